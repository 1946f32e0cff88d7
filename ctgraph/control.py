"""The control graph: the kernel as a program of loops and tile operations, read by every backend.

Nodes are frozen records (:class:`Kernel`, :class:`ForLoop`, :class:`If`, :class:`Assign`, the tile
operations); every index in them is a sympy expression taken from the coordinate graph. Edges say
how nodes nest and follow each other, as in rocRoller's control graph:

- ``Body``: a node (Kernel, ForLoop, If) contains the child;
- ``Sequence``: the child runs after the previous one of the same body;
- ``Initialize`` / ``Increment``: a ForLoop's ``counter = init`` and ``counter = counter + increment``
  assignments.

Storage is a ``networkx.DiGraph`` with int tags in creation order; :meth:`ControlGraph.body` orders a
body by its Sequence edges (ties by tag), so walking the graph is deterministic.

Semantics of the tile operations (one workgroup; tiles are fp32 buffers of the macro-tile shape):

- ``LoadTile(X)``: ``X_tile[i, j] = mask ? float(X[address]) : 0`` over the tile's ``rows x cols``;
- ``Multiply``: ``acc += A_tile @ B_tile`` in fp32, in a fixed order (``i``, then ``kk``, then ``j``);
- ``StorePartial(slot)`` / ``AccumulatePartial(slot)``: ``workspace[slot] = acc`` / ``acc += workspace[slot]``;
- ``Signal(flag, value)``: release-store ``value`` into ``flags[flag]``; ``Wait(flag, value)``: acquire-wait
  until ``flags[flag] == value`` (a backend that runs workgroups one by one treats a wait that is not
  already satisfied as an error);
- ``Epilogue``: ``D[address] = cast(alpha*acc + beta*C[address])`` where ``mask`` holds (C is read
  only when ``beta != 0``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any

import networkx as nx
import sympy

__all__ = [
    "AccumulatePartial",
    "Assign",
    "ControlGraph",
    "Edge",
    "Epilogue",
    "ForLoop",
    "If",
    "Kernel",
    "LoadTile",
    "Multiply",
    "Node",
    "Signal",
    "StorePartial",
    "Wait",
    "ZeroAccumulator",
]


class Edge(Enum):
    Body = "Body"
    Sequence = "Sequence"
    Initialize = "Initialize"
    Increment = "Increment"


@dataclass(frozen=True)
class Node:
    def describe(self) -> str:
        parts = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)]
        return f"{type(self).__name__}({', '.join(parts)})"


@dataclass(frozen=True)
class Kernel(Node):
    """The root: one workgroup's program. ``params`` are the size symbols bound at call time."""

    name: str
    params: tuple[sympy.Symbol, ...]
    workgroup: sympy.Symbol
    macro_tile: tuple[int, int, int]
    dtype: str
    grid: sympy.Expr | None = None  # workgroups to launch; None: the kernel's grid size g


@dataclass(frozen=True)
class ForLoop(Node):
    """``for (counter = init; condition; counter += increment)``.

    ``extent``, when given, bounds the trip count: the condition is false for ``counter - init >= extent``
    and, for loops stepping by one, holds on a prefix of the iterations (so a backend may find the trip
    count up front, by one test at the end of the range and bisection, instead of testing the condition every
    iteration).
    """

    counter: sympy.Symbol
    init: sympy.Expr
    condition: sympy.Expr
    increment: sympy.Expr
    extent: sympy.Expr | None = None


@dataclass(frozen=True)
class If(Node):
    condition: sympy.Expr


@dataclass(frozen=True)
class Assign(Node):
    target: sympy.Symbol
    value: sympy.Expr


@dataclass(frozen=True)
class ZeroAccumulator(Node):
    pass


