"""Every environment variable ctgraph reads, in one place (as Triton's ``knobs``)."""

from __future__ import annotations

import os
from pathlib import Path


def dump_dir() -> Path | None:
    """``CTGRAPH_DUMP=<dir>``: write a DOT file of the graph after every pass into ``<dir>``."""
    d = os.environ.get("CTGRAPH_DUMP")
    return Path(d) if d else None


def cache_dir() -> Path:
    """``CTGRAPH_CACHE_DIR`` (default ``~/.cache/ctgraph``): on-disk caches (nvcc output, tuning tables)."""
    return Path(os.environ.get("CTGRAPH_CACHE_DIR") or Path.home() / ".cache" / "ctgraph")


def tile_device() -> str:
    """``CTGRAPH_TILE_DEVICE`` (default the H100 SXM, the GPU of :data:`ctgraph.tiles.H100`): the GPU whose tuning
    table ``macro_tile="auto"`` takes measured tiles from (rows that ``python -m ctgraph tune --tiles`` wrote)."""
    return os.environ.get("CTGRAPH_TILE_DEVICE") or "NVIDIA H100 80GB HBM3"
