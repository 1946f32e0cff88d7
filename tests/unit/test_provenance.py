"""Which kernels timed a tune table's shapes: recorded per entry, refused by the fit where they are not this code's,
timed again by ``tune --retime``."""

from __future__ import annotations

import json

import pytest

from ctgraph import tune
from ctgraph.cli import main
from ctgraph.select import H100_SXM, Config, Layout
from ctgraph.select import cache as entries
from ctgraph.select import fit as fitting
from ctgraph.target import known_target
from ctgraph.tune import sample, stale

C1 = Config((128, 128, 64), Layout(), "dataparallel", 64)
C2 = Config((64, 128, 64), Layout(), "streamk", 132)


def _entry(kernels: str, *configs: Config) -> entries.Entry:
    timed = configs or (C1, C2)
    return entries.Entry(timed[0], tuple(sorted((c.name, 1e-5 * (i + 1)) for i, c in enumerate(timed))), 2e-5, kernels)


def _table(**by_hash: list[tuple[int, int, int]]) -> entries.Table:
    out = {}
    for kernels, shapes in by_hash.items():
        for m, n, k in shapes:
            out[entries.key(m, n, k, "float16")] = _entry("" if kernels == "unrecorded" else kernels)
    return entries.Table(H100_SXM.name, out)


def test_an_entry_keeps_its_kernels_through_json_and_old_files_still_read():
    e = _entry("abc")
    assert entries.Entry.from_json(json.loads(json.dumps(e.to_json()))) == e
    assert "kernels" not in _entry("").to_json()  # entries from before the hash moved here: unchanged files
    old = json.dumps({"device": "Test GPU", "kernels": "", "entries": {"1,2,3,float16": _entry("").to_json()}})
    table = entries.Table.from_json(old)
    assert table.get(1, 2, 3, "float16").kernels == "" and "kernels" not in json.loads(table.to_json())


def test_timed_on_counts_the_shapes_of_each_hash():
    table = _table(new=[(1, 2, 3), (4, 5, 6)], old=[(7, 8, 9)], unrecorded=[(2, 2, 2)])
    assert fitting.timed_on(table) == {"new": 2, "old": 1, "": 1}
    assert fitting.timed_on([table, table]) == {"new": 4, "old": 2, "": 2}


SHAPES = [(256 + 64 * i, 512 + 32 * i, 1024 + 128 * i) for i in range(6)]


def test_the_fit_refuses_shapes_timed_on_other_kernels_or_on_unrecorded_ones():
    current, mixed = _table(now=SHAPES), _table(now=SHAPES[:4], before=SHAPES[4:])
    with pytest.raises(ValueError, match=r"2 of the tables' 12 shapes were timed on other kernels .*: 2 on before;"):
        fitting.fit(current, mixed, H100_SXM, kernels="now")
    unrecorded = _table(now=SHAPES[:3], before=SHAPES[3:4], unrecorded=SHAPES[4:])
    with pytest.raises(ValueError, match=r"3 of .* \(now\): 1 on before, 2 with none recorded; time them again"):
        fitting.fit(current, unrecorded, H100_SXM, kernels="now")


def test_the_fit_takes_shapes_timed_on_its_own_kernels():
    pytest.importorskip("lightgbm")
    current = _table(now=SHAPES)
    assert fitting.fit(current, current, H100_SXM, kernels="now").correction.kernels == "now"


def test_stale_lists_the_configs_of_shapes_not_timed_on_these_kernels():
    table = _table(now=[(1, 2, 3)], before=[(4, 5, 6)], unrecorded=[(7, 8, 9)])
    table.entries["9,9,9,float32"] = _entry("before")  # another dtype: left to a float32 run
    policy = entries.Entry(C1, (("dataparallel/resident", 1e-5),), None, "before")  # converted: no config to time
    table.entries["5,5,5,float16"] = policy
    assert stale(table, "now") == {(4, 5, 6): [C1, C2], (7, 8, 9): [C1, C2]}  # in the order of their names