@dataclass(frozen=True)
class LoadTile(Node):
    """Load macro tile of ``tensor`` ("A" or "B") over ``rows x cols``, indexed by ``(row, col)`` symbols.

    ``origin``: the tensor coordinates (row, column) of the tile's element (0, 0), for backends that copy
    whole boxes (Hopper's TMA) instead of addressing elements; ``address`` and ``mask`` agree with it.
    """

    tensor: str
    row: sympy.Symbol
    col: sympy.Symbol
    shape: tuple[int, int]
    address: sympy.Expr
    mask: sympy.Expr
    origin: tuple[sympy.Expr, ...] = ()


@dataclass(frozen=True)
class Multiply(Node):
    """``acc += A_tile @ B_tile`` (fp32 multiply-accumulate)."""


@dataclass(frozen=True)
class StorePartial(Node):
    slot: sympy.Expr


@dataclass(frozen=True)
class AccumulatePartial(Node):
    slot: sympy.Expr


@dataclass(frozen=True)
class Signal(Node):
    flag: sympy.Expr
    value: int = 1


@dataclass(frozen=True)
class Wait(Node):
    flag: sympy.Expr
    value: int = 1


@dataclass(frozen=True)
class Epilogue(Node):
    """``D = alpha*acc + beta*C`` over the output tile, cast to the GEMM's dtype, masked.

    ``origin``: D's coordinates (row, column) of the tile's element (0, 0), for backends that store whole
    boxes (Hopper's TMA) instead of addressing elements, as for :class:`LoadTile`.
    """

    row: sympy.Symbol
    col: sympy.Symbol
    shape: tuple[int, int]
    address: sympy.Expr
    mask: sympy.Expr
    origin: tuple[sympy.Expr, ...] = ()


