"""The backend registry: ``ctgraph.compile`` reaches a backend by target name, importing it on first use.

A backend module exposes ``build(kernel) -> program``, where a program has ``.source`` and is called
as ``program(A, B, C, alpha, beta)``. Importing ctgraph never imports a backend, so it needs neither
llvmlite nor pycuda nor a GPU until a kernel is built.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from types import ModuleType
from typing import Any

from .deps import MissingDependency, from_import_error

__all__ = ["BACKENDS", "TARGETS", "backend", "cuda_available", "resolve_target"]

BACKENDS = {"cpu": "lowering.cpu", "cuda": "lowering.cuda"}
TARGETS = (*BACKENDS, "auto")


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
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; valid targets: {', '.join(map(repr, TARGETS))}")
    if target == "auto":
        return "cuda" if cuda_available() else "cpu"
    return target  # type: ignore[return-value]


def check_options(options: dict[str, Any]) -> None:
    """Refuse unknown or invalid backend options before any work (``ValueError`` naming the valid ones). They
    are the CUDA backend's (:class:`lowering.cuda.options.CudaOptions`) and ``build`` on every target, so one
    call works with ``target="auto"`` with or without a GPU; the CPU backend has none and ignores them."""
    backend("cuda").options_from(options)


def backend(target: str) -> ModuleType:
    """The backend module for ``target`` ("cpu" or "cuda"), imported when first asked for.

    A backend that cannot be imported because a package is missing raises
    :class:`~ctgraph.deps.MissingDependency` (an ``ImportError`` and a ``NotImplementedError``) naming it.
    """
    try:
        return importlib.import_module(BACKENDS[target])
    except ModuleNotFoundError as e:
        if e.name == BACKENDS[target] or e.name == BACKENDS[target].split(".")[0]:
            raise MissingDependency(
                f"the {BACKENDS[target]} package", f"the {target!r} backend", "reinstall ctgraph (pip install -e .)"
            ) from None
        missing = from_import_error(e, f"the {target!r} backend")
        if missing is not None:
            raise missing from e
        raise