def test_retime_needs_a_table_and_times_nothing_where_every_shape_is_current(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fitting, "kernel_hash", lambda *a: "now")
    path = tmp_path / "t.json"
    path.write_text(_table(now=[(1, 2, 3)]).to_json())
    assert main(["tune", str(path), "--retime", "--out", str(tmp_path / "new.json")]) == 0
    assert "nothing to time" in capsys.readouterr().out  # and --out holds the table, as after a retime
    assert entries.Table.from_json((tmp_path / "new.json").read_text()) == entries.Table.from_json(path.read_text())
    csv = tmp_path / "s.csv"
    csv.write_text("m,n,k\n1,2,3\n")
    assert main(["tune", str(csv), "--retime"]) == 2
    assert "--retime: give a tune table" in capsys.readouterr().err


def _no_gpu(what: str) -> None:
    raise RuntimeError(f"{what} needs a GPU")


def test_retime_keeps_what_a_stopped_run_timed_and_writes_it_before_any_work(tmp_path, monkeypatch, capsys):
    """A retime stopped by a time limit leaves its workers' parts (``out.part<g>.json``); run again, it keeps the
    entries they hold that were timed on these kernels (not those of other kernels, not another device's) and
    writes them to ``--out`` at once, so that a second stop loses none of them either."""
    monkeypatch.setattr(fitting, "kernel_hash", lambda *a: "now")
    path, out = tmp_path / "t.json", tmp_path / "new.json"
    path.write_text(_table(before=[(1, 2, 3), (4, 5, 6), (7, 8, 9)]).to_json())
    (tmp_path / "new.part0.json").write_text(_table(now=[(1, 2, 3)], before=[(4, 5, 6)]).to_json())
    other = entries.Table("Other GPU", {entries.key(7, 8, 9, "float16"): _entry("now")})
    (tmp_path / "new.part1.json").write_text(other.to_json())
    monkeypatch.setattr("ctgraph.cli._require_gpu_stack", _no_gpu)
    assert main(["tune", str(path), "--retime", "--out", str(out)]) == 2  # two shapes left to time, and no GPU
    assert "an earlier run timed 1 of the shapes on these kernels: kept" in capsys.readouterr().out
    written = entries.Table.from_json(out.read_text())
    assert {k: e.kernels for k, e in written.entries.items()} == {
        entries.key(1, 2, 3, "float16"): "now",
        entries.key(4, 5, 6, "float16"): "before",
        entries.key(7, 8, 9, "float16"): "before",
    }
    # the rest timed too (a later run's part): nothing left to time, and the table says so
    (tmp_path / "new.part0.json").write_text(_table(now=[(4, 5, 6), (7, 8, 9)]).to_json())
    assert main(["tune", str(path), "--retime", "--out", str(out)]) == 0
    assert "nothing to time" in capsys.readouterr().out
    assert stale(entries.Table.from_json(out.read_text()), "now") == {}


