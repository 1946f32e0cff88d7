"""The argument checks every layer shares (a leaf module: it imports nothing of ctgraph, so the front end,
selection and the tools can all use it without an import loop)."""

from __future__ import annotations

import numbers

__all__ = ["count", "positive_int"]


def positive_int(name: str, value: object) -> int:
    """``value`` as an int where it is a positive integer (not a bool), else a ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer (>= 1), got {value!r}")
    return int(value)


def count(name: str, value: object) -> int:
    """``value`` as an int where it is 0 or a positive integer (not a bool), else a ``ValueError`` naming ``name``:
    for options where 0 means none (or all)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be 0 or a positive integer, got {value!r}")
    return int(value)
