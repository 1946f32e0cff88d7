"""What selection chooses: a :class:`Config` (tile, cluster layout, schedule, grid, tile order) for one GEMM.

A config is a frozen value with a stable text form (:meth:`Config.name`, :meth:`Config.parse`), so the autotune
cache and the shipped entries store it as data. ``ctgraph.compile`` runs one through
:meth:`Config.compile_args`: the graph's macro tile, the transform's arguments and the backend options of its
layout. Schedule arithmetic (tile counts, K iterations) lives in :mod:`ctgraph.counts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["LAYOUT_OPTIONS", "Config", "Layout", "cluster_grid", "parse_tile", "tile_name"]

LAYOUT_OPTIONS = ("cluster", "multicast", "swap")  # the backend options a Layout sets (Layout.options)


def tile_name(tile: tuple[int, int, int]) -> str:
    """``(128, 256, 64)`` -> ``"128x256x64"`` (:func:`parse_tile` reads it back)."""
    return "x".join(map(str, tile))


def parse_tile(name: str) -> tuple[int, int, int]:
    try:
        bm, bn, bk = map(int, name.split("x"))
    except ValueError:
        raise ValueError(f"a macro tile is written BMxBNxBK (e.g. '128x256x64'), got {name!r}") from None
    return bm, bn, bk


def cluster_grid(cluster: int, multicast: str) -> tuple[int, int]:
    """A cluster's CTAs as a ``grid_m x grid_n`` grid: CTAs of a grid row share A's rows, those of a grid column
    B's columns (``"b"``: a column of ``cluster``, ``"a"``: a row, ``"ab"``: ``2 x cluster/2``, ``"ba"``:
    ``cluster/2 x 2``)."""
    return {"b": (cluster, 1), "a": (1, cluster), "ab": (2, cluster // 2), "ba": (cluster // 2, 2)}[multicast]


@dataclass(frozen=True, order=True)
class Layout:
    """How a workgroup's ``cluster`` CTAs share its macro tile on the wgmma path: the operands they multicast
    (``"a"``, ``"b"``, ``"ab"``, ``"ba"``), computing ``D^T = B^T A^T`` where ``swap`` (the CUDA options of the
    same names)."""

    cluster: int = 1
    multicast: str = "b"
    swap: bool = False

    @property
    def name(self) -> str:
        """``"1b"``, ``"2a"``, ``"8ab/swap"``: the form data files store (:meth:`parse` reads it back)."""
        return f"{self.cluster}{self.multicast}" + ("/swap" if self.swap else "")

    @classmethod
    def parse(cls, name: str) -> Layout:
        head, _, tail = name.partition("/")
        shared = head.lstrip("0123456789")
        if not head[:1].isdigit() or shared not in ("a", "b", "ab", "ba") or tail not in ("", "swap"):
            want = "CTAs, the operands they share and an optional '/swap' (e.g. '2a/swap')"
            raise ValueError(f"a layout is {want}, got {name!r}")
        return cls(int(head[: len(head) - len(shared)]), shared, tail == "swap")

    @property
    def grid(self) -> tuple[int, int]:
        return cluster_grid(self.cluster, self.multicast)

    def options(self) -> dict[str, Any]:
        """The CUDA options that run it: ``ctgraph.compile(..., **layout.options())``."""
        return {"cluster": self.cluster, "multicast": self.multicast, "swap": self.swap}


@dataclass(frozen=True, order=True)
class Config:
    """One way to run a GEMM: ``tile`` on ``layout``, ``transform`` (with ``sk_batches`` for the hybrid, ``split``
    K chunks for split-K) on ``workgroups`` workgroups, output tiles in groups of ``raster`` rows (1: row-major)."""

    tile: tuple[int, int, int]
    layout: Layout
    transform: str
    workgroups: int
    raster: int = 1
    sk_batches: int | None = None
    split: int | None = None

    @property
    def name(self) -> str:
        """``"128x256x64 1b streamk2tile g132 r8"`` (hybrid ``/b3``, split-K ``/s4``): :meth:`parse` reads it back."""
        extra = f"/b{self.sk_batches}" if self.sk_batches else f"/s{self.split}" if self.split else ""
        return f"{tile_name(self.tile)} {self.layout.name} {self.transform}{extra} g{self.workgroups} r{self.raster}"

    @classmethod
    def parse(cls, name: str) -> Config:
        try:
            tile, layout, schedule, grid, raster = name.split()
            transform, _, extra = schedule.partition("/")
            batches = int(extra[1:]) if extra.startswith("b") else None
            split = int(extra[1:]) if extra.startswith("s") else None
            if not (grid.startswith("g") and raster.startswith("r")):
                raise ValueError
            return cls(
                parse_tile(tile), Layout.parse(layout), transform, int(grid[1:]), int(raster[1:]), batches, split
            )
        except ValueError:
            raise ValueError(f"a config is 'TILE LAYOUT TRANSFORM[/bN|/sN] gG rR', got {name!r}") from None

    def compile_args(self) -> dict[str, Any]:
        """``ctgraph.compile``'s keyword arguments for this config (the graph carries the tile)."""
        args: dict[str, Any] = {"transform": self.transform, "workgroups": self.workgroups}
        if self.sk_batches is not None:
            args["sk_batches"] = self.sk_batches
        if self.split is not None:
            args["split"] = self.split
        if self.raster != 1:
            args["raster"] = self.raster
        return args
