"""Index expressions -> C++: a ``CXX17CodePrinter`` that prints integer ``/``, ``%``, ``min``/``max``."""

from __future__ import annotations

import sympy
from sympy.printing.cxx import CXX17CodePrinter
from sympy.printing.precedence import PRECEDENCE

from ctgraph.expr import FloorDiv, Mod

__all__ = ["IndexPrinter", "cxx"]


class IndexPrinter(CXX17CodePrinter):
    """Every operand is a nonnegative ``int``: C's truncating ``/`` and ``%`` are floor division here."""

    def _binary(self, e: sympy.Basic, op: str) -> str:
        level = PRECEDENCE["Mul"]
        return f"({self.parenthesize(e.args[0], level, strict=True)} {op} {self.parenthesize(e.args[1], level)})"

    def _print_FloorDiv(self, e: FloorDiv) -> str:
        return self._binary(e, "/")

    def _print_Mod(self, e: Mod) -> str:
        return self._binary(e, "%")

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


def cxx(e: sympy.Basic | int) -> str:
    """C++ text of an index expression (deterministic for the same expression)."""
    return _PRINTER.doprint(sympy.sympify(e))
