"""Whole-file writes for the on-disk caches (:func:`ctgraph.knobs.cache_dir`): nvcc output, autotune entries, calibrated
rankers.

Several processes share one cache (``pytest -n 8``, a pool that compiles kernels ahead of a benchmark), and a run may
be stopped mid-write. Each file is therefore written under a name of its own in the same directory and then renamed
over the target (``os.replace``, atomic on POSIX): a reader sees the old file or the new one, never part of either.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_whole"]


def write_whole(path: Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path``, creating its directory, whole or not at all; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, part = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(part, path)
    except BaseException:
        Path(part).unlink(missing_ok=True)
        raise
    return path
