"""The import graph, as import-linter's grimp draws it (imports inside functions included): no loop anywhere in
ctgraph and lowering, and no import from the core into a backend (``make test`` also runs ``lint-imports``)."""

from __future__ import annotations

import networkx as nx
import pytest

grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the dev extra)")


def test_the_import_graph_has_no_loop_and_no_core_to_backend_edge():
    graph = grimp.build_graph("ctgraph", "lowering")
    g = nx.DiGraph((m, imp) for m in graph.modules for imp in graph.find_modules_directly_imported_by(m))
    assert list(nx.simple_cycles(g)) == []
    assert [(a, b) for a, b in g.edges if a.startswith("ctgraph") and b.startswith("lowering")] == []
