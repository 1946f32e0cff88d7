"""Checks on the arrays a kernel is called with, shared by the backends; all run before any work."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .gemm import GemmProblem

__all__ = ["check_host_operands", "check_scalars", "expected_shapes"]


FLOAT32_MAX = float(np.finfo(np.float32).max)


def expected_shapes(p: GemmProblem) -> dict[str, tuple[int, int]]:
    return {"A": (p.m, p.k), "B": (p.k, p.n), "C": (p.m, p.n), "out": (p.m, p.n)}


def check_scalars(alpha: Any, beta: Any) -> tuple[float, float]:
    """``alpha`` and ``beta`` as floats: real numbers that are finite in float32 (the kernels' epilogue type)."""
    if type(alpha) is float and type(beta) is float and abs(alpha) <= FLOAT32_MAX and abs(beta) <= FLOAT32_MAX:
        return alpha, beta  # NOTE: every call's case, without numpy
    for name, v in (("alpha", alpha), ("beta", beta)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {type(v).__name__}")
        with np.errstate(over="ignore"):
            try:
                finite = bool(np.isfinite(np.float32(v)))
            except OverflowError:  # an int too large for a float
                finite = False
        if not finite:
            raise ValueError(f"{name} must be finite in float32 (the epilogue's type), got {v!r}")
    return float(alpha), float(beta)


def overlapping(out: tuple[int, int], others: dict[str, tuple[int, int]]) -> list[str]:
    """The names of ``others`` whose byte range ``[start, end)`` meets ``out``'s: D written over an input while the
    kernel still reads it gives a wrong D (tiles are written while other tiles read A, B and C)."""
    lo, hi = out
    return [name for name, (a, b) in others.items() if a < hi and lo < b]


def check_no_overlap(out: tuple[int, int] | None, inputs: dict[str, tuple[int, int] | None]) -> None:
    """``ValueError`` where ``out``'s bytes overlap an input's (ranges ``(start, end)``; None: absent)."""
    if out is None:
        return
    hit = overlapping(out, {n: r for n, r in inputs.items() if r is not None})
    if hit:
        raise ValueError(f"out overlaps {' and '.join(hit)} in memory; pass an out that shares no bytes with A, B or C")


def host_range(x: np.ndarray) -> tuple[int, int]:
    """The bytes ``[start, end)`` a C-contiguous numpy array's elements span (operands are checked contiguous)."""
    start = int(x.ctypes.data)
    return start, start + int(x.nbytes)


def check_array(
    p: GemmProblem,
    name: str,
    x: Any,
    shape: tuple[int, int],
    dtype: str,
    shape_of: Any,
    dtype_of: Any,
    contiguous: bool,
) -> None:
    """Shape, dtype and layout of one operand, with an error that names it."""
    if tuple(shape_of) != shape:
        raise ValueError(f"{name} must have shape {shape} for this {p.m}x{p.n}x{p.k} GEMM, got {tuple(shape_of)}")
    if str(dtype_of).replace("torch.", "") != dtype:
        raise TypeError(f"{name} must have dtype {dtype} (the GEMM's dtype), got {dtype_of}")
    if not contiguous:
        raise ValueError(f"{name} must be C-contiguous (row-major); make a contiguous copy first")


def check_host_operands(p: GemmProblem, A: Any, B: Any, C: Any, beta: float, out: Any = None) -> None:
    """numpy operands for the CPU backend: ``TypeError``/``ValueError`` naming the bad argument."""
    shapes = expected_shapes(p)
    for name, x in (("A", A), ("B", B), ("C", C), ("out", out)):
        if x is None:
            if name == "C" and beta != 0:
                raise ValueError("C is required when beta != 0 (pass C, or beta=0.0)")
            if name in ("A", "B"):
                raise TypeError(f"{name} is required")
            continue
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{name} must be a numpy.ndarray for the CPU backend, got {type(x).__name__}")
        check_array(p, name, x, shapes[name], p.dtype, x.shape, x.dtype, x.flags.c_contiguous)
        if name == "out" and not x.flags.writeable:
            raise ValueError("out must be writeable")
    if out is not None:
        inputs = {"A": A, "B": B, "C": C}
        check_no_overlap(host_range(out), {n: host_range(x) if x is not None else None for n, x in inputs.items()})
