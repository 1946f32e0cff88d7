"""Control graph -> one CUDA C++ translation unit with an ``extern "C" __global__`` entry point.

One CTA runs one workgroup's program (``wg = blockIdx.x``); loops, assignments and conditions are
printed from the control graph's expressions by :mod:`lowering.cuda.printer`. The tile operations
are lowered per element type:

- **float16**: ``mma.sync.m16n8k16`` tensor-core MACs; A and B tiles go through a ``stages``-deep
  ``cp.async`` shared-memory pipeline (16-byte vectors, zero-filled when masked off) with an XOR
  swizzle so ``ldmatrix`` reads are free of bank conflicts; warps form a ``WM x WN`` grid over the tile.
- **float32**: exact fp32 FMA on a 16 x (threads/16) thread grid (the simpler path), element-wise loads.

The innermost ForLoop (``k = ...; LoadTile A; LoadTile B; Multiply``) becomes a software pipeline:
its trip count is found once per tile from the loop condition (it holds on a prefix, bounded by
``ForLoop.extent``: one test at the end of the range, else bisection), then iteration ``f + stages - 1``
is fetched while ``f`` computes.
Accumulators live in registers as ``acc[NACC]``; partials go to the fp32 workspace thread-major
(``ws[slot][e][tid]``, coalesced), and flags use the ``ld.acquire`` / ``red.release`` templates.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

import sympy

from ctgraph import control as C

from .divisors import PRELUDE as DIVISORS
from .divisors import fast_divisors
from .options import CudaOptions, warp_grid
from .printer import IndexPrinter, cxx
from .ptx import render

__all__ = ["generate", "layout"]

ELEM = {"float16": "half", "float32": "float"}
SPIN_LIMIT = 1 << 24  # polls of a fixup flag before the kernel traps: an error (seconds), never a hang


def layout(macro_tile: tuple[int, int, int], dtype: str, opts: CudaOptions) -> dict[str, int]:
    """Tile constants of the kernel; ``ValueError`` when the macro tile does not fit the instruction set."""
    bm, bn, bk = macro_tile
    warps, stages = opts.mma_shape(macro_tile, dtype)
    t = 32 * warps
    if dtype == "float16":
        grid = warp_grid(bm, bn, warps)
        if grid is None or bk % 16:
            raise ValueError(
                f"macro_tile {macro_tile} does not fit the fp16 mma path with {warps} warps: it needs a "
                f"WM x WN grid of the warps with BM a multiple of 16*WM and BN of 16*WN, and BK a multiple of 16"
            )
        wm, wn = grid
        mi, ni = bm // wm // 16, bn // wn // 8
        return {
            "BM": bm,
            "BN": bn,
            "BK": bk,
            "THREADS": t,
            "BLOCK": t,
            "WM": wm,
            "WN": wn,
            "MI": mi,
            "NI": ni,
            "NACC": mi * ni * 4,
            "STAGES": stages,
            "A_STAGE": bm * bk,
            "B_STAGE": bk * bn,
            "SMEM_BYTES": stages * (bm * bk + bk * bn) * 2,
        }
    ty = t // 16  # fp32 FMA path: a 16 x (threads/16) thread grid, each thread a strided TM x TN block
    if bm % ty or bn % 16:
        raise ValueError(
            f"the fp32 FMA path with {warps} warps needs BM a multiple of {ty} and BN of 16, "
            f"got macro_tile {macro_tile}"
        )
    stages = min(stages, 2)  # element loads are synchronous: a deeper pipeline buys nothing
    # NOTE: A rows are padded by one float so the column reads of the FMA loop avoid bank conflicts.
    return {
        "BM": bm,
        "BN": bn,
        "BK": bk,
        "THREADS": t,
        "BLOCK": t,
        "TY": ty,
        "TM": bm // ty,
        "TN": bn // 16,
        "NACC": (bm // ty) * (bn // 16),
        "STAGES": stages,
        "A_STAGE": bm * (bk + 1),
        "B_STAGE": bk * bn,
        "SMEM_BYTES": stages * (bm * (bk + 1) + bk * bn) * 4,
    }


@dataclass(frozen=True)
class _Hoisted:
    """A vector tile load split by :meth:`_Codegen._hoist`: vectors per thread, row step, per-fetch mask,
    and the symbols of the thread's first row and its column."""

    reps: int
    di: int
    moving: sympy.Expr
    i0: sympy.Symbol
    j0: sympy.Symbol

    @property
    def periodic(self) -> bool:
        """``swz`` depends on ``row & 7`` only: rows ``i0 + r*di`` with ``di % 8 == 0`` share ``i0``'s swizzle,
        so vector ``r``'s shared-memory slot is vector 0's plus ``r*di`` rows."""
        return self.di % 8 == 0


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str = "") -> None:
        self.lines.append("    " * self.depth + line if line else "")

    def open(self, line: str) -> None:
        self(line + " {")
        self.depth += 1

    def close(self, tail: str = "") -> None:
        self.depth -= 1
        self("}" + tail)


