"""``python -m ctgraph tune SHAPES``: time the ranker's candidates on every shape, on every GPU, into one table.

For each shape the ranker's first ``top`` candidates (:func:`ctgraph.select.rank`) and ``extra`` others drawn with a
seeded generator (so the fit also sees where the ranker is wrong) are compiled and timed (kernel time,
:func:`ctgraph.measure.kernel_time`; ``--rounds R``: R interleaved rounds, the median kept), and cuBLAS beside them.
The result is a :class:`~ctgraph.select.cache.Table`: per shape the fastest config and every config's seconds. It is
both the device's autotune cache (``--install``: merged into ``CTGRAPH_CACHE_DIR/autotune/``, or shipped as
``ctgraph/data/autotune-<device>.json``) and the sample the ranker's correction is fitted on
(:mod:`ctgraph.select.fit`).

Spread over GPUs and hosts:

- one worker process per visible GPU (spawned, each with ``CUDA_VISIBLE_DEVICES`` set to its GPU, one of
  those the parent's ``CUDA_VISIBLE_DEVICES`` names: :func:`ctgraph.knobs.visible_device`), taking every
  ``W``-th shape of the host's share; workers write their own part files, which the parent merges;
- ``--shard i/n`` (or ``RANK``/``WORLD_SIZE`` under torchrun) takes every ``n``-th shape from the ``i``-th, so hosts
  split a set; ``python -m ctgraph tune --merge A.json B.json --out T.json`` merges their tables;
- before timing, every kernel the worker will run is compiled by a pool of processes (nvcc on every core; the cubins
  land in the on-disk cache, :mod:`lowering.cuda.nvcc`), so the GPUs wait for nvcc once.

Each shape's entry records the hash of the kernels that timed it (:func:`ctgraph.select.fit.kernel_hash`), and the
fit refuses shapes timed on other kernels. After a kernel change, ``python -m ctgraph tune TABLE.json --retime --out
NEW.json`` times again the configs of the shapes not timed on this code's kernels (:func:`stale`), and writes the
table with their new entries; stopped (by a time limit, say), it goes on where it stopped when run again with the
same ``--out`` (:func:`timed_before`). ``--fraction F`` times a seeded share of the table's shapes instead
(:func:`sample`; ``--out`` then holds those alone): where device time is short, a half of each table fits a
correction within a tenth of a percent of regret of all of it (docs/decisions.md).

Needs torch and a GPU (the merge does not).
"""

from __future__ import annotations

import math
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from . import knobs
from .arguments import count, positive_int
from .config import Config
from .select.cache import Entry, Table, key, parse_key, read_table

__all__ = ["check_options", "configs_for", "merge", "parse_shard", "run", "sample", "stale", "timed_before", "tune"]

Shape = tuple[int, int, int]


def parse_shard(text: str | None, what: str = "shard") -> tuple[int, int]:
    """``"i/n"`` -> ``(i, n)`` with ``0 <= i < n``; None: ``RANK``/``WORLD_SIZE`` from the environment, else (0, 1).
    ``what``: how the caller spells the option, for the error."""
    if text is None:
        rank, size = os.environ.get("RANK", "0"), os.environ.get("WORLD_SIZE", "1")
        try:
            i, n = int(rank), int(size)
        except ValueError:
            raise ValueError(f"RANK and WORLD_SIZE must be integers (torchrun's), got {rank!r} and {size!r}") from None
        if not 0 <= i < n:
            raise ValueError(f"RANK={rank} and WORLD_SIZE={size} from the environment: need 0 <= RANK < WORLD_SIZE")
        return i, n
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise ValueError(f"{what} must be 'i/n' (this host's index and the host count), got {text!r}") from None
    if not 0 <= i < n:
        raise ValueError(f"{what} {text!r}: need 0 <= i < n")
    return i, n


def check_options(rounds: int, top: int, extra: int, shard: tuple[int, int], prefix: str = "tune: ") -> None:
    """A run's ``rounds`` and ``top`` (at least one), ``extra`` (0 or more) and ``shard`` (``0 <= i < n``), refused
    before any work with a ``ValueError`` naming them (``prefix``: how the caller spells them)."""
    positive_int(f"{prefix}rounds", rounds)
    positive_int(f"{prefix}top", top)
    count(f"{prefix}extra", extra)
    i, n = shard
    if not 0 <= i < n:
        raise ValueError(f"{prefix}shard must be (i, n) with 0 <= i < n, got {shard!r}")


def configs_for(
    shape: Shape, target: Any, top: int, extra: int, dtype: str = "float16", objective: str | None = "kernel"
) -> list[Config]:
    """The ranker's first ``top`` candidates for ``shape`` and ``extra`` others, drawn with a seed of the shape;
    first by kernel time, which the tables fit the ranker to (``objective``, :mod:`ctgraph.select.objective`; None:
    ``CTGRAPH_OBJECTIVE``, as the default path ranks them)."""
    from .backends import backend
    from .select import rank
    from .select.resolve import path_of

    m, n, k = shape
    path = path_of(target, dtype, k, n, {})
    ranked = [c for c, _ in rank(m, n, k, dtype, target, path, backend("cuda").supports, objective=objective)]
    rng = random.Random(f"{m},{n},{k}")
    rest = ranked[top:]
    return ranked[:top] + rng.sample(rest, min(extra, len(rest)))


