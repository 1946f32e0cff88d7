"""The caches: whole-file writes for the on-disk ones (:func:`ctgraph.knobs.cache_dir`: nvcc output, autotune entries,
calibrated rankers), and :class:`LRU`, the bound on the in-memory ones (compiled modules, lowered graphs, sources).

Several processes share one cache (``pytest -n 8``, a pool that compiles kernels ahead of a benchmark), and a run may
be stopped mid-write. Each file is therefore written under a name of its own in the same directory and then renamed
over the target (``os.replace``, atomic on POSIX): a reader sees the old file or the new one, never part of either.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Generic, TypeVar

__all__ = ["LRU", "write_whole"]

V = TypeVar("V")


class LRU(Generic[V]):
    """At most ``size`` entries, the least recently used dropped first. A dropped compiled module stays alive as long
    as a program holds it; the cache only stops holding it, so memory is bounded by the programs in use."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"an LRU cache holds at least one entry, got size={size}")
        self.size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()  # for made(); the other methods leave locking to their callers

    def get(self, key: Hashable) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: Hashable, value: V) -> V:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return value

    def made(self, key: Hashable, make: Callable[[], V]) -> V:
        """The value of ``key``, ``make()`` stored first where there is none: for values that are a function of
        their key alone, so two threads that make one at once make the same, and neither waits for the other."""
        with self._lock:
            value = self.get(key)
        if value is None:
            value = make()
            with self._lock:
                self.put(key, value)
        return value

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items


def _file_mode() -> int:
    """The mode ``open`` gives a new file: 0666 less the process's umask (which only setting it reads)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_MODE = _file_mode()  # NOTE: once, at import


def write_whole(path: Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path``, creating its directory, whole or not at all; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, part = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".part")
    try:
        os.fchmod(fd, _MODE)  # NOTE: mkstemp's 0600 would leave a shared cache directory's files to one user
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(part, path)
    except BaseException:
        Path(part).unlink(missing_ok=True)
        raise
    return path
