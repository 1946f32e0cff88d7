"""Pictures: schedules, and the ranker's prices against timings."""

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


def _priced_table():
    """A small tune table of the H200 whose timings are the shipped ranker's own prices, its entries the configs it
    ranks first."""
    from ctgraph.select import cache as entries
    from ctgraph.select import candidates
    from ctgraph.select.model import load_correction, predict_many
    from ctgraph.target import H200

    correction = load_correction("sm90")
    cuda = ctgraph.backends.backend("cuda")
    table = {}
    for m, n, k in ((200, 3000, 2048), (1504, 904, 2048), (3000, 176, 1024)):
        pool = candidates(m, n, k, "float16", H200, "wgmma", cuda.supports)[:5]
        prices = predict_many(pool, m, n, k, "float16", H200, correction)
        seconds = {c.name: t for c, t in zip(pool, prices, strict=True)}
        first = pool[prices.index(min(prices))]
        table[entries.key(m, n, k, "float16")] = entries.Entry(first, tuple(sorted(seconds.items())), 1e-5, "test")
    return entries.Table(H200.name, table), correction


def test_predictions_are_the_rankers_prices_and_its_first_choice():
    from ctgraph.select.fit import predictions
    from ctgraph.target import H200

    table, correction = _priced_table()
    points = predictions(table, H200, correction)
    assert len(points) == 15
    for _, _, predicted, measured, _ in points:
        assert predicted == pytest.approx(measured, rel=1e-9)  # timed at the ranker's price: it predicts them
    assert {(key, c) for key, c, *_, first in points if first} == {(k, e.config) for k, e in table.entries.items()}


def test_table_predictions_keep_a_shape_of_two_tables_as_two_shapes():
    from ctgraph.select.fit import predictions, table_predictions
    from ctgraph.target import H200

    table, correction = _priced_table()
    alone = predictions(table, H200, correction)
    both = table_predictions([table, table], correction)
    assert len(both) == 2 * len(alone) and sum(first for *_, first in both) == 2 * len(table.entries)
    assert [p[1:] for p in both] == [p[1:] for p in alone] * 2 and both[0][0] == f"0:{alone[0][0]}"


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_fit_draws_prices_against_timings(tmp_path, suffix):
    from ctgraph.plot import plot_fit
    from ctgraph.select.fit import predictions
    from ctgraph.target import H200

    table, correction = _priced_table()
    points = predictions(table, H200, correction)
    data = plot_fit(points, tmp_path / f"f{suffix}", "priced").read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data[:500]
    assert plot_fit(points, tmp_path / f"g{suffix}", "priced").read_bytes() == data  # deterministic
    with pytest.raises(ValueError, match="no timed config"):
        plot_fit([], tmp_path / "h.png")


def test_fit_plot_on_the_cli(tmp_path, capsys):
    table, _ = _priced_table()
    path = tmp_path / "t.json"
    path.write_text(table.to_json())
    assert main(["fit", "--report", str(path), "--plot", str(tmp_path / "fit.png")]) == 0
    assert (tmp_path / "fit.png").read_bytes().startswith(b"\x89PNG") and "wrote" in capsys.readouterr().out
    assert main(["fit", "--report", str(path), "--plot", str(tmp_path / "fit.jpeg")]) == 2  # before any work
    err = capsys.readouterr()
    assert "fit --plot must end in .png, .svg or .pdf" in err.err and "shapes" not in err.out
