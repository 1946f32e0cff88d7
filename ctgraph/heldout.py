"""``python -m ctgraph heldout``: the default path against cuBLAS on a shape set, as a user calls it.

For every shape: ``ctgraph.compile(ctgraph.gemm(m, n, k, macro_tile="auto"), transform="auto")`` (with
``--autotune``, its first call times the ranker's top candidates) and ``torch.matmul`` (cuBLAS, fp16, fp32
accumulation, reduced-precision reduction off), timed in ``--rounds`` interleaved rounds (2 by default), cuBLAS
first in even rounds and last in odd ones (:func:`~ctgraph.measure.in_turn`; an odd count is warned of); two
times each (:mod:`ctgraph.measure`): **kernel** (CUDA-graph replay) and **call** (events around back-to-back Python
calls). The ratio is taken per round (``cublas_r / ours_r``) and its median kept per shape.

The summary per set (:func:`summary`): geomean of the kernel-time ratios, p10, the shapes below 0.9x and 0.8x, the
worst, the call-time geomean, and per kind of shape (:func:`by_kind`: skinny, small, large); with ``--regret N``,
the ranker's first ``N`` candidates are timed too, and the regret (chosen / fastest of them), the fastest config
and every timed config's seconds (``timed``, JSON: :func:`timed_of`) written; the selection's stability under +8
and +64 on every dimension (the share of shapes whose tile, layout and transform stay the same, and what keeping
the old choice would cost where it changes, by the ranker's prices: :class:`Stability`) needs no GPU;
``--summarize`` prints the summary of a CSV an earlier run wrote, ``--against OLD`` compares it with another run's
(:func:`compare`: another commit, device or option), and ``--plot`` draws its shapes
(:func:`ctgraph.plot.plot_heldout`). Shapes are spread over the visible GPUs, one spawned worker
each; every shape's two kernels run on one GPU, so each ratio is taken on one device. Each worker writes its rows to
``OUT.part<gpu>.csv`` as it goes (what a run that is killed leaves); a run that finishes merges them into ``OUT`` and
removes them.

``python -m ctgraph choose`` writes what the default path would run on a known device, without a GPU
(:func:`choices`), and with ``--against`` only the shapes whose config a change moved (:func:`changed`): the fresh
draws to time a change on, before and after it.
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import knobs
from .arguments import count, positive_int
from .select.shapes import read_rows, shape_of

if TYPE_CHECKING:
    from .config import Config
    from .select import Selection
    from .select.candidates import Supports
    from .target import Target

__all__ = [
    "KINDS",
    "RESULT_COLUMNS",
    "Stability",
    "by_kind",
    "cached",
    "changed",
    "check_options",
    "choices",
    "chosen_by",
    "compare",
    "flip_costs",
    "kind",
    "matches_float64",
    "run",
    "stability",
    "summary",
    "timed_json",
    "timed_of",
]

Shape = tuple[int, int, int]


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(x for x in xs if math.isfinite(x))
    if not xs:
        return math.nan
    i = q * (len(xs) - 1)
    lo = math.floor(i)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (i - lo)


def matches_float64(D: Any, A: Any, B: Any) -> bool:
    """Whether ``D`` (torch tensors, any device) is ``A @ B`` within fp16's reach of the product in float64:
    ``|D - A B| <= 2e-2 |A B| + 2e-2 sqrt(k) / 8`` everywhere (``A B``'s entries of N(0, 1) operands spread as
    ``sqrt(k)``; a wrong index or a lost K chunk is off by that much). Against float64, not against cuBLAS, which
    can stray further: on 544 x 232 x 23048 (H200, 2026-11-28) its output was 16.1 off where ours was 0.25 off, the
    fp16 output's rounding."""
    import torch

    k = A.shape[-1]
    return bool(torch.allclose(D.double(), A.double() @ B.double(), rtol=2e-2, atol=2e-2 * math.sqrt(k) / 8))


