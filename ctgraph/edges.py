"""Edges: the index transforms of a coordinate graph, with their forward and reverse algebra.

An edge goes from its **inputs** (upstream) to its **outputs** (downstream); order matters. Each
edge is a frozen record holding no sizes: sizes live on the dimensions, and the graph passes them in.
``forward`` maps input coordinates to output coordinates, ``reverse`` maps output coordinates back
to input coordinates. Notation (rocRoller's): ``Edge(ins; outs)``, ``|X|`` the size of ``X``,
``//`` and ``%`` integer division (:class:`ctgraph.expr.FloorDiv`, :class:`ctgraph.expr.Mod`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import sympy

from .expr import FloorDiv, Mod

__all__ = ["Edge", "Flatten", "Join", "PassThrough", "Split", "Sunder", "Tile"]

Exprs = list[sympy.Expr]
Sizes = Sequence[sympy.Expr]


def _row_major(sizes: Sizes) -> tuple[sympy.Expr, ...]:
    """Row-major strides: ``s_j = |X_{j+1}| * ... * |X_n|``."""
    return tuple(sympy.Mul(*sizes[j + 1 :]) for j in range(len(sizes)))


@dataclass(frozen=True)
class Edge:
    """Base class. ``arity`` is (inputs, outputs); ``None`` means "one or more" (``2+`` for Sunder)."""

    arity: ClassVar[tuple[int | None, int | None]] = (None, None)

    def check(self, n_in: int, n_out: int) -> None:
        want_in, want_out = self.arity
        for what, n, want in (("inputs", n_in, want_in), ("outputs", n_out, want_out)):
            lo = 1 if want is None else want
            if (want is None and n < lo) or (want is not None and n != want):
                raise ValueError(f"{self.name} takes {'one or more' if want is None else want} {what}, got {n}")

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def label(self) -> str:
        return self.name

    def forward(self, xs: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        raise NotImplementedError

    def reverse(self, ys: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        raise NotImplementedError

    def needs_for_reverse(self, n_out: int, ys: dict[int, sympy.Expr]) -> list[int]:
        """The output ports ``reverse`` reads, in the order to find them, given those known so far."""
        return list(range(n_out))

    def unchecked_in_reverse(self, n_out: int, ys: dict[int, sympy.Expr]) -> set[int]:
        """Output ports whose value a visitor must not range-check before ``reverse``: ports it ignores, or checks
        itself with a better message."""
        return set()


@dataclass(frozen=True)
class Tile(Edge):
    """``Tile(I; B, T)``: split ``I`` into tile number and index within the tile.

    forward  ``i -> (i // |T|, i % |T|)``
    reverse  ``(b, t) -> b*|T| + t``

    ``|B|`` is ``ceil(|I| / |T|)`` in a GEMM graph, so ``b*|T| + t`` may exceed ``|I|`` in the last tile:
    that overhang is what the kernel masks.
    """

    arity: ClassVar[tuple[int | None, int | None]] = (1, 2)

    def forward(self, xs: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        return [FloorDiv(xs[0], outs[1]), Mod(xs[0], outs[1])]

    def reverse(self, ys: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        return [ys[0] * outs[1] + ys[1]]


@dataclass(frozen=True)
class Flatten(Edge):
    """``Flatten(X0..Xn; F)``: row-major linearisation.

    forward  ``(x0..xn) -> sum_j x_j * |X_{j+1}|...|X_n|``
    reverse  ``f -> (f // (|X1|..|Xn|), ..., (f // |Xn|) % |X_{n-1}|, f % |Xn|)``
    """

    arity: ClassVar[tuple[int | None, int | None]] = (None, 1)

    def forward(self, xs: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        return [sympy.Add(*[x * s for x, s in zip(xs, _row_major(ins), strict=True)])]

    def reverse(self, ys: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        f = ys[0]
        strides = _row_major(ins)
        return [FloorDiv(f, s) if j == 0 else Mod(FloorDiv(f, s), ins[j]) for j, s in enumerate(strides)]


@dataclass(frozen=True)
class Split(Edge):
    """``Split(I; X0..Xn)`` with ``strides`` ``s_j`` (default row-major from the output sizes).

    forward  ``i -> ((i // s_j) % |X_j|)_j``
    reverse  ``(x0..xn) -> sum_j x_j * s_j``

    With ``strides=(1, 1)`` (Stream-K's ``Split(L; ForTile, ForK)``) the reverse is ``forTile + forK``:
    two loop counters that together walk one range.
    """

    strides: tuple[int | sympy.Expr, ...] | None = None
    arity: ClassVar[tuple[int | None, int | None]] = (1, None)

    def _strides(self, outs: Sizes) -> tuple[sympy.Expr, ...]:
        if self.strides is None:
            return _row_major(outs)
        if len(self.strides) != len(outs):
            raise ValueError(f"Split has {len(self.strides)} strides for {len(outs)} outputs")
        return tuple(sympy.sympify(s) for s in self.strides)

    def forward(self, xs: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        return [Mod(FloorDiv(xs[0], s), n) for s, n in zip(self._strides(outs), outs, strict=True)]

    def reverse(self, ys: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        return [sympy.Add(*[y * s for y, s in zip(ys, self._strides(outs), strict=True)])]

    @property
    def label(self) -> str:
        return "Split" if self.strides is None else f"Split strides={tuple(self.strides)}"


@dataclass(frozen=True)
class Join(Edge):
    """``Join(X0..Xn; F)`` with ``strides`` ``s_j`` (default row-major from the input sizes).

    forward  ``(x0..xn) -> sum_j x_j * s_j``
    reverse  ``f -> ((f // s_j) % |X_j|)_j``
    """

    strides: tuple[int | sympy.Expr, ...] | None = None
    arity: ClassVar[tuple[int | None, int | None]] = (None, 1)

    def _strides(self, ins: Sizes) -> tuple[sympy.Expr, ...]:
        if self.strides is None:
            return _row_major(ins)
        if len(self.strides) != len(ins):
            raise ValueError(f"Join has {len(self.strides)} strides for {len(ins)} inputs")
        return tuple(sympy.sympify(s) for s in self.strides)

    def forward(self, xs: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        return [sympy.Add(*[x * s for x, s in zip(xs, self._strides(ins), strict=True)])]

    def reverse(self, ys: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        return [Mod(FloorDiv(ys[0], s), n) for s, n in zip(self._strides(ins), ins, strict=True)]

    @property
    def label(self) -> str:
        return "Join" if self.strides is None else f"Join strides={tuple(self.strides)}"


@dataclass(frozen=True)
class PassThrough(Edge):
    """``PassThrough(A; B)``: the same coordinate under another name. forward ``a -> a``, reverse ``b -> b``."""

    arity: ClassVar[tuple[int | None, int | None]] = (1, 1)

    def forward(self, xs: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        return [xs[0]]

    def reverse(self, ys: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        return [ys[0]]


@dataclass(frozen=True)
class Sunder(Edge):
    """``Sunder(I; P0..P_{n-1}, S)``: cut ``I`` into consecutive, unevenly sized partitions.

    ``S`` (size n) selects the partition; ``sum_j |P_j| = |I|``. With ``o_s = sum_{j<s} |P_j|``:

    forward  ``i -> (p_0..p_{n-1}, s)`` with ``s`` the partition holding ``i``, ``p_s = i - o_s``,
             and ``p_j = 0`` for the partitions not selected
    reverse  ``(p_0..p_{n-1}, s) -> p_s + o_s``  (a ``Piecewise`` over ``s`` when ``s`` is symbolic)

    Reverse reads only ``s`` and ``p_s`` when ``s`` is a number, so a kernel section that fixes the
    selector never needs the other partitions' coordinates.
    """

    arity: ClassVar[tuple[int | None, int | None]] = (1, None)

    def check(self, n_in: int, n_out: int) -> None:
        if n_in != 1 or n_out < 2:
            raise ValueError(
                f"Sunder takes 1 input and 2+ outputs (partitions, then the selector), got {n_in}, {n_out}"
            )

    @staticmethod
    def _offsets(parts: Sizes) -> list[sympy.Expr]:
        return [sympy.Add(*parts[:s]) for s in range(len(parts))]

    def forward(self, xs: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        i, parts = xs[0], list(outs[:-1])
        offs = self._offsets(parts)
        ends = [o + p for o, p in zip(offs, parts, strict=True)]
        # NOTE: the selector counts the partitions that end at or before i.
        s = sympy.Add(*[sympy.Piecewise((1, sympy.Ge(i, e)), (0, True)) for e in ends[:-1]])
        ps = [sympy.Piecewise((i - o, sympy.Eq(s, j)), (0, True)) for j, o in enumerate(offs)]
        return [*ps, s]

    def reverse(self, ys: Exprs, ins: Sizes, outs: Sizes) -> Exprs:
        *ps, s = ys
        offs = self._offsets(list(outs[:-1]))
        if s.is_Integer:
            if not 0 <= int(s) < len(ps):
                raise ValueError(f"Sunder selector {s} out of range [0, {len(ps)})")
            return [ps[int(s)] + offs[int(s)]]
        pieces = [(p + o, sympy.Eq(s, j)) for j, (p, o) in enumerate(zip(ps, offs, strict=True))]
        pieces[-1] = (pieces[-1][0], True)
        return [sympy.Piecewise(*pieces)]

    def unchecked_in_reverse(self, n_out: int, ys: dict[int, sympy.Expr]) -> set[int]:
        """The partitions not selected (their coordinates may hold anything) and the selector (``reverse`` says
        when it is out of range)."""
        s = ys.get(n_out - 1)
        if s is not None and s.is_Integer and 0 <= int(s) < n_out - 1:
            return set(range(n_out)) - {int(s)}
        return {n_out - 1}

    def needs_for_reverse(self, n_out: int, ys: dict[int, sympy.Expr]) -> list[int]:
        s = ys.get(n_out - 1)
        if s is not None and s.is_Integer and 0 <= int(s) < n_out - 1:
            return [n_out - 1, int(s)]
        return [n_out - 1, *range(n_out - 1)]
