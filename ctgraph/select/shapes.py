"""The held-out protocol: seeded shape sets to fit on, choose on and quote, never the same.

A figure tuned and measured on the same shapes says little (the tuning table's 1.03x cuBLAS fell to 0.86x on fresh
shapes from the same distribution). So the ranker is fitted on **train**, its settings are chosen on **validation**,
and only the frozen **test** set (and the **llm** set) are quoted. Train, validation and test hold no shape of each
other, of the llm set or of the benchmark files (anchors, corpus); the llm set is every layer at fixed row counts and
shares 4096^3 and 8192^3 with the anchors. Every set is drawn from one seeded generator (:func:`draw`) over five
strata:

- ``loguniform``: m, n, k log-uniform in [128, 8192], multiples of 8 (the corpus's distribution);
- ``llm``: m log-uniform in [16, 8192], (n, k) of a transformer layer (:data:`LAYERS`);
- ``skinny``: m or n log-uniform in [16, 256], the others in [256, 16384];
- ``longk``: m, n in [64, 2048], k in [8192, 65536];
- ``unaligned``: as ``loguniform``, with k and n multiples of 8 but not of 64 (rows off the 128-byte lines).

n and k are multiples of 8 in every set (the wgmma path's rows; odd n comes later). The test set is written once to
``ctgraph/data/shapes/test.csv`` and frozen: ``tests/unit/test_shapes.py`` checks that the generator still draws it.
A change is chosen on **fresh** draws (:func:`fresh`, ``python -m ctgraph draw``): the same generator run on past its
set, numbered by draw, so that a probe quoted as "train seed, draws A-B" is the same shapes on any machine.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LAYERS", "SEEDS", "STRATA", "draw", "fresh", "llm_shapes", "read", "read_rows", "shape_of", "write"]

Shape = tuple[int, int, int]

# (n, k) of y = x W for the linear layers of each model: fused QKV, attention output, fused gate/up (or up), down
LAYERS: dict[str, tuple[tuple[int, int], ...]] = {
    "llama3-8b": ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)),
    "llama3-70b": ((10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672)),
    "mistral-7b": ((6144, 4096), (4096, 4096), (14336, 4096), (4096, 14336)),
    "gpt2": ((2304, 768), (768, 768), (3072, 768), (768, 3072)),
    "gpt2-xl": ((4800, 1600), (1600, 1600), (6400, 1600), (1600, 6400)),
}
LLM_ROWS = (16, 128, 1024, 4096, 8192)
STRATA = {"loguniform": 0.4, "llm": 0.2, "skinny": 0.15, "longk": 0.1, "unaligned": 0.15}
SEEDS = {"train": 1, "validation": 2, "test": 3}
SIZES = {"train": 400, "validation": 100, "test": 200}
DATA = Path(__file__).resolve().parents[1] / "data" / "shapes"


def _log_uniform(rng: np.random.Generator, lo: int, hi: int, step: int = 8) -> int:
    x = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    return max(step, round(x / step) * step)


def _one(rng: np.random.Generator, stratum: str) -> Shape:
    lu = _log_uniform
    if stratum == "loguniform":
        return lu(rng, 128, 8192), lu(rng, 128, 8192), lu(rng, 128, 8192)
    if stratum == "llm":
        model = sorted(LAYERS)[rng.integers(len(LAYERS))]
        n, k = LAYERS[model][rng.integers(4)]
        return lu(rng, 16, 8192, 1), n, k
    if stratum == "skinny":
        small, big1, big2 = lu(rng, 16, 256), lu(rng, 256, 16384), lu(rng, 256, 16384)
        return (small, big1, big2) if rng.integers(2) else (big1, small, big2)
    if stratum == "longk":
        return lu(rng, 64, 2048), lu(rng, 64, 2048), lu(rng, 8192, 65536)
    if stratum == "unaligned":
        m, n, k = lu(rng, 128, 8192), lu(rng, 128, 8192), lu(rng, 128, 8192)
        return m, n + 8 if n % 64 == 0 else n, k + 8 if k % 64 == 0 else k
    raise ValueError(f"unknown stratum {stratum!r}; valid: {', '.join(STRATA)}")


def llm_shapes() -> list[Shape]:
    """Every layer of :data:`LAYERS` at every m of :data:`LLM_ROWS` (the LLM benchmark set), in a fixed order."""
    out = [(m, n, k) for model in LAYERS for n, k in LAYERS[model] for m in LLM_ROWS]
    return list(dict.fromkeys(out))


def _stream(name: str) -> Iterator[tuple[str, Shape]]:
    """The seeded generator of set ``name``: ``(stratum, shape)`` without end, the strata in the proportions of
    :data:`STRATA`. Its ``i``-th item is the set's draw ``i`` (counting every draw, kept or not)."""
    if name not in SEEDS:
        raise ValueError(f"unknown shape set {name!r}; valid: {', '.join(SEEDS)}")
    return _draws(np.random.default_rng(SEEDS[name]))


