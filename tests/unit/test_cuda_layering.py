"""The CUDA backend's modules: each imports on its own, and their imports of one another form no loop."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "lowering" / "cuda"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = sorted(_module(p) for p in PACKAGE.rglob("*.py"))


def _imports(path: Path) -> set[str]:
    """The modules of ``lowering.cuda`` that ``path`` imports, at any depth of its code."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            name = ".".join(x for x in (base, node.module or "") if x)
            # `from .emit import hopper`: a module when it is one, else a name of the package
            out |= {f"{name}.{a.name}" if f"{name}.{a.name}" in MODULES else name for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m in MODULES and m != module}


def import_graph() -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(MODULES)
    for path in PACKAGE.rglob("*.py"):
        g.add_edges_from((_module(path), m) for m in _imports(path))
    return g


def test_the_backend_has_the_modules_of_its_pipeline():
    for m in ("plan.mma", "plan.hopper", "emit.base", "emit.mma", "emit.hopper", "runtime"):
        assert f"lowering.cuda.{m}" in MODULES


def test_no_two_modules_import_each_other():
    g = import_graph()
    assert nx.is_directed_acyclic_graph(g), list(nx.simple_cycles(g))
    # the emitters print plans; the plans know nothing of printing, and the two emitters nothing of each other
    assert not any(a.startswith("lowering.cuda.plan") and ".emit" in b for a, b in g.edges)
    assert ("lowering.cuda.emit.hopper", "lowering.cuda.emit.mma") not in g.edges
    assert ("lowering.cuda.emit.mma", "lowering.cuda.emit.hopper") not in g.edges


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_on_its_own(module):
    r = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
