"""CUDA code generation without a GPU: determinism, nvcc compile-only checks, PTX contents, golden .cu."""

from __future__ import annotations

import ctypes
import re
import warnings
from pathlib import Path

import pytest
import sympy

import ctgraph
from ctgraph.expr import FloorDiv, Mod
from lowering.cuda.driver import LaunchAttribute
from lowering.cuda.hopper import (
    A_STAGE_MIN_BYTES,
    SMEM_LIMIT,
    SPARE_REGS,
    WATCHDOG_NS,
    accumulator_budget,
    d_tail_box,
    hopper_layout,
    k_start,
    launch_registers,
    reduction_launch,
    register_split,
)
from lowering.cuda.nvcc import check_cubin, nvcc_available
from lowering.cuda.options import CudaOptions
from tests.golden.regenerate import seed_cuda_source, seed_hopper_source
from tests.marks import sweep

GOLDEN = Path(__file__).parents[1] / "golden"
needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed (CUDA toolkit)")
# NOTE: the nvcc sweeps keep one case in `make test` (streamk2tile: Stream-K, data-parallel and the fixup in one
# kernel; the first tile or layout) and run the rest in the slow set (`make test-all`): sweep() marks them.
NVCC_TRANSFORMS = sweep([*ctgraph.TRANSFORMS, "splitk_reduce"], "streamk2tile")


def cuda_kernel(
    transform: str, dtype: str = "float16", shape=(1000, 1000, 1000), tile=(128, 128, 32), workgroups=132, **opts
):
    g = ctgraph.gemm(*shape, macro_tile=tile, dtype=dtype)
    return ctgraph.compile(g, transform=transform, workgroups=workgroups, target="cuda", build=False, **opts)


def test_source_needs_no_gpu_and_is_deterministic():
    a, b = cuda_kernel("streamk2tile").source, cuda_kernel("streamk2tile").source
    assert a == b
    assert 'extern "C" __global__' in a


def test_one_source_serves_every_shape():
    assert (
        cuda_kernel("streamk", shape=(1000, 1000, 1000)).source == cuda_kernel("streamk", shape=(4096, 512, 64)).source
    )


def test_index_math_is_integer():
    src = cuda_kernel("streamk").source
    assert "floor(" not in src and "fmod" not in src and "std::" not in src
    assert re.search(r"/ numTilesK\)", src) and re.search(r"% numTilesN\)", src)


@pytest.mark.parametrize(
    ("dtype", "opts"),
    [
        ("float32", {}),
        ("float32", {"vector": False}),
        ("float16", {"mainloop": "mma"}),
        ("float16", {"mainloop": "wgmma"}),
    ],
    ids=str,
)
def test_prelude_declares_only_constants_the_kernels_use(dtype, opts):
    """nvcc warns of an unused ``constexpr`` (#177-D), and pycuda passes the warning on to every compile."""
    src = cuda_kernel("dataparallel", dtype, shape=(1, 1, 1), **opts).source
    names = re.findall(r"constexpr int (\w+) = ", src)
    assert names and all(len(re.findall(rf"\b{name}\b", src)) > 1 for name in names)


def test_bad_tile_for_mma_path():
    with pytest.raises(ValueError, match="BK"):
        _ = cuda_kernel("streamk", tile=(128, 128, 8)).source


@pytest.mark.parametrize(
    ("tile", "dtype", "warps", "stages"),
    [
        ((128, 128, 64), "float16", 4, 3),  # two CTAs of 64 x 64 warp tiles per SM
        ((256, 128, 64), "float16", 8, 4),  # one CTA per SM, same warp tile: 4 x 48 KiB ring
        ((128, 256, 64), "float16", 8, 4),
        ((128, 192, 64), "float16", 8, 4),  # 64 x 48 warp tiles
        ((128, 128, 128), "float16", 4, 2),  # 64 KiB a stage: two CTAs hold no more than 2 each
        ((16, 16, 16), "float16", 1, 3),  # no grid of 4 or more warps divides it
        ((64, 64, 32), "float32", 4, 3),  # the FMA path: 4 warps
        ((256, 128, 64), "float32", 4, 2),  # 96 KiB a stage
    ],
    ids=str,
)
def test_mma_warps_and_stages_follow_the_macro_tile(tile, dtype, warps, stages):
    """Left out, ``warps`` and ``stages`` are chosen for the macro tile; given, they are kept."""
    src = cuda_kernel("dataparallel", dtype, tile=tile, mainloop="mma").source
    assert f"constexpr int THREADS = {32 * warps};" in src
    assert f"warps={warps}, stages={stages}," in src
    kept = cuda_kernel("dataparallel", dtype, tile=tile, mainloop="mma", warps=1, stages=2).source
    assert "constexpr int THREADS = 32;" in kept and "warps=1, stages=2," in kept


def test_mma_tile_no_warp_grid_divides():
    with pytest.raises(ValueError, match=r"\(48, 48, 16\) does not fit the fp16 mma path with 4 warps: it needs"):
        _ = cuda_kernel("streamk", tile=(48, 48, 16), mainloop="mma", warps=4).source


def test_unknown_option():
    with pytest.raises(ValueError, match="unknown CUDA options"):
        _ = cuda_kernel("streamk", bogus=1).source


@pytest.mark.parametrize("cluster", [3, 16, True, -1])
def test_cluster_sizes(cluster):
    with pytest.raises(ValueError, match=r"cluster must be 0 .*, 1, 2, 4 or 8"):
        _ = cuda_kernel("streamk", mainloop="wgmma", cluster=cluster).source
    with pytest.raises(
        ValueError, match=r"multicast='ab' lays a cluster out as 2 x cluster/2: cluster must be 0, 4 or 8"
    ):
        _ = cuda_kernel("streamk", mainloop="wgmma", cluster=2, multicast="ab").source
    with pytest.raises(
        ValueError, match=r"multicast='ba' lays a cluster out as cluster/2 x 2: cluster must be 0, 4 or 8"
    ):
        _ = cuda_kernel("streamk", mainloop="wgmma", cluster=2, multicast="ba").source


def test_default_workgroups_without_build_are_the_known_devices(monkeypatch):
    """Without a GPU to ask, the default grid is what the known device of CTGRAPH_TARGET_DEVICE (default the H100
    SXM) holds at once: one CTA per SM on the wgmma path, resident clusters for clusters."""
    monkeypatch.delenv("CTGRAPH_TARGET_DEVICE", raising=False)
    one = ctgraph.compile(ctgraph.gemm(4096, 4096, 4096, (128, 256, 64)), "streamk", target="cuda", build=False)
    four = ctgraph.compile(ctgraph.gemm(4096, 4096, 4096, (512, 256, 64)), "streamk", target="cuda", build=False)
    assert (one.workgroups, four.workgroups) == (132, 30)
    monkeypatch.setenv("CTGRAPH_TARGET_DEVICE", "NVIDIA H100 PCIe")
    assert ctgraph.compile(ctgraph.gemm(64, 64, 64), "streamk", target="cuda", build=False).workgroups == 114
    monkeypatch.setenv("CTGRAPH_TARGET_DEVICE", "Imaginary GPU")
    with pytest.raises(ValueError, match="unknown target device 'Imaginary GPU'; known: "):
        ctgraph.compile(ctgraph.gemm(64, 64, 64), "streamk", target="cuda", build=False)


