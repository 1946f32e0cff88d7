"""Division by kernel parameters as a multiply-high and a shift (Granlund & Montgomery, 1994).

Index expressions divide by sizes that are kernel parameters (``numTilesK``, ``numTilesN`` ...). A 32-bit
integer division by a value unknown to the compiler is a ~20-instruction sequence with a long dependency
chain, and every tile's loop bounds and K-loop trip count are such expressions, evaluated serially before
the tile's first load and first MMA. A divisor known at launch costs one ``mul.hi`` and a shift instead:
on the H100 that took the producer's per-tile index math from 1.15 to 0.90 us (1024^3, 64 x 128 tiles)
and from 2.2 to 1.8 us (4096^3, 256 x 256), docs/benchmarks.md.

For a divisor ``d >= 2`` let ``L = ceil(log2 d)`` (so ``2^(L-1) < d <= 2^L``), ``p = 31 + L`` and
``mul = ceil(2^p / d)``, ``shr = p - 32 = L - 1``. Then ``mul < 2^32`` and, for every ``0 <= x < 2^31``::

    floor(x * mul / 2^p) = floor(x / d)

Proof: ``mul * d = 2^p + e`` with ``0 <= e < d``, so ``x * mul / 2^p = x/d + x*e / (d * 2^p)``. The error
term is below ``x / 2^p < 2^31 / 2^(31+L) = 2^-L <= 1/d``, and ``x/d`` is at least ``1/d`` below the next
integer, so the floor is unchanged. ``floor(x * mul / 2^p)`` is ``umulhi(x, mul) >> shr``. ``d = 1`` is
``mul = 0`` (the quotient is ``x``). Every dividend here is a nonnegative ``int`` index, below ``2^31``.

In the generated C++ such a parameter is a ``ctg::Divisor`` (value, mul, shr) that converts to ``int``
everywhere else, with ``operator/`` and ``operator%`` doing the above, so the printed index math still
reads ``x / numTilesK``. A product of divisors divides in turn: ``x // (a*b) = (x // a) // b`` and
``x % (a*b) = x % a + a * ((x // a) % b)`` (for positive ``a``, ``b``).
"""

from __future__ import annotations

import ctypes
import dataclasses

import sympy

from ctgraph import control as C
from ctgraph.expr import FloorDiv, Mod

__all__ = ["PRELUDE", "Divisor", "fast_divisors", "magic"]

PRELUDE = """\
// a kernel parameter that index expressions divide by: its value and the multiply-shift that divides by it
struct Divisor {
    int value;
    unsigned mul, shr;
    __device__ __forceinline__ operator int() const { return value; }
};
// x / d = umulhi(x, mul) >> shr for 0 <= x < 2^31 (lowering/cuda/divisors.py); d = 1 has mul = 0
__device__ __forceinline__ int operator/(int x, const Divisor& d) {
    return d.mul ? (int)(__umulhi((unsigned)x, d.mul) >> d.shr) : x;
}
__device__ __forceinline__ int operator%(int x, const Divisor& d) { return x - (x / d) * d.value; }"""


def magic(d: int) -> tuple[int, int]:
    """``(mul, shr)`` with ``floor(x / d) == (x * mul >> 32) >> shr`` for ``0 <= x < 2**31``; ``(0, 0)`` for 1."""
    if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d < 2**31:
        raise ValueError(f"a divisor must be an integer in [1, 2**31), got {d!r}")
    if d == 1:
        return 0, 0
    log2 = (d - 1).bit_length()  # ceil(log2 d)
    return -(-(1 << (31 + log2)) // d), log2 - 1


class Divisor(ctypes.Structure):
    """A ``ctg::Divisor`` kernel parameter, passed by value."""

    _fields_ = [("value", ctypes.c_int32), ("mul", ctypes.c_uint32), ("shr", ctypes.c_uint32)]

    @classmethod
    def of(cls, d: int) -> Divisor:
        return cls(d, *magic(d))


def _expressions(node: C.Node) -> list[sympy.Basic]:
    out: list[sympy.Basic] = []
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, sympy.Basic):
                out.append(v)
    return out


def fast_divisors(cg: C.ControlGraph) -> frozenset[sympy.Symbol]:
    """The kernel parameters that some index expression divides by (alone or in a product of parameters
    and constants): they become ``ctg::Divisor`` parameters of every kernel of ``cg``."""
    params: set[sympy.Symbol] = set()
    for k in cg.kernels:
        params |= set(cg[k].params)  # type: ignore[attr-defined]
    out: set[sympy.Symbol] = set()
    for t, _ in cg.walk():
        for e in _expressions(cg[t]):
            for op in e.atoms(FloorDiv, Mod):
                factors = sympy.Mul.make_args(op.args[1])
                if all(f.is_Integer or f in params for f in factors):
                    out |= {f for f in factors if f in params}
    return frozenset(out)
