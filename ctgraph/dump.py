"""Dumps: a coordinate graph (or a control graph) as DOT text or a rendered picture, via ``graphviz``.

Dimensions are rounded boxes (green outline: dangling, i.e. the hardware/loop coordinates a kernel
supplies), edges are grey boxes named after their transform (``Tile``, ``Flatten``, ``Sunder`` ...);
every arc carries the port number of the operand, so operand order is visible. ``.dot`` files are
plain text and need no graphviz binary; ``.svg``/``.png``/``.pdf`` call ``dot``.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import graphviz

from .control import ControlGraph
from .graph import CoordinateGraph

__all__ = ["DotNotFoundError", "dump", "to_digraph"]

RENDERED = ("svg", "png", "pdf")


class DotNotFoundError(RuntimeError):
    """The graphviz ``dot`` binary is needed to render and is not on PATH."""


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


@to_digraph.register
def _(cg: ControlGraph) -> graphviz.Digraph:
    dot = graphviz.Digraph("control", graph_attr={"rankdir": "TB"}, node_attr={"fontname": "Helvetica", "shape": "box"})
    for t in sorted(cg.nx.nodes):
        node = cg[t]
        shape = {"ForLoop": "hexagon", "If": "diamond", "Kernel": "doubleoctagon"}.get(type(node).__name__, "box")
        dot.node(f"c{t}", _esc(f"[{t}] {node.describe()}"), shape=shape)
    for u, v, kind in sorted(cg.nx.edges(data="kind"), key=lambda e: (e[0], e[1])):
        dot.edge(f"c{u}", f"c{v}", label=kind.value, style=EDGE_STYLE[kind.value])
    return dot


def dump(obj: object, path: str | Path) -> Path:
    """Write ``obj`` to ``path``: ``.dot`` as DOT text; ``.svg``/``.png``/``.pdf`` rendered by graphviz."""
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in ("dot", "gv", *RENDERED):
        raise ValueError(f"dump path must end in .dot, .gv, .svg, .png or .pdf, got {str(path)!r}")
    dot = to_digraph(obj)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt in ("dot", "gv"):
        path.write_text(dot.source)
        return path
    if shutil.which("dot") is None:
        raise DotNotFoundError(
            f"rendering {path.name} needs the graphviz 'dot' program, which is not on PATH. Install it "
            "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz; conda: conda install graphviz) "
            "or dump to a .dot file, which needs no binary."
        )
    path.write_bytes(dot.pipe(format=fmt))
    return path
