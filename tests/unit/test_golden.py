"""Golden files: the seed's two-tile Stream-K graph, dumped to DOT, byte for byte."""

import pytest

from tests.golden import regenerate


@pytest.mark.parametrize("name", sorted(regenerate.GOLDEN))
def test_golden(name, tmp_path):
    golden = regenerate.HERE / name
    assert golden.exists(), f"{golden} is missing: run `make golden` (python -m tests.golden.regenerate)"
    fresh = regenerate.write(name, tmp_path)
    assert fresh.read_bytes() == golden.read_bytes(), (
        f"{name} differs from the golden file {golden}; if the change is intended, run `make golden` "
        "(python -m tests.golden.regenerate) and review the diff"
    )


def test_golden_seed_content():
    text = (regenerate.HERE / "seed_streamk2tile.dot").read_text()
    for word in ("Sunder", "Linear(SK tiles) size=28672", "Linear(DP tiles) size=32768", "Workgroup(SK) size=32"):
        assert word in text
