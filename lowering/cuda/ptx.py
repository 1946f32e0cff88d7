"""The inline PTX of the CUDA backend, in one table of named templates.

Each entry is a ``__device__ __forceinline__`` C++ function wrapping one ``asm volatile`` statement,
with the operand constraints beside the instruction. The code generator emits only the templates a
kernel uses, in table order, so the source stays small and deterministic.
"""

from __future__ import annotations

__all__ = ["TEMPLATES", "WGMMA_N", "WGMMA_SWAP_N", "render"]

# wgmma N extents of the Hopper mainloop: B in 64-column swizzle chunks, the last one partly read where N % 64 != 0
WGMMA_N = tuple(range(16, 257, 16))
WGMMA_SWAP_N = tuple(range(8, 257, 8))  # N extents with B read K-major (the swapped layout: N runs along m)


def _wgmma(n: int, swap: bool = False) -> str:
    """``wgmma.mma_async.m64n{n}k16`` with both operands in shared memory (descriptors), fp32 accumulators
    ``d[0 .. n/2)`` in place. ``wgmma_n{n}``: A K-major, B MN-major (``imm-trans-b = 1``: B is row-major
    K x N). ``wgmma_swap_n{n}`` computes ``D^T = B^T A^T``: its A is B^T, MN-major (``imm-trans-a = 1``), and
    its B is A^T, K-major."""
    regs = n // 2
    outs = ", ".join(f"%{i}" for i in range(regs))
    binds = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
    name, trans = (f"wgmma_swap_n{n}", "1, 0") if swap else (f"wgmma_n{n}", "0, 1")
    return f"""
__device__ __forceinline__ void {name}(float* d, unsigned long long da, unsigned long long db, int scale_d) {{
    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 2}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 "
                 "{{{outs}}}, %{regs}, %{regs + 1}, p, 1, 1, {trans};\\n}}\\n"
                 : {binds}
                 : "l"(da), "l"(db), "r"(scale_d));
}}"""


