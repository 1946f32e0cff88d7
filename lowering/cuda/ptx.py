"""The inline PTX of the CUDA backend, in one table of named templates.

Each entry is a ``__device__ __forceinline__`` C++ function wrapping one ``asm volatile`` statement,
with the operand constraints beside the instruction. The code generator emits only the templates a
kernel uses, in table order, so the source stays small and deterministic.
"""

from __future__ import annotations

__all__ = ["TEMPLATES", "render"]

TEMPLATES: dict[str, str] = {
    # shared-memory address of a generic pointer (for cp.async / ldmatrix operands)
    "smem_addr": """
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}""",
    # 16-byte global -> shared copy; src_bytes < 16 zero-fills the rest (0: a masked-off vector)
    "cp_async_16": """
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
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
    "red_release_add": """
__device__ __forceinline__ void red_release_add(unsigned* p, unsigned v) {
    asm volatile("fence.acq_rel.gpu;\\n\\tred.release.gpu.global.add.u32 [%0], %1;\\n" :: "l"(p), "r"(v) : "memory");
}""",
    "st_relaxed": """
__device__ __forceinline__ void st_relaxed(unsigned* p, unsigned v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;\\n" :: "l"(p), "r"(v) : "memory");
}""",
}


def render(names: set[str]) -> str:
    """The templates in ``names``, in table order."""
    unknown = names - TEMPLATES.keys()
    if unknown:
        raise KeyError(f"unknown PTX templates: {sorted(unknown)}")
    return "\n".join(body.strip("\n") for name, body in TEMPLATES.items() if name in names)