def test_golden_seed_cu():
    path = GOLDEN / "seed_streamk2tile.cu"
    assert seed_cuda_source() == path.read_text(), "generated CUDA changed: run `make golden` if intended"


@needs_nvcc
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("transform", sweep(ctgraph.TRANSFORMS, "streamk2tile"))
def test_nvcc_compiles_and_ptx_has_expected_instructions(transform, dtype):
    kern = cuda_kernel(transform, dtype, mainloop="mma")
    assert check_cubin(kern.source, "sm_90a")[:4] == b"\x7fELF"
    ptx = kern.ptx
    if dtype == "float16":
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
        assert "ldmatrix.sync.aligned" in ptx and "cp.async.cg.shared.global" in ptx
    else:
        assert "fma.rn.f32" in ptx
    fixup = ("ld.acquire.gpu", "red.release.gpu")
    if transform == "dataparallel":
        assert not any(op in ptx for op in fixup)
    else:
        assert all(op in ptx for op in fixup)


SPLITS = {"splitk": {"split": 4}, "splitk_reduce": {"split": 4}}


@needs_nvcc
@pytest.mark.parametrize("tile", sweep([(128, 128, 32), (128, 256, 64), (64, 64, 32)]), ids=str)
@pytest.mark.parametrize("transform", sweep([*ctgraph.TRANSFORMS, "splitk", "splitk_reduce"], "streamk2tile"))
def test_hopper_source_compiles_and_ptx_has_wgmma_tma_mbarrier(transform, tile):
    kern = cuda_kernel(transform, tile=tile, workgroups=1024, mainloop="wgmma", **SPLITS.get(transform, {}))
    assert kern.program.variant == "wgmma"
    assert check_cubin(kern.source, "sm_90a")[:4] == b"\x7fELF"
    ptx = kern.ptx
    for op in (
        f"wgmma.mma_async.sync.aligned.m64n{tile[1]}k16.f32.f16.f16",
        "wgmma.wait_group",
        "cp.async.bulk.tensor.2d",
        "mbarrier.try_wait.parity",
        "mbarrier.arrive.expect_tx",
        "setmaxnreg",
        "griddepcontrol.wait",
    ):
        assert op in ptx, op
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    # the epilogue stores D by TMA from staged boxes (split-K's first kernel only stores partials)
    tma_store = (
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
        "fence.proxy.async.shared::cta",
        "cp.async.bulk.wait_group.read",
    )
    assert all(op in ptx for op in tma_store) == (transform != "splitk_reduce")
    fixup = ("ld.acquire.gpu", "red.release.gpu")
    spins = transform not in ("dataparallel", "splitk_reduce")
    assert all(op in ptx for op in fixup) == spins and any(op in ptx for op in fixup) == spins


@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
def test_hopper_kernels_wait_for_the_previous_kernel_before_global_memory(transform):
    """Programmatic dependent launch: each entry point (split-K's reduction too) waits for the previous kernel
    before its first read or write of an operand, the workspace or a flag; only shared-memory setup and the tensor
    maps' prefetch (kernel parameters) come before. A kernel that stores D lets the next launch once its producer
    has issued its last load, before the math warpgroups' program (``_launch_dependents``); split-K's partials kernel
    and its reduction never do."""
    src = cuda_kernel(transform, tile=(128, 256, 64), workgroups=1024, mainloop="wgmma", **SPLITS.get(transform, {}))
    kernels = src.source.split('extern "C" __global__')[1:]
    assert len(kernels) == (2 if transform == "splitk_reduce" else 1)
    for body in kernels:
        body = body.split("{", 1)[1]  # after the signature
        wait = body.index("griddep_wait();")
        touched = [body.find(x) for x in ("workspace", "flags", "tma_", "ld_global", "C[", "D[") if x in body]
        assert all(at > wait for at in touched), transform
        assert body.count("griddep_wait();") == 1
        if "tma_store_2d(" in body:  # stores D
            trigger, math = body.index("griddep_launch();"), body.index("setmaxnreg_inc<")
            assert body.count("griddep_launch();") == 1 and body.rindex("tma_load_2d(", 0, math) < trigger < math
        else:
            assert "griddep_launch();" not in body, transform
    assert ("griddep_launch();" in src.source) == (transform != "splitk_reduce")


def test_pdl_option_is_a_bool():
    with pytest.raises(ValueError, match="pdl must be True or False"):
        _ = cuda_kernel("streamk", mainloop="wgmma", pdl=1).source


def test_launch_attribute_matches_cuda_h():
    """``CUlaunchAttribute``: a 4-byte id, then a 64-byte value union aligned to 8."""
    assert ctypes.sizeof(LaunchAttribute) == 72 and LaunchAttribute.value.offset == 8


def test_hopper_source_is_deterministic_and_shape_free():
    def src(shape):
        return cuda_kernel("streamk2tile", shape=shape, tile=(128, 256, 64), mainloop="wgmma").source

    assert src((1000, 1000, 1000)) == src((1000, 1000, 1000)) == src((8192, 64, 4096))


@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk"])
def test_hopper_producer_loads_iteration_0_before_the_trip_count(transform):
    """Every K loop is shown nonempty (``ControlGraph.enters``), so the producer issues its first boxes before
    the serial trip-count math, and its loop starts at 1; the consumers still count first."""
    src = cuda_kernel(
        transform, tile=(128, 256, 64), workgroups=1024, mainloop="wgmma", **SPLITS.get(transform, {})
    ).source
    producer, consumers = src.split("setmaxnreg_dec<PRODUCER_REGS>();")[1].split("setmaxnreg_inc<CONSUMER_REGS>();")
    loops = len(re.findall(r"\n\s*for \(forK\w* = 1; forK\w* < count_;", producer))
    assert loops == len(re.findall(r"for \(forK\w* = 0; forK\w* < count_;", consumers)) >= 1
    for section in producer.split("iteration 0 goes out before the trip count")[1:]:
        assert section.index("tma_load_2d") < section.index("// K loop: trip count") < section.index("= 1; forK")
    assert "goes out before the trip count" not in consumers


def test_k_start_finds_where_a_k_loop_starts_when_k_advances_with_its_counter():
    f, x, n, w = (sympy.Symbol(s, integer=True, nonnegative=True) for s in ("forK", "forTile", "numTilesK", "wg"))
    assert k_start(Mod(f + x + 3 * w, n), f) == Mod(x + 3 * w, n)  # Stream-K / data-parallel: one tile per K loop
    assert k_start(7 * w + f + x, f) == 7 * w + x  # split-K's chunks
    for value in (Mod(2 * f + x, n), x, Mod(f + x, n) + f, FloorDiv(f + x, n)):
        assert k_start(value, f) is None, value


@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk"])
def test_hopper_producer_steps_the_ring_and_k_without_dividing(transform):
    """The producer is one thread whose serial index math per K iteration paced small tiles: its stage, phase and
    ``k`` advance by increments, with no division or remainder left in its K loop."""
    src = cuda_kernel(
        transform, tile=(128, 256, 64), workgroups=1024, mainloop="wgmma", **SPLITS.get(transform, {})
    ).source
    producer = src.split("setmaxnreg_dec<PRODUCER_REGS>();")[1].split("setmaxnreg_inc<CONSUMER_REGS>();")[0]
    loops = re.findall(
        r"for \(forK\w* = 1; forK\w* < count_; \+\+forK\w*, ring_.next\(\)\) \{(.*?)\n {20}\}", producer, re.S
    )
    assert loops
    for body in loops:
        assert "const int k = forK" in body and "k0_" in body and "%" not in body and "/ STAGES" not in body
    assert "it_ %" not in src and "Ring ring_;" in src