def _draws(rng: np.random.Generator) -> Iterator[tuple[str, Shape]]:
    names, weights = list(STRATA), np.array(list(STRATA.values()))
    while True:
        stratum = names[rng.choice(len(names), p=weights / weights.sum())]
        yield stratum, _one(rng, stratum)


def draw(name: str, count: int | None = None, exclude: set[Shape] | frozenset[Shape] = frozenset()) -> list[Shape]:
    """The seeded set ``name`` (train, validation, test): ``count`` distinct shapes (default :data:`SIZES`), the
    strata in the proportions of :data:`STRATA`, none of ``exclude``."""
    count = SIZES[name] if count is None else count
    out: dict[Shape, None] = {}
    stream = _stream(name)
    while len(out) < count:
        shape = next(stream)[1]
        if shape not in exclude:
            out[shape] = None
    return list(out)


def fresh(
    name: str, start: int, stop: int, bounds: dict[str, tuple[int, int]] | None = None, limit: int = 0
) -> list[tuple[int, Shape, str]]:
    """Draws ``start`` to ``stop - 1`` of set ``name``'s generator (:func:`_stream`), as ``(draw, shape, stratum)``:
    shapes the fit never saw, to probe a change on before the held-out sets. Past the set's own draws (``start`` in
    the millions) they are fresh; a shape of any set or benchmark file is left out all the same, and so is a repeat.
    ``bounds``: inclusive ``(lo, hi)`` for any of ``"m"``, ``"n"``, ``"k"``; ``limit``: at most that many (0: all).
    The documents quote probes as "train seed, draws A-B": this draws them again."""
    stream = _stream(name)
    if not 0 <= start <= stop:
        raise ValueError(f"fresh draws: need 0 <= start <= stop, got {start} and {stop}")
    bounds = bounds or {}
    unknown = set(bounds) - {"m", "n", "k"}
    if unknown:
        raise ValueError(f"fresh draws: bounds are on m, n and k, got {', '.join(sorted(unknown))}")
    if start == stop:
        return []
    held = set().union(*sets().values(), benchmark_shapes())
    out: dict[Shape, tuple[int, Shape, str]] = {}
    for i, (stratum, shape) in enumerate(itertools.islice(stream, stop)):
        if i < start or shape in held or shape in out:
            continue
        if all(lo <= shape["mnk".index(d)] <= hi for d, (lo, hi) in bounds.items()):
            out[shape] = (i, shape, stratum)
            if len(out) == limit:
                break
    return list(out.values())


def shape_of(row: Mapping[str, Any]) -> Shape:
    """The ``(m, n, k)`` of a CSV row (its fields text, or numbers)."""
    return int(row["m"]), int(row["n"]), int(row["k"])


def read_rows(path: str | Path, needs: Sequence[str] = ("m", "n", "k")) -> list[dict[str, str]]:
    """The rows of a CSV with a header, by column name (a UTF-8 byte order mark and spaces around the names allowed);
    a header without every column of ``needs`` is a ``ValueError`` naming the file and the columns."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        names = [name.strip() for name in reader.fieldnames or ()]
        missing = [c for c in needs if c not in names]
        if missing:
            raise ValueError(f"{path}: no column {', '.join(missing)} in its header {','.join(names) or '(empty)'}")
        reader.fieldnames = names
        return list(reader)


def read(path: str | Path) -> list[Shape]:
    """``m,n,k`` rows of a CSV (with a header; other columns ignored). A row that is not three positive integers is
    a ``ValueError`` naming the file and its line."""
    out = []
    for line, row in enumerate(read_rows(path), start=2):
        try:
            shape = shape_of({c: (row[c] or "").strip() for c in "mnk"})
        except ValueError:
            raise ValueError(
                f"{path}, line {line}: m, n and k must be integers, got {row['m']!r}, {row['n']!r}, {row['k']!r}"
            ) from None
        if min(shape) < 1:
            raise ValueError(f"{path}, line {line}: m, n and k must be positive, got {shape}")
        out.append(shape)
    return out


def write(path: str | Path, shapes: Sequence[Sequence[object]], header: Sequence[str] = ("m", "n", "k")) -> Path:
    """Rows of ``header``'s columns (m, n, k first, so :func:`read` takes them back)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(shapes)
    return path


def benchmark_shapes() -> set[Shape]:
    """The shapes of the quoted sets and the benchmark files: what train and validation never hold."""
    bench = DATA
    held = set(llm_shapes())
    for f in ("anchors.csv", "corpus.csv"):
        if (bench / f).exists():
            held |= set(read(bench / f))
    return held


def sets() -> dict[str, list[Shape]]:
    """All four sets: test and llm first, then train and validation drawn around them and each other."""
    test = draw("test", exclude=benchmark_shapes())
    held = benchmark_shapes() | set(test)
    validation = draw("validation", exclude=held)
    train = draw("train", exclude=held | set(validation))
    return {"train": train, "validation": validation, "test": test, "llm": llm_shapes()}
