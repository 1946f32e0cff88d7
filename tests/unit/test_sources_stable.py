"""Generated CUDA sources and tile plans stay byte-identical to the record (:mod:`tests.unit.sources_stable`)."""

from __future__ import annotations

import json

import pytest

from tests.unit import sources_stable as stable


def _check(every: int) -> None:
    want = json.loads(stable.RECORD.read_text())
    todo = [c for i, c in enumerate(stable.cases()) if c[1] == "layout" or i % every == 0]
    got = dict(map(stable._run, todo))
    assert set(got) <= set(want)
    differs = [name for name, sha in got.items() if want[name] != sha]
    assert not differs, f"{len(differs)} of {len(got)} cases changed, e.g. {differs[:5]}"


def test_sources_and_plans_match_the_record_sampled():
    """Every plan and every 16th source (table entries, mma, wgmma, ping-pong, two-block, swapped, transforms)."""
    _check(16)


@pytest.mark.slow
def test_sources_and_plans_match_the_record():
    _check(1)
