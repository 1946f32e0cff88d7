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


def visible_device(i: int) -> str:
    """The ``CUDA_VISIBLE_DEVICES`` value that gives a spawned worker the ``i``-th GPU its parent sees: the ``i``-th
    entry of the parent's ``CUDA_VISIBLE_DEVICES`` where that is set (``"2,3"``: worker 1 runs on GPU 3, not on GPU
    1), else ``i``."""
    names = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not names:
        return str(i)
    if not 0 <= i < len(names):
        raise ValueError(f"worker {i}: CUDA_VISIBLE_DEVICES names {len(names)} GPU(s) ({','.join(names)})")
    return names[i]


def objective() -> str:
    """``CTGRAPH_OBJECTIVE``: what ``"auto"`` minimises (:mod:`ctgraph.select.objective`): ``kernel`` (default) the
    GPU time of a kernel, as a CUDA graph replays it; ``call`` the time of back-to-back eager calls, where a kernel
    shorter than the host's time per call makes one launch beat two."""
    from .select.objective import check_objective

    return check_objective(os.environ.get("CTGRAPH_OBJECTIVE", "").strip().lower() or "kernel", "CTGRAPH_OBJECTIVE")