def _precompile_group(work: list[tuple[Config, Shape, str]]) -> list[str]:
    """nvcc (no GPU context) for each distinct source among ``work``, configs of one tile, layout, transform and
    tile order whose shapes may still print different sources (a tile-row group that divides the tile rows or
    not, the group itself): the cubins land in the on-disk cache. Returns the errors, one per config."""
    from .api import compile_config
    from .backends import backend

    errors: dict[str, str] = {}
    seen: set[str] = set()
    for config, shape, dtype in work:
        try:
            on_wgmma = backend("cuda").supports(config.tile, dtype, config.layout, "wgmma")
            kern = compile_config(config, *shape, dtype, "cuda", build=False, mainloop="wgmma" if on_wgmma else "mma")
            if kern.program.source not in seen:
                seen.add(kern.program.source)
                kern.program.cubin()
        except Exception as e:  # a config that fails is timed as infinity later; say why here
            errors.setdefault(config.name, f"{config.name}: {type(e).__name__}: {e}")
    return list(errors.values())


def precompile(work: list[tuple[Config, Shape, str]], processes: int) -> list[str]:
    """Compile every config's kernel with ``processes`` nvcc processes at once; returns the errors. The work goes
    out in groups of one tile, layout, transform, tile order and dtype (a group's shapes mostly share one source,
    sizes being parameters), and each group compiles each source its shapes print once."""
    groups: dict[tuple[Any, ...], list[tuple[Config, Shape, str]]] = {}
    for c, shape, dtype in work:
        groups.setdefault((c.tile, c.layout, c.transform, c.raster, dtype), []).append((c, shape, dtype))
    import multiprocessing as mp

    # NOTE: spawned, not forked: the parent may hold a CUDA context, which a forked child must not touch
    with ProcessPoolExecutor(max_workers=max(1, processes), mp_context=mp.get_context("spawn")) as pool:
        return [e for errors in pool.map(_precompile_group, [groups[g] for g in sorted(groups)]) for e in errors]


def stale(table: Table, kernels: str, dtype: str = "float16") -> dict[Shape, list[Config]]:
    """The ``dtype`` shapes of ``table`` not timed on ``kernels`` (a :func:`~ctgraph.select.fit.kernel_hash`; shapes
    whose hash was not recorded included), each with the configs it timed: what ``tune --retime`` times again."""
    out: dict[Shape, list[Config]] = {}
    for name, entry in sorted(table.entries.items()):
        m, n, k, kind = parse_key(name)
        if kind == dtype and entry.kernels != kernels:
            configs = [c for c, _ in entry.timed()]
            if configs:
                out[(m, n, k)] = configs
    return out


