"""Dumps (.dot text, rendered pictures) and the command line."""

import importlib
import re
import shutil

import pytest

import ctgraph
from ctgraph.cli import main

dump_module = importlib.import_module("ctgraph.dump")

HAS_DOT = shutil.which("dot") is not None


@pytest.fixture(scope="module")
def seed_graph():
    g = ctgraph.gemm(160, 192, 4096, macro_tile=(16, 16, 8))
    return ctgraph.compile(g, transform="streamk2tile", workgroups=32, target="cpu").graph


def test_dump_dot_text(seed_graph, tmp_path):
    out = ctgraph.dump(seed_graph, tmp_path / "sub" / "g.dot")
    assert out == tmp_path / "sub" / "g.dot"
    text = out.read_text()
    assert text.startswith("digraph")
    for word in ("Sunder", "Tile", "Flatten", "Split strides=(1, 1)", "MacroTileNumber(A; 0) size=10"):
        assert word in text
    ports = {int(p) for p in re.findall(r"-> n\d+ \[label=(\d+)\]", text)}
    assert ports == {0, 1, 2}  # Sunder and Flatten have three operands
    # one arc per operand
    n_arcs = sum(len(seed_graph.inputs(e)) + len(seed_graph.outputs(e)) for e in seed_graph.edges())
    assert len(re.findall(r"n\d+ -> n\d+", text)) == n_arcs


def test_dump_is_deterministic(seed_graph, tmp_path):
    a = ctgraph.dump(seed_graph, tmp_path / "a.dot").read_bytes()
    b = ctgraph.dump(seed_graph.copy(), tmp_path / "b.gv").read_bytes()
    assert a == b


@pytest.mark.skipif(not HAS_DOT, reason="graphviz 'dot' binary not installed")
def test_dump_svg(seed_graph, tmp_path):
    out = ctgraph.dump(seed_graph, tmp_path / "g.svg")
    text = out.read_text()
    assert "<svg" in text and "Sunder" in text


def test_missing_dot_says_how_to_install(seed_graph, tmp_path, monkeypatch):
    monkeypatch.setattr(dump_module.shutil, "which", lambda *a, **k: None)
    with pytest.raises(dump_module.DotNotFoundError) as info:
        ctgraph.dump(seed_graph, tmp_path / "g.svg")
    msg = str(info.value)
    assert "graphviz" in msg and "install" in msg and ".dot" in msg
    assert not (tmp_path / "g.svg").exists()
    # .dot needs no binary
    assert ctgraph.dump(seed_graph, tmp_path / "g.dot").exists()


@pytest.mark.parametrize("name", ["g.txt", "g", "g.jpeg"])
def test_bad_suffix(seed_graph, tmp_path, name):
    with pytest.raises(ValueError, match=r"\.dot"):
        ctgraph.dump(seed_graph, tmp_path / name)


def test_dump_rejects_other_objects(tmp_path):
    with pytest.raises(TypeError):
        ctgraph.dump(object(), tmp_path / "g.dot")


# the seed example on the command line (also the schedule picture's, tests/unit/test_plot.py)
SEED_ARGS = ["compile", "--m", "160", "--n", "192", "--k", "4096", "--tile", "16", "16", "8"]
SEED_ARGS += ["--transform", "streamk2tile", "--workgroups", "32"]


def run(argv):
    """main's exit status, whether it returns it or argparse exits with it."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


def test_cli_compile_seed(tmp_path, capsys):
    out = tmp_path / "out.dot"
    assert run([*SEED_ARGS, "--dump", str(out)]) == 0
    text = capsys.readouterr().out
    assert "10 x 12 = 120 output tiles" in text and "512 k-iterations" in text
    assert "28672" in text and "32768" in text
    for axis in "mnk":
        assert re.search(rf"^\s*{axis} = .*(FloorDiv|Mod)\(", text, re.M), axis
    assert str(out) in text
    assert "Sunder" in out.read_text()


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_cli_transforms(transform, capsys):
    assert (
        run(
            [
                "compile",
                "--m",
                "33",
                "--n",
                "17",
                "--k",
                "70",
                "--tile",
                "16",
                "16",
                "8",
                "--transform",
                transform,
                "--workgroups",
                "4",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert f"transform: {transform}" in text and "3 x 2 = 6 output tiles" in text


def test_cli_help(capsys):
    assert run(["--help"]) == 0
    assert "compile" in capsys.readouterr().out
    assert run(["compile", "--help"]) == 0
    assert "--transform" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["compile", "--m", "0", "--n", "16", "--k", "16"],
        ["compile", "--m", "16", "--n", "16", "--k", "16", "--workgroups", "0"],
        ["compile", "--m", "16", "--n", "16", "--k", "16", "--tile", "16", "0", "8"],
        ["compile", "--m", "x", "--n", "16", "--k", "16"],
        ["compile", "--m", "16", "--n", "16"],
        ["compile", "--m", "16", "--n", "16", "--k", "16", "--transform", "nope"],
        ["compile", "--m", "16", "--n", "16", "--k", "16", "--dump", "g.txt"],
        ["frobnicate"],
        [],
    ],
)
def test_cli_bad_args(argv, capsys):
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert "error" in err
