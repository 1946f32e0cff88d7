"""``ctgraph.compile``: run a transform pipeline on a GEMM graph and wrap the result as a kernel.

The kernel object holds the transformed graph, computes its schedule from the graph's index
expressions, and builds the backend program (control graph -> source -> binary) in ``compile``, or
on first use with ``build=False``.
"""

from __future__ import annotations

import numbers
import warnings
from functools import cached_property
from typing import Any

from . import knobs
from .backends import backend, check_options, resolve_target
from .checks import check_build, check_grid, check_index_range
from .config import LAYOUT_OPTIONS
from .counts import split_for_budget, splitk_workgroups
from .deps import require_cuda
from .gemm import GemmProblem, gemm
from .graph import CoordinateGraph
from .passes import TAKES_SPLIT, pass_options
from .passes import transform as run_pipeline
from .schedule import schedule as graph_schedule
from .select import Config, Selection, objective_or_env

__all__ = ["CPU_WORKGROUPS", "CIgnoredWarning", "Kernel", "compile", "compile_config"]

CPU_WORKGROUPS = 8  # default grid on the CPU: small, and more than one so the fixup is exercised


class CIgnoredWarning(UserWarning):
    """A kernel was called with ``C`` but ``beta == 0``, so ``C`` does not enter ``D``."""


class Kernel:
    """A GEMM compiled by ctgraph. Build with :func:`compile`."""

    def __init__(
        self,
        graph: CoordinateGraph,
        transform: str,
        workgroups: int,
        target: str,
        options: dict[str, Any],
        sk_batches: int | None = None,
        split: int | None = None,
        raster: int | None = None,
    ) -> None:
        self.transform = transform
        self.workgroups = workgroups
        self.target = target
        self.options = dict(options)
        self.sk_batches = sk_batches
        self.split = split
        self.selection: Selection | None = None  # what transform="auto" chose, and why
        self._found_gpu = False
        self.problem: GemmProblem = graph.attrs["gemm"]
        self.graph = run_pipeline(graph, transform, workgroups, sk_batches, split, raster)
        self.raster = self.graph.attrs.get("raster", 1)  # the tile rows walked together (1: row-major)

    def __repr__(self) -> str:
        p = self.problem
        return (
            f"Kernel({self.transform}, m={p.m}, n={p.n}, k={p.k}, macro_tile={p.macro_tile}, "
            f"dtype={p.dtype}, workgroups={self.workgroups}, target={self.target!r})"
        )

    @property
    def policy(self) -> Selection | None:
        """:attr:`selection`'s older name."""
        return self.selection

    def schedule(self) -> list[list[tuple[int, int, int]]]:
        """Per workgroup, the ``(m_tile, n_tile, k_iter)`` triples it processes, in order (a fresh copy)."""
        return [list(work) for work in self._schedule]

    @cached_property
    def _schedule(self) -> list[list[tuple[int, int, int]]]:
        return graph_schedule(self.graph)

    @cached_property
    def program(self) -> Any:
        """The backend's program for this kernel (built on first use)."""
        return backend(self.target).build(self)

    @property
    def control(self) -> Any:
        return self.program.control

    @property
    def source(self) -> str:
        return self.program.source

    @property
    def ptx(self) -> str:
        """The PTX of a "cuda" kernel (needs nvcc, not a GPU)."""
        return self.program.ptx

    def __call__(
        self,
        A: Any,
        B: Any,
        C: Any = None,
        *,
        alpha: float = 1.0,
        beta: float = 0.0,
        out: Any = None,
        stream: Any = None,
    ) -> Any:
        """``D = alpha*A@B + beta*C``, with ``beta`` 0.0 by default (torch.addmm's default is 1); ``C`` may be
        omitted when ``beta == 0``. A ``C`` passed while ``beta == 0`` is ignored, with a :class:`CIgnoredWarning`.
        ``out``: where D goes (a new array or tensor when None); ``stream``: the CUDA stream to launch on (None:
        torch's current one for torch tensors, else the legacy default stream; the CPU takes None alone).
        A "cuda" kernel needs pycuda and a GPU here (:class:`ctgraph.deps.MissingDependency` otherwise)."""
        if C is not None and not isinstance(beta, bool) and isinstance(beta, numbers.Real) and beta == 0:
            warnings.warn(
                "C is ignored because beta == 0: ctgraph computes D = alpha*A@B + beta*C with beta=0.0 by default "
                "(torch.addmm's default is 1); pass beta=1.0 to add C, or leave C out",
                CIgnoredWarning,
                stacklevel=2,
            )
        if self.target == "cuda" and not self._found_gpu:
            require_cuda("calling a target='cuda' kernel")
            self._found_gpu = True  # NOTE: once per kernel: the checks are off every later call's path
        return self.program(A, B, C, alpha=alpha, beta=beta, out=out, stream=stream)


