"""The examples of README.md and docs/*.md run, so the docs cannot drift from the code.

Each file's code blocks run in order in one namespace, in a temporary folder: ```python blocks must run
without error, ```pycon blocks are doctests whose output must match. A block whose first line says it
needs a GPU is skipped; one that needs graphviz's ``dot``, matplotlib or torch runs where they are installed.
"""

from __future__ import annotations

import doctest
import importlib.util
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = ["README.md", "docs/guide.md", "docs/cuda.md", "docs/streamk.md"]
BLOCK = re.compile(r"^```(python|pycon)\n(.*?)^```", re.M | re.S)


def blocks(path: Path) -> list[tuple[str, str, int]]:
    """``(kind, code, line)`` of every python and pycon block of ``path``."""
    text = path.read_text()
    return [(m[1], m[2], text.count("\n", 0, m.start()) + 1) for m in BLOCK.finditer(text)]


def skip_reason(code: str) -> str | None:
    first = code.splitlines()[0] if code.strip() else ""
    if "needs a GPU" in first:
        return "needs a GPU"
    if "needs graphviz's dot" in first and shutil.which("dot") is None:
        return "needs graphviz's dot"
    if "needs matplotlib" in first and importlib.util.find_spec("matplotlib") is None:
        return "needs matplotlib"
    if "needs torch" in first and importlib.util.find_spec("torch") is None:
        return "needs torch"
    return None


def test_every_file_has_examples():
    assert all(blocks(ROOT / f) for f in FILES)
    guide = (ROOT / "docs/guide.md").read_text()
    for section in (
        "## Install",
        "## A first GEMM on the CPU",
        "## A first GEMM on a GPU",
        "## Transforms",
        "## Dumps",
    ):
        assert section in guide, section
    for section in ("## Pictures", "## Check the index math yourself", "## Command line", "## Errors"):
        assert section in guide, section
    assert "## Choosing tiles and schedules (`auto`)" in guide


@pytest.mark.parametrize("name", FILES)
def test_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = ROOT / name
    globs: dict[str, object] = {"__name__": f"docs:{name}"}
    ran = 0
    for kind, code, line in blocks(path):
        if skip_reason(code):
            continue
        where = f"{name}:{line}"
        if kind == "python":
            exec(compile(code, where, "exec"), globs)
        else:
            test = doctest.DocTestParser().get_doctest(code, globs, where, str(path), line)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            out: list[str] = []
            runner.run(test, out=out.append, clear_globs=False)
            assert runner.failures == 0, f"{where}: the example's output differs:\n{''.join(out)}"
            globs.update(test.globs)
        ran += 1
    assert ran or name == "docs/cuda.md"
