"""The front end's ``"auto"``: from a GEMM graph, a backend name and options to a config, through the registry.

:func:`target_of` takes the known device ``CTGRAPH_TARGET_DEVICE`` names, else asks the backend for its
:class:`~ctgraph.target.Target` where a GPU answers, else takes the H100 SXM: ``build=False`` decides
without a GPU.
:func:`choose` resolves ``transform="auto"``: the tile too where the graph was built with ``macro_tile="auto"``
(the graph is then rebuilt with the tile chosen for this target), else the schedule of the graph's tile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import knobs
from ..backends import backend, cuda_available
from ..config import LAYOUT_OPTIONS, Config, Layout
from ..graph import CoordinateGraph
from ..target import Target, known_target
from . import Selection, candidates, measured_choice, objective_or_env, rank, select, select_schedule
from .autotune import autotune as run_autotune
from .objective import by

__all__ = [
    "LAYOUT_OPTIONS",
    "AutoTile",
    "auto_layout",
    "choose",
    "default_target",
    "device_target",
    "given_layout",
    "path_of",
    "target_of",
]


def target_of(name: str, options: dict[str, Any]) -> Target:
    """The :class:`Target` of backend ``name``: for "cuda", the known device ``CTGRAPH_TARGET_DEVICE`` names, else
    the GPU where one answers, else the H100 SXM (so ``build=False`` decides without a GPU)."""
    if name == "cuda" and (knobs.target_device() is not None or not cuda_available()):
        return known_target(knobs.target_device())
    return backend(name).target()


def device_target(name: str) -> Target:
    """The device itself, never ``CTGRAPH_TARGET_DEVICE``: what measurements (tune, heldout, calibrate) are filed
    under."""
    return backend(name).target()


def default_target() -> Target:
    """What ``macro_tile="auto"`` selects for before a backend is named: the CUDA target (:func:`target_of`)."""
    return target_of("cuda", {})


def path_of(target: Target, dtype: str, k: int, n: int, options: dict[str, Any]) -> str:
    """The instruction path that will run: the target's fastest for these rows, unless ``mainloop="mma"``."""
    paths = target.paths(dtype, k, n)
    if options.get("mainloop") == "mma" and paths[0] == "wgmma":
        return paths[1]
    return paths[0]


def _backend_name(target: Target) -> str:
    return "cpu" if target.family == "cpu" else "cuda"


@dataclass(frozen=True)
class AutoTile:
    """What chose the tile of a graph built with ``macro_tile="auto"``: the selection, and the backend, target,
    path and objective it was made for. :func:`choose` takes it for a compile on the same four rather than select
    again (the same inputs: the same answer), which saves a new shape's first call one of its two selections."""

    selection: Selection
    backend: str
    target: Target
    path: str
    objective: str

    def made_for(self, name: str, target: Target, path: str, objective: str) -> bool:
        return (self.backend, self.target, self.path, self.objective) == (name, target, path, objective)


def auto_tile(m: int, n: int, k: int, dtype: str) -> AutoTile:
    """``macro_tile="auto"`` in :func:`ctgraph.gemm`: the selection on :func:`default_target`'s fastest path, by
    ``CTGRAPH_OBJECTIVE``."""
    target = default_target()
    path, name, objective = target.paths(dtype, k, n)[0], _backend_name(target), knobs.objective()
    selection = select(m, n, k, dtype, target, path, backend(name).supports, objective=objective)
    return AutoTile(selection, name, target, path, objective)


def given_layout(options: dict[str, Any]) -> dict[str, Any]:
    """The layout options the caller set (None and 0 leave the layout to the backend or to selection)."""
    return {name: options[name] for name in LAYOUT_OPTIONS if options.get(name) not in (None, 0)}


def layout_for(graph: CoordinateGraph, name: str, target: Target, options: dict[str, Any]) -> tuple[str, Layout]:
    """The path that will run the graph's tile on ``target`` with these options, and the tile's layout on it: the
    wgmma kernel's where the tile fits it, else one CTA on the next path (the mma.sync paths run any tile)."""
    p = graph.attrs["gemm"]
    paths = target.paths(p.dtype, p.k, p.n)
    path = path_of(target, p.dtype, p.k, p.n, options)
    if path != "wgmma":
        return path, Layout()
    layout = backend(name).layout_of(p.macro_tile, p.dtype, options)
    return (path, layout) if layout is not None else (paths[1], Layout())


