"""Dumps: a coordinate graph (or a control graph) as DOT text or a rendered picture, via ``graphviz``.

Dimensions are rounded boxes (green outline: dangling, i.e. the hardware/loop coordinates a kernel
supplies), edges are grey boxes named after their transform (``Tile``, ``Flatten``, ``Sunder`` ...);
every arc carries the port number of the operand, so operand order is visible. ``.dot`` files are
plain text and need no graphviz binary; ``.svg``/``.png``/``.pdf`` call ``dot``.

A control graph is drawn as nested boxes: every ``ForLoop`` and ``If`` is a graphviz cluster holding
the node, its ``Initialize``/``Increment`` assignments and its body. A body hangs from its first child's
``Body`` arc and the ``Sequence`` arcs between children, so the program reads top to bottom; the other
``Body`` arcs stay in the DOT text but are invisible in a picture (the box says the same). Long labels
wrap at their fields and at the ``&`` of conditions. ``.txt`` writes the compact text view of a control
graph (:meth:`ControlGraph.pretty`), one node a line.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import graphviz

from .control import ControlGraph, ForLoop, If
from .deps import OPTIONAL, MissingDependency
from .graph import CoordinateGraph

__all__ = ["DotNotFoundError", "dump", "to_digraph"]

RENDERED = ("svg", "png", "pdf")


class DotNotFoundError(MissingDependency):
    """The graphviz ``dot`` binary is needed to render and is not on PATH (a :class:`MissingDependency`,
    so also a ``RuntimeError``)."""


def _esc(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


@functools.singledispatch
def to_digraph(obj: object) -> graphviz.Digraph:
    """A ``graphviz.Digraph`` of ``obj``; other graph types register their own."""
    raise TypeError(f"cannot dump a {type(obj).__name__}; expected a CoordinateGraph or a ControlGraph")


@to_digraph.register
def _(g: CoordinateGraph) -> graphviz.Digraph:
    dot = graphviz.Digraph("coordinates", graph_attr={"rankdir": "TB"}, node_attr={"fontname": "Helvetica"})
    sinks = set(g.sinks())
    for t in g:
        el = g[t]
        if g.is_dimension(t):
            style = {"shape": "box", "style": "rounded"}
            if t in sinks:
                style.update(color="#33bb33", penwidth="2")
            dot.node(f"n{t}", _esc(f"{el.label}\n[{t}]"), **style)
        else:
            dot.node(f"n{t}", _esc(f"{el.label} [{t}]"), shape="box", style="filled", fillcolor="#e8e8e8")
    for u, v, port in sorted(g.nx.edges(data="port")):
        dot.edge(f"n{u}", f"n{v}", label=str(port))
    return dot


EDGE_STYLE = {"Body": "solid", "Sequence": "dashed", "Initialize": "dotted", "Increment": "dotted"}


WRAP = 72  # characters per line of a control-graph node label


def _wrap(text: str, width: int = WRAP) -> list[str]:
    """``text`` cut into lines of about ``width`` characters, at ``", "`` between fields and ``" & "`` in
    conditions; a line never ends inside a word, and joining the lines with nothing gives ``text`` back."""
    pieces, start = [], 0
    for i in range(len(text)):
        if text.startswith(", ", i) or text.startswith(" & ", i):
            cut = i + (2 if text[i] == "," else 1)
            pieces.append(text[start:cut])
            start = cut
    pieces.append(text[start:])
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return lines


def _control_label(tag: int, node: object) -> str:
    r"""A node's DOT label: ``[tag] describe()`` wrapped, left-justified lines (``\l``) after the first."""
    lines = _wrap(f"[{tag}] {node.describe()}")  # type: ignore[attr-defined]
    if len(lines) == 1:
        return _esc(lines[0])
    return "\\l".join(_esc(line) for line in lines) + "\\l"