def _time_shape(shape: Shape, rounds: int, autotune: bool, regret: int) -> dict[str, Any]:
    import torch

    from ctgraph import api
    from ctgraph.gemm import gemm
    from ctgraph.measure import call_time, in_turn, kernel_time

    m, n, k = shape
    A = torch.randn(m, k, device="cuda", dtype=torch.float16)
    B = torch.randn(k, n, device="cuda", dtype=torch.float16)
    D = torch.empty(m, n, device="cuda", dtype=torch.float16)
    D2 = torch.empty(m, n, device="cuda", dtype=torch.float16)
    t0 = time.time()
    kern = api.compile(gemm(m, n, k, macro_tile="auto"), transform="auto", target="cuda", autotune=autotune)
    setup = time.time() - t0

    def ours() -> Any:
        return kern(A, B, out=D)  # on torch's current stream

    def cublas() -> Any:
        return torch.matmul(A, B, out=D2)

    kr, cr, ko, co = [], [], [], []
    for r in range(rounds):
        timed = {fn: (kernel_time(fn), call_time(fn)) for fn in in_turn([cublas, ours], r)}
        (kc, cc), (kx, cx) = timed[cublas], timed[ours]
        kr.append(kc / kx)
        cr.append(cc / cx)
        ko.append(kx)
        co.append(kc)
    ok = matches_float64(D, A, B)
    row = {
        "m": m,
        "n": n,
        "k": k,
        "config": kern.selection.config.name if kern.selection else "",
        "reason": kern.selection.reason if kern.selection else "",
        "kernel_ratio": statistics.median(kr),
        "call_ratio": statistics.median(cr),
        "ours_us": statistics.median(ko) * 1e6,
        "cublas_us": statistics.median(co) * 1e6,
        "setup_s": round(setup, 2),
        "close": ok,
        "regret": math.nan,
        "fastest": "",
        "predicted_us": predicted_us(kern.selection),
    }
    if regret:
        from ctgraph.api import compile_config
        from ctgraph.select.autotune import time_configs

        ranked = [c for c, _ in kern.selection.ranked[:regret]] if kern.selection else []
        times = time_configs(m, n, k, "float16", ranked, lambda c: compile_config(c, m, n, k, build=False))
        chosen = kern.selection.config if kern.selection else None
        if chosen is not None:  # the chosen config's seconds are the run's own
            times[chosen] = statistics.median(ko)
        fastest, best = min(times.items(), key=lambda ct: ct[1], default=(chosen, statistics.median(ko)))
        row["regret"] = statistics.median(ko) / best
        row["fastest"] = fastest.name if fastest is not None else ""
        row["timed"] = timed_json(times)
    return row


def _worker(args: tuple[str, list[Shape], int, bool, int, str]) -> str:
    gpu, shapes, rounds, autotune, regret, part = args
    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    import torch

    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    rows = []
    for i, shape in enumerate(shapes):
        try:
            row = _time_shape(shape, rounds, autotune, regret)
        except Exception as e:  # a shape that fails is reported, not dropped
            row = {
                "m": shape[0],
                "n": shape[1],
                "k": shape[2],
                "config": "",
                "reason": f"error: {e}",
                "kernel_ratio": math.nan,
                "call_ratio": math.nan,
                "close": False,
            }
        rows.append(row)
        print(
            f"[gpu{gpu} {i + 1}/{len(shapes)}] {shape}: {row.get('config')} kernel {row['kernel_ratio']:.3f}x "
            f"call {row['call_ratio']:.3f}x",
            flush=True,
        )
        _write(rows, Path(part))
    return part


FIELDS = (
    "m",
    "n",
    "k",
    "config",
    "reason",
    "kernel_ratio",
    "call_ratio",
    "ours_us",
    "cublas_us",
    "setup_s",
    "close",
    "regret",
    "fastest",
    "predicted_us",
    "timed",
)


