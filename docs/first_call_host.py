"""Host time of a shape's first ``ctgraph.matmul``-like call before the GPU (docs/benchmarks.md): selection,
passes, lowering and the CUDA source, with ``build=False``; median per shape over two sets of 80 fresh shapes."""

import statistics
import time

import ctgraph


def first_call(m: int, n: int, k: int) -> None:
    ctgraph.compile(ctgraph.gemm(m, n, k, macro_tile="auto"), "auto", target="cuda", build=False).source  # noqa: B018


SETS = {
    "varied": [(97 + 61 * i, (768, 4096, 11008, 1024)[i % 4], (4096, 2048, 768, 14336)[i % 4]) for i in range(80)],
    "one layer": [(m, 4096, 4096) for m in range(24, 664, 8)],
}

first_call(64, 64, 64)  # imports and first-use caches
for name, shapes in SETS.items():
    times = []
    for shape in shapes:
        t = time.perf_counter()
        first_call(*shape)
        times.append(time.perf_counter() - t)
    print(f"{name}: {len(shapes)} shapes, median {statistics.median(times) * 1e3:.1f} ms a shape")