def _splitk_grid(p: GemmProblem, workgroups: int, split: int | None, transform: str) -> tuple[int, int]:
    """``transform`` (split-K, either way) runs one workgroup per (output tile, K chunk): ``workgroups`` is the budget
    it fits in.

    Without ``split``, the most chunks that fit: ``split = workgroups // tiles`` (at least 1). The arithmetic is
    :mod:`ctgraph.counts`' (:func:`~ctgraph.counts.split_for_budget`, :func:`~ctgraph.counts.splitk_workgroups`).
    """
    mt, nt, kt = p.tiles
    tiles = mt * nt
    split = int(split_for_budget(tiles, workgroups)) if split is None else split
    need = splitk_workgroups(tiles, kt, split)
    if need > workgroups:
        raise ValueError(
            f"{transform} needs {need} workgroups ({tiles} output tiles x their K chunks) but has "
            f"{workgroups}; use fewer chunks (split=), more workgroups, or a Stream-K transform"
        )
    return need, split


def compile_config(
    config: Config, m: int, n: int, k: int, dtype: str = "float16", target: str = "cuda", **options: Any
) -> Kernel:
    """The kernel of one selection ``config`` for an ``m x n x k`` GEMM: its tile, schedule, grid, tile order and
    cluster layout (what autotune, ``tune`` and ``heldout`` time)."""
    g = gemm(m, n, k, macro_tile=config.tile, dtype=dtype)
    return compile(g, target=target, **config.compile_args(), **(options | config.layout.options()))


def _autotune_idle(target: str, transform: str, auto_tile: bool, options: dict[str, Any]) -> str | None:
    """Why ``autotune=True`` has nothing to time in this compile (None: it times, or reads the device's cache):
    autotune chooses among the ranker's configs of ``transform="auto"`` on a ``macro_tile="auto"`` graph, tile and
    cluster layout included, on the GPU."""
    if target != "cuda":
        return f"target {target!r} (autotune times CUDA kernels on the GPU)"
    if transform != "auto":
        return f'transform={transform!r} (autotune chooses the transform too: give transform="auto")'
    if not auto_tile:
        return 'a graph of a fixed macro_tile (autotune chooses the tile too: build it with macro_tile="auto")'
    if given := [o for o in LAYOUT_OPTIONS if options.get(o) not in (None, 0)]:
        return f"{', '.join(given)} given (autotune chooses the cluster layout too)"
    return None


def _autotune_build(graph: CoordinateGraph, target: str, options: dict[str, Any]) -> Any:
    """How autotune makes a candidate config of this GEMM (:mod:`ctgraph.select.autotune`): not yet built, so that
    :func:`~ctgraph.select.autotune.time_configs` compiles every candidate at once; each loads at its first launch."""
    p = graph.attrs["gemm"]
    return lambda c: compile_config(c, p.m, p.n, p.k, p.dtype, target, **(options | {"build": False}))


