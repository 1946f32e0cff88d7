"""``CoordinateGraph``: the hypergraph of dimensions and edges that describes a GEMM's index spaces.

Storage is a ``networkx.DiGraph`` whose nodes are int tags from one counter shared by dimensions and
edges. A hyper-edge ``E(ins; outs)`` is an edge node with arcs ``in_j -> E`` (attribute ``port=j``)
and ``E -> out_j`` (``port=j``), so operand order is explicit and the graph stays bipartite.

``forward``/``reverse`` walk as many edges as needed, demand-driven from the targets: to find a
dimension, reverse looks for an edge it feeds whose outputs can all be found (recursively) and applies
that edge's reverse map; forward looks for an edge that produces it. Edges are tried in tag order, so
the result is deterministic. A :class:`Walk` also records which dimensions each result depends on, so
callers can ask for the conditions ``0 <= v < |X|`` along the way (the masks and loop bounds of a kernel).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import sympy

from .dimensions import Dimension
from .edges import Edge
from .expr import Mod

__all__ = ["CoordinateGraph", "Walk", "check_coordinate"]

Values = Mapping[int, int | sympy.Expr]


@dataclass
class Walk:
    """The outcome of a walk: every value found and, per dimension, the dimensions it was derived from."""

    graph: CoordinateGraph
    values: dict[int, sympy.Expr]
    support: dict[int, frozenset[int]] = field(default_factory=dict)
    given: frozenset[int] = frozenset()

    def __getitem__(self, tag: int) -> sympy.Expr:
        return self.values[tag]

    def depends(self, targets: Iterable[int]) -> list[int]:
        """Tags of the dimensions the targets were derived from (targets included), sorted."""
        out: set[int] = set()
        for t in targets:
            out |= self.support[t]
        return sorted(out)

    def in_bounds(self, targets: Iterable[int]) -> list[sympy.Expr]:
        """Conditions ``v < |X|`` for every derived dimension the targets depend on, unless already true.

        The given coordinates are the caller's to keep in range. Values are nonnegative by construction
        (nonnegative coordinates, nonnegative algebra), so only the upper bound is stated; conditions
        that sympy can decide to be true are dropped.
        """
        conds: list[sympy.Expr] = []
        for t in self.depends(targets):
            if t in self.given:
                continue
            v, n = self.values[t], self.graph.size(t)
            if isinstance(v, Mod) and v.args[1] == n:  # x % n < n
                continue
            c = sympy.Lt(v, n)
            if c is not sympy.true and c not in conds:
                conds.append(c)
        return conds


def check_coordinate(g: CoordinateGraph, tag: int, value: object, in_range: bool = True) -> int | sympy.Expr:
    """A coordinate for dimension ``tag``: a sympy expression (kept), or a nonnegative integer, below ``|X|``
    where the size is a number and ``in_range``. Anything else is a ``TypeError`` (float, string, bool) or a
    ``ValueError`` (negative, out of range), naming the dimension. An empty dimension (size 0, e.g. an empty
    Sunder partition) takes 0 as a placeholder: its coordinate is never read."""
    if isinstance(value, sympy.Basic) and not value.is_number:
        return value  # type: ignore[return-value]
    if isinstance(value, sympy.Integer):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"coordinate of {g.label(tag)} must be an integer or a sympy expression, got {value!r}")
    size = g.size(tag)
    if value < 0 or (in_range and size.is_Integer and value >= size and not value == size == 0):
        bound = f"0 <= value < {size}" if size.is_Integer else "value >= 0"
        raise ValueError(f"coordinate of {g.label(tag)} must satisfy {bound}, got {value}")
    return int(value)


class CoordinateGraph:
    """A coordinate-transform hypergraph. See the module docstring."""

    def __init__(self) -> None:
        self.nx = nx.DiGraph()
        self._next = 0
        self._ordered: tuple[tuple[int, Dimension | Edge], ...] | None = None  # (tag, element) by tag; None: stale

    # --- building ----------------------------------------------------------------------------------

    def add_dimension(self, dim: Dimension) -> int:
        """Add a dimension and return its tag."""
        if not isinstance(dim, Dimension):
            raise TypeError(f"add_dimension takes a Dimension, got {type(dim).__name__}")
        tag = self._take_tag()
        self.nx.add_node(tag, element=dim)
        self._ordered = None
        return tag

    def add_edge(self, edge: Edge, inputs: Sequence[int], outputs: Sequence[int]) -> int:
        """Add ``edge(inputs; outputs)``; inputs are upstream, outputs downstream. Returns the edge's tag."""
        if not isinstance(edge, Edge):
            raise TypeError(f"add_edge takes an Edge, got {type(edge).__name__}")
        inputs, outputs = list(inputs), list(outputs)
        edge.check(len(inputs), len(outputs))
        for role, tags in (("inputs", inputs), ("outputs", outputs)):
            for t in tags:
                if not self.is_dimension(t):
                    raise ValueError(f"{edge.name} {role}: {t!r} is not a dimension tag of this graph")
        if len(set(inputs + outputs)) != len(inputs) + len(outputs):
            raise ValueError(f"{edge.name}: a dimension appears twice among inputs {inputs} and outputs {outputs}")
        tag = self._take_tag()
        self.nx.add_node(tag, element=edge)
        self._ordered = None
        for port, t in enumerate(inputs):
            self.nx.add_edge(t, tag, port=port)
        for port, t in enumerate(outputs):
            self.nx.add_edge(tag, t, port=port)
        return tag

    def replace_dimension(self, tag: int, dim: Dimension) -> None:
        """Swap the record of dimension ``tag`` (same tag, same connections)."""
        if not self.is_dimension(tag):
            raise ValueError(f"{tag!r} is not a dimension tag of this graph")
        self.nx.nodes[tag]["element"] = dim
        self._ordered = None

    @property
    def attrs(self) -> dict[str, Any]:
        """Graph-level facts (``gemm``: the problem the graph was built for), kept by ``copy()``."""
        return self.nx.graph

    def copy(self) -> CoordinateGraph:
        """An independent copy with the same tags (elements are frozen, so they are shared)."""
        g = CoordinateGraph()
        g.nx = self.nx.copy()
        g._next = self._next
        return g

    def _take_tag(self) -> int:
        self._next += 1
        return self._next - 1

    # --- queries -----------------------------------------------------------------------------------

    def __getitem__(self, tag: int) -> Dimension | Edge:
        if tag not in self.nx:
            raise KeyError(f"no node with tag {tag!r}")
        return self.nx.nodes[tag]["element"]

    def __contains__(self, tag: object) -> bool:
        return tag in self.nx

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self.nx.nodes))

    def __len__(self) -> int:
        return self.nx.number_of_nodes()

    def is_dimension(self, tag: object) -> bool:
        return tag in self.nx and isinstance(self.nx.nodes[tag]["element"], Dimension)

    def is_edge(self, tag: object) -> bool:
        return tag in self.nx and isinstance(self.nx.nodes[tag]["element"], Edge)

    def dimension(self, tag: int) -> Dimension:
        if not self.is_dimension(tag):
            raise ValueError(f"{tag!r} is not a dimension tag of this graph")
        return self.nx.nodes[tag]["element"]

    def edge(self, tag: int) -> Edge:
        if not self.is_edge(tag):
            raise ValueError(f"{tag!r} is not an edge tag of this graph")
        return self.nx.nodes[tag]["element"]

    def size(self, tag: int) -> sympy.Expr:
        return sympy.sympify(self.dimension(tag).size)

    def label(self, tag: int) -> str:
        return f"{self[tag].label} [{tag}]"

    @staticmethod
    def _matches(element: Any, kind: type | None, attrs: Mapping[str, Any]) -> bool:
        if kind is not None and not isinstance(element, kind):
            return False
        return all(getattr(element, k, object()) == v for k, v in attrs.items())

    def dimensions(self, kind: type | None = None, **attrs: Any) -> list[int]:
        """Tags of the dimensions of type ``kind`` whose fields equal ``attrs``, in tag order."""
        return self._elements(Dimension, kind, attrs)

    def edges(self, kind: type | None = None, **attrs: Any) -> list[int]:
        """Tags of the edges of type ``kind`` whose fields equal ``attrs``, in tag order."""
        return self._elements(Edge, kind, attrs)

    def _elements(self, family: type, kind: type | None, attrs: Mapping[str, Any]) -> list[int]:
        """Tags of the ``family`` elements (dimensions or edges) that :meth:`_matches` takes, in tag order. The
        elements in tag order are kept until the graph changes (``add_*``, :meth:`replace_dimension`): lowering
        asks for one dimension at a time, thousands of times a kernel."""
        if self._ordered is None:
            self._ordered = tuple(sorted(self.nx.nodes(data="element")))
        return [t for t, e in self._ordered if isinstance(e, family) and self._matches(e, kind, attrs)]

    def find(self, kind: type, **attrs: Any) -> int:
        """The one dimension of type ``kind`` with ``attrs``; ``ValueError`` if there is none or several."""
        found = self.dimensions(kind, **attrs)
        if len(found) != 1:
            what = f"{kind.__name__}({', '.join(f'{k}={v!r}' for k, v in attrs.items())})"
            raise ValueError(f"expected one {what} in the graph, found {len(found)}")
        return found[0]

    def inputs(self, edge: int) -> list[int]:
        """The input (upstream) dimensions of ``edge`` in port order."""
        self.edge(edge)
        return [u for u, _, _ in sorted(self.nx.in_edges(edge, data="port"), key=lambda a: a[2])]

    def outputs(self, edge: int) -> list[int]:
        """The output (downstream) dimensions of ``edge`` in port order."""
        self.edge(edge)
        return [v for _, v, _ in sorted(self.nx.out_edges(edge, data="port"), key=lambda a: a[2])]

    def edges_in(self, dim: int) -> list[int]:
        """Edges that produce ``dim`` (``dim`` is one of their outputs), in tag order."""
        self.dimension(dim)
        return sorted(self.nx.predecessors(dim))

    def edges_out(self, dim: int) -> list[int]:
        """Edges that consume ``dim`` (``dim`` is one of their inputs), in tag order."""
        self.dimension(dim)
        return sorted(self.nx.successors(dim))

    def sources(self) -> list[int]:
        """Dimensions no edge produces (the most upstream: the user tensors)."""
        return [t for t in self.dimensions() if not self.nx.in_degree(t)]

    def sinks(self) -> list[int]:
        """Dimensions no edge consumes (the most downstream: workgroups, loops, tile indices)."""
        return [t for t in self.dimensions() if not self.nx.out_degree(t)]

    def topological_order(self) -> list[int]:
        """All tags, upstream first, ties broken by tag: the same graph always gives the same order."""
        return list(nx.lexicographical_topological_sort(self.nx, key=int))

    def structure(self) -> tuple:
        """A hashable summary of the graph's structure and records (tags, elements, ports)."""
        nodes = tuple((t, self[t]) for t in self)
        arcs = tuple(sorted((u, v, p) for u, v, p in self.nx.edges(data="port")))
        return nodes, arcs, tuple(sorted(self.attrs.items()))

    def __repr__(self) -> str:
        return f"CoordinateGraph({len(self.dimensions())} dimensions, {len(self.edges())} edges)"

    # --- walking -----------------------------------------------------------------------------------

    def walk(self, values: Values, targets: Iterable[int], direction: str = "reverse") -> Walk:
        """Find ``targets`` from the coordinates ``values`` by applying edges in ``direction``.

        ``direction="reverse"`` goes upstream (outputs -> inputs), ``"forward"`` downstream.
        Raises ``ValueError`` naming the targets that cannot be reached and the coordinates missing. Numeric
        coordinates must be nonnegative integers (:func:`check_coordinate`), but may lie past their dimension's
        size, so that :meth:`Walk.in_bounds` can say which bound fails; sympy expressions are kept.
        """
        if direction not in ("reverse", "forward"):
            raise ValueError(f"direction must be 'reverse' or 'forward', got {direction!r}")
        for t in values:
            self.dimension(t)
        # NOTE: a walk may start out of range (that is how in_bounds finds the conditions); reverse/forward may not
        values = {t: check_coordinate(self, t, v, in_range=False) for t, v in values.items()}
        targets = list(targets)
        for t in targets:
            self.dimension(t)
        w = Walk(self, {t: sympy.sympify(v) for t, v in values.items()}, given=frozenset(values))
        w.support = {t: frozenset([t]) for t in w.values}
        busy: set[int] = set()
        failed = [t for t in targets if not self._find(w, t, direction, busy)]
        if failed:
            raise ValueError(self._unreachable_message(values, failed, direction))
        return w

    def reverse(self, values: Values, targets: Iterable[int]) -> dict[int, sympy.Expr]:
        """Upstream coordinates ``targets`` from downstream ``values``: ``{q: 3, r: 5} -> {a: 53}``. Numeric values
        must be integers inside their dimension (:func:`check_coordinate`)."""
        targets = list(targets)
        values = {t: check_coordinate(self, t, v) for t, v in values.items() if self.dimension(t)}
        w = self.walk(values, targets, "reverse")
        return {t: w.values[t] for t in targets}

    def forward(self, values: Values, targets: Iterable[int]) -> dict[int, sympy.Expr]:
        """Downstream coordinates ``targets`` from upstream ``values``: ``{a: 53} -> {q: 3, r: 5}``. Numeric values
        must be integers inside their dimension (:func:`check_coordinate`)."""
        targets = list(targets)
        values = {t: check_coordinate(self, t, v) for t, v in values.items() if self.dimension(t)}
        w = self.walk(values, targets, "forward")
        return {t: w.values[t] for t in targets}

    def apply(self, edge: int, coords: Sequence[int | sympy.Expr], direction: str) -> list[sympy.Expr]:
        """Apply one edge: ``coords`` are its inputs (forward) or its outputs (reverse)."""
        e, ins, outs = self.edge(edge), self.inputs(edge), self.outputs(edge)
        given = ins if direction == "forward" else outs
        if len(coords) != len(given):
            raise ValueError(f"{e.name} [{edge}] {direction} takes {len(given)} coordinates, got {len(coords)}")
        xs = [sympy.sympify(c) for c in coords]
        in_sizes, out_sizes = [self.size(t) for t in ins], [self.size(t) for t in outs]
        fn = e.forward if direction == "forward" else e.reverse
        return [sympy.sympify(v) for v in fn(xs, in_sizes, out_sizes)]

    def _find(self, w: Walk, tag: int, direction: str, busy: set[int]) -> bool:
        if tag in w.values:
            return True
        if tag in busy:
            return False
        busy.add(tag)
        try:
            candidates = self.edges_out(tag) if direction == "reverse" else self.edges_in(tag)
            return any(self._try_edge(w, e, direction, busy) for e in candidates)
        finally:
            busy.discard(tag)

    def _try_edge(self, w: Walk, edge: int, direction: str, busy: set[int]) -> bool:
        e, ins, outs = self.edge(edge), self.inputs(edge), self.outputs(edge)
        given, found = (outs, ins) if direction == "reverse" else (ins, outs)
        used: list[int] = []
        while True:
            known = {p: w.values[t] for p, t in enumerate(given) if t in w.values}
            needed = e.needs_for_reverse(len(given), known) if direction == "reverse" else list(range(len(given)))
            missing = [p for p in needed if given[p] not in w.values]
            if not missing:
                used = [given[p] for p in needed]
                break
            if not self._find(w, given[missing[0]], direction, busy):
                return False
        coords = [w.values.get(t, sympy.Integer(0)) for t in given]
        support = frozenset().union(*(w.support[t] for t in used))
        for t, v in zip(found, self.apply(edge, coords, direction), strict=True):
            if t not in w.values:
                w.values[t] = v
                w.support[t] = support | {t}
        return True

    def _unreachable_message(self, values: Values, failed: list[int], direction: str) -> str:
        # The coordinates that would help: the leaves on the far side of each failed target.
        leaves = self.sinks() if direction == "reverse" else self.sources()
        side = nx.descendants if direction == "reverse" else nx.ancestors
        missing = sorted({t for f in failed for t in side(self.nx, f) if t in leaves and t not in values})
        names = ", ".join(self.label(t) for t in failed)
        need = ", ".join(self.label(t) for t in missing) or "none: no edge leads there"
        return (
            f"cannot reach {names} by a {direction} walk from the given coordinates "
            f"({', '.join(self.label(t) for t in sorted(values)) or 'none'}); missing coordinates: {need}"
        )
