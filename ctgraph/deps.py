"""Optional dependencies: one clear error naming what is missing and how to install it.

The core of ctgraph (graphs, passes, control graph, the CPU backend, ``.dot`` dumps) needs only the
packages ``pip install ctgraph`` brings. The rest is optional and asked for where it is used:

| what | needed for | how to get it |
|---|---|---|
| pycuda | ``target="cuda"`` (compile, load, launch) | ``pip install 'ctgraph[cuda]'`` |
| an NVIDIA GPU and its driver | running ``target="cuda"`` kernels | a CUDA machine (or ``build=False``: source only) |
| nvcc (CUDA toolkit) | compiling CUDA source, ``kern.ptx`` | the CUDA toolkit, with ``nvcc`` on PATH |
| torch | ``python -m ctgraph bench / heldout / tune`` | ``pip install torch`` |
| matplotlib | ``plot_schedule``, ``--plot`` | ``pip install 'ctgraph[plot]'`` |
| lightgbm | ``python -m ctgraph fit / calibrate`` (the ranker's trees) | ``pip install 'ctgraph[fit]'`` |
| graphviz's ``dot`` | ``.svg``/``.png``/``.pdf`` dumps | ``apt-get install graphviz`` / ``brew install graphviz`` |

A missing one raises :class:`MissingDependency` (the command line prints ``error: ...`` and exits
with status 2). It is an ``ImportError`` (what is missing is most often a package) and a
``NotImplementedError`` (what an unavailable backend raised before, as docs/design.md said), so
``except ImportError`` and ``except NotImplementedError`` both catch it; being a
``NotImplementedError`` it is also a ``RuntimeError``.
"""

from __future__ import annotations

import functools
import importlib
import shutil
import sys
from dataclasses import dataclass
from types import ModuleType

__all__ = [
    "OPTIONAL",
    "Dependency",
    "MissingDependency",
    "from_import_error",
    "require",
    "require_cuda",
    "require_program",
]


@dataclass(frozen=True)
class Dependency:
    """An optional dependency: what it is called in messages and how to install it."""

    what: str
    install: str


OPTIONAL: dict[str, Dependency] = {
    "pycuda": Dependency("pycuda", "pip install 'ctgraph[cuda]' (needs an NVIDIA driver)"),
    "torch": Dependency("torch", "pip install torch (a CUDA build, see https://pytorch.org)"),
    "matplotlib": Dependency("matplotlib", "pip install 'ctgraph[plot]'"),
    "tqdm": Dependency("tqdm", "pip install 'ctgraph[plot]'"),
    "lightgbm": Dependency("lightgbm", "pip install 'ctgraph[fit]'"),
    "llvmlite": Dependency("llvmlite", "pip install llvmlite (a dependency of ctgraph: reinstall it)"),
    "scipy": Dependency("scipy", "pip install scipy"),
    "nvcc": Dependency("nvcc (the CUDA toolkit's compiler)", "install the CUDA toolkit and put nvcc on PATH"),
    "dot": Dependency(
        "graphviz's 'dot' program",
        "apt-get install graphviz (Debian/Ubuntu), brew install graphviz (macOS) or conda install graphviz",
    ),
    "gpu": Dependency("an NVIDIA GPU with a working CUDA driver", "run on a CUDA machine"),
}


class MissingDependency(ImportError, NotImplementedError):
    """An optional dependency that a call needs is missing; the message says which and how to get it.

    ``what``: the missing thing (``"pycuda"``); ``needed_for``: what asked for it; ``install``: how to
    get it.
    """

    def __init__(self, what: str, needed_for: str, install: str, detail: str = "") -> None:
        self.what, self.needed_for, self.install = what, needed_for, install
        more = f" ({detail})" if detail else ""
        super().__init__(f"{needed_for} needs {what}, which is not available{more}. Install it: {install}")

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return type(self), (self.what, self.needed_for, self.install)


def _missing(key: str, needed_for: str, detail: str = "") -> MissingDependency:
    dep = OPTIONAL[key]
    return MissingDependency(dep.what, needed_for, dep.install, detail)


def require(module: str, needed_for: str) -> ModuleType:
    """``import module``, or a :class:`MissingDependency` naming its package and how to install it.

    A module that is present but fails to import for another reason keeps its own error, except an
    ``ImportError`` (a broken or blocked install), which is reported as missing.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        dep = OPTIONAL.get(top, Dependency(top, f"pip install {top}"))
        raise MissingDependency(dep.what, needed_for, dep.install, str(e)) from e


def from_import_error(e: ImportError, needed_for: str) -> MissingDependency | None:
    """The :class:`MissingDependency` for an ``ImportError`` of a known optional package, else None."""
    if isinstance(e, MissingDependency):
        return e
    name = (getattr(e, "name", None) or "").split(".")[0]
    if name not in OPTIONAL:
        return None
    return _missing(name, needed_for, str(e))


def require_program(name: str, needed_for: str) -> str:
    """The path of the program ``name`` ("nvcc", "dot") on PATH, or a :class:`MissingDependency`."""
    path = shutil.which(name)
    if path is None:
        raise _missing(name, needed_for, f"'{name}' is not on PATH")
    return path


@functools.cache
def _gpu_error() -> str:
    """Why no CUDA device answers ('' when one does); checked once per process."""
    try:
        import pycuda.driver as drv

        drv.init()
        if drv.Device.count() > 0:
            return ""
        return "the CUDA driver reports no device"
    except Exception as e:  # no driver, no device: say what the driver said
        return f"{type(e).__name__}: {e}"


def require_cuda(needed_for: str) -> None:
    """pycuda imports and a CUDA device answers, or a :class:`MissingDependency` saying which is missing.

    (``nvcc`` is checked where a source is compiled, since a cached binary needs none.)
    """
    if sys.modules.get("pycuda") is not None and sys.modules.get("pycuda.driver") is not None and not _gpu_error():
        return  # NOTE: the fast path of every call of a "cuda" kernel: imported and answered before
    require("pycuda", needed_for)
    require("pycuda.driver", needed_for)
    why = _gpu_error()
    if why:
        raise _missing(
            "gpu", needed_for, f"{why}; use target='cpu', or build=False to generate the CUDA source without a GPU"
        )