def compile(
    graph: CoordinateGraph,
    transform: str = "streamk2tile",
    workgroups: int | str | None = None,
    target: str = "auto",
    sk_batches: int | None = None,
    split: int | None = None,
    raster: int | str | None = None,
    autotune: bool = False,
    objective: str | None = None,
    **options: Any,
) -> Kernel:
    """Transform a GEMM graph (from :func:`ctgraph.gemm`) and return a :class:`Kernel`.

    ``transform``: "dataparallel", "streamk", "streamk2tile" or "streamk_hybrid" (data-parallel plus
    ``sk_batches`` waves of Stream-K work, 1 to 6, default 1), "splitk" or "splitk_reduce" (``split`` K chunks
    per output tile, default: as many as ``workgroups`` holds, one workgroup per chunk: g = tiles * chunks), or
    "auto": the whole config (transform, batches, grid, tile order, cluster layout, and the tile where the graph
    was built with ``macro_tile="auto"``) from :mod:`ctgraph.select`: the device's measured entry for this shape,
    else the ranker's best candidate; ``kern.selection`` says what and why; ``sk_batches`` and ``split`` are
    chosen too, and a ``workgroups`` of yours is kept (split-K then takes the chunks it holds; on fewer
    workgroups than output tiles Stream-K splits K instead, and the in-kernel split-K of ``CTGRAPH_OBJECTIVE=call``
    gives way to ``splitk_reduce`` on more than are resident; the reason says so). ``autotune=True``
    (or ``CTGRAPH_AUTOTUNE=1``): for a graph built with ``macro_tile="auto"``, the ranker's top candidates are
    timed on the GPU where the device has no entry for the shape, and the winner is cached per device
    (:mod:`ctgraph.select.autotune`). ``autotune=True`` with ``build=False`` is an error (timing needs the GPU);
    where it has nothing to time (target "cpu", a named transform, a fixed tile or a given cluster layout) it
    warns and compiles without it. The environment variable only applies where a kernel is built on a GPU, so it
    never breaks ``build=False`` and never warns.
    ``objective``: what every "auto" minimises (:mod:`ctgraph.select.objective`): "kernel" the kernel's GPU time, as
    a CUDA graph replays it; "call" the time of back-to-back eager calls, host included, where one launch beats
    split-K's two on a kernel shorter than the host's time per call; None (default): ``CTGRAPH_OBJECTIVE``, else
    "kernel". On "cpu" selection is by its model's time alone.
    ``workgroups``: the grid size g; default: the workgroups the device holds at once on "cuda" (one CTA per SM,
    which fills an SM on the wgmma path and is a lower bound on the mma paths; whole clusters where a workgroup is
    a cluster), :data:`CPU_WORKGROUPS` on "cpu";
    "auto": the grid the ranker predicts fastest for this transform and tile. ``raster``: the order of the output
    tiles (not for split-K): 1 (default) row-major as seed 004; G > 1 walks G tile rows at once, column by column,
    for L2 reuse (Triton's ``GROUP_SIZE_M``), capped at the tile rows; the last group is ragged (``Mt % G`` rows);
    "auto": the order the ranker predicts fastest for this transform and tile (row-major on "cpu" and for
    split-K). With ``transform="auto"`` the selection picks it unless given. The cluster layout options (cuda:
    ``cluster``, ``multicast``, ``swap``) take "auto" too: with ``transform="auto"`` the selection's, with a named
    transform the layout the ranker puts first for the graph's tile and that transform (agreeing with the layout
    options given; the backend's default where selection offers no config of the tile).
    A grid above 2**31 - 1, or one above 65,536 that leaves workgroups without an iteration, is a
    ``ValueError`` (:mod:`ctgraph.checks`); on "cpu" split-K's default budget is ``max(8, tiles * split)``, so
    the default grid fits any GEMM. Without a GPU, "auto" decides for the known device of
    ``CTGRAPH_TARGET_DEVICE`` (default the H100 SXM).
    ``target``: "cpu", "cuda" or "auto" (cuda when a GPU and pycuda are usable), or the name of a backend
    registered with :func:`ctgraph.backends.register` (the contract: :class:`ctgraph.backends.Backend`).
    ``build`` (True or False, default True): ``build=False`` defers lowering and compilation to the first
    use: ``kern.source`` of a "cuda" kernel then needs no GPU, pycuda or nvcc, and nothing that grows with
    the GEMM (such as the schedule) is computed until asked for. ``target="cuda"`` with ``build=True`` needs
    pycuda and a GPU: a :class:`ctgraph.deps.MissingDependency` says which is missing. A GEMM whose element
    or iteration counts reach 2**62 is a ``ValueError``. Other options go to the backend (cuda: ``warps``,
    ``stages``, ``vector``, ``arch``, ``ctas_per_sm``, ``fetch_step``, ``mainloop``, ``cluster``,
    ``multicast``, ``swap``, ``pdl``, ``pingpong``: :class:`lowering.cuda.options.CudaOptions`).
    """
    if not isinstance(graph, CoordinateGraph) or "gemm" not in graph.attrs:
        raise TypeError(f"compile takes the graph returned by ctgraph.gemm(...), got {type(graph).__name__}")
    build = check_build(options)
    target = resolve_target(target)
    auto_layout = tuple(o for o in LAYOUT_OPTIONS if options.get(o) == "auto")
    options = {o: v for o, v in options.items() if o not in auto_layout}  # "auto": selection's, below
    check_options(options, target)
    if isinstance(raster, str) and raster != "auto":
        raise ValueError(
            f'raster must be a positive integer (tile rows walked together), None or "auto", got {raster!r}'
        )
    if not isinstance(autotune, bool):
        raise ValueError(f"autotune must be True or False (or CTGRAPH_AUTOTUNE=1 in the environment), got {autotune!r}")
    objective = objective_or_env(objective)
    if target != "cuda":  # NOTE: no host launch to price: the CPU backend runs workgroups on the calling thread
        objective = "kernel"
    check_index_range(graph.attrs["gemm"])
    if target == "cuda" and build:
        require_cuda("compile(target='cuda') with build=True")
    selection = None
    twin_on_given_grid = False
    auto_tile = "auto_selection" in graph.attrs  # built with macro_tile="auto"
    idle = autotune and not (target == "cuda" and not build and transform == "auto")  # that one: an error, below
    if idle and (why := _autotune_idle(target, transform, auto_tile, options)):
        warnings.warn(f"autotune=True has nothing to time here: {why}; compiled without it", stacklevel=2)
    if transform == "auto" or workgroups in (None, "auto") or auto_tile or auto_layout or raster == "auto":
        from .select.resolve import auto_layout as ranked_layout
        from .select.resolve import choose, given_layout, layout_for, resident, target_of, wgmma_options

        device = target_of(target, options)
        if auto_layout and target == "cuda" and not (transform == "auto" and auto_tile):  # the graph's tile is fixed
            options = options | ranked_layout(
                graph, target, device, None if transform == "auto" else transform, options, objective
            )
    if transform == "auto":
        for name, given in (("sk_batches", sk_batches), ("split", split)):
            if given is not None:
                raise ValueError(f'{name} is chosen by transform="auto"; pass a transform to set it')
        if autotune and target == "cuda" and not build:
            raise ValueError("autotune times kernels on the GPU: it needs build=True")
        timed = (autotune or knobs.autotune()) and target == "cuda" and build
        tuner = _autotune_build(graph, target, options) if timed else None
        selection = choose(graph, target, device, options, tuner, objective)
        config = selection.config
        if config.tile != graph.attrs["gemm"].macro_tile:  # a graph built with macro_tile="auto": the target's tile
            p = graph.attrs["gemm"]
            graph = gemm(p.m, p.n, p.k, macro_tile=config.tile, dtype=p.dtype)
        transform, sk_batches, split = config.transform, config.sk_batches, config.split
        if transform in TAKES_SPLIT:
            raster = None
        elif raster in (None, "auto"):
            raster = config.raster
        if workgroups in (None, "auto"):
            workgroups = config.workgroups
        elif transform in TAKES_SPLIT:  # a grid of the caller's: as many K chunks as it holds
            split = None
            twin_on_given_grid = transform == "splitk"  # by call time; the split-K it mirrors where not resident
            mt, nt, kt = graph.attrs["gemm"].tiles
            if isinstance(workgroups, numbers.Integral) and not isinstance(workgroups, bool) and workgroups < mt * nt:
                # NOTE: split-K needs a workgroup per output tile; Stream-K splits K on any grid (data-parallel
                # where there is no K to split)
                transform, split = ("streamk" if kt > 1 else "dataparallel"), None
                twin_on_given_grid = False
                why = f"{selection.reason}; {transform} on workgroups={workgroups}, fewer than its {mt * nt} tiles"
                selection = Selection(selection.config, why, selection.ranked, selection.source)
        if target == "cuda" and not given_layout(options):
            options = options | config.layout.options()
    if target == "cuda" and (selection is not None or auto_tile):
        options = wgmma_options(graph, target, device, options)
    auto_order = raster == "auto" and transform not in TAKES_SPLIT  # split-K walks no tile order
    order: int | None = None if isinstance(raster, str) else raster
    pass_options(transform, 1, sk_batches, split, order)  # checks the pass options before any work
    if workgroups == "auto" or auto_order:  # the ranker's grid and tile order for this transform and tile
        from .select import select_schedule

        if target == "cuda":
            p = graph.attrs["gemm"]
            layout_ = layout_for(graph, target, device, options)[1]
            best = select_schedule(p.m, p.n, p.k, p.dtype, p.macro_tile, layout_, device, transform, objective)
            workgroups = best.config.workgroups if workgroups == "auto" else workgroups
            order = best.config.raster if auto_order else order
        else:  # the CPU's default grid (below) and row-major (its workgroups run one by one: no L2 to share)
            workgroups = None if workgroups == "auto" else workgroups
    if workgroups is None:
        if target == "cuda":
            workgroups = resident(device, target, graph, options)
        else:  # the CPU's default grid; split-K's budget grows with the tiles so that it fits
            mt, nt, _ = graph.attrs["gemm"].tiles
            workgroups = max(CPU_WORKGROUPS, mt * nt * (split or 1)) if transform in TAKES_SPLIT else CPU_WORKGROUPS
    if isinstance(workgroups, bool) or not isinstance(workgroups, numbers.Integral) or workgroups < 1:
        raise ValueError(f'workgroups must be a positive integer, None or "auto", got {workgroups!r}')
    if transform in TAKES_SPLIT:
        workgroups, split = _splitk_grid(graph.attrs["gemm"], int(workgroups), split, transform)
        if twin_on_given_grid and selection is not None and workgroups > device.resident(config.layout.cluster):
            transform = "splitk_reduce"  # NOTE: the twin's fixup waits on every chunk: its grid must be resident
            why = f"{selection.reason}; splitk_reduce on workgroups={workgroups}, more than are resident"
            selection = Selection(config, why, selection.ranked, selection.source)
    check_grid(graph.attrs["gemm"], int(workgroups))
    kern = Kernel(graph, transform, int(workgroups), target, options, sk_batches, split, order)
    kern.selection = selection
    if options.get("build", True):
        kern.program  # noqa: B018 -- lower, generate and (cuda) compile now, so errors surface here
    return kern