def test_a_retime_on_another_device_is_refused_before_any_timing(tmp_path, monkeypatch, capsys):
    """A table's new timings are filed under its device: an H100's table timed again on an H200 is refused, naming
    both, before any kernel is built or timed."""
    monkeypatch.setattr(fitting, "kernel_hash", lambda *a: "now")
    path, out = tmp_path / "t.json", tmp_path / "new.json"
    path.write_text(_table(before=[(1, 2, 3)]).to_json())
    monkeypatch.setattr("ctgraph.cli._require_gpu_stack", lambda what: None)
    monkeypatch.setattr("ctgraph.select.resolve.device_target", lambda name: known_target("NVIDIA H200"))
    monkeypatch.setattr(tune, "run", lambda *a, **k: pytest.fail("timed on another device"))
    assert main(["tune", str(path), "--retime", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"was timed on {H100_SXM.name!r} and this GPU is 'NVIDIA H200'" in err and not out.exists()


def test_a_retime_shard_keeps_its_own_share_only(tmp_path, monkeypatch):
    """A shard's ``--out`` is its share, merged with the others' later: the stopped run's entries go there, the old
    table's do not (a stale entry in one shard's file would win over another shard's new one in the merge)."""
    monkeypatch.setattr(fitting, "kernel_hash", lambda *a: "now")
    path, out = tmp_path / "t.json", tmp_path / "s0.json"
    path.write_text(_table(before=[(1, 2, 3), (4, 5, 6)]).to_json())
    (tmp_path / "s0.part0.json").write_text(_table(now=[(1, 2, 3)]).to_json())
    monkeypatch.setattr("ctgraph.cli._require_gpu_stack", _no_gpu)
    assert main(["tune", str(path), "--retime", "--shard", "0/2", "--out", str(out)]) == 2
    assert list(entries.Table.from_json(out.read_text()).entries) == [entries.key(1, 2, 3, "float16")]


def test_sample_is_a_seeded_nested_share_of_the_keys():
    table = _table(before=[(s, 8, 8) for s in range(1, 41)])
    half, quarter = sample(table, 0.5), sample(table, 0.25)
    assert len(half.entries) == 20 and len(quarter.entries) == 10 and half.device == table.device
    assert set(quarter.entries) < set(half.entries)  # a larger share later times only the shapes it adds
    assert sample(table, 0.5) == half and sample(table, 1.0) == table
    assert half.entries != {k: table.entries[k] for k in sorted(table.entries)[:20]}  # drawn, not the first keys
    assert len(sample(_table(before=[(1, 2, 3)]), 0.01).entries) == 1  # at least one
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"--fraction must be in \(0, 1\]"):
            sample(table, bad)


def test_a_retime_of_a_fraction_times_its_share_alone_and_goes_on_with_it(tmp_path, monkeypatch, capsys):
    """``--fraction``: ``--out`` holds the share of the table's shapes alone (what a fit on it takes), the same share
    again after a stop; refused where ``--out`` is the table itself, and without ``--retime``."""
    monkeypatch.setattr(fitting, "kernel_hash", lambda *a: "now")
    shapes = [(s, 16, 16) for s in range(1, 9)]
    path, out = tmp_path / "t.json", tmp_path / "half.json"
    path.write_text(_table(before=shapes).to_json())
    share = sorted(sample(_table(before=shapes), 0.5).entries)
    first = entries.parse_key(share[0])[:3]
    (tmp_path / "half.part0.json").write_text(_table(now=[first]).to_json())  # a stopped run timed one of them
    monkeypatch.setattr("ctgraph.cli._require_gpu_stack", _no_gpu)
    assert main(["tune", str(path), "--retime", "--fraction", "0.5", "--out", str(out)]) == 2  # three left, no GPU
    assert "a seeded 0.5 of" in capsys.readouterr().out
    written = entries.Table.from_json(out.read_text())
    assert sorted(written.entries) == share and written.entries[share[0]].kernels == "now"
    assert sorted(stale(written, "now")) == [entries.parse_key(k)[:3] for k in share[1:]]
    (tmp_path / "half.part0.json").write_text(_table(now=[entries.parse_key(k)[:3] for k in share]).to_json())
    assert main(["tune", str(path), "--retime", "--fraction", "0.5", "--out", str(out)]) == 0
    assert "nothing to time" in capsys.readouterr().out
    assert main(["tune", str(path), "--retime", "--fraction", "0.5", "--out", str(path)]) == 2
    assert "--out must be another file" in capsys.readouterr().err
    assert main(["tune", str(path), "--fraction", "0.5", "--out", str(out)]) == 2
    assert "add --retime" in capsys.readouterr().err
    assert main(["tune", str(path), "--retime", "--fraction", "2", "--out", str(out)]) == 2
    assert "--fraction must be in (0, 1]" in capsys.readouterr().err


def test_precompile_compiles_each_source_its_shapes_print_once(monkeypatch):
    """Shapes of one config share a source where sizes are all that differ, not where a tile-row group divides
    the tile rows in one and not in the other (a ragged group prints its own walk): each source once, none left
    for the timing to compile."""
    from lowering.cuda.runtime import CudaProgram

    compiled: list[str] = []
    monkeypatch.setattr(CudaProgram, "cubin", lambda self: compiled.append(self.source) or b"")
    config = Config((128, 128, 64), Layout(), "dataparallel", 132, raster=8)
    even = [(128 * 16, 1024, 512), (128 * 24, 2048, 256)]  # 16, 24 tile rows: groups of 8 divide them
    ragged = [(128 * 13, 1024, 512), (128 * 21, 512, 1024)]  # 13, 21: a last group of 5
    work = [(config, shape, "float16") for shape in even + ragged]
    assert tune._precompile_group(work) == []
    assert len(compiled) == len(set(compiled)) == 2
    bad = Config((128, 128, 64), Layout(), "no-such-transform", 132)
    errors = tune._precompile_group([(bad, (256, 256, 256), "float16"), (bad, (512, 256, 256), "float16")])
    assert len(errors) == 1 and errors[0].startswith(bad.name)  # said once per config