def generate(cg: C.ControlGraph, opts: CudaOptions) -> str:
    """One CUDA C++ translation unit with an entry point per kernel of the control graph (byte-identical for
    the same graph and options)."""
    templates: set[str] = set()
    divisors = fast_divisors(cg)  # NOTE: of the whole unit: its kernels share one parameter list
    if opts.mainloop == "wgmma":
        from .hopper import HopperCodegen

        parts: list[_Codegen] = [HopperCodegen(cg, opts, tag, templates, divisors) for tag in cg.kernels]
    else:
        templates |= {"cp_async_commit", "cp_async_wait"}
        parts = [_Codegen(cg, opts, tag, templates, divisors) for tag in cg.kernels]
    bodies = "\n".join(p.body for p in parts)
    return parts[0].prelude(bodies) + bodies


class _Codegen:
    sync = "__syncthreads();"  # the barrier of the threads that run the fixup and epilogue
    nacc = "NACC"  # the length of ``acc``: a thread's accumulators
    first_acc = "0"  # which of the thread's accumulators ``acc[0]`` is (a CTA that holds a slice: see hopper.py)

    def __init__(
        self,
        cg: C.ControlGraph,
        opts: CudaOptions,
        kernel: int,
        templates: set[str],
        divisors: frozenset[sympy.Symbol],
    ) -> None:
        self.cg, self.tag = cg, kernel
        self.kernel: C.Kernel = cg[kernel]  # type: ignore[assignment]
        self.dtype = self.kernel.dtype
        # NOTE: warps and stages are the mma path's; the wgmma path sizes its own warpgroups and ring
        self.opts = opts if opts.mainloop == "wgmma" else opts.for_tile(self.kernel.macro_tile, self.dtype)
        self.mma = self.dtype == "float16"
        self.L = self.layout()
        self.vector = opts.vector and self.mma
        self.templates = templates  # NOTE: shared by the kernels of one unit; the prelude renders them all
        self.divisors = divisors  # the unit's ctg::Divisor parameters (fast_divisors)
        self.printer = IndexPrinter(self.divisors)
        self.w = _Writer()
        self.body = self._kernel()

    def layout(self) -> dict[str, int]:
        return layout(self.kernel.macro_tile, self.dtype, self.opts)

    # --- pieces ------------------------------------------------------------------------------------

    def cxx(self, e: sympy.Basic | int) -> str:
        """C++ text of an index expression, dividing by ``ctg::Divisor`` parameters."""
        return cxx(e, self.printer)

    def _params(self) -> str:
        """The kernel's size parameters: ``int``, or ``ctg::Divisor`` for those that index math divides by."""
        return ", ".join(
            f"const {'ctg::Divisor' if p in self.divisors else 'int'} {p.name}" for p in self.kernel.params
        )

    def _divisor_prelude(self) -> str:
        return f"{DIVISORS}\n" if self.divisors else ""

    def constants(self, used: str) -> str:
        """``constexpr`` lines for the layout constants that ``used`` (kernels, templates) names: nvcc warns
        of the others."""
        words = set(re.findall(r"\w+", used))
        return "\n".join(f"constexpr int {k} = {v};" for k, v in self.L.items() if k in words)

    def prelude(self, bodies: str) -> str:
        templates = render(self.templates)
        consts = self.constants(bodies + templates)
        return (
            "// Generated by ctgraph: do not edit. One CTA runs one workgroup of the control graph.\n"
            f"// kernel {self.kernel.name}: macro tile {self.kernel.macro_tile}, {self.dtype}, {self.opts}\n"
            "#include <cuda_fp16.h>\n\n"
            "namespace ctg {\n"
            f"{consts}\n"
            f"{self._divisor_prelude()}"
            f"{templates}\n\n"
            "// XOR swizzle of 16-byte chunks so that 8 consecutive rows hit 8 different bank groups; the chunks of\n"
            "// a row past its last whole group of 8 (cpr % 8 of them) stay in place: XORed, they would leave the row\n"
            "__device__ __forceinline__ int swz(int row, int chunk, int cpr) {\n"
            "    return cpr >= 8 ? ((chunk | 7) < cpr ? chunk ^ (row & 7) : chunk)\n"
            "         : cpr == 4 ? chunk ^ ((row >> 1) & 3) : cpr == 2 ? chunk ^ ((row >> 2) & 1) : chunk;\n"
            "}\n"
            "}  // namespace ctg\n\n"
        )

    def _kernel(self) -> str:
        w, k = self.w, self.kernel
        elem = ELEM[self.dtype]
        params = self._params()
        w(f'extern "C" __global__ void __launch_bounds__(ctg::THREADS, {self.opts.ctas_per_sm}) {k.name}(')
        w(f"    const {elem}* __restrict__ A, const {elem}* __restrict__ B, const {elem}* C, {elem}* D,")
        w("    const float alpha, const float beta, float* __restrict__ workspace, unsigned* __restrict__ flags,")
        w(f"    {params})")
        w("{")
        w.depth += 1
        w("using namespace ctg;")
        if any(isinstance(self.cg[t], C.LoadTile) for t, _ in self.cg.walk(self.tag)):
            w(f"extern __shared__ __align__(128) {elem} smem_[];")
            w(f"{elem}* const sA_ = smem_;")
            w(f"{elem}* const sB_ = smem_ + STAGES * A_STAGE;")
        w("const int tid_ = threadIdx.x;")
        if self.mma:
            w("const int lane_ = tid_ & 31, warp_m_ = (tid_ >> 5) / WN, warp_n_ = (tid_ >> 5) % WN;")
        else:
            w("const int tx_ = tid_ & 15, ty_ = tid_ >> 4;")
        w(f"const int {k.workgroup.name} = blockIdx.x;")
        for sym in sorted(self._variables(), key=lambda s: s.name):
            w(f"int {sym.name} = 0;")
        w("float acc[NACC];")
        self._body(self.tag)
        w.depth -= 1
        w("}")
        return "\n".join(w.lines) + "\n"

    def _is_mainloop(self, tag: int) -> bool:
        """The innermost K loop ``k = ...; LoadTile A; LoadTile B; Multiply``, lowered by :meth:`_mainloop`."""
        return [type(self.cg[c]) for c in self.cg.body(tag)] == [C.Assign, C.LoadTile, C.LoadTile, C.Multiply]

    def _variables(self) -> set[sympy.Symbol]:
        """The kernel-scope ``int`` variables: loop counters and assignment targets, except a K loop's
        K-tile index, which each fetch declares for itself."""
        out, local = set(), set()
        for t, _ in self.cg.walk(self.tag):
            node = self.cg[t]
            if isinstance(node, C.Assign):
                out.add(node.target)
            elif isinstance(node, C.ForLoop):
                out.add(node.counter)
                if self._is_mainloop(t):
                    local.add(self.cg[self.cg.body(t)[0]].target)
        return out - local

    def _body(self, tag: int) -> None:
        for child in self.cg.body(tag):
            node = self.cg[child]
            getattr(self, f"_{type(node).__name__}")(child, node)

    # --- control -----------------------------------------------------------------------------------

    def _ForLoop(self, tag: int, node: C.ForLoop) -> None:
        if self._is_mainloop(tag):
            self._mainloop(tag, node)
            return
        c = node.counter.name
        self.w.open(f"for ({c} = {self.cxx(node.init)}; {self.cxx(node.condition)}; {c} += {self.cxx(node.increment)})")
        self._loop_body(tag)
        self.w.close()

    def _loop_body(self, tag: int) -> None:
        """The body of loop ``tag`` (not a K loop), inside its ``for``."""
        self._body(tag)

    def _If(self, tag: int, node: C.If) -> None:
        self.w.open(f"if ({self.cxx(node.condition)})")
        self._body(tag)
        self.w.close()

    def _Assign(self, tag: int, node: C.Assign) -> None:
        self.w(f"{node.target.name} = {self.cxx(node.value)};")

    def _ZeroAccumulator(self, tag: int, node: C.ZeroAccumulator) -> None:
        self.w("#pragma unroll")
        self.w(f"for (int e_ = 0; e_ < {self.nacc}; ++e_) acc[e_] = 0.f;")

    # --- the pipelined K loop ----------------------------------------------------------------------

    def _mainloop(self, tag: int, node: C.ForLoop) -> None:
        w = self.w
        assign, load_a, load_b, _ = (self.cg[c] for c in self.cg.body(tag))
        fk = node.counter
        f = sympy.Symbol("f_", integer=True, nonnegative=True)
        w.open("")  # scope of the mainloop
        self._trip_count(node)

        self._k_name = assign.target.name
        plans = {node.tensor: self._hoist(node, assign.target) for node in (load_a, load_b)}

        def head(index: str) -> list[Callable[[], None]]:
            """Declare fetch ``index``'s stage, K tile and predicate; issue the loads that are not hoisted
            and return the hoisted ones, one vector each, to be placed among the MMAs (no branch: each
            ``cp.async`` carries the predicate ``fetch_``)."""
            w(f"const int f_ = {index}, stage_ = f_ % STAGES;")
            w("const bool fetch_ = f_ < count_;")
            w(f"const int {assign.target.name} = {self.cxx(assign.value.subs(fk, f))};")
            vectors: list[Callable[[], None]] = []
            for load, buf, stage_size in ((load_a, "sA_", "A_STAGE"), (load_b, "sB_", "B_STAGE")):
                plan = plans[load.tensor]
                if plan is None:
                    w.open("if (fetch_)")
                    self._load(load, buf, stage_size)
                    w.close()
                else:
                    vectors += self._fetch_vectors(load, buf, stage_size, plan)
            return vectors

        def fetch(index: str) -> None:
            """All of fetch ``index`` at once, committed as one group."""
            for vector in head(index):
                vector()
            w("cp_async_commit();")

        w("#pragma unroll 1")
        w.open("for (int s_ = 0; s_ < STAGES - 1; ++s_)")
        fetch("s_")
        w.close()
        if self.mma:
            self._mma_loop(fk.name, lambda: head(f"{fk.name} + STAGES - 1"))
        else:
            w("#pragma unroll 1")
            w.open(f"for ({fk.name} = 0; {fk.name} < count_; ++{fk.name})")
            w("cp_async_wait<STAGES - 2>();")
            w("__syncthreads();")
            self._fma(f"{fk.name} % STAGES")
            fetch(f"{fk.name} + STAGES - 1")
            w.close()
        w("cp_async_wait<0>();")
        w("__syncthreads();")
        w.close()

    def _trip_count(self, node: C.ForLoop) -> None:
        """Declare ``count_``, the trip count of K loop ``node``, whose condition holds on a prefix of
        ``[0, extent]``: when it holds at ``extent - 1`` the loop runs the whole range (one test: every tile
        a workgroup does not share), else bisection finds where it stops. Each test is serial index math
        (~250 cycles on the H100), paid per tile before the tile's first load and first MMA."""
        if node.increment != 1 or node.extent is None:
            raise NotImplementedError("the CUDA mainloop needs a unit-step K loop with a known extent")
        w, f = self.w, sympy.Symbol("f_", integer=True, nonnegative=True)
        cond = self.cxx(node.condition.subs(node.counter, f))
        w(f"// K loop: trip count from its condition (true on a prefix of [0, {self.cxx(node.extent)}])")
        w(f"int lo_ = 0, hi_ = {self.cxx(node.extent)};")
        w.open("if (hi_ > 0)")
        w("const int f_ = hi_ - 1;")
        w(f"if ({cond}) lo_ = hi_;  // the whole range")
        w.close()
        w.open("while (lo_ < hi_)")
        w("const int f_ = (lo_ + hi_) >> 1;")
        w(f"if ({cond}) lo_ = f_ + 1; else hi_ = f_;")
        w.close()
        w("const int count_ = lo_;")

    def _hoist(self, node: C.LoadTile, k: sympy.Symbol) -> _Hoisted | None:
        """Split a vector tile load into what is fixed for the whole K loop and what moves with ``k``.

        Thread ``tid`` loads vectors ``v = tid + r*THREADS``, i.e. rows ``i = i0 + r*di`` at the fixed
        column ``j0``. When the address is affine in ``i`` and ``k``, it is ``base + r*d_i*di + k*d_k``:
        one pointer per thread, computed once per tile. Mask conditions free of ``k`` become a per-tile
        bit mask over ``r``; the others are evaluated per fetch.
        """
        if not self.vector:
            return None
        rows, cols = node.shape
        threads, cpr = self.L["THREADS"], cols // 8
        if threads % cpr or (rows * cpr) % threads or rows * cpr // threads > 32:
            return None
        i, j = node.row, node.col
        address = sympy.expand(node.address)
        d_i, d_k = sympy.diff(address, i), sympy.diff(address, k)
        if (d_i.free_symbols | d_k.free_symbols) & {i, j, k} or address.has(sympy.Derivative):
            return None
        conds = sympy.And.make_args(node.mask)
        fixed = sympy.And(*[c for c in conds if k not in c.free_symbols])
        moving = sympy.And(*[c for c in conds if k in c.free_symbols])
        x, di, reps = node.tensor, threads // cpr, rows * cpr // threads
        w = self.w
        i0, j0 = sympy.Symbol(f"{x}_i0_", integer=True), sympy.Symbol(f"{x}_j0_", integer=True)
        w(f"// {x} loads: pointer, strides, row mask and shared-memory slot fixed for the whole K loop")
        w(f"const int {x}_i0_ = tid_ / {cpr}, {x}_j0_ = (tid_ % {cpr}) * 8;")
        plan = _Hoisted(reps, di, moving, i0, j0)
        if plan.periodic:  # the slot of vector 0 (_fetch_vectors adds r*di rows)
            w(f"const int {x}_s0_ = {x}_i0_ * {cols} + swz({x}_i0_, {x}_j0_ / 8, {cpr}) * 8;")
        base = address.subs({i: i0, j: j0, k: 0})
        w(f"const half* const {x}_base_ = {x} + ({self.cxx(base)});")
        w(f"const int {x}_dk_ = {self.cxx(d_k)}, {x}_dr_ = {self.cxx(d_i * di)};")
        w(f"unsigned {x}_rows_ = 0;")
        w("#pragma unroll")
        w.open(f"for (int r_ = 0; r_ < {reps}; ++r_)")
        bind = {i: f"{x}_i0_ + r_ * {di}", j: f"{x}_j0_"}
        w(
            ", ".join(f"const int {sym.name} = {bind[sym]}" for sym in (i, j) if sym in fixed.free_symbols) + ";"
            if fixed.free_symbols & {i, j}
            else "// (the row mask does not depend on the element)"
        )
        w(f"{x}_rows_ |= (unsigned)({self.cxx(fixed)}) << r_;")
        w.close()
        return plan

    def _fetch_vectors(self, node: C.LoadTile, buf: str, stage_size: str, plan: _Hoisted) -> list[Callable[[], None]]:
        """Declare the pointer and slot of this fetch of a hoisted tile load; return one emitter per vector.

        Vector ``r`` reads ``p + r*dr`` into slot ``dst + r*di*cols`` where the plan is periodic (the offset is
        a constant of the instruction), else into its own swizzled slot. A masked-off vector reads 0 bytes
        (zero fill): its address is never dereferenced."""
        w, x = self.w, node.tensor
        rows, cols = node.shape
        cpr, i, j = cols // 8, node.row, node.col
        self.templates |= {"cp_async_16", "smem_addr"}
        w(f"// {x} tile {rows}x{cols}: 16-byte cp.async vectors, swizzled; pointer moves by k")
        w(f"const half* const {x}_p_ = {x}_base_ + {self._k_name} * {x}_dk_;")
        if plan.periodic:
            w(f"const unsigned {x}_dst_ = smem_addr({buf} + stage_ * {stage_size} + {x}_s0_);")

        def vector(r: int) -> None:
            row = plan.i0 + r * plan.di
            slot = (
                (f"{x}_dst_ + {r * plan.di * cols * 2}" if r else f"{x}_dst_")
                if plan.periodic
                else f"smem_addr({buf} + stage_ * {stage_size} + ({self.cxx(row)}) * {cols} + "
                f"swz({self.cxx(row)}, {x}_j0_ / 8, {cpr}) * 8)"
            )
            ok = f"(({x}_rows_ >> {r}) & 1u)"
            if plan.moving != sympy.true:
                ok += f" && {self.cxx(plan.moving.subs({i: row, j: plan.j0}))}"
            src = f"{x}_p_ + {r} * {x}_dr_" if r else f"{x}_p_"
            w(f"cp_async_16({slot}, {src}, ({ok}) ? 16 : 0, fetch_);")

        return [functools.partial(vector, r) for r in range(plan.reps)]

    def _load(self, node: C.LoadTile, buf: str, stage_size: str) -> None:
        """Fill stage ``stage_`` of ``buf`` with the tile of ``node`` (masked elements are 0)."""
        w = self.w
        rows, cols = node.shape
        i, j = node.row.name, node.col.name
        dst = f"{buf} + stage_ * {stage_size}"
        w.open("")
        if self.vector:
            self.templates |= {"cp_async_16", "smem_addr"}
            cpr = cols // 8
            w(f"// {node.tensor} tile {rows}x{cols}: 16-byte cp.async vectors, swizzled")
            self._strided("v_", rows * cpr, "#pragma unroll")
            w(f"const int {i} = v_ / {cpr}, {j} = (v_ % {cpr}) * 8;")
            w(f"const bool ok_ = {self.cxx(node.mask)};")
            w(f"const half* src_ = ok_ ? {node.tensor} + ({self.cxx(node.address)}) : {node.tensor};")
            slot = f"smem_addr({dst} + {i} * {cols} + swz({i}, v_ % {cpr}, {cpr}) * 8)"
            w(f"cp_async_16({slot}, src_, ok_ ? 16 : 0, true);")
            self._end_strided(rows * cpr)
        else:
            pitch = cols + 1 if (not self.mma and node.tensor == "A") else cols
            w(f"// {node.tensor} tile {rows}x{cols}: element loads")
            self._strided("e_", rows * cols, "#pragma unroll 4")
            w(f"const int {i} = e_ / {cols}, {j} = e_ % {cols};")
            if self.mma:
                slot = f"{i} * {cols} + swz({i}, {j} / 8, {cols // 8}) * 8 + {j} % 8"
                zero = "__float2half(0.f)"
            else:
                slot, zero = f"{i} * {pitch} + {j}", "0.f"
            w(f"({dst})[{slot}] = ({self.cxx(node.mask)}) ? {node.tensor}[{self.cxx(node.address)}] : {zero};")
            self._end_strided(rows * cols)
        w.close()

    def _strided(self, var: str, total: int, pragma: str) -> None:
        """Open ``for`` over ``var = tid_, tid_ + THREADS, ... < total`` with a constant trip count (so it unrolls)."""
        threads = self.L["THREADS"]
        self.w(pragma)
        self.w.open(f"for (int r_ = 0; r_ < {-(-total // threads)}; ++r_)")
        self.w(f"const int {var} = tid_ + r_ * THREADS;")
        if total % threads:
            self.w.open(f"if ({var} < {total})")

    def _end_strided(self, total: int) -> None:
        if total % self.L["THREADS"]:
            self.w.close()
        self.w.close()

    def _mma_loop(self, fk: str, fetch: Callable[[], list[Callable[[], None]]]) -> None:
        """The tensor-core K loop, software-pipelined at two levels.

        Shared memory: iteration ``f`` multiplies stage ``f % STAGES`` while stage ``(f-1) % STAGES`` is
        refilled with iteration ``f + STAGES - 1``: its index math from k16 step ``fetch_step`` on, its
        ``cp.async`` vectors spread over the remaining steps, all in the one basic block of the iteration
        (predicated, no branch) so the scheduler interleaves them with the MMAs. Registers: the
        ``ldmatrix`` fragments of step ``ks+1`` load while step ``ks`` multiplies, and the *next* stage's
        first fragments load -- after the one barrier of the iteration -- while the last step multiplies,
        so no step waits on shared memory.
        """
        w, ks_count = self.w, self.L["BK"] // 16
        self.templates |= {"ldmatrix_x4", "ldmatrix_x4_trans", "mma_m16n8k16", "smem_addr"}
        w("unsigned fa_[2][MI][4], fb_[2][NI][2];")
        # NOTE: swz depends on row & 7 only, and every fragment row is lane_ & 7 modulo 8 (warp tiles and
        # k16 steps are multiples of 16 rows): the byte offsets within a stage are fixed per lane, one per
        # k16 step for A (fragment mi adds a constant) and one per column pair for B (step ks adds one).
        w("unsigned a_off_[BK / 16], b_off_[NI / 2];")
        w("#pragma unroll")
        w.open("for (int ks_ = 0; ks_ < BK / 16; ++ks_)")
        w("const int c_ = ks_ * 2 + (lane_ >> 4);")
        w("a_off_[ks_] = ((warp_m_ * (BM / WM) + (lane_ & 15)) * BK + swz(lane_ & 7, c_, BK / 8) * 8) * 2;")
        w.close()
        w("#pragma unroll")
        w.open("for (int p_ = 0; p_ < NI / 2; ++p_)")
        w("const int c_ = (warp_n_ * (BN / WN) + p_ * 16) / 8 + (lane_ >> 4);")
        w("b_off_[p_] = (((lane_ & 7) + ((lane_ >> 3) & 1) * 8) * BN + swz(lane_ & 7, c_, BN / 8) * 8) * 2;")
        w.close()
        w("const unsigned sa_ = smem_addr(sA_), sb_ = smem_addr(sB_);")
        w.open("auto frags_ = [&](const int buf, const int stage, const int ks)")
        w("const unsigned a_ = sa_ + stage * (A_STAGE * 2) + a_off_[ks];")
        w("const unsigned b_ = sb_ + stage * (B_STAGE * 2) + ks * (16 * BN * 2);")
        w("#pragma unroll")
        w("for (int mi_ = 0; mi_ < MI; ++mi_) ldmatrix_x4(fa_[buf][mi_], a_ + mi_ * (16 * BK * 2));")
        w("#pragma unroll")
        w.open("for (int p_ = 0; p_ < NI / 2; ++p_)")
        w("unsigned t_[4];")
        w("ldmatrix_x4_trans(t_, b_ + b_off_[p_]);")
        w("fb_[buf][2 * p_][0] = t_[0]; fb_[buf][2 * p_][1] = t_[1];")
        w("fb_[buf][2 * p_ + 1][0] = t_[2]; fb_[buf][2 * p_ + 1][1] = t_[3];")
        w.close()
        w.close(";")
        w("cp_async_wait<STAGES - 2>();")
        w("__syncthreads();")
        w("frags_(0, 0, 0);")
        w("#pragma unroll 1")
        w.open(f"for ({fk} = 0; {fk} < count_; ++{fk})")
        w(f"const int cs_ = {fk} % STAGES, ns_ = ({fk} + 1) % STAGES;")
        fetch_at = min(self.opts.fetch_step, ks_count - 1)
        vectors: list[Callable[[], None]] = []
        for ks in range(ks_count):
            if ks == fetch_at:
                vectors = fetch()
            if ks >= fetch_at:
                steps, t = ks_count - fetch_at, ks - fetch_at
                for vector in vectors[t * len(vectors) // steps : (t + 1) * len(vectors) // steps]:
                    vector()
            if ks == ks_count - 1:
                w("cp_async_commit();")
                w("cp_async_wait<STAGES - 2>();  // the next stage has landed ...")
                w("__syncthreads();  // ... for every thread, and nobody reads the stage the next fetch refills")
                w(f"frags_({ks_count & 1}, ns_, 0);")
            else:
                w(f"frags_({(ks + 1) & 1}, cs_, {ks + 1});")
            w("#pragma unroll")
            w("for (int mi_ = 0; mi_ < MI; ++mi_)")
            w("#pragma unroll")
            w("    for (int ni_ = 0; ni_ < NI; ++ni_)")
            w(f"        mma_m16n8k16(acc + (mi_ * NI + ni_) * 4, fa_[{ks & 1}][mi_], fb_[{ks & 1}][ni_]);")
        if ks_count % 2:  # the next stage's first fragments went to buffer 1; the loop starts from buffer 0
            w("#pragma unroll")
            w("for (int q_ = 0; q_ < MI * 4; ++q_) fa_[0][q_ / 4][q_ % 4] = fa_[1][q_ / 4][q_ % 4];")
            w("#pragma unroll")
            w("for (int q_ = 0; q_ < NI * 2; ++q_) fb_[0][q_ / 2][q_ % 2] = fb_[1][q_ / 2][q_ % 2];")
        w.close()

    def _fma(self, stage: str) -> None:
        """fp32 FMA on stage ``stage``: each thread a strided TM x TN block of the tile."""
        w = self.w
        w.open("")
        w(f"const float* a_ = sA_ + ({stage}) * A_STAGE;")
        w(f"const float* b_ = sB_ + ({stage}) * B_STAGE;")
        w("#pragma unroll 4")
        w.open("for (int kk_ = 0; kk_ < BK; ++kk_)")
        w("float ra_[TM], rb_[TN];")
        w("#pragma unroll")
        w("for (int r_ = 0; r_ < TM; ++r_) ra_[r_] = a_[(ty_ + TY * r_) * (BK + 1) + kk_];")
        w("#pragma unroll")
        w("for (int c_ = 0; c_ < TN; ++c_) rb_[c_] = b_[kk_ * BN + tx_ + 16 * c_];")
        w("#pragma unroll")
        w("for (int r_ = 0; r_ < TM; ++r_)")
        w("#pragma unroll")
        w("    for (int c_ = 0; c_ < TN; ++c_) acc[r_ * TN + c_] = fmaf(ra_[r_], rb_[c_], acc[r_ * TN + c_]);")
        w.close()
        w.close()

    # --- fixup and epilogue --------------------------------------------------------------------------

    def _slot(self, slot: sympy.Expr) -> str:
        """This CTA's fp32 partial tile in workspace slot ``slot``."""
        return f"workspace + (size_t)({self.cxx(slot)}) * (BM * BN)"

    def _flag(self, flag: sympy.Expr) -> str:
        """This CTA's fixup flag ``flag``."""
        return f"flags + ({self.cxx(flag)})"

    def _StorePartial(self, tag: int, node: C.StorePartial) -> None:
        self.w.open("")
        self.w(f"float* ws_ = {self._slot(node.slot)};")
        self.w("#pragma unroll")
        self.w("for (int e_ = 0; e_ < NACC; ++e_) ws_[e_ * THREADS + tid_] = acc[e_];")
        self.w.close()

    def _AccumulatePartial(self, tag: int, node: C.AccumulatePartial) -> None:
        self.w.open("")
        self.w(f"const float* ws_ = {self._slot(node.slot)};")
        self.w("#pragma unroll")
        self.w("for (int e_ = 0; e_ < NACC; ++e_) acc[e_] += ws_[e_ * THREADS + tid_];")
        self.w.close()

    def _Signal(self, tag: int, node: C.Signal) -> None:
        if node.value:
            self.templates.add("red_release_add")
            self.w(f"{self.sync}  // every thread's partial is written before the release")
            self.w(f"if (tid_ == 0) red_release_add({self._flag(node.flag)}, {node.value}u);")
        else:
            self.templates.add("st_relaxed")
            self.w(f"if (tid_ == 0) st_relaxed({self._flag(node.flag)}, 0u);  // reset for the next launch")

    def _Wait(self, tag: int, node: C.Wait) -> None:
        self.w.open("if (tid_ == 0)")
        self._spin(node)
        self.w.close()
        self.w(self.sync)

    def _spin(self, node: C.Wait) -> None:
        """Poll the flag with acquire loads until it holds the value; trap after ``SPIN_LIMIT`` polls."""
        self.templates.add("ld_acquire")
        self.w(f"unsigned spins_ = 0, limit_ = {SPIN_LIMIT}u;")
        self.w(f"while (ld_acquire({self._flag(node.flag)}) != {node.value}u)")
        self.w("    if (++spins_ > limit_) __trap();  // a flag that never comes is an error, not a hang")

    def _acc_element(self) -> str:
        """C++ of the accumulator that ``acc[e_]`` holds: ``e_``, or ``first_acc + e_`` in a slice."""
        return "e_" if self.first_acc == "0" else f"({self.first_acc} + e_)"

    def _acc_coords(self) -> tuple[str, str]:
        """Tile row and column of ``acc[e_]`` of this thread."""
        e = self._acc_element()
        if self.mma:
            row = f"warp_m_ * (BM / WM) + ({e} / (NI * 4)) * 16 + (lane_ >> 2) + (({e} & 2) ? 8 : 0)"
            col = f"warp_n_ * (BN / WN) + (({e} / 4) % NI) * 8 + (lane_ & 3) * 2 + ({e} & 1)"
        else:
            row, col = f"ty_ + TY * ({e} / TN)", f"tx_ + 16 * ({e} % TN)"
        return row, col

    def _Epilogue(self, tag: int, node: C.Epilogue) -> None:
        w = self.w
        row, col = self._acc_coords()
        i, j = node.row, node.col
        # NOTE: fp16 fragments hold column pairs (j, j+1) in elements (e, e+1): one 4-byte store when the
        # pair is in bounds and D's address steps by one along j (an aligned half2).
        step = sympy.expand(node.address.subs(j, j + 1) - node.address)
        if self.dtype != "float16" or step != 1:
            self._epilogue_scalar(node, row, col)
            return
        w("#pragma unroll")
        w.open(f"for (int e_ = 0; e_ < {self.nacc}; e_ += 2)")
        w(f"const int {i.name} = {row}, {j.name} = {col};")
        w(f"const bool ok0_ = {self.cxx(node.mask)}, ok1_ = {self.cxx(node.mask.subs(j, j + 1))};")
        w(f"const int at_ = {self.cxx(node.address)};")
        w("float v0_ = alpha * acc[e_], v1_ = alpha * acc[e_ + 1];")
        w.open("if (beta != 0.f)")
        w("if (ok0_) v0_ += beta * __half2float(C[at_]);")
        w("if (ok1_) v1_ += beta * __half2float(C[at_ + 1]);")
        w.close()
        w(
            "if (ok0_ && ok1_ && (reinterpret_cast<size_t>(D + at_) & 3) == 0) "
            "*reinterpret_cast<__half2*>(D + at_) = __halves2half2(__float2half(v0_), __float2half(v1_));"
        )
        w.open("else")
        w("if (ok0_) D[at_] = __float2half(v0_);")
        w("if (ok1_) D[at_ + 1] = __float2half(v1_);")
        w.close()
        w.close()

    def _epilogue_scalar(self, node: C.Epilogue, row: str, col: str) -> None:
        w = self.w
        i, j = node.row.name, node.col.name
        cast = "__float2half" if self.dtype == "float16" else ""
        load = "__half2float" if self.dtype == "float16" else ""
        w("#pragma unroll")
        w.open(f"for (int e_ = 0; e_ < {self.nacc}; ++e_)")
        w(f"const int {i} = {row}, {j} = {col};")
        w.open(f"if ({self.cxx(node.mask)})")
        w(f"const int at_ = {self.cxx(node.address)};")
        w("float v_ = alpha * acc[e_];")
        w(f"if (beta != 0.f) v_ += beta * {load}(C[at_]);")
        w(f"D[at_] = {cast}(v_);")
        w.close()
        w.close()