def sample(table: Table, fraction: float) -> Table:
    """A seeded ``fraction`` (0 < fraction <= 1) of ``table``'s shapes, at least one: the first of its keys shuffled
    with a fixed seed. The draw depends on the keys alone, so a stopped ``tune --retime --fraction`` goes on with
    the same shapes, and a larger fraction later holds a smaller one's (it times only the shapes added)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"tune --retime: --fraction must be in (0, 1], the share of the table to time, got {fraction}")
    keys = sorted(table.entries)
    random.Random(0).shuffle(keys)
    kept = keys[: max(1, round(fraction * len(keys)))]
    return Table(table.device, {k: table.entries[k] for k in sorted(kept)})


def timed_before(path: Path, out: Path, device: str, kernels: str) -> Table:
    """The entries of ``device`` timed on ``kernels`` that an earlier ``--retime`` from ``path`` to ``out`` left:
    in ``out`` (where it is another file) and in its workers' parts (``out.part<g>.json``, which a stopped run
    leaves). ``tune --retime`` keeps them, so a retime stopped by a time limit goes on where it stopped."""
    found = [out] if out.is_file() and out.resolve() != path.resolve() else []
    found += sorted(out.parent.glob(out.with_suffix(".part*.json").name))  # named as run() names them
    kept: dict[str, Entry] = {}
    for p in found:
        t = read_table(p)
        if t.device == device:
            kept |= {k: e for k, e in t.entries.items() if e.kernels == kernels}
    return Table(device, kept)


def tune(
    shapes: list[Shape],
    top: int = 8,
    extra: int = 4,
    dtype: str = "float16",
    progress: bool = True,
    part: Path | None = None,
    rounds: int = 1,
    configs: dict[Shape, list[Config]] | None = None,
) -> Table:
    """Time :func:`configs_for` of each shape (or ``configs[shape]``) on this process's GPU (module docstring), each
    config ``rounds`` times in interleaved rounds (the median kept); ``part``: write the table after each shape,
    whole (a stopped run keeps what it finished). Each entry records the :func:`~ctgraph.select.fit.kernel_hash`
    of the code that timed it."""
    import torch

    from .cache import write_whole
    from .measure import kernel_time
    from .select.autotune import time_configs
    from .select.fit import kernel_hash
    from .select.resolve import device_target

    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    target = device_target("cuda")
    kernels = kernel_hash()
    table = Table(target.name)
    for i, shape in enumerate(shapes):
        m, n, k = shape
        t0 = time.time()
        tdt = getattr(torch, dtype)
        A, B = torch.randn(m, k, device="cuda", dtype=tdt), torch.randn(k, n, device="cuda", dtype=tdt)
        D = torch.empty(m, n, device="cuda", dtype=tdt)
        cublas = kernel_time(partial(torch.matmul, A, B, out=D))
        del A, B, D
        build = partial(_build, shape=shape, dtype=dtype)
        timed = configs[shape] if configs is not None else configs_for(shape, target, top, extra, dtype)
        times = time_configs(m, n, k, dtype, timed, build, rounds)
        seconds = {c.name: t for c, t in times.items() if math.isfinite(t)}
        for c in (c for c, t in times.items() if not math.isfinite(t)):
            print(f"{m}x{n}x{k} {c.name}: did not build or run", file=sys.stderr, flush=True)
        if seconds:
            best = min(seconds, key=seconds.__getitem__)
            entry = Entry(Config.parse(best), tuple(sorted(seconds.items())), cublas, kernels)
            table.entries[key(m, n, k, dtype)] = entry
            if progress:
                print(
                    f"[{i + 1}/{len(shapes)}] {m}x{n}x{k}: {best} {seconds[best] * 1e6:.1f} us, cuBLAS "
                    f"{cublas * 1e6:.1f} us ({cublas / seconds[best]:.2f}x), {time.time() - t0:.1f} s",
                    flush=True,
                )
        if part is not None:
            write_whole(part, table.to_json())
    return table


def _build(config: Config, shape: Shape, dtype: str) -> Any:
    from .api import compile_config

    return compile_config(config, *shape, dtype, build=False)  # built at its first launch (time_configs)


def _worker(args: tuple[str, list[Shape], int, int, str, str, int, dict[Shape, list[Config]] | None]) -> str:
    gpu, shapes, top, extra, dtype, part, rounds, configs = args
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    tune(shapes, top, extra, dtype, progress=True, part=Path(part), rounds=rounds, configs=configs)
    return part


def run(
    shapes: list[Shape],
    out: Path,
    top: int = 8,
    extra: int = 4,
    dtype: str = "float16",
    shard: tuple[int, int] = (0, 1),
    gpus: int | None = None,
    compile_processes: int | None = None,
    rounds: int = 1,
    configs: dict[Shape, list[Config]] | None = None,
) -> Table:
    """This host's share of ``shapes`` (``shard``) over its GPUs, one spawned worker each, every config (those of
    :func:`configs_for`, or ``configs[shape]``) timed in ``rounds`` interleaved rounds; the merged table is written
    to ``out`` (and the workers' parts beside it)."""
    import multiprocessing as mp

    from .select.resolve import device_target

    check_options(rounds, top, extra, shard)
    i, n = shard
    mine = shapes[i::n]
    if gpus is None:
        import torch

        gpus = torch.cuda.device_count()
    if gpus < 1:
        raise RuntimeError("tune needs a GPU: torch sees none")
    devices = [knobs.visible_device(g) for g in range(gpus)]
    target = device_target("cuda")
    chosen = configs or {s: configs_for(s, target, top, extra, dtype) for s in mine}
    work = [(c, s, dtype) for s in mine for c in chosen[s]]
    t0 = time.time()
    errors = precompile(work, compile_processes or os.cpu_count() or 1)
    print(f"compiled the kernels of {len(work)} timings in {time.time() - t0:.0f} s ({len(errors)} failed)", flush=True)
    for e in errors[:20]:
        print("  " + e, file=sys.stderr)
    parts = [str(out.with_suffix(f".part{g}.json")) for g in range(gpus)]
    jobs = [  # each worker times the configs compiled above: they are ranked once, here
        (devices[g], mine[g::gpus], top, extra, dtype, parts[g], rounds, {s: chosen[s] for s in mine[g::gpus]})
        for g in range(gpus)
    ]
    with ProcessPoolExecutor(max_workers=gpus, mp_context=mp.get_context("spawn")) as pool:
        list(pool.map(_worker, jobs))
    return merge([Path(p) for p in parts if Path(p).exists()], out)


def merge(paths: list[Path], out: Path | None = None) -> Table:
    """One table of several (shards, workers); a shape in two keeps the later file's entry."""
    from .cache import write_whole

    tables = [read_table(p) for p in paths]
    if not tables:
        raise ValueError("merge: no tables given")
    devices = {t.device for t in tables}
    if len(devices) > 1:
        raise ValueError(f"merge: tables of different devices {sorted(devices)}; merge one device at a time")
    table = tables[0]
    for t in tables[1:]:
        table = table.merged(t)
    if out is not None:
        write_whole(out, table.to_json())
    return table
