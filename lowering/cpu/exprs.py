"""Index expressions -> LLVM IR: a small printer from sympy to ``llvmlite.ir`` instructions.

Integers are i64, conditions i1. ``FloorDiv``/``Mod`` become ``sdiv``/``srem``: every operand of an
index expression is nonnegative and every divisor positive, where truncation equals floor.
"""

from __future__ import annotations

from collections.abc import Callable

import sympy
from llvmlite import ir

from ctgraph.expr import FloorDiv, Mod

I64 = ir.IntType(64)
I1 = ir.IntType(1)

_CMP = {
    sympy.StrictLessThan: "<",
    sympy.LessThan: "<=",
    sympy.StrictGreaterThan: ">",
    sympy.GreaterThan: ">=",
    sympy.Equality: "==",
    sympy.Unequality: "!=",
}


class ExprEmitter:
    """``emit(expr)`` appends instructions to ``builder``; ``lookup(symbol)`` gives a symbol's i64 value."""

    def __init__(self, builder: ir.IRBuilder, lookup: Callable[[sympy.Symbol], ir.Value]) -> None:
        self.b = builder
        self.lookup = lookup

    def emit(self, e: sympy.Basic) -> ir.Value:
        b = self.b
        if e is sympy.true or e is sympy.false:
            return ir.Constant(I1, int(e is sympy.true))
        if e.is_Integer:
            return ir.Constant(I64, int(e))
        if e.is_Symbol:
            return self.lookup(e)
        if isinstance(e, sympy.Add):
            return self._fold(e.args, b.add)
        if isinstance(e, sympy.Mul):
            return self._fold(e.args, b.mul)
        if isinstance(e, FloorDiv):
            return b.sdiv(self.emit(e.args[0]), self.emit(e.args[1]))
        if isinstance(e, Mod):
            return b.srem(self.emit(e.args[0]), self.emit(e.args[1]))
        if type(e) in _CMP:
            return b.icmp_signed(_CMP[type(e)], self.emit(e.lhs), self.emit(e.rhs))
        if isinstance(e, sympy.And):
            return self._fold(e.args, b.and_)
        if isinstance(e, sympy.Or):
            return self._fold(e.args, b.or_)
        if isinstance(e, sympy.Not):
            return b.not_(self.emit(e.args[0]))
        if isinstance(e, sympy.Min | sympy.Max):
            op = "<" if isinstance(e, sympy.Min) else ">"
            acc = self.emit(e.args[0])
            for a in e.args[1:]:
                v = self.emit(a)
                acc = b.select(b.icmp_signed(op, acc, v), acc, v)
            return acc
        if isinstance(e, sympy.Piecewise):
            *pieces, (last, _) = e.args
            acc = self.emit(last)
            for value, cond in reversed(pieces):
                acc = b.select(self.emit(cond), self.emit(value), acc)
            return acc
        raise NotImplementedError(f"cannot lower {type(e).__name__} in index expression {e}")

    def _fold(self, args: tuple[sympy.Basic, ...], op: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
        # NOTE: sorted by printed form so the IR text is the same however sympy ordered the args.
        vals = [self.emit(a) for a in sorted(args, key=sympy.srepr)]
        acc = vals[0]
        for v in vals[1:]:
            acc = op(acc, v)
        return acc