@needs_nvcc
@pytest.mark.parametrize(
    "tile, options",
    sweep([((128, 256, 64), {}), ((256, 128, 64), {"cluster": 2}), ((64, 128, 64), {"pingpong": True})], several=True),
    ids=["one CTA", "cluster", "pingpong"],
)
@pytest.mark.parametrize("transform", sweep(["dataparallel", "streamk2tile"], "streamk2tile"))
def test_hopper_mbarrier_waits_are_bounded_by_the_watchdog(transform, tile, options):
    """The mbarrier waits are bare ``try_wait`` loops; what keeps a phase that never completes from hanging is
    one watchdog thread per CTA, which sleeps on ``done_`` until the producer and every math thread have arrived,
    and traps after ``WATCHDOG_NS``. The producer's code follows only exits, so ptxas keeps it convergent."""
    kern = cuda_kernel(transform, tile=tile, workgroups=1024, mainloop="wgmma", **options)
    src, L = kern.source, kern.program.layout
    wait = src[src.index("void mbar_wait(") : src.index("\n}", src.index("void mbar_wait("))]
    assert "@!p bra WAIT_%=;" in wait and "trap" not in wait and "tries" not in wait
    assert src.count("watchdog(done_, ") == 1 and f"watchdog(done_, {WATCHDOG_NS}ull);" in src
    assert "mbar_init(done_, 1 + 128 * WARPGROUPS);" in src and L["BLOCK"] == 128 * (L["WARPGROUPS"] + 1)
    producer, consumers = src.split("setmaxnreg_dec<PRODUCER_REGS>();")[1].split("setmaxnreg_inc<CONSUMER_REGS>();")
    head = producer[: producer.index("Ring ring_;")]
    assert "if (warp_index() == 1) {" in head and head.count("exit_thread();") == 2
    assert "if (threadIdx.x != 0) exit_thread();" in head and "if (threadIdx.x == 0)" not in producer
    # one arrival each: the producer's after its last wait, every math thread's after its last store
    assert producer.count("mbar_arrive(done_);") == 1 and consumers.count("mbar_arrive(done_);") == 1
    assert consumers.rstrip().splitlines()[-3].strip() == "mbar_arrive(done_);  // finished"
    ptx = kern.ptx
    assert "%globaltimer" in ptx and "trap;" in ptx and "exit;" in ptx


@pytest.mark.parametrize("transform", ["streamk", "streamk2tile", "streamk_hybrid", "splitk"])
def test_hopper_partials_reach_the_consumers_through_the_ring(transform):
    """The producer waits on a sender's flag and bulk-copies its partial into ring stages; the consumers add
    it from shared memory and never poll a flag, though they still store and release their own."""
    src = cuda_kernel(
        transform, tile=(128, 256, 64), workgroups=1024, mainloop="wgmma", **SPLITS.get(transform, {})
    ).source
    producer, consumers = src.split("setmaxnreg_dec<PRODUCER_REGS>();")[1].split("setmaxnreg_inc<CONSUMER_REGS>();")
    wait = producer.index("ld_acquire(flags")
    assert wait < producer.index("fence_proxy_async_global();") < producer.index("bulk_load(", wait)
    assert "st_relaxed(flags" in producer and "+= ws_[" not in consumers
    assert "ld_acquire" not in consumers and "ld_shared_v4_f32" in consumers and "red_release_add" in consumers


@pytest.mark.parametrize(
    "tile", [(64, 64, 32), (128, 256, 64), (256, 128, 32), (192, 192, 64), (512, 256, 64), (120, 128, 64), (72, 64, 64)]
)
def test_hopper_partial_fits_its_ring_stages(tile):
    """FIX_CHUNKS stages hold every accumulator of every consumer thread, each region within its stage, in whole
    float4s of the workspace's layout."""
    L = hopper_layout(tile, "float16", CudaOptions(mainloop="wgmma"))
    assert L["NACC"] % 4 == 0 and L["FIX_EA"] % 4 == 0 and L["FIX_EB"] % 4 == 0 and L["FIX_EA"] + L["FIX_EB"] > 0
    assert L["FIX_EA"] * L["THREADS"] * 4 <= L["A_STAGE"] * 2 and L["FIX_EB"] * L["THREADS"] * 4 <= L["B_STAGE"] * 2
    per_stage = L["FIX_EA"] + L["FIX_EB"]
    assert (L["FIX_CHUNKS"] - 1) * per_stage < L["NACC"] <= L["FIX_CHUNKS"] * per_stage


@pytest.mark.parametrize(
    ("tile", "options", "early"),
    [
        ((256, 128, 64), {}, True),
        ((512, 128, 64), {"cluster": 2}, True),
        ((128, 256, 64), {}, False),
        ((64, 64, 64), {}, False),
    ],
    ids=str,
)
def test_hopper_four_consumer_warpgroups_release_each_stage_once_its_group_retires(tile, options, early):
    """Four consumer warpgroups keep no wgmma group in flight across K steps: each waits for its own group and frees
    that stage at once (one more stage loading); fewer keep one group in flight and free the stage before."""
    kern = cuda_kernel("streamk2tile", tile=tile, mainloop="wgmma", **options)
    assert kern.program.layout["EARLY_RELEASE"] == early == (kern.program.layout["CONSUMERS"] == 4)
    loop = kern.source.split("wgmma_commit();")[1]
    loop = loop[loop.index("wgmma_wait") :].split("}")[0]  # past the deferred D box (DEFER_D) staged under the group
    if early:
        assert "wgmma_wait<0>();" in loop and "(empty_ + 8 * s_" in loop and "wgmma_wait<1>" not in loop
    else:
        assert "wgmma_wait<1>();" in loop and "ring_.previous()" in loop


@pytest.mark.parametrize(("tile", "defer"), [((128, 128, 64), True), ((256, 128, 64), False)], ids=str)
def test_hopper_epilogue_reads_c_only_when_beta_is_not_zero(tile, defer):
    """The epilogue has a copy per case, of its box loop or (``DEFER_D``) of its pack: beta == 0 computes no
    address or mask of C."""
    kern = cuda_kernel("streamk2tile", tile=tile, mainloop="wgmma")
    assert kern.program.layout["DEFER_D"] == defer
    end = "pend_ = " if defer else "fence_proxy_async();"
    with_c, without_c = kern.source.split("if (beta != 0.f) {")[1].split(end)[0].split("else {")
    assert "C[" in with_c and "C[" not in without_c and "c_at_" not in without_c
    staged = "pk_[q_] =" if defer else "stmatrix_x4"
    assert staged in with_c and staged in without_c
    if defer:  # and a copy for alpha == 1 without its multiplies
        with_c, unscaled = with_c.split("else if (alpha == 1.f) {")
        assert "alpha" not in unscaled and "C[" not in unscaled and staged in unscaled
        assert "alpha * acc[e_]" in with_c and "alpha * acc[e_]" in without_c


