"""The shipped ranker is data fitted by a documented command (docs/results/refit.sh): fitted again from the tables
it was fitted on, it is the same file byte for byte. A change to the analytic model's terms, the trees' inputs or
the fit shows here as a fit to redo, not as a ranker that no longer matches its code."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from ctgraph.select import H200
from ctgraph.select.cache import Table
from ctgraph.select.fit import fit

TABLES = Path(__file__).parents[2] / "docs" / "results" / "retime-h200"
PAIRS = ("2", "", "midm", "swap64", "thin", "m128", "m16", "l2edge", "narrowmid")  # refit.sh's order
LIGHTGBM = "4.7.0"  # the trees of another LightGBM may differ in their last bits


def _tables(split: str) -> list[Table]:
    return [Table.from_json((TABLES / f"tune-h200{'-' if p else ''}{p}-{split}.json").read_text()) for p in PAIRS]


@pytest.mark.slow
def test_the_shipped_ranker_is_the_fit_of_its_tables_byte_for_byte():
    lightgbm = pytest.importorskip("lightgbm")
    if lightgbm.__version__ != LIGHTGBM:
        pytest.skip(f"the shipped ranker's trees were fitted by LightGBM {LIGHTGBM}, not {lightgbm.__version__}")
    shipped = (resources.files("ctgraph") / "data" / "ranker-sm90.json").read_text()
    kernels = json.loads(shipped)["kernels"]  # the tables' hash: the fit is checked apart from the kernels' sources
    again = fit(_tables("train"), _tables("validation"), H200, kernels=kernels, bounds_norm=4)
    assert again.correction.to_json() == shipped, (
        "ctgraph/data/ranker-sm90.json is not the fit of its tables: `bash docs/results/refit.sh OUTDIR` on a copy "
        "of docs/results/retime-h200, then ship OUTDIR/ranker-p4.json"
    )