class ControlGraph:
    """Nodes and Body/Sequence/Initialize/Increment edges; see the module docstring."""

    def __init__(self) -> None:
        self.nx = nx.DiGraph()
        self._bodies: dict[int, tuple[int, ...]] = {}  # body() of each node asked for; add() forgets the parent's

    def add(self, node: Node, parent: int | None = None) -> int:
        """Add ``node``; with ``parent``, append it to the parent's body (after its last child)."""
        if not isinstance(node, Node):
            raise TypeError(f"expected a control Node, got {type(node).__name__}")
        tag = self.nx.number_of_nodes()
        self.nx.add_node(tag, node=node)
        if parent is not None:
            body = self.body(parent)
            self._bodies.pop(parent, None)
            self.nx.add_edge(parent, tag, kind=Edge.Body)
            if body:
                self.nx.add_edge(body[-1], tag, kind=Edge.Sequence)
        if isinstance(node, ForLoop):
            init = self.nx.number_of_nodes()
            self.nx.add_node(init, node=Assign(node.counter, node.init))
            self.nx.add_edge(tag, init, kind=Edge.Initialize)
            inc = self.nx.number_of_nodes()
            self.nx.add_node(inc, node=Assign(node.counter, node.counter + node.increment))
            self.nx.add_edge(tag, inc, kind=Edge.Increment)
        return tag

    def __getitem__(self, tag: int) -> Any:
        """The node record of ``tag`` (typed ``Any``: callers dispatch on its class)."""
        return self.nx.nodes[tag]["node"]

    def structure(self) -> tuple:
        """A hashable summary of the whole graph: the records by tag and the edges with their kinds. Graphs of equal
        structure are the same program: the records hold every index as a sympy expression of the kernel's
        parameters, so GEMMs that differ only in their sizes have it in common."""
        nodes = tuple(self[t] for t in range(len(self)))
        return nodes, tuple(sorted((u, v, k.value) for u, v, k in self.nx.edges(data="kind")))

    def __len__(self) -> int:
        return self.nx.number_of_nodes()

    def _targets(self, tag: int, kind: Edge) -> list[int]:
        return sorted(v for _, v, k in self.nx.out_edges(tag, data="kind") if k is kind)

    def body(self, tag: int) -> list[int]:
        """The children of ``tag`` in execution order (Sequence edges, ties by tag); kept until a child is added,
        since the emitters ask for each body many times."""
        if tag not in self._bodies:
            kids = set(self._targets(tag, Edge.Body))
            seq = nx.DiGraph()
            seq.add_nodes_from(kids)
            seq.add_edges_from(
                (u, v) for u, v, k in self.nx.edges(data="kind") if k is Edge.Sequence and u in kids and v in kids
            )
            self._bodies[tag] = tuple(nx.lexicographical_topological_sort(seq, key=int))
        return list(self._bodies[tag])

    def initialize(self, loop: int) -> Assign:
        (t,) = self._targets(loop, Edge.Initialize)
        return self[t]  # type: ignore[return-value]

    def increment(self, loop: int) -> Assign:
        (t,) = self._targets(loop, Edge.Increment)
        return self[t]  # type: ignore[return-value]

    def parent(self, tag: int) -> int | None:
        """The node whose body holds ``tag`` (None for a Kernel)."""
        return next((u for u, _, k in self.nx.in_edges(tag, data="kind") if k is Edge.Body), None)

    def enters(self, loop: int) -> bool:
        """Whether ForLoop ``loop`` runs at least once wherever the program reaches it, as read off the graph.

        Its condition at ``counter = init`` is rewritten into the values at the entry of each enclosing body
        (the assignments before it in that body substituted, latest first); every conjunct must then be true,
        or a conjunct of the enclosing ForLoop's or If's condition, which holds on entry to its body. A
        sibling before ``loop`` that is a ForLoop or If (it may assign anything) ends the proof, and so does a
        conjunct left over past an enclosing ForLoop that names a variable the loop changes: ``False`` means
        "not shown", not "may be empty". For a K loop under its tile loop: ``m == m_tile(forTile + 0)`` once
        ``m`` is substituted, and ``forTile + 0 < tilesPerWG`` is the tile loop's own bound.
        """
        node = self[loop]
        if not isinstance(node, ForLoop):
            raise TypeError(f"node {loop} is a {type(node).__name__}, not a ForLoop")
        left = set(sympy.And.make_args(node.condition.subs(node.counter, node.init))) - {sympy.true}
        tag, parent = loop, self.parent(loop)
        while left and parent is not None:
            body = self.body(parent)
            for sibling in reversed(body[: body.index(tag)]):
                before = self[sibling]
                if isinstance(before, ForLoop | If):
                    return False
                if isinstance(before, Assign):
                    left = {c.subs(before.target, before.value) for c in left} - {sympy.true}
            if sympy.false in left:
                return False
            enclosing = self[parent]
            if isinstance(enclosing, ForLoop | If):
                left -= set(sympy.And.make_args(enclosing.condition))
            if isinstance(enclosing, ForLoop):  # what the loop changes is not known above it
                changed = {enclosing.counter} | {
                    self[t].target for t, _ in self.walk(parent) if isinstance(self[t], Assign)
                }
                if any(c.free_symbols & changed for c in left):
                    return False
            tag, parent = parent, self.parent(parent)
        return not left

    @property
    def kernels(self) -> list[int]:
        """The Kernel nodes in launch order (a program may be several kernels, e.g. split-K + reduction)."""
        return sorted(t for t in self.nx if isinstance(self[t], Kernel))

    @property
    def root(self) -> int:
        """The Kernel node of a one-kernel program."""
        roots = self.kernels
        if len(roots) != 1:
            raise ValueError(f"a control graph has one Kernel node, found {len(roots)} (see .kernels)")
        return roots[0]

    def walk(self, tag: int | None = None, depth: int = 0) -> Iterator[tuple[int, int]]:
        """``(tag, depth)`` for every node reachable by Body edges, in program order (every kernel)."""
        if tag is None:
            for k in self.kernels:
                yield from self.walk(k, depth)
            return
        yield tag, depth
        for child in self.body(tag):
            yield from self.walk(child, depth + 1)

    def nodes(self, kind: type | None = None) -> list[int]:
        return [t for t, _ in self.walk() if kind is None or isinstance(self[t], kind)]

    def pretty(self) -> str:
        """The program as indented text, one node a line."""
        return "\n".join(f"{'  ' * d}[{t}] {self[t].describe()}" for t, d in self.walk())
