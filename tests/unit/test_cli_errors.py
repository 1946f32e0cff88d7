"""The command line's error paths: checked outputs before any work, ``--workgroups auto``, honest timings."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ctgraph.cli import main

GEMM = ["--m", "64", "--n", "48", "--k", "40", "--tile", "16", "16", "8"]


def run(argv):
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize("flag", ["--dump", "--plot"])
@pytest.mark.parametrize("name", ["g.txt", "g", "g.jpeg"])
def test_bad_suffix_before_any_output(capsys, tmp_path, flag, name):
    assert run(["compile", *GEMM, flag, str(tmp_path / name)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith("error: ") and flag in out.err


def test_unwritable_dump_folder(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert run(["compile", *GEMM, "--dump", str(blocker / "sub" / "g.dot")]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.startswith("error: cannot write") and "Traceback" not in out.err


def test_workgroups_auto_is_accepted(capsys):
    assert run(["compile", *GEMM, "--workgroups", "auto"]) == 0
    assert "over 8 workgroups" in capsys.readouterr().out
    assert run(["compile", *GEMM, "--workgroups", "many"]) == 2
    assert "positive integer or 'auto'" in capsys.readouterr().err


def test_splitk_on_the_cli_default_grid(capsys):
    assert (
        run(["compile", "--m", "100", "--n", "90", "--k", "64", "--tile", "16", "16", "8", "--transform", "splitk"])
        == 0
    )
    assert "transform: splitk over 42 workgroups" in capsys.readouterr().out


def test_run_reports_the_lowering_time(capsys):
    assert run(["run", *GEMM, "--transform", "streamk", "--workgroups", "4"]) == 0
    out = capsys.readouterr().out
    passes, lowering = (float(v) for v in re.search(r"passes ([\d.]+) ms, lowering ([\d.]+) ms", out).groups())
    assert lowering > 0.0 and passes > 0.0
    assert "lowering 0.0 ms" not in out


def test_too_many_workgroups_on_the_cli(capsys):
    assert run(["compile", *GEMM, "--workgroups", str(10**6)]) == 2
    assert "more than this GEMM's" in capsys.readouterr().err


def test_control_graph_dump(capsys, tmp_path):
    dot, txt = tmp_path / "c.dot", tmp_path / "c.txt"
    assert run(["compile", *GEMM, "--transform", "streamk", "--control", str(dot), "--control", str(txt)]) == 0
    assert "subgraph cluster_c" in dot.read_text() and txt.read_text().startswith("[0] Kernel(")
    assert run(["compile", *GEMM, "--control", str(tmp_path / "c.jpeg")]) == 2
    assert "--control path must end in" in capsys.readouterr().err


def test_shape_sets_skip_then_limit():
    from ctgraph.cli import _shapes
    from ctgraph.select import shapes

    everything = shapes.read(shapes.DATA / "train.csv")
    assert _shapes("train", limit=5, skip=10) == everything[10:15]
    assert _shapes("train", skip=390) == everything[390:]
    with pytest.raises(ValueError, match="--skip must be 0 or a positive integer, got -1"):
        _shapes("train", skip=-1)
    with pytest.raises(ValueError, match="--limit must be 0 or a positive integer, got -2"):
        _shapes("train", limit=-2)


@pytest.mark.parametrize(
    "argv",
    [
        ["tune", "test", "--rounds", "0"],
        ["heldout", "test", "--plot", "t.jpeg"],
        ["heldout", "test", "--rounds", "0"],
        ["heldout", "test", "--regret", "-1"],
        ["heldout", "test", "--out", "test.txt"],
        ["tune", "test", "--top", "0"],
        ["tune", "test", "--extra", "-1"],
        ["tune", "test", "--out", "test.csv"],
        ["tune", "test", "--shard", "2/2"],
        ["calibrate", "--shapes", "0"],
        ["bench", "--limit", "-1"],
        ["draw", "train", "--start", "-1", "--stop", "5"],
        ["draw", "train", "--limit", "-1", "--start", "0", "--stop", "5"],
    ],
)
def test_timing_commands_refuse_bad_options_before_any_work(capsys, argv):
    """No GPU is asked for: the option is checked first, and the message names it (the first flag given)."""
    assert run(argv) == 2
    out = capsys.readouterr()
    flag = next(a for a in argv if a.startswith("--"))
    assert out.out == "" and out.err.startswith("error: ") and flag in out.err


@pytest.mark.parametrize("norm", ["0.5", "two", "nan", "0"])
def test_fit_refuses_a_bad_bounds_norm_before_any_work(capsys, norm):
    assert run(["fit", "no-such-train.json", "no-such-validation.json", "--bounds-norm", norm]) == 2
    err = capsys.readouterr().err
    assert "--bounds-norm is 'max' or a p >= 1" in err and repr(norm) in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fit", "no-such-train.json", "no-such-validation.json"], "fit: the train table 'no-such-train.json'"),
        (["fit", __file__, "no-such-validation.json"], "fit: the validation table 'no-such-validation.json'"),
        (["fit", __file__, __file__, "--also", __file__, "gone.json"], "fit: the validation table 'gone.json'"),
        (["fit", "--report", "gone.json"], "fit --report: the table 'gone.json' is not a file"),
    ],
)
def test_fit_names_a_table_that_is_not_there(capsys, argv, message):
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "give a table that python -m ctgraph tune wrote" in err


def test_heldout_run_refuses_bad_rounds_and_regret_before_any_work():
    from ctgraph import heldout

    for rounds, regret, message in ((0, 0, "rounds must be"), (2, -1, "regret must be 0"), (2, 1.5, "regret")):
        with pytest.raises(ValueError, match=message):
            heldout.run([(64, 64, 64)], Path("unused.csv"), rounds=rounds, regret=regret)


def test_tune_run_refuses_bad_rounds_before_any_work():
    from pathlib import Path

    from ctgraph import tune

    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="rounds must be a positive integer"):
            tune.run([(64, 64, 64)], Path("unused.json"), rounds=bad)
    for options, message in (
        ({"top": 0}, "top must be a positive integer"),
        ({"extra": -2}, "extra must be 0 or a positive integer"),
        ({"shard": (1, 1)}, r"shard must be \(i, n\) with 0 <= i < n"),
    ):
        with pytest.raises(ValueError, match=message):
            tune.run([(64, 64, 64)], Path("unused.json"), **options)


def test_tune_merge_names_a_table_that_is_not_there(capsys, tmp_path):
    assert run(["tune", "--merge", "gone.json", "--out", str(tmp_path / "m.json")]) == 2
    assert "tune --merge: the table 'gone.json' is not a file" in capsys.readouterr().err


def test_a_reader_that_stops_reading_gets_no_error():
    # ``python -m ctgraph compile ... | head -0``: the pipe closes before the summary is written
    cmd = [sys.executable, "-m", "ctgraph", "compile", *GEMM]
    root = Path(__file__).resolve().parents[2]
    with subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        assert p.stdout is not None and p.stderr is not None
        p.stdout.close()
        err = p.stderr.read().decode()
    assert p.returncode == 1 and err == ""


@pytest.mark.parametrize(
    "text, says",
    [
        ("m,n\n1,2\n", r"no column k in its header m,n"),
        ("m,n,k\n-128,128,128\n", r"line 2: m, n and k must be positive, got \(-128, 128, 128\)"),
        ("m,n,k\n0,128,128\n", r"line 2: m, n and k must be positive"),
        ("m,n,k\n12a,1,1\n", r"line 2: m, n and k must be integers, got '12a', '1', '1'"),
        ("m,n,k\n64,64\n", r"line 2: m, n and k must be integers"),
        ("m,n,k\n", r"holds no shapes"),
        ("m,n,k\n2147483648,2147483648,2147483648\n", r"too large to index"),
    ],
)
@pytest.mark.parametrize("command", [["choose"], ["heldout", "--stability"], ["tune"], ["bench"]])
def test_a_shape_csv_it_cannot_read_is_one_line_naming_it(capsys, tmp_path, monkeypatch, text, says, command):
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "shapes.csv"
    path.write_text(text)
    code = run([*command[:1], str(path), *command[1:], "--out", str(tmp_path / "out.csv")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err, err
    assert not (tmp_path / "out.csv").exists()
    if command[0] in ("choose", "heldout"):  # no GPU asked for: the shapes' error itself
        assert re.search(says, err), err


@pytest.mark.parametrize("header", ["\ufeffm,n,k", "m, n, k"])
def test_a_byte_order_mark_or_spaces_in_the_header_are_read(capsys, tmp_path, monkeypatch, header):
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "shapes.csv"
    path.write_text(f"{header}\n64, 64, 64\n", encoding="utf-8")
    assert run(["choose", str(path), "--out", str(tmp_path / "o.csv")]) == 0
    assert (tmp_path / "o.csv").read_text().splitlines()[1].startswith("64,64,64,")


def test_tables_and_families_it_cannot_use_are_named(capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"device": "x"}')
    assert run(["tune", "--merge", str(bad), "--out", str(tmp_path / "m.json")]) == 2
    assert re.search(r"bad.json: not a table this version reads \(KeyError", capsys.readouterr().err)
    assert run(["tune", "--merge", str(bad), "--out", str(tmp_path / "m.txt")]) == 2
    assert "tune --out path must end in .json" in capsys.readouterr().err
    assert run(["fit", "--check", "foo"]) == 2
    assert "or one calibrated here, got 'foo'" in capsys.readouterr().err


def test_a_summary_of_a_csv_without_results_is_refused(capsys, tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("config,kernel_ratio\nx,1.0\n")
    assert run(["heldout", str(path), "--summarize"]) == 2
    assert "no column m, n, k" in capsys.readouterr().err
    path.write_text("m,n,k,kernel_ratio\n")
    assert run(["heldout", str(path), "--summarize"]) == 2
    assert "has no rows" in capsys.readouterr().err


@pytest.mark.parametrize("rank, says", [("a", "RANK and WORLD_SIZE must be integers"), ("1", "need 0 <= RANK < WORLD")])
def test_a_torchrun_environment_it_cannot_shard_by_is_named(capsys, monkeypatch, rank, says):
    monkeypatch.setenv("RANK", rank)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert run(["tune", "anchors"]) == 2
    assert says in capsys.readouterr().err


def test_a_fit_pair_of_two_devices_is_refused(capsys, tmp_path):
    pytest.importorskip("lightgbm")
    for name, device in (("tr.json", "NVIDIA H100 80GB HBM3"), ("va.json", "NVIDIA H200")):
        (tmp_path / name).write_text(f'{{"device": "{device}", "entries": {{}}}}')
    assert run(["fit", str(tmp_path / "tr.json"), str(tmp_path / "va.json"), "--out", str(tmp_path / "f.txt")]) == 2
    assert "fit --out path must end in .json" in capsys.readouterr().err
    assert run(["fit", str(tmp_path / "tr.json"), str(tmp_path / "va.json"), "--out", str(tmp_path / "f.json")]) == 2
    err = capsys.readouterr().err
    assert "was timed on 'NVIDIA H100 80GB HBM3', its validation table" in err and "'NVIDIA H200'" in err
    assert not (tmp_path / "f.json").exists()


def test_run_names_a_bad_seed_and_a_gemm_too_large_for_memory(capsys, monkeypatch):
    assert run(["run", *GEMM, "--seed", "-1"]) == 2
    assert "run --seed must be 0 or a positive integer, got -1" in capsys.readouterr().err
    import numpy as np

    class Refusing:
        def standard_normal(self, shape):
            raise MemoryError("Unable to allocate 74.5 GiB")

    monkeypatch.setattr(np.random, "default_rng", lambda seed: Refusing())
    assert run(["run", *GEMM]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: out of memory (Unable to allocate 74.5 GiB)") and "Traceback" not in err
