"""Schedule pictures."""

from __future__ import annotations

import pytest

import ctgraph
from ctgraph.cli import main
from ctgraph.plot import seams
from tests.unit.test_dump_cli import SEED_ARGS

pytest.importorskip("matplotlib")


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_schedule_writes_a_picture(tmp_path, transform, suffix):
    kern = ctgraph.compile(
        ctgraph.gemm(100, 90, 300, macro_tile=(16, 16, 16)), transform=transform, workgroups=7, target="cpu"
    )
    path = ctgraph.plot_schedule(kern, tmp_path / f"s{suffix}")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data[:500]
    assert ctgraph.plot_schedule(kern, tmp_path / f"t{suffix}").read_bytes() == data  # deterministic


def test_bad_suffix(tmp_path):
    kern = ctgraph.compile(
        ctgraph.gemm(16, 16, 16, macro_tile=(16, 16, 16)), transform="streamk", workgroups=2, target="cpu"
    )
    with pytest.raises(ValueError, match=r"\.png, \.svg or \.pdf"):
        ctgraph.plot_schedule(kern, tmp_path / "s.jpg")


def test_seams_mark_partial_starts_and_early_stops():
    work = [(0, 0, 2), (0, 0, 3), (0, 1, 0), (0, 1, 1)]  # Kt = 4: starts tile (0,0) at k=2, leaves (0,1) at k=1
    assert seams(work, 4) == ([0], [3])


def test_cli_plot(tmp_path, capsys):
    out = tmp_path / "sched.png"
    assert main([*SEED_ARGS, "--plot", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG")
    assert "wrote" in capsys.readouterr().out