@to_digraph.register
def _(cg: ControlGraph) -> graphviz.Digraph:
    dot = graphviz.Digraph(
        "control",
        graph_attr={"rankdir": "TB", "compound": "true", "fontname": "Helvetica", "labeljust": "l"},
        node_attr={"fontname": "Helvetica", "shape": "box"},
    )
    dot.body.append("\t// text view of the same graph: ControlGraph.pretty(), or ctgraph.dump(control, 'name.txt')\n")
    shapes = {"ForLoop": "hexagon", "If": "diamond", "Kernel": "doubleoctagon"}

    def node(sub: graphviz.Digraph, t: int) -> None:
        sub.node(f"c{t}", _control_label(t, cg[t]), shape=shapes.get(type(cg[t]).__name__, "box"))

    def place(sub: graphviz.Digraph, t: int) -> None:
        """Node ``t``, and for a loop or an If, a cluster holding its assignments and its body."""
        if not isinstance(cg[t], ForLoop | If):
            node(sub, t)
            for child in cg.body(t):
                place(sub, child)
            return
        with sub.subgraph(name=f"cluster_c{t}") as box:
            box.attr(label=_esc(f"[{t}] {type(cg[t]).__name__}"), style="rounded", color="#888888")
            node(box, t)
            for _, v, kind in sorted(cg.nx.out_edges(t, data="kind")):
                if kind.value in ("Initialize", "Increment"):
                    node(box, v)
            for child in cg.body(t):
                place(box, child)

    placed: set[int] = set()
    for root in cg.kernels:
        place(dot, root)
        placed.update(t for t, _ in cg.walk(root))
    for t in sorted(set(cg.nx.nodes) - placed):
        if not any(kind.value in ("Initialize", "Increment") for _, _, kind in cg.nx.in_edges(t, data="kind")):
            node(dot, t)  # NOTE: a node outside every kernel's body (none in a lowered GEMM): still drawn

    def last(t: int) -> int:
        """The node drawn lowest in ``t``'s box: its body's last node, recursively."""
        body = cg.body(t)
        return last(body[-1]) if body else t

    firsts = {body[0] for t in cg.nx.nodes if (body := cg.body(t))}
    for u, v, kind in sorted(cg.nx.edges(data="kind"), key=lambda e: (e[0], e[1])):
        attrs = {"label": kind.value, "style": EDGE_STYLE[kind.value]}
        if kind.value == "Body" and v not in firsts:
            # NOTE: the cluster shows that v is in the body; its arc is kept in the text, hidden in the picture
            attrs.update(constraint="false", style="invis")
        if kind.value == "Sequence" and last(u) != u:  # v goes below all of u's box, not beside it
            attrs["constraint"] = "false"
            dot.edge(f"c{last(u)}", f"c{v}", style="invis")
        dot.edge(f"c{u}", f"c{v}", **attrs)
    return dot


def dump(obj: object, path: str | Path) -> Path:
    """Write ``obj`` to ``path``: ``.dot`` (or ``.gv``) as DOT text; ``.svg``/``.png``/``.pdf`` rendered by
    graphviz (:class:`DotNotFoundError` without its ``dot`` program); ``.txt``, for a control graph, its text view
    (:meth:`ControlGraph.pretty`). Parent folders are created; returns the path."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    check_path(obj, path)
    if fmt == "txt":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(obj.pretty() + "\n")  # type: ignore[attr-defined]
        return path
    dot = to_digraph(obj)
    if fmt in RENDERED and shutil.which("dot") is None:
        raise DotNotFoundError(
            "graphviz's 'dot' program",
            f"rendering {path.name}",
            OPTIONAL["dot"].install + "; or dump to a .dot file, which needs no binary",
            "'dot' is not on PATH",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt in ("dot", "gv"):
        path.write_text(dot.source)
        return path
    path.write_bytes(dot.pipe(format=fmt))
    return path


def check_path(obj: object, path: str | Path) -> Path:
    """``path`` when its suffix is one :func:`dump` writes for ``obj``, else a ``ValueError`` listing them."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    text = ("txt",) if isinstance(obj, ControlGraph) else ()
    if fmt not in ("dot", "gv", *RENDERED, *text):
        kinds = ".dot, .gv, .svg, .png, .pdf" + (" or .txt" if text else "")
        raise ValueError(f"dump path must end in {kinds}, got {str(path)!r}")
    return path
