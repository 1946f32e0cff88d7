"""Measured configs per device: the autotune cache and the entries that ship pre-filled.

One JSON file per device name holds, per GEMM (``"m,n,k,dtype"``), the config that ran fastest and the seconds of
each config timed (:class:`Entry`). ``autotune=True`` writes the user's file in ``CTGRAPH_CACHE_DIR/autotune/``;
``ctgraph/data/autotune-<device>.json`` ships the entries measured for this project's benchmark shapes (what
``python -m ctgraph tune`` writes, the old tuning table converted). Lookups read the user's file, then the shipped
one. A device's files are its own (a measured time is of that device); selection falls back to those of another
device of the same chip (:func:`ctgraph.target.same_chip`) only where the device has no entry for a shape.

Writers take a lock file and write whole files (:func:`ctgraph.cache.write_whole`), so processes that autotune at
once merge their entries and a reader never sees half a file. A file this version cannot read (truncated,
hand-edited, of another version) is skipped with a warning, and the next store writes a whole table over it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .. import knobs
from ..cache import write_whole
from ..config import Config

__all__ = ["Entry", "Table", "key", "load", "load_user", "parse_key", "read_table", "shipped_path", "user_path"]


def key(m: int, n: int, k: int, dtype: str) -> str:
    return f"{m},{n},{k},{dtype}"


def parse_key(text: str) -> tuple[int, int, int, str]:
    """``(m, n, k, dtype)`` of a :func:`key`."""
    m, n, k, dtype = text.split(",")
    return int(m), int(n), int(k), dtype


@dataclass(frozen=True)
class Entry:
    """The config kept for one GEMM, the seconds of every config timed for it (by :attr:`Config.name`; entries
    converted from the old tuning table label them by policy), cuBLAS's seconds in the same run, where timed, and
    ``kernels``: the :func:`~ctgraph.select.fit.kernel_hash` of the code that timed them ("" where not recorded:
    entries timed before ``tune`` recorded it, 2026-11-28)."""

    config: Config
    seconds: tuple[tuple[str, float], ...] = ()
    cublas: float | None = None
    kernels: str = ""

    def to_json(self) -> dict:
        out: dict[str, object] = {"config": self.config.name, "seconds": dict(self.seconds)}
        out |= {"cublas": self.cublas} if self.cublas is not None else {}
        return out | ({"kernels": self.kernels} if self.kernels else {})

    def timed(self) -> list[tuple[Config, float]]:
        """The configs timed and their seconds, in the order of their names; labels that are not a config (entries
        converted from the old tuning table label by policy) are left out."""
        out = []
        for label, secs in self.seconds:
            try:
                out.append((Config.parse(label), secs))
            except ValueError:
                continue
        return out

    @classmethod
    def from_json(cls, d: dict) -> Entry:
        seconds = tuple(sorted((str(a), float(b)) for a, b in d["seconds"].items()))
        return cls(Config.parse(d["config"]), seconds, d.get("cublas"), d.get("kernels", ""))


@dataclass
class Table:
    """A device's entries, each with the hash of the kernels that timed it (:attr:`Entry.kernels`)."""

    device: str
    entries: dict[str, Entry] = field(default_factory=dict)

    def get(self, m: int, n: int, k: int, dtype: str) -> Entry | None:
        return self.entries.get(key(m, n, k, dtype))

    def merged(self, other: Table) -> Table:
        """This table with ``other``'s entries added (``other`` wins on a shape both hold)."""
        return Table(self.device, self.entries | other.entries)

    def to_json(self) -> str:
        body = {"device": self.device, "entries": {k: e.to_json() for k, e in sorted(self.entries.items())}}
        return json.dumps(body, indent=1, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Table:  # files written before the hash moved to the entries hold a "kernels": ""
        d = json.loads(text)
        return cls(d["device"], {k: Entry.from_json(e) for k, e in d["entries"].items()})


def _file(device: str) -> str:
    return "autotune-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", device) + ".json"


def user_path(device: str) -> Path:
    return knobs.cache_dir() / "autotune" / _file(device)


def shipped_path(device: str) -> Path:
    return Path(str(resources.files("ctgraph") / "data" / _file(device)))


def read_table(path: str | Path) -> Table:
    """The table in ``path`` (a tune table, or a device's cache); a file that is not one is a ``ValueError`` naming
    it (a missing one an ``OSError``)."""
    text = Path(path).read_text()
    try:
        return Table.from_json(text)
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # NOTE: JSONDecodeError is a ValueError
        raise ValueError(f"{path}: not a table this version reads ({type(e).__name__}: {e})") from None


def _parse(path: Path) -> Table | None:
    """The table in ``path``; None where there is no file, or (with a warning) one this version cannot read: a cache
    that is truncated, hand-edited or of another version is skipped, not an error on every selection."""
    try:
        return read_table(path)
    except FileNotFoundError:
        return None
    except ValueError as e:
        warnings.warn(f"ignoring the autotune cache {e}; delete it, or let autotune write it again", stacklevel=3)
        return None


@functools.lru_cache(maxsize=32)
def _read(path: Path, stamp: tuple[int, int, int]) -> Table | None:
    return _parse(path)


def _table(path: Path) -> Table | None:
    """The table in ``path``, parsed once per version of the file (its time, size and inode: a file replaced
    within one tick of a coarse clock is still read again)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return _read(path, (st.st_mtime_ns, st.st_size, st.st_ino))


def load_user(device: str) -> Table:
    """The user's autotune cache for the device alone (empty where there is none)."""
    return _table(user_path(device)) or Table(device)


def load(device: str) -> Table:
    """The device's entries: the shipped ones, overridden by the user's autotune cache."""
    table = Table(device)
    for path in (shipped_path(device), user_path(device)):
        found = _table(path)
        if found is not None:
            table = table.merged(found)
    return table


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def store(device: str, entries: dict[str, Entry], path: Path | None = None) -> Path:
    """Add ``entries`` to the device's user cache (or ``path``), under a lock, written whole."""
    path = path or user_path(device)
    with _locked(path):
        old = _parse(path) or Table(device)  # NOTE: the file itself, under the lock: never a memo of an older one
        write_whole(path, old.merged(Table(device, entries)).to_json())
    return path
