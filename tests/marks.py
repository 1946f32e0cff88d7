"""Marks the suites share: which cases of an exhaustive sweep run in the fast loop (``make test``).

``make test`` runs ``pytest -m "not slow"``; ``make test-all`` and CI's slow set run everything. A sweep over
transforms, tiles and layouts keeps one representative case in the fast loop and marks the rest ``slow``: the cold
nvcc compiles of the whole sweep are what make a fresh clone's test run take minutes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

__all__ = ["sweep"]


def sweep(values: Iterable[Any], *keep: Any, several: bool = False) -> list[Any]:
    """``values`` for ``pytest.mark.parametrize``, every one but those in ``keep`` (default: the first) marked
    ``slow``. ``several=True`` where the parametrize names several arguments (each value a tuple of them). Plain
    values only (ids through ``parametrize``'s ``ids``), so a case keeps its id whether it is slow or not."""
    values = list(values)
    kept = keep or (values[0],)
    out: list[Any] = []
    for v in values:
        if v in kept:
            out.append(v)
        else:
            out.append(pytest.param(*(v if several else (v,)), marks=pytest.mark.slow))
    return out