TEMPLATES: dict[str, str] = {
    # shared-memory address of a generic pointer (for cp.async / ldmatrix operands)
    "smem_addr": """
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}""",
    # 16-byte global -> shared copy when `issue`; src_bytes < 16 zero-fills the rest (0: a masked-off vector)
    "cp_async_16": """
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes, bool issue) {
    asm volatile("{\\n.reg .pred p;\\nsetp.ne.b32 p, %3, 0;\\n"
                 "@p cp.async.cg.shared.global [%0], [%1], 16, %2;\\n}\\n"
                 :: "r"(dst), "l"(src), "r"(src_bytes), "r"((int)issue) : "memory");
}""",
    "cp_async_commit": """
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\\n" ::: "memory");
}""",
    # wait until at most N committed groups are still in flight
    "cp_async_wait": """
template <int N> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\\n" :: "n"(N) : "memory");
}""",
    # four 8x8 b16 matrices from shared memory; lane l supplies the row address of matrix l/8
    "ldmatrix_x4": """
__device__ __forceinline__ void ldmatrix_x4(unsigned* r, unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}""",
    "ldmatrix_x4_trans": """
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned* r, unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}""",
    # D = A(16x16, row) * B(16x8, col) + C, fp16 inputs, fp32 accumulators in place
    "mma_m16n8k16": """
__device__ __forceinline__ void mma_m16n8k16(float* c, const unsigned* a, const unsigned* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}""",
    # fixup flags: acquire load (the waiter), release add (the producer), relaxed store (the reset)
    "ld_acquire": """
__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}""",
    # NOTE: red.release is itself the release pattern (fence.acq_rel + a relaxed red), cumulative over the other
    # threads' partial stores that the named barrier before it ordered; a fence before it waited for the stores
    # to drain twice (H100: 0.77 us -> 0.41 us from the barrier to the flag;
    # git show 688fa90:docs/bench/timeline-probes.txt)
    "red_release_add": """
__device__ __forceinline__ void red_release_add(unsigned* p, unsigned v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;\\n" :: "l"(p), "r"(v) : "memory");
}""",
    "st_relaxed": """
__device__ __forceinline__ void st_relaxed(unsigned* p, unsigned v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;\\n" :: "l"(p), "r"(v) : "memory");
}""",
    # --- Hopper (sm_90a): mbarriers, TMA, wgmma, register reallocation, named barriers ---
    "mbar_init": """
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\\n" :: "r"(bar), "r"(count) : "memory");
}""",
    # make the initialised barriers visible to the async proxy (TMA) before first use
    "fence_mbar_init": """
__device__ __forceinline__ void fence_mbar_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\\n\\tfence.proxy.async.shared::cta;\\n" ::: "memory");
}""",
    # fetch a tensor map (a __grid_constant__ parameter) into the TMA unit's cache before its first copy
    "prefetch_tensormap": """
__device__ __forceinline__ void prefetch_tensormap(const void* map) {
    asm volatile("prefetch.tensormap [%0];\\n" :: "l"(map) : "memory");
}""",
    # arrive and expect `bytes` more bytes of TMA transactions in this phase
    "mbar_expect_tx": """
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n" :: "r"(bar), "r"(bytes) : "memory");
}""",
    "mbar_arrive": """
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\\n" :: "r"(bar) : "memory");
}""",
    # wait for the phase of parity `parity` to complete: the bare try_wait loop, which ptxas turns into a wait that
    # falls through when the phase is complete and keeps the code around it on the uniform datapath (with a poll
    # counter in the loop, small clustered kernels ran 9-12% slower); the CTA's watchdog bounds it instead
    "mbar_wait": """
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\\n.reg .pred p;\\nWAIT_%=:\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\\n"
                 "@!p bra WAIT_%=;\\n}\\n" :: "r"(bar), "r"(parity) : "memory");
}""",
    # one thread's watch over its CTA: sleep on the mbarrier `done`, which every role arrives on once as it
    # finishes (try_wait resumes as soon as the phase completes), and trap if the CTA has not finished `limit_ns`
    # after the watch began: every mbar_wait of the CTA is then an error after a while, never a hang
    "watchdog": """
__device__ __forceinline__ void watchdog(unsigned done, unsigned long long limit_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;\\n" : "=l"(start));
    for (unsigned finished = 0;;) {
        asm volatile("{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0, 1000000;\\n"
                     "selp.u32 %0, 1, 0, p;\\n}\\n" : "=r"(finished) : "r"(done) : "memory");
        if (finished) return;
        asm volatile("mov.u64 %0, %%globaltimer;\\n" : "=l"(now));
        if (now - start > limit_ns) __trap();
    }
}""",
    # the thread's warp, through a shuffle from lane 0 so that ptxas knows it is the same in the whole warp (a
    # branch on it is warp-uniform)
    "warp_index": """
__device__ __forceinline__ unsigned warp_index() {
    return __shfl_sync(0xffffffffu, threadIdx.x / 32, 0);
}""",
    # the thread leaves the kernel here (PTX exit; the C++ that follows is never reached)
    "exit_thread": """
__device__ __forceinline__ void exit_thread() {
    asm volatile("exit;\\n" ::: "memory");
}""",
    # TMA: a 2-D box at (c0 = column, c1 = row) of the tensor map into shared memory; completes on `bar`
    "tma_load_2d": """
__device__ __forceinline__ void tma_load_2d(unsigned dst, const void* map, unsigned bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%3, %4}], [%2];\\n"
                 :: "r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1) : "memory");
}""",
    # the same box, written at the same shared-memory offset in every CTA of `mask` (and signalled on the
    # mbarrier at `bar`'s offset in each): one L2 read feeds the cluster
    "tma_load_2d_multicast": """
__device__ __forceinline__ void tma_load_2d_multicast(unsigned dst, const void* map, unsigned bar, int c0, int c1,
                                                      unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                 "[%0], [%1, {%3, %4}], [%2], %5;\\n"
                 :: "r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1), "h"(mask) : "memory");
}""",
    # bulk copy (TMA, no tensor map): `bytes` contiguous bytes of global memory into shared memory; completes
    # on `bar` (sizes and addresses multiples of 16)
    "bulk_load": """
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\\n"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}""",
    # what this thread has acquired through the generic proxy (another CTA's partial) is visible to the
    # async proxy (its bulk copies) from here on
    "fence_proxy_async_global": """
__device__ __forceinline__ void fence_proxy_async_global() {
    asm volatile("fence.proxy.async.global;\\n" ::: "memory");
}""",
    # four consecutive fp32 of shared memory (16-byte aligned): a float4 of a partial the ring holds
    "ld_shared_v4_f32": """
__device__ __forceinline__ float4 ld_shared_v4_f32(unsigned addr) {
    float4 v;
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr));
    return v;
}""",
    # TMA store: the box at shared address `src` to (c0 = column, c1 = row) of the tensor map; the parts of
    # the box outside the tensor are not written. One bulk group per commit; completion is per thread.
    "tma_store_2d": """
__device__ __forceinline__ void tma_store_2d(const void* map, unsigned src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\\n"
                 :: "l"(map), "r"(src), "r"(c0), "r"(c1) : "memory");
}""",
    "bulk_commit": """
__device__ __forceinline__ void bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;\\n" ::: "memory");
}""",
    # wait until at most N of this thread's bulk groups still read shared memory (.read) or are in flight
    "bulk_wait_read": """
template <int N> __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\\n" :: "n"(N) : "memory");
}""",
    # this thread's generic-proxy writes to shared memory become visible to the async proxy (a TMA store)
    "fence_proxy_async": """
__device__ __forceinline__ void fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");
}""",
    # store four 8 x 8 b16 matrices: thread t's register i holds row t/4, columns 2*(t%4) and +1 of matrix i
    # (the mma fragment); row j of matrix i goes to the 16 bytes at thread 8*i + j's address
    "stmatrix_x4": """
__device__ __forceinline__ void stmatrix_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\\n"
                 :: "r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}""",
    # store two 8 x 8 b16 matrices transposed: thread t's registers hold row t/4, columns 2*(t%4) and +1 of
    # each (the mma fragment); row j of matrix i goes to the 16 bytes at thread 8*i + j's address
    "stmatrix_x2_trans": """
__device__ __forceinline__ void stmatrix_x2_trans(unsigned addr, unsigned r0, unsigned r1) {
    asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\\n" :: "r"(addr), "r"(r0), "r"(r1)
                 : "memory");
}""",
    # arrive on the mbarrier at offset `bar` of CTA `cta` of this cluster; the default .release.cta suffices
    # for a stage whose reads (wgmma) have retired, and costs no cluster-scope fence
    "mbar_arrive_cluster": """
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned cta) {
    asm volatile("{\\n.reg .b32 remote;\\nmapa.shared::cluster.u32 remote, %0, %1;\\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\\n}\\n"
                 :: "r"(bar), "r"(cta) : "memory");
}""",
    "cluster_rank": """
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\\n" : "=r"(r));
    return r;
}""",
    # every thread of every CTA of the cluster arrives, then waits for all. NOTE: relaxed: after
    # fence.mbarrier_init.release.cluster (fence_mbar_init) it still orders the barriers' initialisation before any use
    # by the cluster; the release arrive cost ~0.55 us a kernel (H100, git show 688fa90:docs/bench/timeline-probes.txt)
    "cluster_sync": """
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.relaxed;\\n\\tbarrier.cluster.wait;\\n" ::: "memory");
}""",
    "ring": """
// a position in the ring of STAGES stages: iteration it, its stage it % STAGES and the stage's phase (it / STAGES) & 1
struct Ring {
    unsigned it = 0, stage = 0, phase = 0;
    __device__ __forceinline__ void next() {
        ++it;
        if (++stage == STAGES) stage = 0, phase ^= 1;
    }
    __device__ __forceinline__ unsigned previous() const { return stage ? stage - 1 : STAGES - 1; }
    __device__ __forceinline__ void advance(unsigned n) {  // n calls of next()
        const unsigned s = stage + n % STAGES;
        it += n, phase ^= (n / STAGES + s / STAGES) & 1, stage = s % STAGES;
    }
};""",
    # shared-memory matrix descriptor: address, leading / stride byte offsets, swizzle span (128, 64, 32 B)
    "smem_desc": """
__device__ __forceinline__ unsigned long long smem_desc(unsigned addr, unsigned lbo, unsigned sbo, int swizzle) {
    const unsigned long long mode = swizzle == 128 ? 1 : swizzle == 64 ? 2 : 3;
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16)
         | ((unsigned long long)(sbo >> 4) << 32) | (mode << 62);
}""",
    "wgmma_fence": """
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");
}""",
    "wgmma_commit": """
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory");
}""",
    "wgmma_wait": """
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\\n" :: "n"(N) : "memory");
}""",
    **{f"wgmma_n{n}": _wgmma(n) for n in WGMMA_N},
    **{f"wgmma_swap_n{n}": _wgmma(n, swap=True) for n in WGMMA_SWAP_N},
    # programmatic dependent launch: a kernel launched with the attribute may start before the previous one in its
    # stream has finished; this waits until it has and its writes are visible (a no-op without the attribute)
    "griddep_wait": """
__device__ __forceinline__ void griddep_wait() {
    asm volatile("griddepcontrol.wait;\\n" ::: "memory");
}""",
    # and lets the next kernel in the stream launch once every CTA of this one has said so or exited (the first
    # thread of a CTA to say so speaks for it; a no-op where the next kernel was not launched with the attribute)
    "griddep_launch": """
__device__ __forceinline__ void griddep_launch() {
    asm volatile("griddepcontrol.launch_dependents;\\n" ::: "memory");
}""",
    # give registers back (producer) or take them (consumers): warpgroup-wide
    "setmaxnreg_dec": """
template <int N> __device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\\n" :: "n"(N));
}""",
    "setmaxnreg_inc": """
template <int N> __device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\\n" :: "n"(N));
}""",
    # barrier over the `threads` threads of the math warpgroups only (id 1; 0 is __syncthreads)
    "bar_sync": """
__device__ __forceinline__ void bar_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\\n" :: "r"(id), "r"(threads) : "memory");
}""",
}


def render(names: set[str]) -> str:
    """The templates in ``names``, in table order."""
    unknown = names - TEMPLATES.keys()
    if unknown:
        raise KeyError(f"unknown PTX templates: {sorted(unknown)}")
    return "\n".join(body.strip("\n") for name, body in TEMPLATES.items() if name in names)
