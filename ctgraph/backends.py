"""The backend registry and contract: ``ctgraph.compile`` reaches a backend by target name, importing it on first use.

Where it sits: the one bridge from the front end (``api``, ``select``) to the backends (``lowering.cpu``,
``lowering.cuda``). A backend is anything that provides the five functions of :class:`Backend` -- a module (the
two built in) or an object -- registered under a target name with :func:`register`. Built-in backends are
registered by module path and imported when first asked for, so importing ctgraph never imports a backend and
needs neither llvmlite nor pycuda nor a GPU until a kernel is built. Selection asks a backend only
``target()``, ``supports()`` and ``layout_of()``; ``compile`` asks ``options_from()`` before any work and
``build()`` for the program.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .deps import MissingDependency, from_import_error

if TYPE_CHECKING:
    from .config import Layout
    from .target import Target

__all__ = [
    "BACKENDS",
    "TARGETS",
    "Backend",
    "Program",
    "backend",
    "cuda_available",
    "register",
    "resolve_target",
    "targets",
    "unregister",
]


@runtime_checkable
class Program(Protocol):
    """What ``Backend.build`` returns: the kernel's lowered form and its source text, called to run the GEMM as
    ``program(A, B, C, alpha=, beta=, out=, stream=)`` (returns D: ``out`` where given). ``control`` is the control
    graph."""

    control: Any
    source: str

    def __call__(
        self,
        A: Any,
        B: Any,
        C: Any = None,
        *,
        alpha: float = 1.0,
        beta: float = 0.0,
        out: Any = None,
        stream: Any = None,
    ) -> Any: ...


@runtime_checkable
class Backend(Protocol):
    """The few functions a backend provides (a module or an object; ``isinstance(x, Backend)`` checks that they
    are there). Types name the front end's values: ``Target`` and ``Layout`` from :mod:`ctgraph.select`.

    - ``target() -> Target``: the device as selection sees it (frozen; its ``family``, SMs, paths...).
    - ``supports(macro_tile, dtype, layout, path) -> bool``: whether ``path`` (one of ``Target.paths``) runs
      that tile on exactly that cluster layout; selection keeps only candidates it accepts.
    - ``layout_of(macro_tile, dtype, options) -> Layout | None``: the cluster layout a tile runs on with these
      options, None where it does not fit.
    - ``options_from(options) -> object``: the backend's options from ``compile``'s keyword arguments
      (``build`` among them); ``ValueError`` naming the valid ones for any other.
    - ``build(kernel) -> Program``: lower and compile a :class:`ctgraph.Kernel` (``kernel.graph``,
      ``kernel.problem``, ``kernel.workgroups``, ``kernel.options``; with ``options["build"] is False`` only
      what reading ``source`` needs).
    """

    def target(self) -> Target: ...

    def supports(self, macro_tile: tuple[int, int, int], dtype: str, layout: Layout, path: str) -> bool: ...

    def layout_of(self, macro_tile: tuple[int, int, int], dtype: str, options: dict[str, Any]) -> Layout | None: ...

    def options_from(self, options: dict[str, Any]) -> Any: ...

    def build(self, kernel: Any) -> Program: ...


BUILTIN = {"cpu": "lowering.cpu", "cuda": "lowering.cuda"}
_REGISTRY: dict[str, str | Backend] = dict(BUILTIN)
BACKENDS: Mapping[str, str | Backend] = _REGISTRY  # NOTE: a live view; change it through register()
TARGETS = (*BUILTIN, "auto")  # the built-in names (the CLI's --target); targets() lists every registered one


def register(name: str, impl: str | Backend) -> None:
    """Register a backend under the target name ``name``: a module path (imported on first use) or an object
    (or module) that provides :class:`Backend`. ``compile(..., target=name)`` then builds through it, and
    ``transform="auto"`` selects through its ``target()`` and ``supports()``. Re-registering a name replaces it;
    "auto" is reserved."""
    if not isinstance(name, str) or not name or name == "auto":
        raise ValueError(f"a backend needs a target name other than 'auto', got {name!r}")
    if not isinstance(impl, str) and not isinstance(impl, Backend):
        missing = [f for f in ("target", "supports", "layout_of", "options_from", "build") if not hasattr(impl, f)]
        raise TypeError(f"{impl!r} is not a Backend: it lacks {', '.join(missing)}")
    _REGISTRY[name] = impl


def unregister(name: str) -> None:
    """Forget the backend ``name`` (a built-in one returns to its module)."""
    if name in BUILTIN:
        _REGISTRY[name] = BUILTIN[name]
    else:
        _REGISTRY.pop(name, None)


def targets() -> tuple[str, ...]:
    """Every target name ``compile`` accepts: the registered backends and "auto"."""
    return (*_REGISTRY, "auto")


@functools.cache
def cuda_available() -> bool:
    """True when pycuda imports and a CUDA device answers."""
    if importlib.util.find_spec("pycuda") is None:
        return False
    try:
        import pycuda.driver as drv

        drv.init()
        return drv.Device.count() > 0
    except Exception:  # no driver, no device: the CPU backend is the answer
        return False


def resolve_target(target: object) -> str:
    """A registered target name as given; "auto": "cuda" when a GPU and pycuda are usable, else "cpu"."""
    if not isinstance(target, str) or target not in targets():
        raise ValueError(f"unknown target {target!r}; valid targets: {', '.join(map(repr, targets()))}")
    if target == "auto":
        return "cuda" if cuda_available() else "cpu"
    return target


def check_options(options: dict[str, Any], target: str = "cuda") -> None:
    """Refuse unknown or invalid backend options before any work (``ValueError`` naming the valid ones). On the
    built-in targets they are the CUDA backend's (:class:`lowering.cuda.options.CudaOptions`) and ``build``, so
    one call works with ``target="auto"`` with or without a GPU (the CPU backend has none and ignores them); a
    registered backend checks its own."""
    backend("cuda" if target in BUILTIN else target).options_from(options)


def backend(target: str) -> Backend:
    """The backend registered for ``target`` (a module path is imported when first asked for; Python keeps it).

    A built-in backend that cannot be imported because a package is missing raises
    :class:`~ctgraph.deps.MissingDependency` (an ``ImportError`` and a ``NotImplementedError``) naming it.
    """
    impl = _REGISTRY[target]
    if not isinstance(impl, str):
        return impl
    try:
        module: Backend = importlib.import_module(impl)  # type: ignore[assignment]
        return module
    except ModuleNotFoundError as e:
        if e.name == impl or e.name == impl.split(".")[0]:
            raise MissingDependency(
                f"the {impl} package", f"the {target!r} backend", "reinstall ctgraph (pip install -e .)"
            ) from None
        missing = from_import_error(e, f"the {target!r} backend")
        if missing is not None:
            raise missing from e
        raise
