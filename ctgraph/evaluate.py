"""Numbers from index expressions: :func:`evaluate` and :func:`lambdify`.

Every index a kernel uses is a sympy expression read off a coordinate graph (``FloorDiv``, ``Mod``,
``Min``, ``Max``, ``Piecewise`` under a ``Sunder``, relations and ``&`` in loop bounds and masks). Here
they become Python functions once, through ``sympy.lambdify`` with two small printers, and are then
called per point (microseconds, not the milliseconds of ``.subs``):

- scalars: :class:`PythonIndexPrinter`, exact Python integers (``FloorDiv -> //``, ``Mod -> %``,
  ``Piecewise -> a if c else b``);
- numpy arrays: :class:`NumpyIndexPrinter`, element-wise over int64 arrays that broadcast
  (``FloorDiv -> floor_divide``, ``Mod -> mod``, ``Min/Max -> minimum/maximum``, ``And/Or ->
  logical_and/or``, ``Piecewise -> where``, which keeps the integer dtype). int64 wraps past 2**63: use scalars there.

Coordinates are passed by symbol name (``wg=3``), as nonnegative integers or integer arrays.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import sympy
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.pycode import PythonCodePrinter

__all__ = ["NUMPY", "NumpyIndexPrinter", "PythonIndexPrinter", "evaluate", "lambdify"]

# The ``modules`` argument of ``sympy.lambdify`` for index expressions (kept for callers of the old
# ``ctgraph.schedule.NUMPY``); :func:`lambdify` is the documented way.
NUMPY = [{"FloorDiv": np.floor_divide, "Mod": np.mod}, "numpy"]


class PythonIndexPrinter(PythonCodePrinter):
    """Python source for an index expression, exact on Python ints: ``FloorDiv(x, y) -> (x // y)``."""

    def _print_FloorDiv(self, e: sympy.Expr) -> str:
        x, y = (self._print(a) for a in e.args)
        return f"(({x}) // ({y}))"

    def _print_Mod(self, e: sympy.Expr) -> str:
        x, y = (self._print(a) for a in e.args)
        return f"(({x}) % ({y}))"

    def _print_Rational(self, e: sympy.Rational) -> str:
        raise ValueError(f"{e} is not an integer: index expressions use FloorDiv, not /")


class NumpyIndexPrinter(NumPyPrinter):
    """numpy source for an index expression, element-wise over broadcasting integer arrays."""

    def _print_FloorDiv(self, e: sympy.Expr) -> str:
        x, y = (self._print(a) for a in e.args)
        return f"{self._module_format('numpy.floor_divide')}({x}, {y})"

    def _print_Mod(self, e: sympy.Expr) -> str:
        x, y = (self._print(a) for a in e.args)
        return f"{self._module_format('numpy.mod')}({x}, {y})"

    def _nested(self, fn: str, args: Sequence[sympy.Expr]) -> str:
        out = self._print(args[-1])
        for a in reversed(args[:-1]):
            out = f"{self._module_format(fn)}({self._print(a)}, {out})"
        return out

    def _print_Min(self, e: sympy.Expr) -> str:
        return self._nested("numpy.minimum", e.args)

    def _print_Max(self, e: sympy.Expr) -> str:
        return self._nested("numpy.maximum", e.args)

    def _print_And(self, e: sympy.Expr) -> str:
        return self._nested("numpy.logical_and", e.args)  # NOTE: sympy's reduce((a, b)) fails on ragged shapes

    def _print_Or(self, e: sympy.Expr) -> str:
        return self._nested("numpy.logical_or", e.args)

    def _print_Piecewise(self, e: sympy.Piecewise) -> str:
        # NOTE: sympy's own prints numpy.select(..., default=nan), which makes every result a float.
        *pairs, (last, cond) = e.args
        if cond is not sympy.true:
            raise ValueError(f"a Piecewise without a final True branch has no value everywhere: {e}")
        out = self._print(last)
        where = self._module_format("numpy.where")
        for value, c in reversed(pairs):
            out = f"{where}({self._print(c)}, {self._print(value)}, {out})"
        return out

    def _print_Rational(self, e: sympy.Rational) -> str:
        raise ValueError(f"{e} is not an integer: index expressions use FloorDiv, not /")


def _symbols(exprs: Sequence[sympy.Basic]) -> list[sympy.Symbol]:
    found: set[sympy.Symbol] = set()
    for e in exprs:
        found |= e.free_symbols
    return sorted(found, key=lambda s: s.name)


@functools.lru_cache(maxsize=1024)
def _compiled(exprs: tuple[sympy.Basic, ...], names: tuple[str, ...], vector: bool) -> Callable[..., Any]:
    args = [sympy.Symbol(n) for n in names]
    # NOTE: the expressions' symbols carry assumptions (integer, nonnegative); lambdify matches by name.
    by_name = {s: sympy.Symbol(s.name) for e in exprs for s in e.free_symbols}
    plain = [e.xreplace(by_name) for e in exprs]
    if vector:
        return sympy.lambdify(args, plain, modules="numpy", printer=NumpyIndexPrinter)  # type: ignore[no-any-return]
    return sympy.lambdify(args, plain, modules=[{}], printer=PythonIndexPrinter)  # type: ignore[no-any-return]


def _check_value(name: str, v: Any) -> tuple[Any, bool]:
    """``(value, is_array)`` for a coordinate: a nonnegative integer or an integer array."""
    if isinstance(v, np.ndarray) or (isinstance(v, Sequence) and not isinstance(v, str | bytes)):
        arr = np.asarray(v)
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"coordinate {name} must be integers, got an array of {arr.dtype}")
        if arr.size and arr.min() < 0:
            raise ValueError(f"coordinate {name} must be nonnegative, got {int(arr.min())}")
        return arr.astype(np.int64, copy=False), True
    if isinstance(v, sympy.Integer):
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"coordinate {name} must be an integer, got {type(v).__name__} {v!r}")
    if v < 0:
        raise ValueError(f"coordinate {name} must be nonnegative, got {v}")
    return int(v), False


