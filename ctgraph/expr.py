"""Integer index algebra: ``FloorDiv``, ``Mod`` and the rewrite rules that keep index expressions small.

Every index the kernel needs is a sympy expression over nonnegative integer symbols (workgroup id,
loop counters, sizes). Python's ``//`` and ``%`` on sympy objects produce ``floor(x/y)`` and sympy's own
``Mod``, which print as floating-point division; the two functions here are *integer* operations that
the CUDA printer emits as ``/`` and ``%`` and ``lambdify`` maps to ``numpy.floor_divide``/``numpy.mod``.

Rules are data, as in tinygrad's symbolic rewriter: ``FloorDiv.eval``/``Mod.eval`` fold what can be
decided locally (constants, unit divisors, multiples of the divisor), and :func:`simplify` applies the
rules that look at a whole sum (``(x % c) + (x // c)*c -> x``). All rules assume the operands are
integers and the divisors positive, which holds for every size and coordinate in a coordinate graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeAlias

import sympy

__all__ = ["FloorDiv", "Mod", "ceildiv", "free_indices", "index", "simplify", "size", "to_int"]

Expr: TypeAlias = sympy.Expr


def index(name: str) -> sympy.Symbol:
    """A nonnegative integer symbol: a coordinate (workgroup id, loop counter, element index)."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def size(name: str) -> sympy.Symbol:
    """A nonnegative integer symbol: a size bound at call time (``numTilesK``; ``numTilesSK`` may be 0)."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def _divisible(term: Expr, d: Expr) -> bool:
    """True when ``term`` is provably an integer multiple of ``d``."""
    if d == 0:
        return False
    return bool((term / d).is_integer)


class FloorDiv(sympy.Function):
    """Integer floor division ``x // y`` for integer ``x`` and positive ``y``.

    Rules (applied on construction):
      FloorDiv(a, b)            -> a // b           for integer constants
      FloorDiv(x, 1)            -> x
      FloorDiv(0, y)            -> 0
      FloorDiv(FloorDiv(x, a), b) -> FloorDiv(x, a*b)   (floor(floor(x/a)/b) = floor(x/(ab)) for a, b > 0)
      FloorDiv(y*q + r, y)      -> q + FloorDiv(r, y)   for integer q
    """

    nargs = 2
    is_integer = True

    @classmethod
    def eval(cls, x: Expr, y: Expr) -> Expr | None:
        if y.is_zero:
            raise ZeroDivisionError(f"FloorDiv({x}, 0)")
        if x.is_Integer and y.is_Integer:
            return sympy.Integer(int(x) // int(y))
        if y == 1:
            return x
        if x.is_zero:
            return sympy.Integer(0)
        if isinstance(x, FloorDiv) and (x.args[1] * y).is_nonnegative:  # divisors are never 0
            return cls(x.args[0], x.args[1] * y)
        terms = sympy.Add.make_args(x)
        whole = [t for t in terms if _divisible(t, y)]
        if whole:
            rest = sympy.Add(*[t for t in terms if not _divisible(t, y)])
            return sympy.Add(*[t / y for t in whole]) + cls(rest, y)
        return None

    def _eval_is_nonnegative(self) -> bool | None:
        x, y = self.args
        if x.is_nonnegative and y.is_nonnegative:  # a divisor is never 0
            return True
        return None


class Mod(sympy.Function):
    """Integer remainder ``x % y`` (floor semantics; equal to C's ``%`` for the nonnegative operands here).

    Rules:
      Mod(a, b)           -> a % b       for integer constants
      Mod(x, 1)           -> 0
      Mod(Mod(x, a), b)   -> Mod(x, b)   when b divides a
      Mod(y*q + r, y)     -> Mod(r, y)   for integer q
    """

    nargs = 2
    is_integer = True

    @classmethod
    def eval(cls, x: Expr, y: Expr) -> Expr | None:
        if y.is_zero:
            raise ZeroDivisionError(f"Mod({x}, 0)")
        if x.is_Integer and y.is_Integer:
            return sympy.Integer(int(x) % int(y))
        if y == 1 or x.is_zero:
            return sympy.Integer(0)
        if isinstance(x, Mod) and _divisible(x.args[1], y):
            return cls(x.args[0], y)
        terms = sympy.Add.make_args(x)
        if any(_divisible(t, y) for t in terms):
            return cls(sympy.Add(*[t for t in terms if not _divisible(t, y)]), y)
        return None

    def _eval_is_nonnegative(self) -> bool | None:
        return True if self.args[1].is_nonnegative else None  # a divisor is never 0


def ceildiv(x: Expr | int, y: Expr | int) -> Expr:
    """``ceil(x / y)`` for nonnegative ``x`` and positive ``y``, as ``FloorDiv(x + y - 1, y)``."""
    return FloorDiv(sympy.sympify(x) + y - 1, sympy.sympify(y))


# --- whole-sum rules -------------------------------------------------------------------------------


def _recombine(terms: list[Expr]) -> list[Expr] | None:
    """``a*(x % c) + a*c*(x // c) -> a*x``: find a remainder term and its matching quotient term."""
    for i, t in enumerate(terms):
        for m in (f for f in sympy.Mul.make_args(t) if isinstance(f, Mod)):
            x, c = m.args
            a = t / m
            partner = sympy.expand(a * c * FloorDiv(x, c))
            for j, u in enumerate(terms):
                if j != i and sympy.expand(u - partner) == 0:
                    return [a * x] + [v for k, v in enumerate(terms) if k not in (i, j)]
    return None


SUM_RULES: tuple[Callable[[list[Expr]], list[Expr] | None], ...] = (
    _recombine,  # (x % c) + (x // c)*c -> x
)


def _rewrite(e: Expr) -> Expr:
    if not e.args:
        return e
    e = e.func(*[_rewrite(a) for a in e.args])
    if isinstance(e, sympy.Add):
        terms = list(e.args)
        changed = True
        while changed:
            changed = False
            for rule in SUM_RULES:
                out = rule(terms)
                if out is not None:
                    terms, changed = out, True
        e = sympy.Add(*terms)
    return e


def simplify(e: Expr | int) -> Expr:
    """Apply the rewrite rules bottom-up until nothing changes."""
    e = sympy.sympify(e)
    while True:
        new = _rewrite(e)
        if new == e:
            return new
        e = new


def to_int(e: Expr | int) -> int:
    """``int(e)`` with a clear error when ``e`` still holds symbols."""
    e = sympy.sympify(e)
    if not e.is_Integer:
        raise ValueError(f"expected an integer, got the expression {e}")
    return int(e)


def free_indices(exprs: Iterable[Expr]) -> list[sympy.Symbol]:
    """The free symbols of ``exprs``, sorted by name (deterministic argument order for lambdify)."""
    syms: set[sympy.Symbol] = set()
    for e in exprs:
        syms |= sympy.sympify(e).free_symbols
    return sorted(syms, key=lambda s: s.name)