def _write(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


RESULT_COLUMNS = ("m", "n", "k", "kernel_ratio")  # what a summary of a run reads


def read(path: Path, needs: tuple[str, ...] = ("m", "n", "k")) -> list[dict[str, Any]]:
    """The rows of a CSV that ``heldout`` or ``choose`` wrote, with the columns of ``needs`` at least (a
    ``ValueError`` naming the file otherwise), ratios and times as floats."""
    rows: list[dict[str, Any]] = list(read_rows(path, needs))
    for r in rows:
        for key in ("kernel_ratio", "call_ratio", "regret", "ours_us", "predicted_us"):
            r[key] = float(r.get(key) or "nan")  # NOTE: runs before the ranker's level wrote no predicted_us
    return rows


def timed_json(times: dict[Any, float]) -> str:
    """A ``--regret`` row's ``timed`` column: the seconds of every config timed for the shape, as JSON by config name
    (those that did not build or run left out), so that another ranking can be scored on the run later, without a
    GPU (:func:`timed_of`)."""
    return json.dumps({c.name: t for c, t in times.items() if math.isfinite(t)}, sort_keys=True)


def timed_of(row: dict[str, Any]) -> dict[str, float]:
    """The seconds of each config a ``--regret`` row timed (:func:`timed_json`), by config name; none for other rows
    and for runs before the column."""
    return {str(c): float(t) for c, t in json.loads(row.get("timed") or "{}").items()}


def predicted_us(selection: Any) -> float:
    """The ranker's price of the chosen config, in microseconds: its predicted seconds among the candidates the
    ranker kept (``selection.ranked``); nan where it is not among them (a measured entry the ranker ranks lower)."""
    if selection is None:
        return math.nan
    return next((t * 1e6 for c, t in selection.ranked if c == selection.config), math.nan)


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Geomean, p10, counts below 0.9x, 0.85x (the held-out target's floor) and 0.8x, worst; call time's geomean,
    p10 and count below 0.85x; regret geomean (where timed); and how the kernel times stand to the ranker's prices,
    the p10 and p90 of ``ours_us / predicted_us`` (where priced)."""
    kr = [r["kernel_ratio"] for r in rows]
    cr = [r["call_ratio"] for r in rows]
    priced = [r["ours_us"] / r["predicted_us"] for r in rows if r.get("ours_us", 0) > 0 < r.get("predicted_us", 0)]
    return {
        "shapes": len(rows),
        "geomean": _geomean(kr),
        "p10": _quantile(kr, 0.1),
        "below_0.9": sum(x < 0.9 for x in kr),
        "below_0.85": sum(x < 0.85 for x in kr),
        "below_0.8": sum(x < 0.8 for x in kr),
        "worst": min((x for x in kr if math.isfinite(x)), default=math.nan),
        "call_geomean": _geomean(cr),
        "call_p10": _quantile(cr, 0.1),
        "call_below_0.85": sum(x < 0.85 for x in cr),
        "regret": _geomean([r["regret"] for r in rows if math.isfinite(r.get("regret", math.nan))]),
        "failed": sum(not math.isfinite(x) for x in kr) + sum(str(r.get("close")) == "False" for r in rows),
        "time_over_predicted_p10": _quantile(priced, 0.1),
        "time_over_predicted_p90": _quantile(priced, 0.9),
    }


def chosen_by(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many rows' configs each source chose, read off their reasons: "ranker" (or "analytic model"), "shipped
    entry", "autotune cache" (a winner an earlier autotune run left: a default-path figure should have none),
    "autotuned on first call", "measured" (a measured entry in a CSV written before the reasons named their file),
    "error", "unrecorded" (no reason); each with ", by call time" where that objective chose
    (``CTGRAPH_OBJECTIVE=call``)."""

    from ctgraph.select.objective import BY_CALL

    def source(reason: str) -> str:
        if BY_CALL in reason:
            return source(reason.replace(BY_CALL, "")) + BY_CALL
        if reason.startswith("measured on"):
            ends = {"autotune cache)": "autotune cache", "shipped)": "shipped entry"}
            return next((name for end, name in ends.items() if reason.endswith(end)), "measured")
        return "error" if reason.startswith("error") else reason.split(" (")[0] or "unrecorded"

    return dict(sorted(Counter(source(str(r.get("reason", ""))) for r in rows).items()))


def compare(rows: list[dict[str, Any]], before: list[dict[str, Any]], movers: int = 5) -> dict[str, Any]:
    """``rows`` against an earlier run ``before`` of the same shapes (another commit, device or option), on the
    shapes both hold: the geomean of the per-shape quotients (new ratio / old ratio: how a second device's ratios
    stand to the first's); the shapes whose config changed, their geomean before and after; those whose config
    stayed, before and after (the spread between runs, against which a change is read); the changed shapes by call
    time, before and after (where a change trades one time for the other, as the call objective does); and the
    ``movers`` changed shapes that moved most each way, as ``(shape, old config, new config, old ratio, new
    ratio)``."""
    old = {shape_of(r): r for r in before}
    both = [(r, old[shape_of(r)]) for r in rows if shape_of(r) in old]
    changed = [(r, o) for r, o in both if r["config"] != o["config"]]
    same = [(r, o) for r, o in both if r["config"] == o["config"]]

    def moved(pair: tuple[dict[str, Any], dict[str, Any]]) -> float:
        r, o = pair
        return math.log(r["kernel_ratio"] / o["kernel_ratio"]) if r["kernel_ratio"] > 0 < o["kernel_ratio"] else 0.0

    def row(r: dict[str, Any], o: dict[str, Any]) -> tuple[str, str, str, float, float]:
        shape = f"{r['m']}x{r['n']}x{r['k']}"
        return shape, o["config"], r["config"], round(o["kernel_ratio"], 3), round(r["kernel_ratio"], 3)

    ordered = sorted(changed, key=moved)
    return {
        "shapes": len(both),
        "quotient": _geomean([r["kernel_ratio"] / o["kernel_ratio"] for r, o in both if o["kernel_ratio"] > 0]),
        "changed": len(changed),
        "changed_before": _geomean([o["kernel_ratio"] for _, o in changed]),
        "changed_after": _geomean([r["kernel_ratio"] for r, _ in changed]),
        "changed_call_before": _geomean([o["call_ratio"] for _, o in changed]),
        "changed_call_after": _geomean([r["call_ratio"] for r, _ in changed]),
        "same": len(same),
        "same_before": _geomean([o["kernel_ratio"] for _, o in same]),
        "same_after": _geomean([r["kernel_ratio"] for r, _ in same]),
        "gained": [row(*p) for p in reversed(ordered[-movers:]) if moved(p) > 0],
        "lost": [row(*p) for p in ordered[:movers] if moved(p) < 0],
    }


KINDS = ("skinny", "small", "large")


def kind(m: int, n: int, k: int) -> str:
    """A shape's kind, as docs/selection.md splits the sample: ``skinny`` (``min(m, n) <= 128``: thin outputs and small
    batches), else ``small`` (``m n k < 2^30``: a few microseconds of work), else ``large``."""
    if min(m, n) <= 128:
        return "skinny"
    return "small" if m * n * k < 2**30 else "large"


def by_kind(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """:func:`summary`'s shapes, geomean and p10 per :func:`kind` (the kinds with no shape left out)."""
    out = {}
    for name in KINDS:
        mine = [r for r in rows if kind(*shape_of(r)) == name]
        if mine:
            kr = [r["kernel_ratio"] for r in mine]
            out[name] = {"shapes": len(mine), "geomean": _geomean(kr), "p10": _quantile(kr, 0.1)}
    return out


@dataclass(frozen=True)
class Stability:
    """The selection under a move of ``+delta`` on m, n and k: ``kept``, the share of shapes whose tile, layout and
    transform stay the same; ``costs``, for each shape whose choice changes, what keeping the old one would cost at
    the moved shape by the ranker's prices: the old tile, layout and transform on their best grid and tile order
    there (:func:`~ctgraph.select.select_schedule`) over the new choice (near 1: a near tie, and the change costs
    little; below 1 where the old one is not among the candidates there; nan where the moved shape takes another
    path, or the old tile, layout or transform does not run there, or the new choice is a measured entry the
    ranker does not price)."""

    kept: float
    costs: tuple[float, ...]


def stability(shapes: list[Shape], delta: int, device: str | None = None) -> Stability:
    """:class:`Stability` of the default path's choice on ``shapes`` at ``+delta`` (selected for the known device
    ``device``, None: the H100 SXM; no GPU needed)."""
    from ctgraph.select import select_schedule

    same, costs, dtype = 0, [], "float16"
    for m, n, k in shapes:
        a = _selection((m, n, k), device).config
        chosen = _selection((m + delta, n + delta, k + delta), device)
        if _choice(a) == _choice(chosen.config):
            same += 1
            continue
        target, path, supports = _on(device, n + delta, k + delta, dtype)
        kept = math.nan  # unless the old tile and layout run on the moved shape's path, the one the old shape took
        if path == _on(device, n, k, dtype)[1] and supports(a.tile, dtype, a.layout, path):
            old = select_schedule(m + delta, n + delta, k + delta, dtype, a.tile, a.layout, target, a.transform)
            kept = old.ranked[0][1] if old.ranked else math.nan
        costs.append(kept * 1e6 / predicted_us(chosen))
    return Stability(same / len(shapes), tuple(costs))


def flip_costs(moved: Stability) -> str:
    """A line on :attr:`Stability.costs`: how many shapes changed their choice, the median and p90 of what keeping
    the old one would cost by the ranker's prices, how many changes were near ties (within 2% either way), and how
    many priced the old choice lower still."""
    costs = [c for c in moved.costs if math.isfinite(c)]
    if not moved.costs:
        return "no shape changed its choice"
    line = f"{len(moved.costs)} changed"
    if costs:
        median, p90 = statistics.median(costs), _quantile(costs, 0.9)
        line += f"; keeping the old choice would cost, by the ranker's prices, median {median:.3f}x, p90 {p90:.3f}x"
        line += f"; {sum(abs(math.log(c)) < math.log(1.02) for c in costs)} within 2% (near ties)"
        cheaper = sum(c <= 1 / 1.02 for c in costs)
        line += f"; {cheaper} cheaper (the old one not among the candidates there)" if cheaper else ""
    unpriced = len(moved.costs) - len(costs)
    return line + (f" ({unpriced} not priced)" if unpriced else "")


def _choice(config: Config) -> tuple[Any, ...]:
    """What :func:`stability` compares: a config's tile, layout and transform (its grid and tile order follow the
    shape)."""
    return config.tile, config.layout, config.transform


def _on(device: str | None, n: int, k: int, dtype: str) -> tuple[Target, str, Supports]:
    """The known device ``device`` (None: the H100 SXM), the path the operands' alignment allows there, and what
    the CUDA backend runs."""
    from ctgraph.backends import backend
    from ctgraph.select.resolve import path_of
    from ctgraph.target import known_target

    target = known_target(device)
    return target, path_of(target, dtype, k, n, {}), backend("cuda").supports


def _selection(shape: Shape, device: str | None, dtype: str = "float16") -> Selection:
    """The default path's :class:`~ctgraph.select.Selection` for ``shape`` on the known device ``device`` (None:
    the H100 SXM), on the path the operands' alignment allows, without a GPU."""
    from ctgraph.select import select

    m, n, k = shape
    return select(m, n, k, dtype, *_on(device, n, k, dtype))


def choices(shapes: list[Shape], device: str | None = None, dtype: str = "float16") -> list[dict[str, Any]]:
    """The config the default path runs for each shape on the known device ``device`` (default: the H100 SXM) and
    the reason, as :func:`run` records them, decided without a GPU (:func:`_selection`); with the ranker's price of
    it (``predicted_us``, :func:`predicted_us`), the config it priced next (``runner_up``) and how much dearer
    (``margin``: the runner-up's price over the chosen one's; near 1, the ranker is least sure, and autotune or a
    probe has the most to find)."""
    out = []
    for m, n, k in shapes:
        chosen = _selection((m, n, k), device, dtype)
        price = predicted_us(chosen)
        runner = next(((c, t) for c, t in chosen.ranked if c != chosen.config), None)
        out.append(
            {
                "m": m,
                "n": n,
                "k": k,
                "config": chosen.config.name,
                "reason": chosen.reason,
                "predicted_us": round(price, 3),
                "runner_up": runner[0].name if runner else "",
                "margin": round(runner[1] * 1e6 / price, 4) if runner and math.isfinite(price) else math.nan,
            }
        )
    return out


def changed(rows: list[dict[str, Any]], before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of ``rows`` whose config differs from ``before``'s for the same shape (a CSV that :func:`choices`
    or :func:`run` wrote, at another commit or with another correction): the shapes a change moves, to time before
    and after it. Shapes ``before`` lacks are left out."""
    old = {shape_of(r): r["config"] for r in before}
    return [r for r in rows if shape_of(r) in old and old[shape_of(r)] != r["config"]]


def precompile(shapes: list[Shape], processes: int, autotune: bool, regret: int) -> None:
    """nvcc ahead of timing for every shape's chosen config (and the candidates autotune or ``regret`` will time)."""
    from ctgraph import tune
    from ctgraph.select.autotune import TOP
    from ctgraph.select.resolve import device_target

    target = device_target("cuda")
    top = max(regret, TOP if autotune else 1)
    work = [(c, s, "float16") for s in shapes for c in tune.configs_for(s, target, top, 0, objective=None)]
    work += [(_chosen(s), s, "float16") for s in shapes]
    tune.precompile(work, processes)


def _chosen(shape: Shape) -> Any:
    from ctgraph import api
    from ctgraph.gemm import gemm

    kern = api.compile(gemm(*shape, macro_tile="auto"), transform="auto", target="cuda", build=False)
    assert kern.selection is not None
    return kern.selection.config


def cached(shapes: list[Shape], device: str, dtype: str = "float16") -> int:
    """How many of ``shapes`` have an entry in the user's autotune cache for ``device`` (which the default path
    then runs in place of the ranker's choice)."""
    from ctgraph.select import cache

    table = cache.load_user(device)
    return sum(table.get(*s, dtype) is not None for s in shapes)


def _warn_cached(shapes: list[Shape], device: str) -> None:
    from ctgraph.select import cache

    found = cached(shapes, device)
    if found:
        print(
            f"warning: {found} of the {len(shapes)} shapes have entries in the autotune cache "
            f"{cache.user_path(device)} (an earlier --autotune run?): they run those entries, not the ranker's "
            "choice; set CTGRAPH_CACHE_DIR to an empty folder to time the default path",
            file=sys.stderr,
            flush=True,
        )


def check_options(rounds: int, regret: int, prefix: str = "heldout: ") -> None:
    """A run's ``rounds`` (at least one) and ``regret`` (0: none; else how many of the ranker's first candidates to
    time), refused before any work with a ``ValueError`` naming them (``prefix``: how the caller spells them)."""
    positive_int(f"{prefix}rounds", rounds)
    count(f"{prefix}regret", regret)


def run(
    shapes: list[Shape], out: Path, rounds: int = 2, autotune: bool = False, regret: int = 0, gpus: int | None = None
) -> list[dict[str, Any]]:
    """Time every shape (module docstring) over the visible GPUs; the rows, also written to ``out`` (CSV)."""
    import multiprocessing as mp

    check_options(rounds, regret)
    if rounds > 1 and rounds % 2:
        print(
            f"warning: {rounds} rounds put cuBLAS first in {rounds // 2 + 1} of them and ctgraph in {rounds // 2}: "
            "an even count gives each the first place as often (a long kernel meets the GPU as the other left it)",
            file=sys.stderr,
            flush=True,
        )

    import torch

    gpus = gpus or torch.cuda.device_count()
    if gpus < 1:
        raise RuntimeError("heldout needs a GPU: torch sees none")
    devices = [knobs.visible_device(g) for g in range(gpus)]
    if not autotune:
        from ctgraph.select.resolve import device_target

        _warn_cached(shapes, device_target("cuda").name)
    t0 = time.time()
    precompile(shapes, os.cpu_count() or 1, autotune, regret)
    print(f"precompiled in {time.time() - t0:.0f} s", flush=True)
    parts = [str(out.with_suffix(f".part{g}.csv")) for g in range(gpus)]
    jobs = [(devices[g], shapes[g::gpus], rounds, autotune, regret, parts[g]) for g in range(gpus)]
    with ProcessPoolExecutor(max_workers=gpus, mp_context=mp.get_context("spawn")) as pool:
        list(pool.map(_worker, jobs))
    rows = [r for p in parts if Path(p).exists() for r in read(Path(p))]
    order = {s: i for i, s in enumerate(shapes)}
    rows.sort(key=lambda r: order.get(shape_of(r), 0))
    _write(rows, out)
    for p in parts:
        Path(p).unlink(missing_ok=True)
    return rows