def lambdify(exprs: sympy.Basic | Sequence[sympy.Basic], names: Sequence[str] | None = None) -> Callable[..., Any]:
    """A numpy function of ``exprs`` (one expression, or a sequence: the function then returns a list).

    Called with keyword arguments named after the symbols (``f(wg=np.arange(8), forK=0)``), or
    positionally in the order of ``names`` (default: the symbols' names, sorted; ``f.names`` lists
    them). Arguments broadcast; results are numpy arrays of the broadcast shape (int64 for indices,
    bool for conditions).
    """
    single = isinstance(exprs, sympy.Basic | int)
    items = tuple(sympy.sympify(e) for e in ([exprs] if single else exprs))  # type: ignore[list-item,union-attr]
    order = tuple(names) if names is not None else tuple(s.name for s in _symbols(items))
    fn = _compiled(items, order, True)

    def call(*args: Any, **kw: Any) -> Any:
        values = dict(zip(order, args, strict=False))
        if len(args) > len(order):
            raise TypeError(f"takes {len(order)} positional coordinates ({', '.join(order)}), got {len(args)}")
        values.update(kw)
        missing = [n for n in order if n not in values]
        unknown = [n for n in values if n not in order]
        if missing or unknown:
            raise ValueError(f"coordinates {order}: missing {missing}, unknown {unknown}")
        arrays = [np.asarray(_check_value(n, values[n])[0]) for n in order]
        shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else ()
        out = [np.broadcast_to(np.asarray(r), shape) for r in fn(*arrays)]
        return out[0] if single else out

    call.names = order  # type: ignore[attr-defined]
    call.__doc__ = f"{', '.join(map(str, items))} at ({', '.join(order)})"
    return call


def evaluate(expr: sympy.Basic | int, values: Mapping[Any, Any] | None = None, /, **coords: Any) -> Any:
    """The value of an index expression at the given coordinates.

    ``evaluate(expr, wg=3, forTile=0, forK=5)``: coordinates by symbol name (or a mapping from symbols
    or names, ``evaluate(expr, {wg: 3})``). Every free symbol of ``expr`` needs a value (values for names it
    does not use are allowed, so one set of coordinates serves every expression of a walk), and values are
    nonnegative integers: a Python ``int`` comes back, exact at any size (``bool`` for a condition). If
    any value is an integer numpy array (or a list), the evaluation is vectorised (:func:`lambdify`) and
    a numpy array of the broadcast shape comes back. A missing name is a ``ValueError``;
    negative values a ``ValueError``, floats and strings a ``TypeError``.
    """
    e = sympy.sympify(expr)
    given = {getattr(k, "name", k): v for k, v in (values or {}).items()}
    given.update(coords)
    needed = [s.name for s in _symbols([e])]
    missing = [n for n in needed if n not in given]
    if missing:
        raise ValueError(f"evaluate needs a value for {', '.join(missing)} (the free symbols of {e})")
    checked = {n: _check_value(str(n), v) for n, v in given.items()}  # NOTE: unused ones are checked, not used
    checked = {n: checked[n] for n in needed}
    if any(is_array for _, is_array in checked.values()):
        return lambdify(e, needed)(**{n: v for n, (v, _) in checked.items()})
    result = _compiled((e,), tuple(needed), False)(*(checked[n][0] for n in needed))[0]
    if isinstance(result, bool | np.bool_):  # a relation or a condition
        return bool(result)
    return int(result)
