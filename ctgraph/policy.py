"""``transform="auto"``: choose the policy (transform, Stream-K batches, grid) per GEMM shape, fast.

As in Stream-K++, the choice comes first from a **tuning table** measured on the GPU
(``python -m ctgraph tune shapes.csv``): for every policy, a Bloom filter holds the shapes on which that
policy was the fastest. A Bloom filter has no false negatives, so a tuned shape always finds its
winner; a false positive can add candidates, and then the grid-size model (:mod:`ctgraph.model`)
breaks the tie among the candidates. A shape no filter knows is decided by the model alone. Shapes are
hashed with BLAKE2b (stable across runs and machines, unlike Python's ``hash()``). Decisions are
cached in memory; a table for the H100 ships in ``ctgraph/data`` and ``tune`` writes its tables to the
cache directory, which takes precedence.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from . import knobs
from .model import GridModel, load_model, useful_grid, work
from .passes import pass_options
from .tiles import Layout, TileCost, choose_tile, k_iterations, output_tiles, preferred_schedule

__all__ = [
    "POLICIES",
    "RASTER",
    "RASTERED",
    "BloomFilter",
    "Policy",
    "Selection",
    "TuningTable",
    "auto_layout",
    "auto_tile",
    "parse_tile",
    "raster_for",
    "select",
]


@dataclass(frozen=True)
class Policy:
    """A schedule choice: a transform, its Stream-K batches (hybrids) and how the grid is sized."""

    transform: str
    sk_batches: int | None = None
    # "resident": every CTA the GPU holds at once (data-parallel: one per tile at most); "model": the grid
    # model's choice
    grid: str = "resident"

    @property
    def batches(self) -> int:
        """The Stream-K batches the transform runs with (``pass_options``' defaults where unset)."""
        return pass_options(self.transform, 1, self.sk_batches).sk_batches

    @property
    def name(self) -> str:
        batches = f"/b{self.sk_batches}" if self.sk_batches else ""
        return f"{self.transform}{batches}/{self.grid}"


POLICIES: tuple[Policy, ...] = (
    Policy("dataparallel"),
    Policy("dataparallel", grid="model"),
    Policy("streamk"),
    Policy("streamk", grid="model"),
    Policy("streamk2tile"),
    Policy("streamk2tile", grid="model"),
    Policy("streamk_hybrid", 1),
    Policy("streamk_hybrid", 3),
    Policy("splitk_reduce"),  # chunks: the resident CTAs shared out over the tiles (few tiles only)
    Policy("splitk_reduce", grid="model"),
)
BY_NAME = {p.name: p for p in POLICIES}


def shape_key(m: int, n: int, k: int, dtype: str) -> bytes:
    return f"{m},{n},{k},{dtype}".encode()


@dataclass
class BloomFilter:
    """A Bloom filter over byte strings: ``bits`` bits, ``hashes`` probes, each a salted BLAKE2b of the key."""

    bits: int
    hashes: int
    data: bytearray = field(default_factory=bytearray)

    def __post_init__(self) -> None:
        if not self.data:
            self.data = bytearray((self.bits + 7) // 8)

    @classmethod
    def for_capacity(cls, items: int, fp_rate: float = 0.01) -> BloomFilter:
        """Sized for ``items`` entries at false-positive rate ``fp_rate``: m = -n ln p / ln2^2, k = m/n ln 2."""
        n = max(1, items)
        bits = max(64, math.ceil(-n * math.log(fp_rate) / math.log(2) ** 2))
        return cls(bits, max(1, round(bits / n * math.log(2))))

    def _probes(self, key: bytes) -> list[int]:
        """``hashes`` independent bit positions: BLAKE2b of the key salted with the probe's number.

        NOTE: double hashing (``h1 + i*h2 mod bits``) was used before: in the filters of 64-500 bits a table
        holds, keys whose ``h2`` agree modulo ``bits`` probe overlapping progressions, and the measured
        false-positive rate was 3-11x the designed one (7 of the H100 table's 128 shapes had a second
        candidate)."""
        return [
            int.from_bytes(hashlib.blake2b(key, digest_size=8, salt=i.to_bytes(16, "little")).digest(), "little")
            % self.bits
            for i in range(self.hashes)
        ]

    def add(self, key: bytes) -> None:
        for p in self._probes(key):
            self.data[p >> 3] |= 1 << (p & 7)

    def __contains__(self, key: bytes) -> bool:
        return all(self.data[p >> 3] >> (p & 7) & 1 for p in self._probes(key))

    def to_json(self) -> dict:
        return {"bits": self.bits, "hashes": self.hashes, "data": self.data.hex()}

    @classmethod
    def from_json(cls, d: dict) -> BloomFilter:
        return cls(d["bits"], d["hashes"], bytearray.fromhex(d["data"]))


def tile_name(macro_tile: tuple[int, int, int] | str) -> str:
    """``"128x128x64"``, or ``"auto"`` for a table tuned with each shape's ``macro_tile="auto"`` tile."""
    return macro_tile if isinstance(macro_tile, str) else "x".join(map(str, macro_tile))


def parse_tile(name: str) -> tuple[int, int, int]:
    """``"128x128x64"`` -> ``(128, 128, 64)``, the inverse of :func:`tile_name`."""
    bm, bn, bk = map(int, name.split("x"))
    return bm, bn, bk


def _shape(row: dict) -> tuple[int, int, int, str]:
    return row["m"], row["n"], row["k"], row["dtype"]


@dataclass
class TuningTable:
    """One Bloom filter per policy name, plus the measurements it was built from. The policies were timed
    with one macro tile (``macro_tile``, or ``"auto"``: each shape's own), and apply only to that tile."""

    device: str
    filters: dict[str, BloomFilter]
    rows: list[dict] = field(default_factory=list)
    macro_tile: str = "128x128x64"

    @classmethod
    def build(
        cls, device: str, rows: list[dict], fp_rate: float = 1e-4, macro_tile: tuple[int, int, int] | str = "auto"
    ) -> TuningTable:
        """``rows``: ``{"m", "n", "k", "dtype", "best": policy name, ...}`` per tuned shape."""
        filters = {}
        for name in BY_NAME:
            mine = [r for r in rows if r["best"] == name]
            bloom = BloomFilter.for_capacity(len(mine), fp_rate)
            for r in mine:
                bloom.add(shape_key(*_shape(r)))
            filters[name] = bloom
        return cls(device, filters, rows, tile_name(macro_tile))

    def applies(self, m: int, n: int, k: int, dtype: str, macro_tile: tuple[int, int, int]) -> bool:
        """Whether this table's timings were taken with ``macro_tile`` for this shape. A table tuned with
        ``"auto"`` records each shape's tile (``row["tile"]``): when ``choose_tile`` has changed since, the
        timings are of another tile and do not apply."""
        return self._applies(self.row(m, n, k, dtype), m, n, k, dtype, macro_tile)

    def timed(self, m: int, n: int, k: int, dtype: str, macro_tile: tuple[int, int, int]) -> bool:
        """Whether this table holds timings of this shape with ``macro_tile``."""
        row = self.row(m, n, k, dtype)
        return row is not None and self._applies(row, m, n, k, dtype, macro_tile)

    def _applies(self, row: dict | None, m: int, n: int, k: int, dtype: str, macro_tile: tuple[int, int, int]) -> bool:
        if self.macro_tile != "auto":
            return self.macro_tile == tile_name(macro_tile)
        tuned = row.get("tile") if row is not None else None
        return tile_name(macro_tile) == tuned if tuned else macro_tile == choose_tile(m, n, k, dtype)

    def row(self, m: int, n: int, k: int, dtype: str) -> dict | None:
        """The measurements of one tuned shape, if it was tuned."""
        return next((r for r in self.rows if _shape(r) == (m, n, k, dtype)), None)

    def tuned_tile(self, m: int, n: int, k: int, dtype: str) -> tuple[int, int, int] | None:
        """The macro tile ``tune --tiles`` or ``--layouts`` measured fastest for this shape (rows with ``"tiles"``
        or ``"layouts"``: the best time of each candidate tried), or None where none were searched."""
        row = self.row(m, n, k, dtype)
        if row is None or ("tiles" not in row and "layouts" not in row):
            return None
        return parse_tile(row["tile"])

    def tuned_layout(self, m: int, n: int, k: int, dtype: str, macro_tile: tuple[int, int, int]) -> Layout | None:
        """The cluster layout ``tune --layouts`` timed this shape's ``macro_tile`` on (row ``"layout"``), or None
        where the row has none or another tile: the tile's own layout then (:func:`ctgraph.tiles.tile_layout`)."""
        row = self.row(m, n, k, dtype)
        if row is None or "layout" not in row or row["tile"] != tile_name(macro_tile):
            return None
        return Layout.parse(row["layout"])

    def updated(self, rows: list[dict]) -> TuningTable:
        """This table with ``rows`` (newly timed) in place of its rows of the same shapes, and the others
        kept, in their order: ``tune --update`` re-times only the shapes whose tile has changed."""
        merged = {_shape(r): r for r in self.rows} | {_shape(r): r for r in rows}
        return TuningTable.build(self.device, list(merged.values()), macro_tile=self.macro_tile)

    def candidates(self, m: int, n: int, k: int, dtype: str) -> list[str]:
        key = shape_key(m, n, k, dtype)
        return [name for name in BY_NAME if name in self.filters and key in self.filters[name]]  # POLICIES order

    def to_json(self) -> str:
        return (
            json.dumps(
                {
                    "device": self.device,
                    "macro_tile": self.macro_tile,
                    "filters": {k: v.to_json() for k, v in self.filters.items()},
                    "rows": self.rows,
                },
                indent=1,
                sort_keys=True,
            )
            + "\n"
        )

    @classmethod
    def from_json(cls, text: str) -> TuningTable:
        d = json.loads(text)
        filters = {k: BloomFilter.from_json(v) for k, v in d["filters"].items()}
        return cls(d["device"], filters, d.get("rows", []), d.get("macro_tile", "128x128x64"))


def _file_name(device: str) -> str:
    return "tuning-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", device) + ".json"


def user_table_path(device: str) -> Path:
    return knobs.cache_dir() / "tuning" / _file_name(device)


@functools.cache
def load_table(device: str) -> TuningTable | None:
    """The tuning table of ``device``: the cache directory's (from ``tune``), else the shipped one, else None."""
    path = user_table_path(device)
    if path.exists():
        return TuningTable.from_json(path.read_text())
    shipped = resources.files("ctgraph") / "data" / _file_name(device)
    if shipped.is_file():
        return TuningTable.from_json(shipped.read_text())
    return None


def auto_tile(m: int, n: int, k: int, dtype: str) -> tuple[int, int, int]:
    """``macro_tile="auto"``: the tile ``tune --tiles`` measured fastest for this shape on the GPU of
    :func:`ctgraph.knobs.tile_device` (its table in the cache directory, else the shipped one), else the tile
    model's (:func:`ctgraph.tiles.choose_tile`)."""
    table = load_table(knobs.tile_device())
    return (table and table.tuned_tile(m, n, k, dtype)) or choose_tile(m, n, k, dtype)


def auto_layout(m: int, n: int, k: int, dtype: str, macro_tile: tuple[int, int, int]) -> Layout | None:
    """The layout the tuning table of :func:`ctgraph.knobs.tile_device` timed ``macro_tile`` on for this shape
    (:meth:`TuningTable.tuned_layout`): what the wgmma path runs where the caller leaves the layout open."""
    table = load_table(knobs.tile_device())
    return table.tuned_layout(m, n, k, dtype, macro_tile) if table is not None else None


@dataclass(frozen=True)
class Selection:
    """What ``auto`` chose and why (``kern.policy``); ``raster`` is the tile order's group (1: row-major)."""

    policy: Policy
    workgroups: int
    reason: str
    raster: int = 1

    def __str__(self) -> str:
        order = f", tile rows in groups of up to {self.raster}" if self.raster > 1 else ""
        return f"{self.policy.name} on {self.workgroups} workgroups{order}: {self.reason}"


RASTER = 8  # tile rows walked together once the operands outgrow the L2 (H100: DP +1-13% at 4096^3-8192^3)
RASTERED = frozenset({"dataparallel"})  # the transform whose workgroups walk the tiles round-robin, in waves


def raster_for(transform: str, m: int, n: int, k: int, dtype: str, l2_bytes: int) -> int:
    """The ``raster`` ``auto`` gives ``transform`` on one GEMM: :data:`RASTER` when A and B together do not
    fit in an L2 of ``l2_bytes`` (0: unknown) and the transform is data-parallel, else 1.

    Data-parallel workgroups take tiles round-robin (``tile = wg + i*g``), so each wave is g consecutive
    tiles: in row-major order a wave reads all of B once the grid spans a tile row, and grouping rows pays
    when B cannot stay in the L2 between waves. The Stream-K part of the other transforms gives each
    workgroup a contiguous range of iterations, so the tiles running at once are spread over the part and
    grouping does not bring them together. Their data-parallel part goes out in rounds under a raster
    (:func:`~ctgraph.passes.common.distribute_rounds`), and at 8192^3 grouping then pays (on the H100 the
    mma.sync hybrid ran 414-418 TFLOP/s in contiguous ranges and 456 in rounds, the wgmma one 466
    ungrouped and 745 grouped), but on the tuned anchor and corpus shapes whose operands exceed the L2
    it lost 1-7% on 5 of the 9 that run a Stream-K policy and gained 2-7% on 2 (docs/benchmarks.md).
    """
    itemsize = 2 if dtype == "float16" else 4
    return RASTER if transform in RASTERED and l2_bytes and (m + n) * k * itemsize > l2_bytes else 1


def _grid(policy: Policy, model: GridModel, tiles: int, kt: int, resident: int) -> int:
    if policy.grid == "resident":
        return useful_grid(policy.transform, tiles, resident)
    return model.best_grid(policy.transform, tiles, kt, max_grid=resident, sk_batches=policy.batches)


def _predict(policy: Policy, model: GridModel, tiles: int, kt: int, resident: int) -> tuple[float, int]:
    g = _grid(policy, model, tiles, kt, resident)
    return model.time(work(policy.transform, tiles, kt, g, policy.batches), g), g


@functools.lru_cache(maxsize=4096)
def select(
    device: str,
    m: int,
    n: int,
    k: int,
    dtype: str,
    macro_tile: tuple[int, int, int],
    resident: int,
    sms: int,
    l2_bytes: int = 0,
    tile_cost: TileCost | None = None,
) -> Selection:
    """The policy for one GEMM on ``device`` (a GPU that runs ``sms`` workgroups at once, holds ``resident``
    and has an L2 of ``l2_bytes``; 0 where unknown).

    A shape the tuning table does not know is decided by the models. The grid-size model prices every
    tile alike, so where ``tile_cost`` holds this kernel's measured costs (:mod:`ctgraph.tiles`), the tile
    model first says whether to split K at all (:func:`ctgraph.tiles.preferred_schedule`): when it predicts
    data-parallel faster than each Stream-K schedule it prices, data-parallel it is; when it prefers the
    two-tile schedule, the grid model chooses between that and data-parallel only. On the 128 shapes of
    the H100 table, priced as if untuned, this took the chosen policy from 1.062x to 1.041x the time of
    the measured best, and the worst from 1.55x to 1.50x (512^3 in 64 x 128 tiles: data-parallel 5.0 us on
    the H100 where the grid model's Stream-K took 7.4; 8192^3: no longer a hybrid at 1.55x; docs/benchmarks.md)."""
    tiles, kt = output_tiles(m, n, macro_tile), k_iterations(k, macro_tile)
    model = load_model(device)
    model = dataclasses.replace(model, sms=sms, ctas_per_sm=max(1, resident // sms), device=device)
    table = load_table(device)
    other_tile = table is not None and not table.applies(m, n, k, dtype, macro_tile)
    hits = table.candidates(m, n, k, dtype) if table is not None and not other_tile else []
    pool = [BY_NAME[h] for h in hits if h in BY_NAME] or list(POLICIES)
    scored = sorted((_predict(p, model, tiles, kt, resident), i, p) for i, p in enumerate(pool))
    scored = [s for s in scored if math.isfinite(s[0][0]) and s[0][0] < 1e6] or scored  # split-K: tiles <= g
    verdict = preferred_schedule(tile_cost, m, n, k, sms) if not hits and tile_cost is not None else None
    if verdict == "dataparallel":
        scored = [s for s in scored if s[2] == BY_NAME["dataparallel/resident"]]
    elif verdict == "streamk2tile":
        scored = [s for s in scored if s[2].transform in ("dataparallel", "streamk2tile")]
    (_, g), _, best = scored[0]
    if len(hits) == 1:
        reason = "tuning table"
    elif hits:
        reason = f"tuning table ({len(hits)} candidates: a Bloom false positive), grid model broke the tie"
    elif table is None:
        reason = f"grid model (no tuning table for {device})"
    elif other_tile:
        reason = f"grid model (the tuning table was timed with macro tile {table.macro_tile})"
    else:
        reason = "grid model (shape not in the tuning table)"
    if verdict == "dataparallel":
        why = "data-parallel beats each Stream-K schedule of this tile"
        reason = f"tile model{reason.removeprefix('grid model')}: {why}"
    elif verdict == "streamk2tile":
        reason += "; the tile model narrowed it to data-parallel or two-tile Stream-K"
    return Selection(best, g, reason, raster_for(best.transform, m, n, k, dtype, l2_bytes))