def choose(
    graph: CoordinateGraph,
    name: str,
    target: Target,
    options: dict[str, Any],
    build: Callable[[Config], Any] | None = None,
    objective: str | None = None,
) -> Selection:
    """``transform="auto"``: the selection for this GEMM graph on backend ``name``'s ``target``, by ``objective``
    (None: ``CTGRAPH_OBJECTIVE``; :mod:`.objective`). Where the graph was
    built with ``macro_tile="auto"`` and no layout is given, the whole config, its tile included (the caller rebuilds
    the graph where the tile differs); else the selection's config where it runs the graph's tile, else a schedule of
    that tile on the path that runs it. ``build``: autotune's way to compile a config's kernel (None: no autotune;
    autotune applies to ``macro_tile="auto"`` graphs, whose tile it may choose)."""
    p = graph.attrs["gemm"]
    path = path_of(target, p.dtype, p.k, p.n, options)
    supports = backend(name).supports
    objective = objective_or_env(objective)
    if not given_layout(options):
        made = graph.attrs.get("auto_selection")  # a graph built with macro_tile="auto": what chose its tile
        if made is not None and made.made_for(name, target, path, objective):
            chosen = made.selection
        else:
            chosen = select(p.m, p.n, p.k, p.dtype, target, path, supports, objective=objective)
        if made is not None:
            if build is not None and chosen.source != "measured":
                ranked = [c for c, _ in chosen.ranked]  # the ranker's first candidates, as select ranked them
                entry = run_autotune(p.m, p.n, p.k, p.dtype, target, ranked, build)
                # NOTE: the entry keeps the fastest kernel, which a process by kernel time reads (unless an in-kernel
                # twin, timed by call time only); by call time the same entry gives measured_choice's config
                why = f"autotuned on first call ({len(entry.seconds)} candidates timed{by(objective)})"
                mine = measured_choice(entry, objective) or entry.config  # NOTE: None never: these are its own
                chosen = Selection(mine, why, chosen.ranked, "autotune")
            return chosen
        if chosen.config.tile == p.macro_tile:  # the selection's config runs this tile (its layout included)
            return chosen
    _, layout = layout_for(graph, name, target, options)
    return select_schedule(p.m, p.n, p.k, p.dtype, p.macro_tile, layout, target, objective=objective)


def auto_layout(
    graph: CoordinateGraph,
    name: str,
    target: Target,
    transform: str | None,
    options: dict[str, Any],
    objective: str | None = None,
) -> dict[str, Any]:
    """The layout options for ``cluster``, ``multicast`` or ``swap="auto"`` on a graph of a fixed tile: those of the
    candidate the ranker puts first among the ones with the graph's tile and ``transform`` (None: any) whose layout
    agrees with the layout options given; none (the backend's default layout) off the wgmma path or where no
    candidate has the tile (a tile of the caller's that selection would not offer)."""
    p = graph.attrs["gemm"]
    path = path_of(target, p.dtype, p.k, p.n, options)
    if path != "wgmma":
        return {}
    want = "splitk_reduce" if transform == "splitk" else transform
    given = given_layout(options)
    supports = backend(name).supports
    pool = [
        c
        for c in candidates(p.m, p.n, p.k, p.dtype, target, path, supports, named=want)
        if c.tile == p.macro_tile and c.transform == want and all(c.layout.options()[o] == v for o, v in given.items())
    ]
    return rank(p.m, p.n, p.k, p.dtype, target, path, supports, pool, objective)[0][0].layout.options() if pool else {}


def resident(target: Target, name: str, graph: CoordinateGraph, options: dict[str, Any]) -> int:
    """The workgroups of this kernel the target holds at once: one CTA per SM (the wgmma kernel's shared memory fills
    an SM; on the mma.sync paths a lower bound, which the backend's occupancy check at build time never refuses),
    whole clusters where a workgroup is a cluster."""
    return target.resident(layout_for(graph, name, target, options)[1].cluster)


def wgmma_options(graph: CoordinateGraph, name: str, target: Target, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with ``mainloop="wgmma"`` where selection chose the graph's tile for the wgmma path and the caller
    left the mainloop open: a machine without a GPU then generates the kernel the GPU will run."""
    if name != "cuda" or options.get("mainloop", "auto") != "auto":
        return options
    return options | {"mainloop": "wgmma"} if layout_for(graph, name, target, options)[0] == "wgmma" else options