@pytest.mark.parametrize(
    ("tile", "options", "defer"),
    [
        ((128, 256, 64), {}, True),  # 128 accumulators + 64 packed fit 232 registers
        ((256, 256, 64), {"cluster": 2}, True),
        ((64, 256, 64), {"pingpong": True}, False),  # the other warpgroup's mainloop runs under the epilogue
        ((256, 128, 64), {}, False),  # four warpgroups: 112 registers a thread
        ((192, 192, 64), {}, False),  # three: 160
        ((128, 240, 64), {}, True),  # a tail box of D_TAIL = 48 columns
        ((232, 128, 64), {}, True),  # swapped: 116 accumulators of D^T, a tail box of 40 rows
    ],
    ids=str,
)
def test_hopper_defers_d_where_its_packed_registers_fit(tile, options, defer):
    """``DEFER_D``: the epilogue packs D into ``NACC/2`` registers and the next K loop stages and stores one box
    after each step's wgmma group is issued; the rest goes at the next epilogue and at the end. It is on where
    ``3*NACC/2 + SPARE_REGS`` registers fit the consumers' ``setmaxnreg`` share, and off with ping-pong."""
    kern = cuda_kernel("streamk2tile", tile=tile, mainloop="wgmma", **options)
    L, src = kern.program.layout, kern.source
    assert L["DEFER_D"] == defer
    assert (L["NACC"] * 3 // 2 + SPARE_REGS <= register_split(L["WARPGROUPS"])[1] and not L["PINGPONG"]) == defer
    assert ("unsigned pk_[NACC / 2];" in src) == defer
    step = src.split("wgmma_commit();")[1].split("wgmma_wait")[0]
    assert ("if (pend_ > 0)" in step and "tma_store_2d" in step and "--pend_;" in step) == defer
    consumer_end = src.split("bulk_wait_read<0>();  // the last D boxes")[0].rsplit("ring_.next()", 1)[1]
    assert ("pend_ = 0;" in consumer_end) == defer


@pytest.mark.parametrize("transform", ["dataparallel", "streamk", "streamk2tile", "splitk"])
@pytest.mark.parametrize("options", [{}, {"swap": True}, {"pingpong": True}], ids=str)
def test_hopper_tiles_start_with_scale_d_zero_instead_of_zeroed_accumulators(transform, options):
    """Every K loop of the transforms runs at least once where it is reached, so each tile's first wgmma takes
    scale-d = 0 (``D = A*B``) and no accumulator is zeroed."""
    tile = (64, 128, 64) if options else (128, 128, 64)
    src = cuda_kernel(transform, tile=tile, mainloop="wgmma", **options).source
    assert "acc[e_] = 0.f;" not in src
    calls = re.findall(r"wgmma_(?:swap_)?n\d+\(acc, d[ab]_, d[ab]_, ([^)]*)\);", src)
    assert calls and all(re.fullmatch(r"forK_?\w* > 0 \|\| ks_ > 0", c) for c in calls), calls


def test_hopper_zeroes_the_accumulators_where_the_k_loop_may_not_run(monkeypatch):
    """Where the control graph does not show that the K loop runs, the accumulators are zeroed before it as on
    the mma.sync path, and every wgmma adds to them (scale-d = 1)."""
    from lowering.cuda import runtime

    monkeypatch.setattr(ctgraph.control.ControlGraph, "enters", lambda self, loop: False)
    monkeypatch.setattr(runtime, "_SOURCES", runtime.LRU(runtime.MODULES))  # printed again by the patched emitter
    src = cuda_kernel("streamk", tile=(128, 128, 64), mainloop="wgmma").source
    assert "acc[e_] = 0.f;" in src
    assert re.findall(r"wgmma_n128\(acc, da_, db_, ([^)]*)\);", src) == ["1"]


def test_golden_hopper_cu():
    path = GOLDEN / "seed_streamk2tile_hopper.cu"
    assert seed_hopper_source() == path.read_text(), "generated CUDA changed: run `make golden` if intended"


@pytest.mark.parametrize(
    ("tile", "cluster"),
    [
        ((128, 128, 16), 1),
        ((256, 192, 64), 1),
        ((192, 256, 64), 1),
        ((128, 104, 64), 1),  # wgmma's N: a multiple of 16
        ((128, 320, 64), 1),
        ((320, 64, 64), 1),
        ((256, 104, 64), 4),
        ((512, 256, 16), 4),
    ],
    ids=str,
)
def test_wgmma_refuses_tiles_it_cannot_run(tile, cluster):
    """Accumulators beyond the registers of a consumer thread, or rows that do not split over the cluster."""
    with pytest.raises(ValueError, match="wgmma mainloop takes float16 with BM in"):
        _ = cuda_kernel("streamk", tile=tile, mainloop="wgmma", cluster=cluster).source


@pytest.mark.parametrize(
    ("tile", "options"),
    [
        ((100, 64, 64), {}),  # rows not a multiple of 8
        ((264, 64, 64), {}),  # wgmma's N side is at most 256
        ((136, 320, 64), {}),  # five consumer warpgroups
        ((200, 256, 64), {"cluster": 1}),  # 100 accumulators and the spare registers exceed four consumers' share
        ((72, 128, 64), {"cluster": 2, "multicast": "b"}),  # 36 rows per CTA
        ((72, 128, 32), {"cluster": 8}),  # 9 rows per CTA
        ((128, 96, 64), {"swap": True}),  # 96 columns: no whole warpgroups
    ],
    ids=str,
)
def test_swapped_layout_refuses_tiles_it_cannot_run(tile, options):
    with pytest.raises(ValueError, match=r"takes float16 with BM a multiple of \d+ .*swap=True\), BN in"):
        _ = cuda_kernel("streamk", tile=tile, mainloop="wgmma", **options).source


@pytest.mark.parametrize(
    ("tile", "options", "ctas"),
    [
        ((136, 128, 64), {}, (136, 128)),
        ((8, 256, 32), {}, (8, 256)),
        ((192, 128, 64), {"cluster": 2}, (96, 128)),
        ((144, 256, 64), {"cluster": 2, "multicast": "a"}, (144, 128)),
        ((128, 128, 64), {"swap": True}, (128, 128)),
        ((136, 256, 64), {"cluster": 2, "multicast": "a"}, (136, 128)),  # A shared in two shares of 72 rows
        ((240, 512, 64), {"cluster": 8, "multicast": "ab"}, (120, 128)),  # A in four shares of 32 rows
    ],
    ids=str,
)
def test_swapped_layout(tile, options, ctas):
    """D^T = B^T A^T: one consumer warpgroup per 64 columns, wgmma's N side along the CTA's rows, an A stage
    padded to whole 1024-byte swizzle atoms, D in boxes of 64 rows and a last box of the rest."""
    L = hopper_layout(tile, "float16", CudaOptions(mainloop="wgmma", **options))
    assert L["SWAP"] == 1 and (L["CTA_M"], L["CTA_N"]) == ctas
    assert L["CONSUMERS"] == ctas[1] // 64 and L["NACC"] == ctas[0] // 2
    assert L["A_STAGE"] * 2 % 1024 == 0 and L["A_STAGE"] >= ctas[0] * tile[2]
    shares = L["CLUSTER_N"] * L["A_SHARE"]  # A's rows as the stage receives them: the last share may overlap
    assert L["A_SHARE"] % 8 == 0 and ctas[0] <= shares < ctas[0] + 8 * L["CLUSTER_N"]
    assert L["STAGE_BYTES"] == (shares + ctas[1]) * tile[2] * 2
    assert L["D_ROWS"] == min(64, ctas[0]) and L["D_TAIL"] == ctas[0] % L["D_ROWS"] and L["D_TAIL"] % 8 == 0
    assert (
        (L["FIX_CHUNKS"] - 1) * (L["FIX_EA"] + L["FIX_EB"]) < L["NACC"] <= L["FIX_CHUNKS"] * (L["FIX_EA"] + L["FIX_EB"])
    )


@pytest.mark.parametrize("rows", range(8, 72, 8))
@pytest.mark.parametrize("columns", [64, 256])
def test_a_stages_of_small_ctas_stay_8kb_apart(rows, columns):
    """A swapped CTA of fewer than 64 rows keeps its ring's A stages ``A_STAGE_MIN_BYTES`` apart (closer, its K
    steps ran 1.7x slower on the H100, docs/benchmarks.md); B's stages, the ring's depth and the fit are as before."""
    L = hopper_layout((rows, columns, 64), "float16", CudaOptions(mainloop="wgmma"))
    assert L["SWAP"] == (rows % 64 != 0) and L["CTA_M"] == rows
    assert L["A_STAGE"] * 2 == max(A_STAGE_MIN_BYTES, -(-rows * 64 * 2 // 1024) * 1024)
    assert L["B_STAGE"] == 64 * columns and L["STAGE_BYTES"] == (rows + columns) * 64 * 2
    assert L["STAGES"] >= 4 and L["SMEM_BYTES"] <= SMEM_LIMIT


@needs_nvcc
@pytest.mark.parametrize(
    ("tile", "options"),
    sweep(
        [((136, 128, 64), {}), ((24, 192, 32), {}), ((272, 128, 64), {"cluster": 2}), ((128, 128, 64), {"swap": True})],
        several=True,
    ),
    ids=str,
)
@pytest.mark.parametrize("transform", NVCC_TRANSFORMS)
def test_swapped_source_compiles_and_transposes(transform, tile, options):
    """The swapped kernel reads B^T MN-major and A^T K-major (``imm-trans-a = 1, imm-trans-b = 0``) and stages D
    with ``stmatrix .trans``; split-K's reduction kernel stores element by element."""
    kern = cuda_kernel(transform, tile=tile, workgroups=1024, mainloop="wgmma", **options, **SPLITS.get(transform, {}))
    src, cta_m = kern.source, kern.program.layout["CTA_M"]
    assert re.search(rf"wgmma_swap_n{cta_m}\(acc, db_, da_, forK\w* > 0 \|\| ks_ > 0\);", src)
    reduce = transform == "splitk_reduce"  # partials to a workspace; the reduction kernel stores D
    assert ("stmatrix_x2_trans(at_" in src) != reduce and ("D[at_] = __float2half(v_);" in src) == reduce
    assert check_cubin(src, "sm_90a")[:4] == b"\x7fELF"
    ptx = kern.ptx
    assert f"wgmma.mma_async.sync.aligned.m64n{cta_m}k16.f32.f16.f16" in ptx and "p, 1, 1, 1, 0;" in ptx
    assert ("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16" in ptx) != reduce


@pytest.mark.parametrize(
    ("tile", "options", "consumers"),
    [
        ((256, 160, 64), {"cluster": 1}, 2),
        ((512, 160, 64), {"cluster": 2, "multicast": "b"}, 2),
        ((512, 320, 64), {"cluster": 4, "multicast": "ab"}, 2),
    ],
    ids=str,
)
def test_consumer_warpgroups_of_two_row_blocks(tile, options, consumers):
    """Where one 64-row block per consumer warpgroup does not fit the registers and two do, each warpgroup holds
    two blocks' accumulators (``NACC = CTA_N``) and the fixup and the reduction kernel take them as one run."""
    L = hopper_layout(tile, "float16", CudaOptions(mainloop="wgmma", **options))
    assert (L["BLOCKS"], L["CONSUMERS"], L["NACC"]) == (2, consumers, L["CTA_N"])
    assert L["CTA_M"] == 128 * consumers and L["DEFER_D"] == 0 and L["R_PIECES"] == consumers * L["CTA_N"] // 4


def test_one_row_block_a_warpgroup_comes_first():
    """``cluster=0`` keeps the fewest CTAs that fit one block a warpgroup (what the tile costs were measured on);
    the refusal names the widths two blocks allow (256 rows: 160 columns, not 128) and no CTA of 384 rows."""
    L = hopper_layout((256, 160, 64), "float16", CudaOptions(mainloop="wgmma"))
    assert (L["CLUSTER"], L["CTA_M"], L["BLOCKS"]) == (2, 128, 1)
    with pytest.raises(ValueError, match=r"BM in \(64, 128, 192, 256\).*BM=192: BN<=192, BM=256: BN<=160\)"):
        hopper_layout((256, 176, 64), "float16", CudaOptions(mainloop="wgmma", cluster=1))
    with pytest.raises(ValueError, match=r"BM=256: BN<=160\); got macro_tile \(384, 112, 64\)"):
        hopper_layout((384, 112, 64), "float16", CudaOptions(mainloop="wgmma", cluster=1))  # one TMA box of A rows


@needs_nvcc
@pytest.mark.parametrize("transform", NVCC_TRANSFORMS)
def test_two_row_blocks_issue_a_wgmma_per_block(transform):
    """Each K step's wgmma for the warpgroup's second block reads A 64 rows further on into the second half of
    its accumulators, from the same B descriptor; the epilogue stores each block's boxes at its own rows."""
    kern = cuda_kernel(
        transform, tile=(256, 160, 64), workgroups=1024, mainloop="wgmma", cluster=1, **SPLITS.get(transform, {})
    )
    src = kern.source
    second = r"wgmma_n160\(acc \+ 1 \* \(NACC / BLOCKS\), smem_desc\(a_ \+ 1 \* 64 \* BK \* 2, [^;]*\), db_, "
    assert len(re.findall(second, src)) == len(re.findall(r"wgmma_n160\(acc, da_, db_, ", src)) >= 1
    reduce = transform == "splitk_reduce"
    assert ("tma_store_2d(c_ < CTA_N / 64 ? &tmD : &tmDt, buf_, j0_ + 64 * c_, i0_ + 64 * b_);" in src) != reduce
    assert check_cubin(src, "sm_90a")[:4] == b"\x7fELF"


@pytest.mark.parametrize(
    ("tile", "options"),
    [
        ((128, 128, 64), {}),
        ((128, 256, 64), {"cluster": 2}),
        ((256, 128, 64), {"cluster": 4, "multicast": "ab"}),
        ((136, 128, 64), {}),
    ],
    ids=str,
)
def test_hopper_reduction_spreads_each_tile_over_ctas(tile, options):
    """Split-K's reduction kernel runs CTAs of 128 threads without a ring, each adding one float4 of every
    partial: a workgroup's BM x BN accumulators over CLUSTER * R_PIECES of them, 512 each."""
    kern = cuda_kernel("splitk_reduce", tile=tile, workgroups=1024, mainloop="wgmma", split=4, **options)
    prog, lay = kern.program, kern.program.layout
    assert prog.reductions == {"ctgraph_gemm_reduce"}
    threads, smem, cluster, ctas = reduction_launch(lay)
    assert (threads, smem, cluster) == (128, 0, 1) and ctas * threads * 4 == tile[0] * tile[1]
    reduce = kern.source[kern.source.index("ctgraph_gemm_reduce(") :]
    assert 'extern "C" __global__ void __launch_bounds__(128) ctgraph_gemm_reduce(' in kern.source
    assert "float acc[4];" in reduce and "setmaxnreg" not in reduce and "smem_" not in reduce
    assert "#pragma unroll 8\n    for (chunk = 0; chunk < numChunks; chunk += 1)" in reduce


@pytest.mark.parametrize(("consumers", "budget"), [(1, 255), (2, 168), (3, 128), (4, 96)])
def test_register_split_fits_the_register_file(consumers, budget):
    """setmaxnreg.inc draws only on what the CTA's warps gave back: the split fits the launch allocation
    (four consumers at 120 registers each waited for registers forever on the H100)."""
    producer, consumer = register_split(consumers)
    block = 128 * (consumers + 1)
    assert 128 * producer + 128 * consumers * consumer <= block * launch_registers(block) <= 64 * 1024
    assert producer % 8 == consumer % 8 == 0 and 24 <= producer <= consumer <= 256
    assert accumulator_budget(consumers) == budget


@needs_nvcc
@pytest.mark.parametrize(("tile", "cluster"), sweep([((256, 256, 64), 2), ((512, 256, 64), 4)], several=True), ids=str)
@pytest.mark.parametrize("transform", NVCC_TRANSFORMS)
def test_cluster_source_multicasts_b_and_keeps_per_cta_fixup(transform, tile, cluster):
    kern = cuda_kernel(
        transform, tile=tile, workgroups=66, mainloop="wgmma", cluster=cluster, **SPLITS.get(transform, {})
    )
    src = kern.source
    assert "__cluster_dims__(ctg::CLUSTER, 1, 1)" in src and "constexpr int CTA_M = 128;" in src
    assert f"constexpr int CLUSTER = {cluster};" in src
    assert check_cubin(src, "sm_90a")[:4] == b"\x7fELF"
    ptx = kern.ptx
    for op in (
        "multicast::cluster",
        "mapa.shared::cluster",
        "mbarrier.arrive.shared::cluster",
        "barrier.cluster.wait",
        "%cluster_ctarank",
    ):
        assert op in ptx, op
    if transform not in ("dataparallel", "splitk_reduce"):
        assert "flags + (wg) * CLUSTER + cta_" in src
    # one relaxed cluster barrier, after the mbarriers are initialised; before exit, the producer tail
    assert src.count("cluster_sync();") == 1 and "barrier.cluster.arrive.relaxed" in ptx
    assert "barrier.cluster.arrive.release" not in ptx
    producer = src[src.index("Ring ring_;  // ring position") : src.index("setmaxnreg_inc<CONSUMER_REGS>();")]
    tail = producer[producer.index("// the producer tail") :]
    assert "mbar_wait(empty_ + 8 * ring_.stage, ring_.phase ^ 1);" in tail and "tma_load" not in tail


@needs_nvcc
@pytest.mark.parametrize(("tile", "cluster"), sweep([((128, 256, 64), 2), ((64, 256, 32), 4)], several=True), ids=str)
@pytest.mark.parametrize("transform", NVCC_TRANSFORMS)
def test_cluster_source_can_split_columns_and_multicast_a(transform, tile, cluster):
    kern = cuda_kernel(
        transform,
        tile=tile,
        workgroups=1024,
        mainloop="wgmma",
        cluster=cluster,
        multicast="a",
        **SPLITS.get(transform, {}),
    )
    src = kern.source
    lay = kern.program.layout
    assert (lay["CTA_M"], lay["CTA_N"], lay["WN"], lay["NACC"]) == (tile[0], 256 // cluster, cluster, 128 // cluster)
    assert (lay["CLUSTER_M"], lay["CLUSTER_N"]) == (1, cluster)  # CTA r: the grid's column r
    assert "constexpr int CLUSTER_M = 1;" in src
    assert check_cubin(src, "sm_90a")[:4] == b"\x7fELF"
    assert "multicast::cluster" in kern.ptx and f"m64n{256 // cluster}k16" in kern.ptx


@needs_nvcc
@pytest.mark.parametrize(
    ("tile", "cluster", "ctas"),
    sweep(
        [((256, 256, 64), 4, (128, 128)), ((256, 512, 64), 8, (128, 128)), ((288, 128, 64), 4, (144, 64))],
        several=True,
    ),
    ids=str,
)
@pytest.mark.parametrize("transform", NVCC_TRANSFORMS)
def test_cluster_source_can_multicast_both_operands(transform, tile, cluster, ctas):
    """``multicast="ab"``: a 2 x cluster/2 grid of CTAs; A's rows go to a grid row, B's columns to a grid column."""
    kern = cuda_kernel(
        transform,
        tile=tile,
        workgroups=1024,
        mainloop="wgmma",
        cluster=cluster,
        multicast="ab",
        **SPLITS.get(transform, {}),
    )
    src, lay = kern.source, kern.program.layout
    assert (lay["CLUSTER_M"], lay["CLUSTER_N"], lay["CTA_M"], lay["CTA_N"]) == (2, cluster // 2, *ctas)
    row = sum(1 << (2 * j) for j in range(cluster // 2))
    assert f"{row:#x}u << cta_m_);" in src and "((1u << CLUSTER_M) - 1) << (cta_n_ * CLUSTER_M));" in src
    assert src.count("tma_load_2d(") == 1  # the template's definition: every box is multicast
    assert check_cubin(src, "sm_90a")[:4] == b"\x7fELF"
    assert "multicast::cluster" in kern.ptx


@needs_nvcc
@pytest.mark.parametrize(
    ("tile", "ctas"),
    sweep([((512, 256, 64), (128, 128)), ((704, 256, 64), (176, 128)), ((256, 128, 32), (64, 64))], several=True),
    ids=str,
)
@pytest.mark.parametrize("transform", NVCC_TRANSFORMS)
def test_cluster_source_can_share_a_in_pairs_and_b_in_fours(transform, tile, ctas):
    """``multicast="ba"``: a 4 x 2 grid of CTAs; each loads half of its grid row's A rows and a quarter of B's
    k-rows of its grid column (BK/4: two swizzle atoms of 8 k-rows at BK = 64, one at BK = 32)."""
    kern = cuda_kernel(
        transform, tile=tile, workgroups=1024, mainloop="wgmma", cluster=8, multicast="ba", **SPLITS.get(transform, {})
    )
    src, lay = kern.source, kern.program.layout
    assert (lay["CLUSTER_M"], lay["CLUSTER_N"], lay["CTA_M"], lay["CTA_N"]) == (4, 2, *ctas)
    assert lay["A_SHARE"] == -(-ctas[0] // 16) * 8  # half of CTA_M, in whole 8-row swizzle atoms
    assert lay["STAGE_BYTES"] == (2 * lay["A_SHARE"] + ctas[1]) * tile[2] * 2
    assert "0x11u << cta_m_);" in src and "((1u << CLUSTER_M) - 1) << (cta_n_ * CLUSTER_M));" in src
    assert check_cubin(src, "sm_90a")[:4] == b"\x7fELF"


@needs_nvcc
@pytest.mark.parametrize(
    ("tile", "options", "cta_n"),
    sweep(
        [
            ((128, 160, 64), {}, 160),
            ((64, 48, 32), {}, 48),
            ((256, 160, 64), {"cluster": 2}, 160),
            ((128, 320, 64), {"cluster": 2, "multicast": "a"}, 160),
            ((512, 352, 64), {"cluster": 8, "multicast": "ba"}, 176),
            ((64, 208, 64), {"pingpong": True}, 208),
        ],
        several=True,
    ),
    ids=str,
)
@pytest.mark.parametrize("transform", NVCC_TRANSFORMS)
def test_ctas_whose_columns_are_not_whole_64_column_chunks(transform, tile, options, cta_n):
    """wgmma's N = CTA_N, a multiple of 16: B arrives in whole 64-column chunks (the last one partly read) and the
    epilogue ends each warpgroup's rows in an unswizzled box of D_TAIL = CTA_N % 64 columns (tmDt)."""
    kern = cuda_kernel(transform, tile=tile, workgroups=4096, mainloop="wgmma", **options, **SPLITS.get(transform, {}))
    src, lay = kern.source, kern.program.layout
    chunks = -(-cta_n // 64)
    assert (lay["SWAP"], lay["CTA_N"], lay["D_TAIL"], lay["B_STAGE"]) == (0, cta_n, cta_n % 64, 64 * chunks * tile[2])
    assert f"wgmma_n{cta_n}(" in src and "c_ < CTA_N / 64 + 1" in src
    if transform != "splitk_reduce":  # split-K's main kernel stores no D
        assert "c_ < CTA_N / 64 ? &tmD : &tmDt" in src and "buf_ + r_ * (D_TAIL * 2) + (u_ << 4)" in src
    assert check_cubin(src, "sm_90a")[:4] == b"\x7fELF"
    assert d_tail_box(lay) == (64, cta_n % 64, 0)


def test_multicast_names_the_allowed_operands_and_layouts():
    with pytest.raises(ValueError, match=r"multicast must be None \(the tile.s measured layout\) or one of"):
        _ = cuda_kernel("streamk", mainloop="wgmma", cluster=2, multicast="c").source
    with pytest.raises(ValueError, match=r"multicast='a'.*BN a multiple of 32 up to 512"):
        _ = cuda_kernel("streamk", tile=(128, 72, 64), mainloop="wgmma", cluster=2, multicast="a").source
    with pytest.raises(ValueError, match="swap must be None"):
        _ = cuda_kernel("streamk", mainloop="wgmma", swap=1).source


def test_wgmma_refuses_float32_and_other_arches():
    with pytest.raises(ValueError, match="float16"):
        _ = cuda_kernel("streamk", "float32", mainloop="wgmma").source
    with pytest.raises(ValueError, match="sm_90a"):
        _ = cuda_kernel("streamk", mainloop="wgmma", arch="sm_80").source
    with pytest.raises(ValueError, match="mainloop must be one of"):
        _ = cuda_kernel("streamk", mainloop="tcgen05").source


@pytest.mark.parametrize(
    ("cc", "tile", "dtype", "shape", "variant"),
    [
        ((9, 0), (128, 128, 32), "float16", (1000, 1000, 1000), "wgmma"),
        ((9, 0), (128, 128, 32), "float16", (1000, 1001, 1000), "scalar"),  # n % 8: no TMA rows
        ((9, 0), (128, 128, 16), "float16", (1000, 1000, 1000), "vector"),  # BK=16: not a wgmma tile
        ((9, 0), (128, 128, 32), "float32", (1000, 1000, 1000), "scalar"),
        ((8, 0), (128, 128, 32), "float16", (1000, 1000, 1000), "vector"),  # not Hopper
        (None, (128, 128, 32), "float16", (1000, 1000, 1000), "vector"),  # no GPU (CI)
    ],
)
def test_auto_mainloop_follows_the_device(monkeypatch, cc, tile, dtype, shape, variant):
    from lowering.cuda import driver

    monkeypatch.setattr(driver, "compute_capability", lambda: cc)
    assert cuda_kernel("streamk2tile", dtype, shape=shape, tile=tile).program.variant == variant


@needs_nvcc
def test_scalar_load_variant_compiles():
    kern = cuda_kernel("streamk2tile", shape=(1000, 1001, 999))  # n, k not multiples of 8: element loads
    assert "cp_async_16(" not in kern.source
    check_cubin(kern.source, "sm_90a")


@needs_nvcc
def test_seed_kernel_compiles():
    check_cubin(seed_cuda_source(), "sm_90a")


@needs_nvcc
@pytest.mark.parametrize("mainloop", ["mma", "wgmma"])
@pytest.mark.parametrize("m", [4096, 1664])  # 32 tile rows (groups of 8) and 13 (a group of 8, then a ragged one of 5)
@pytest.mark.parametrize("transform", sweep(["dataparallel", "streamk", "streamk2tile"], "streamk2tile"))
def test_rastered_source_compiles(transform, m, mainloop):
    kern = cuda_kernel(transform, shape=(m, 2048, 1000), tile=(128, 128, 64), mainloop=mainloop, raster=8)
    assert kern.raster == 8 and "numRasterGroups" in kern.source
    assert ("numRasterLastRows" in kern.source) == (m == 1664)
    assert check_cubin(kern.source, "sm_90a")[:4] == b"\x7fELF"


@pytest.mark.parametrize(
    ("tile", "options", "ctas"),
    [
        ((64, 256, 64), {}, (64, 256)),
        ((128, 192, 64), {"cluster": 2}, (64, 192)),
        ((72, 64, 64), {}, (72, 64)),  # swapped: one warpgroup's 64 columns
    ],
    ids=str,
)
def test_pingpong_layout(tile, options, ctas):
    """Ping-pong: one consumer warpgroup's CTA tile, run by two warpgroups in turn; each stages its own D boxes."""
    L = hopper_layout(tile, "float16", CudaOptions(mainloop="wgmma", pingpong=True, **options))
    cooperative = hopper_layout(tile, "float16", CudaOptions(mainloop="wgmma", **options))
    assert (L["CTA_M"], L["CTA_N"]) == ctas and L["CONSUMERS"] == L["THREADS"] // 128 == 1
    assert L["PINGPONG"] == 1 and L["WARPGROUPS"] == 2 and L["BLOCK"] == 384
    assert (L["PRODUCER_REGS"], L["CONSUMER_REGS"]) == register_split(2)
    stage = L["A_STAGE"] * 2 + L["B_STAGE"] * 2
    staging = L["D_BUFFERS"] * L["D_STAGE"] * 2  # one more warpgroup's D boxes, and the two turn barriers
    assert L["SMEM_BYTES"] - cooperative["SMEM_BYTES"] == staging + 16 - (cooperative["STAGES"] - L["STAGES"]) * stage
    assert cooperative["PINGPONG"] == 0 and cooperative["WARPGROUPS"] == 1


def test_a_cluster_layout_the_wgmma_path_refuses_warns_before_mma_sync():
    """mainloop="auto" runs a tile the wgmma path refuses on mma.sync, one unswapped CTA a workgroup: where the caller
    asked for a swapped or clustered layout it says so (a warning naming the options), and mainloop="wgmma" raises;
    a plain tile falls back without a word."""
    with pytest.warns(UserWarning, match=r"mma\.sync path instead, which ignores cluster=0, multicast=None and swap"):
        assert cuda_kernel("dataparallel", tile=(64, 96, 64), swap=True).program.mainloop == "mma"
    with pytest.raises(ValueError, match="the wgmma mainloop takes float16"):
        _ = cuda_kernel("dataparallel", tile=(64, 96, 64), swap=True, mainloop="wgmma").source
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cuda_kernel("dataparallel", tile=(32, 32, 32)).program.mainloop == "mma"


@pytest.mark.parametrize(
    ("tile", "options"), [((128, 128, 64), {"cluster": 1}), ((256, 128, 64), {"cluster": 2})], ids=str
)
def test_pingpong_refuses_tiles_of_several_warpgroups(tile, options):
    """Under mainloop="auto" too: ping-pong is the wgmma path's, so such a tile is not run on mma.sync instead."""
    for mainloop in ("wgmma", "auto"):
        with pytest.raises(ValueError, match=r"pingpong runs CTA tiles of one consumer warpgroup: 64 rows"):
            _ = cuda_kernel("streamk", tile=tile, mainloop=mainloop, pingpong=True, **options).source
    with pytest.raises(ValueError, match="pingpong must be True or False"):
        CudaOptions(pingpong=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
def test_pingpong_warpgroups_take_the_units_in_turn(transform):
    """Each unit (an iteration of a loop of the kernel's body) runs on warpgroup ``unit % 2``; the other steps its
    ring position over the unit's stages without waiting on them, and the turns hand over once a unit has read
    its last stage, before its epilogue or partial store."""
    kern = cuda_kernel(
        transform, tile=(64, 128, 64), workgroups=1024, mainloop="wgmma", pingpong=True, **SPLITS.get(transform, {})
    )
    src = kern.source
    main = src[: src.index("ctgraph_gemm_reduce")] if transform == "splitk_reduce" else src
    loops = main.count("if (unit_++ % 2 == wg_) {")
    assert loops == (2 if transform in ("streamk2tile", "streamk_hybrid") else 1)
    assert main.count("ring_.advance(count_);") == loops  # the skipped unit's K iterations
    assert main.count("mbar_wait(turn_ + 8 * wg_, turns_++ & 1);") == loops
    hand_over = "if (!handed_ && tid_ == 0) mbar_arrive(turn_ + 8 * (wg_ ^ 1));"
    assert main.index(hand_over) < main.index("tma_store_2d(&tmD" if transform != "splitk_reduce" else "ws_[q_ *")
    assert ("ring_.advance(FIX_CHUNKS);" in main) == (transform not in ("dataparallel", "splitk_reduce"))
    assert "bar_sync(1, THREADS)" not in main  # each warpgroup syncs on its own named barrier


@needs_nvcc
@pytest.mark.parametrize(
    ("tile", "options"), sweep([((64, 256, 64), {}), ((208, 128, 64), {"cluster": 4, "multicast": "ab"})], several=True)
)
def test_pingpong_source_compiles(tile, options):
    kern = cuda_kernel("streamk2tile", tile=tile, workgroups=1024, mainloop="wgmma", pingpong=True, **options)
    assert check_cubin(kern.source, "sm_90a")[:4] == b"\x7fELF"
    assert "wgmma.mma_async" in kern.ptx and "setmaxnreg.inc.sync.aligned.u32 232" in kern.ptx


class _FakeEvents:
    """libcuda's event calls, with the event after the launches completing after ``polls`` queries (never: None)."""

    def __init__(self, polls: int | None) -> None:
        self.polls, self.queries, self.destroyed, self.created = polls, 0, 0, 0

    def cuEventCreate(self, event, flags):
        self.created += 1
        event._obj.value = self.created  # events 1 and 2
        return 0

    def cuEventRecord(self, event, stream):
        return 0

    def cuEventQuery(self, event):
        if event.value == 1:
            return 0  # the launches have started
        self.queries += 1
        return 0 if self.polls is not None and self.queries > self.polls else 600  # CUDA_ERROR_NOT_READY

    def cuEventDestroy_v2(self, event):
        self.destroyed += 1
        return 0


@pytest.mark.parametrize("polls", [0, 5])
def test_a_bounded_wait_returns_once_the_launches_finish(monkeypatch, polls):
    from lowering.cuda import driver

    fake = _FakeEvents(polls)
    monkeypatch.setattr(driver, "_lib", lambda: fake)
    with driver.bounded_wait(0, 60.0, "the kernel"):
        pass  # the launches
    assert fake.queries == polls + 1 and fake.destroyed == 2


def test_a_bounded_wait_raises_instead_of_hanging(monkeypatch):
    """The launches started and never finish: an error after the limit, naming the kernel, and no events left."""
    from lowering.cuda import driver

    fake = _FakeEvents(None)
    monkeypatch.setattr(driver, "_lib", lambda: fake)
    late = r"the 8x8x8 kernel had not finished 0\.0 s after it started"
    with pytest.raises(driver.CudaError, match=late), driver.bounded_wait(0, 0.02, "the 8x8x8 kernel"):
        pass
    assert fake.queries > 1 and fake.destroyed == 2


def test_a_bounded_wait_does_not_wait_when_a_launch_fails(monkeypatch):
    from lowering.cuda import driver

    fake = _FakeEvents(None)
    monkeypatch.setattr(driver, "_lib", lambda: fake)
    with pytest.raises(driver.CudaError, match="cuLaunchKernelEx"), driver.bounded_wait(0, 60.0, "the kernel"):
        raise driver.CudaError("cuLaunchKernelEx failed")
    assert fake.queries == 0 and fake.destroyed == 2


def test_a_new_shape_of_a_config_seen_before_takes_the_source_printed_for_it(monkeypatch):
    """Sizes are kernel parameters: shapes of one config have one control-graph structure, so the source is printed
    once (``runtime._generated``), and what is taken is what printing it again gives."""
    from lowering.cuda import runtime
    from lowering.cuda.emit import generate

    printed = []
    monkeypatch.setattr(runtime, "generate", lambda cg, opts: printed.append(opts) or generate(cg, opts))
    monkeypatch.setattr(runtime, "_SOURCES", runtime.LRU(runtime.MODULES))
    for m, n, k, transform, mainloop in [
        (1000, 4096, 4096, "dataparallel", "auto"),
        (1008, 4096, 4096, "dataparallel", "auto"),
        (37, 200, 8200, "dataparallel", "auto"),  # partial tiles on every side: the same program
        (1000, 4096, 4096, "streamk", "auto"),
        (1500, 1000, 3000, "streamk", "auto"),
        (300, 512, 8192, "splitk_reduce", "auto"),
        (301, 503, 8190, "splitk_reduce", "auto"),  # rows off 8: the same structure, the scalar variant
        (1000, 4096, 4096, "streamk", "wgmma"),
        (1016, 2048, 512, "streamk", "wgmma"),
    ]:
        g = ctgraph.gemm(m, n, k, (128, 128, 64))
        program = ctgraph.compile(g, transform, target="cuda", build=False, mainloop=mainloop).program
        assert program.source == generate(program.control, program._options_of(program.variant))
    assert len(printed) == 5  # data-parallel, Stream-K, split-K's vector and scalar variants, Stream-K on wgmma
