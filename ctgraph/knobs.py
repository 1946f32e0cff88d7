"""Every environment variable ctgraph reads, in one place (as Triton's ``knobs``)."""

from __future__ import annotations

import os
from pathlib import Path


def dump_dir() -> Path | None:
    """``CTGRAPH_DUMP=<dir>``: write a DOT file of the graph after every pass into ``<dir>``."""
    d = os.environ.get("CTGRAPH_DUMP")
    return Path(d) if d else None


def cache_dir() -> Path:
    """``CTGRAPH_CACHE_DIR`` (default ``~/.cache/ctgraph``): on-disk caches (nvcc output, autotune entries,
    calibrated rankers)."""
    return Path(os.environ.get("CTGRAPH_CACHE_DIR") or Path.home() / ".cache" / "ctgraph")


def target_device() -> str | None:
    """``CTGRAPH_TARGET_DEVICE``: the known device (:data:`ctgraph.target.KNOWN`) that selection assumes
    where no GPU answers (``build=False``, ``macro_tile="auto"`` on a machine without one); unset: the GPU when one
    answers, else the H100 SXM."""
    return os.environ.get("CTGRAPH_TARGET_DEVICE") or None


def autotune() -> bool:
    """``CTGRAPH_AUTOTUNE=1``: ``compile(..., transform="auto")`` times the ranker's top candidates on the first
    call of a new shape (as ``autotune=True``)."""
    return os.environ.get("CTGRAPH_AUTOTUNE", "0").strip().lower() in ("1", "true", "yes", "on")
