"""Index expressions -> C++: a ``CXX17CodePrinter`` that prints integer ``/``, ``%``, ``min``/``max``.

Divisions by ``ctg::Divisor`` parameters (:mod:`lowering.cuda.divisors`) print as ``/`` and ``%`` too;
a product of them is divided factor by factor, so each division is one multiply-shift."""

from __future__ import annotations

import functools

import sympy
from sympy.printing.cxx import CXX17CodePrinter
from sympy.printing.precedence import PRECEDENCE

from ctgraph.expr import FloorDiv, Mod

__all__ = ["IndexPrinter", "cxx"]


class IndexPrinter(CXX17CodePrinter):
    """Every operand is a nonnegative ``int``: C's truncating ``/`` and ``%`` are floor division here.

    ``divisors``: the kernel parameters that are ``ctg::Divisor`` objects. ``x // (a*b)`` with ``a``, ``b``
    such parameters (or constants) prints as ``((x / a) / b)`` and ``x % (a*b)`` as
    ``(x % a) + a*((x / a) % b)``: one fast division per factor instead of a generic one by the product.
    """

    def __init__(self, divisors: frozenset[sympy.Symbol] = frozenset()) -> None:
        super().__init__()
        self.divisors = divisors

    def _factors(self, d: sympy.Expr) -> list[sympy.Expr] | None:
        """The factors of divisor ``d`` to divide by in turn (constants first), or None: divide by ``d``."""
        factors = sympy.Mul.make_args(d)
        if len(factors) < 2 or not any(f in self.divisors for f in factors):
            return None
        if not all(f.is_Integer or f in self.divisors for f in factors):
            return None
        return sorted(factors, key=lambda f: (not f.is_Integer, str(f)))

    def _binary(self, e: sympy.Basic, op: str) -> str:
        level = PRECEDENCE["Mul"]
        return f"({self.parenthesize(e.args[0], level, strict=True)} {op} {self.parenthesize(e.args[1], level)})"

    def _print_FloorDiv(self, e: FloorDiv) -> str:
        factors = self._factors(e.args[1])
        if factors is None:
            return self._binary(e, "/")
        out = self.parenthesize(e.args[0], PRECEDENCE["Mul"], strict=True)
        for f in factors:
            out = f"({out} / {self._print(f)})"
        return out

    def _print_Mod(self, e: Mod) -> str:
        factors = self._factors(e.args[1])
        if factors is None:
            return self._binary(e, "%")
        x = self.parenthesize(e.args[0], PRECEDENCE["Mul"], strict=True)
        # x % (a*b*...) = x % a + a*((x / a) % b) + a*b*(((x / a) / b) % c) + ...
        terms: list[str] = []
        scale: list[str] = []
        quotient = x
        for f in factors:
            name = self._print(f)
            terms.append("*".join([*scale, f"({quotient} % {name})"]))
            quotient, scale = f"({quotient} / {name})", [*scale, name]
        return "(" + " + ".join(terms) + ")"

    def _print_Min(self, e: sympy.Min) -> str:
        out = self._print(e.args[0])
        for a in e.args[1:]:
            out = f"min({out}, {self._print(a)})"
        return out

    def _print_Max(self, e: sympy.Max) -> str:
        out = self._print(e.args[0])
        for a in e.args[1:]:
            out = f"max({out}, {self._print(a)})"
        return out

    def _print_Integer(self, e: sympy.Integer) -> str:
        return str(int(e))

    def _print_Piecewise(self, e: sympy.Piecewise) -> str:
        *pieces, (last, _) = e.args
        out = self._print(last)
        for value, cond in reversed(pieces):
            out = f"(({self._print(cond)}) ? ({self._print(value)}) : ({out}))"
        return out


_PRINTER = IndexPrinter()


def cxx(e: sympy.Basic | int, printer: IndexPrinter = _PRINTER) -> str:
    """C++ text of an index expression (deterministic for the same expression)."""
    return _printed(sympy.sympify(e), printer.divisors)


@functools.lru_cache(maxsize=64)
def _printer(divisors: frozenset[sympy.Symbol]) -> IndexPrinter:
    return IndexPrinter(divisors)


@functools.lru_cache(maxsize=8192)
def _printed(e: sympy.Basic, divisors: frozenset[sympy.Symbol]) -> str:
    """The text is a function of the expression and the divisors alone, and the kernels of one schedule, whatever
    their tile, print mostly the same expressions (sizes are parameters), so each is printed once."""
    return _printer(divisors).doprint(e)
