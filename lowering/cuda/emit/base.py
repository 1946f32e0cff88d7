"""The shared base of the CUDA emitters: a control graph's kernel -> CUDA C++ text, node by node.

Sits after the plan (:mod:`lowering.cuda.plan`) and before nvcc: :class:`Emitter` walks the control graph of one
kernel and prints loops, assignments and conditions from their expressions (:mod:`lowering.cuda.printer`), the
accumulators (``acc[NACC]``), the K loop's trip count, the fixup (partials to the fp32 workspace thread-major,
``ws[slot][e][tid]``, coalesced; flags through the ``ld.acquire`` / ``red.release`` templates) and the register
epilogue. The mma.sync emitter (:mod:`.mma`) and the Hopper emitter (:mod:`.hopper`) add the kernel's frame and its
K loop; :mod:`lowering.cuda.emit` picks one per unit.
"""

from __future__ import annotations

import functools
import re
from typing import Protocol

import sympy

from ctgraph import control as C
from ctgraph.expr import FloorDiv, Mod

from ..divisors import PRELUDE as DIVISORS
from ..options import CudaOptions
from ..printer import IndexPrinter, cxx

__all__ = ["ELEM", "SPIN_LIMIT", "Emitter", "Plan", "Writer", "loads_tiles", "trip_guess"]

ELEM = {"float16": "half", "float32": "float"}
SPIN_LIMIT = 1 << 24  # polls of a fixup flag before the kernel traps: an error (seconds), never a hang


class Plan(Protocol):
    """A kernel's resource plan, as the emitter reads it: its constants by name."""

    def constants(self) -> dict[str, int]: ...


def loads_tiles(cg: C.ControlGraph, tag: int) -> bool:
    """Does node ``tag`` (a kernel: else it only adds partials, split-K's reduction) load tiles below it?"""
    return any(isinstance(cg[t], C.LoadTile) for t, _ in cg.walk(tag))


@functools.lru_cache(maxsize=256)
def trip_guess(condition: sympy.Basic, f: sympy.Symbol) -> sympy.Expr | None:
    """Where the prefix of ``[0, ...)`` on which ``condition`` holds most likely ends: the first ``f`` at which some
    term of it can change, or None where no term says.

    A term ``x // D`` or ``x % D`` with ``x = f + s`` (``s`` free of ``f``) changes first at ``f = D - s % D`` (the next
    multiple of ``D``: the end of a K tile, for ``x // numTilesK``); a term ``f + a < b`` at ``f = b - a`` (the end of
    a workgroup's range). The guess is the least of these. It is only a guess: the trip count is taken from it only
    where the condition holds just before it and fails at it (:meth:`Emitter._trip_count`), so a wrong guess costs
    two tests, never a wrong count.

    Remembered per condition (a pure function of it): sizes are kernel parameters, so the K loops of every config
    of a schedule share a few conditions, and ``Min`` of their ends, which sympy orders term against term, cost ~8
    ms each time.
    """
    ends: list[sympy.Expr] = []
    for atom in sorted(condition.atoms(FloorDiv, Mod), key=sympy.default_sort_key):
        x, d = atom.args
        rest = sympy.expand(x - f)
        if x.has(f) and not rest.has(f) and not d.has(f):
            ends.append(d - Mod(rest, d))
    for rel in sorted(condition.atoms(sympy.StrictLessThan), key=sympy.default_sort_key):
        below = sympy.expand(rel.rhs - (rel.lhs - f))  # lhs < rhs  <=>  f < rhs - (lhs - f)
        if rel.lhs.has(f) and not below.has(f):
            ends.append(below)
    return sympy.Min(*ends) if ends else None


class Writer:
    """Lines of C++ at an indentation depth."""

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


class Emitter:
    """Prints one kernel of a control graph; a subclass provides the plan (:meth:`_plan`), the prelude, the kernel's
    frame (:meth:`_kernel`) and its K loop (:meth:`_mainloop`).

    What varies per kernel is set up front, before printing (:meth:`_setup`): ``sync``, the barrier of the threads
    that run the fixup and epilogue; ``nacc``, the length of ``acc`` (a thread's accumulators); ``first_acc``, which
    of the thread's accumulators ``acc[0]`` is (a CTA that holds a slice: the Hopper reduction kernel)."""

    sync: str
    nacc: str
    first_acc: str

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
        self.plan = self._plan()
        self.L = self.plan.constants()  # the plan's constants by name: what the printer reads and declares
        self.vector = opts.vector and self.mma
        self.templates = templates  # NOTE: shared by the kernels of one unit; the prelude renders them all
        self.divisors = divisors  # the unit's ctg::Divisor parameters (fast_divisors)
        self.printer = IndexPrinter(self.divisors)
        self.w = Writer()
        self.sync, self.nacc, self.first_acc = "__syncthreads();", "NACC", "0"
        self._setup()
        self.body = self._kernel()

    def _plan(self) -> Plan:
        """The kernel's resource plan (:mod:`lowering.cuda.plan`)."""
        raise NotImplementedError

    def _setup(self) -> None:
        """Emitter state fixed for the whole kernel, set before printing (the defaults suit the mma path)."""

    def prelude(self, bodies: str) -> str:
        """The unit's namespace ``ctg`` (constants, templates, helpers) before the kernels' ``bodies``."""
        raise NotImplementedError

    def _kernel(self) -> str:
        """The entry point's source."""
        raise NotImplementedError

    def _mainloop(self, tag: int, node: C.ForLoop) -> None:
        """The innermost K loop ``node`` (:meth:`_is_mainloop`)."""
        raise NotImplementedError

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

    def _trip_count(self, node: C.ForLoop) -> None:
        """Declare ``count_``, the trip count of K loop ``node``, whose condition holds on a prefix of
        ``[0, extent]``: when it holds at ``extent - 1`` the loop runs the whole range (one test: every tile
        a workgroup does not share); else two tests at the guess of :func:`trip_guess` (the end of the K tile or of
        the workgroup's range: exact for Stream-K's runs, ``tests/unit/test_trip_count.py``), and bisection only
        where the guess is wrong. Each test is serial index math (~250 cycles on the H100), paid per tile before the
        tile's first load and first MMA: a shared tile took 1 + log2(extent) tests before the guess, 3 with it."""
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
        guess = trip_guess(node.condition.subs(node.counter, f), f)
        if guess is not None:
            # the prefix most likely ends at g_ (trip_guess): two tests say whether it does, else they narrow the
            # bisection (the condition holds on [0, lo_) and fails at hi_ or before)
            w.open("if (lo_ < hi_)")
            w(f"const int g_ = min(hi_ - 1, {self.cxx(guess)});")
            w.open("if (g_ >= 0)")
            w("bool before_ = true;  // the condition holds at g_ - 1")
            w.open("if (g_ > 0)")
            w("const int f_ = g_ - 1;")
            w(f"before_ = {cond};")
            w.close()
            w.open("if (before_)")
            w("const int f_ = g_;")
            w(f"if ({cond}) lo_ = g_ + 1; else lo_ = hi_ = g_;")
            w.close()
            w.open("else")
            w("hi_ = g_ - 1;")
            w.close()
            w.close()
            w.close()
        w.open("while (lo_ < hi_)")
        w("const int f_ = (lo_ + hi_) >> 1;")
        w(f"if ({cond}) lo_ = f_ + 1; else hi_ = f_;")
        w.close()
        w("const int count_ = lo_;")

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
