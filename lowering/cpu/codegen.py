"""Control graph -> LLVM IR (``llvmlite.ir``): one function that runs one workgroup.

    i32 @<name>(i64 wg, elem* A, elem* B, elem* C, elem* D, float alpha, float beta,
                float* workspace, i32* flags, i64* params)

``params`` holds the kernel's size parameters in the order of ``Kernel.params``. Tiles are fp32 stack
buffers; fp16 elements are widened on load and the result is narrowed on store. The function returns
0, or ``flag + 1`` when it reaches a Wait whose flag is not set: workgroups run one at a time on the
CPU, so such a wait could never be satisfied, and the host reports it instead of spinning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sympy
from llvmlite import ir

from ctgraph import control as C

from .exprs import I64, ExprEmitter

F32 = ir.FloatType()
I32 = ir.IntType(32)
ELEM = {"float16": ir.HalfType(), "float32": ir.FloatType()}


def generate(cg: C.ControlGraph) -> str:
    """The LLVM IR text of the control graph's kernels, one function each (byte-identical for the same graph)."""
    kernels = cg.kernels
    module = ir.Module(name=cg[kernels[0]].name)  # type: ignore[attr-defined]
    for tag in kernels:
        _Codegen(cg, module, tag)
    return str(module)


class _Codegen:
    def __init__(self, cg: C.ControlGraph, module: ir.Module, kernel: int) -> None:
        self.cg = cg
        self.kernel: C.Kernel = cg[kernel]  # type: ignore[assignment]
        bm, bn, bk = self.kernel.macro_tile
        elem = ELEM[self.kernel.dtype]
        self.module = module
        ptr = ir.PointerType
        fty = ir.FunctionType(
            I32, [I64, ptr(elem), ptr(elem), ptr(elem), ptr(elem), F32, F32, ptr(F32), ptr(I32), ptr(I64)]
        )
        self.fn = ir.Function(self.module, fty, name=self.kernel.name)
        names = ("wg", "A", "B", "C", "D", "alpha", "beta", "workspace", "flags", "params")
        for arg, name in zip(self.fn.args, names, strict=True):
            arg.name = name
        self.args = dict(zip(names, self.fn.args, strict=True))
        self.entry = self.fn.append_basic_block("entry")
        self.b = ir.IRBuilder(self.entry)
        self.values: dict[sympy.Symbol, ir.Value] = {self.kernel.workgroup: self.args["wg"]}
        for i, p in enumerate(self.kernel.params):
            self.values[p] = self.b.load(self.b.gep(self.args["params"], [ir.Constant(I64, i)]), name=p.name)
        self.vars: dict[sympy.Symbol, ir.AllocaInstr] = {}
        self.tiles = {
            "A": self._buffer("A_tile", bm * bk),
            "B": self._buffer("B_tile", bk * bn),
            "acc": self._buffer("acc", bm * bn),
        }
        self.expr = ExprEmitter(self.b, self._lookup)
        self._body(kernel)
        self.b.ret(ir.Constant(I32, 0))

    # --- storage -----------------------------------------------------------------------------------

    def _buffer(self, name: str, n: int) -> ir.Value:
        return self.b.alloca(F32, size=ir.Constant(I64, n), name=name)

    def _var(self, sym: sympy.Symbol) -> ir.AllocaInstr:
        if sym not in self.vars:
            with self.b.goto_block(self.entry):
                self.b.position_at_start(self.entry)  # NOTE: allocas in the entry block, so mem2reg lifts them
                self.vars[sym] = self.b.alloca(I64, name=sym.name)
        return self.vars[sym]

    def _lookup(self, sym: sympy.Symbol) -> ir.Value:
        if sym in self.values:
            return self.values[sym]
        if sym in self.vars:
            return self.b.load(self.vars[sym])
        raise KeyError(f"symbol {sym} is used before it is assigned")

    def _elem(self, ptr: ir.Value, index: ir.Value) -> ir.Value:
        return self.b.gep(ptr, [index])

    # --- structure ---------------------------------------------------------------------------------

    def _body(self, tag: int) -> None:
        for child in self.cg.body(tag):
            node = self.cg[child]
            getattr(self, f"_{type(node).__name__}")(child, node)

    @contextmanager
    def _loop(self, cond: Callable[[], ir.Value], step: Callable[[], None]) -> Iterator[None]:
        head, body, done = (self.fn.append_basic_block(n) for n in ("loop", "body", "done"))
        self.b.branch(head)
        self.b.position_at_end(head)
        self.b.cbranch(cond(), body, done)
        self.b.position_at_end(body)
        yield
        step()
        self.b.branch(head)
        self.b.position_at_end(done)

    @contextmanager
    def _range(self, n: int, name: str) -> Iterator[ir.Value]:
        """``for (name = 0; name < n; ++name)`` with a constant trip count."""
        var = self._var(sympy.Symbol(f"__{name}"))
        self.b.store(ir.Constant(I64, 0), var)
        with self._loop(
            lambda: self.b.icmp_signed("<", self.b.load(var), ir.Constant(I64, n)),
            lambda: self.b.store(self.b.add(self.b.load(var), ir.Constant(I64, 1)), var),
        ):
            yield self.b.load(var, name=name)

    def _store_var(self, sym: sympy.Symbol, value: sympy.Expr) -> None:
        v = self.expr.emit(value)
        self.b.store(v, self._var(sym))

    def _ForLoop(self, tag: int, node: C.ForLoop) -> None:
        init, inc = self.cg.initialize(tag), self.cg.increment(tag)
        self._store_var(init.target, init.value)
        with self._loop(lambda: self.expr.emit(node.condition), lambda: self._store_var(inc.target, inc.value)):
            self._body(tag)

    def _If(self, tag: int, node: C.If) -> None:
        with self.b.if_then(self.expr.emit(node.condition)):
            self._body(tag)

    def _Assign(self, tag: int, node: C.Assign) -> None:
        self._store_var(node.target, node.value)

    # --- tiles -------------------------------------------------------------------------------------

    def _tile_loop(
        self, rows: int, cols: int, row: sympy.Symbol, col: sympy.Symbol, fn: Callable[[ir.Value], None]
    ) -> None:
        """Run ``fn(flat_index)`` for every element of a ``rows x cols`` tile, with ``row``/``col`` bound."""
        with self._range(rows, row.name) as i, self._range(cols, col.name) as j:
            self.values[row], self.values[col] = i, j
            fn(self.b.add(self.b.mul(i, ir.Constant(I64, cols)), j))
            del self.values[row], self.values[col]

    def _ZeroAccumulator(self, tag: int, node: C.ZeroAccumulator) -> None:
        bm, bn, _ = self.kernel.macro_tile
        acc = self.tiles["acc"]
        with self._range(bm * bn, "z") as i:
            self.b.store(ir.Constant(F32, 0.0), self._elem(acc, i))

    def _masked_load(self, tensor: ir.Value, address: sympy.Expr, mask: sympy.Expr) -> ir.Value:
        """``mask ? float(tensor[address]) : 0`` without touching memory when the mask is off."""
        b = self.b
        ok = self.expr.emit(mask)
        start = b.block
        with b.if_then(ok):
            v = b.load(self._elem(tensor, self.expr.emit(address)))
            loaded = b.fpext(v, F32) if v.type != F32 else v
            then = b.block
        phi = b.phi(F32)
        phi.add_incoming(loaded, then)
        phi.add_incoming(ir.Constant(F32, 0.0), start)
        return phi

    def _LoadTile(self, tag: int, node: C.LoadTile) -> None:
        dest = self.tiles[node.tensor]
        src = self.args[node.tensor]
        self._tile_loop(
            *node.shape,
            node.row,
            node.col,
            lambda flat: self.b.store(self._masked_load(src, node.address, node.mask), self._elem(dest, flat)),
        )

    def _Multiply(self, tag: int, node: C.Multiply) -> None:
        bm, bn, bk = self.kernel.macro_tile
        b, A, B, acc = self.b, self.tiles["A"], self.tiles["B"], self.tiles["acc"]
        with self._range(bm, "mi") as i, self._range(bk, "mk") as kk:
            a = b.load(self._elem(A, b.add(b.mul(i, ir.Constant(I64, bk)), kk)))
            with self._range(bn, "mj") as j:
                c = self._elem(acc, b.add(b.mul(i, ir.Constant(I64, bn)), j))
                bv = b.load(self._elem(B, b.add(b.mul(kk, ir.Constant(I64, bn)), j)))
                b.store(b.fadd(b.load(c), b.fmul(a, bv)), c)

    def _slot_loop(self, slot: sympy.Expr, fn: Callable[[ir.Value, ir.Value], None]) -> None:
        """``fn(acc_elem_ptr, workspace_elem_ptr)`` over the tile in workspace slot ``slot``."""
        bm, bn, _ = self.kernel.macro_tile
        base = self.b.mul(self.expr.emit(slot), ir.Constant(I64, bm * bn))
        with self._range(bm * bn, "w") as i:
            fn(self._elem(self.tiles["acc"], i), self._elem(self.args["workspace"], self.b.add(base, i)))

    def _StorePartial(self, tag: int, node: C.StorePartial) -> None:
        self._slot_loop(node.slot, lambda acc, ws: self.b.store(self.b.load(acc), ws))

    def _AccumulatePartial(self, tag: int, node: C.AccumulatePartial) -> None:
        self._slot_loop(node.slot, lambda acc, ws: self.b.store(self.b.fadd(self.b.load(acc), self.b.load(ws)), acc))

    def _flag(self, flag: sympy.Expr) -> ir.Value:
        return self._elem(self.args["flags"], self.expr.emit(flag))

    def _Signal(self, tag: int, node: C.Signal) -> None:
        self.b.store_atomic(ir.Constant(I32, node.value), self._flag(node.flag), "release", 4)

    def _Wait(self, tag: int, node: C.Wait) -> None:
        b = self.b
        seen = b.load_atomic(self._flag(node.flag), "acquire", 4)
        with b.if_then(b.icmp_signed("!=", seen, ir.Constant(I32, node.value)), likely=False):
            b.ret(b.trunc(b.add(self.expr.emit(node.flag), ir.Constant(I64, 1)), I32))

    def _Epilogue(self, tag: int, node: C.Epilogue) -> None:
        b = self.b
        elem = ELEM[self.kernel.dtype]
        alpha, beta = self.args["alpha"], self.args["beta"]
        use_c = b.fcmp_unordered("!=", beta, ir.Constant(F32, 0.0))  # NaN beta reads C, as numpy

        def store(flat: ir.Value) -> None:
            with b.if_then(self.expr.emit(node.mask)):
                addr = self.expr.emit(node.address)
                val = b.fmul(alpha, b.load(self._elem(self.tiles["acc"], flat)))
                start = b.block
                with b.if_then(use_c):
                    c = b.load(self._elem(self.args["C"], addr))
                    with_c = b.fadd(val, b.fmul(beta, b.fpext(c, F32) if c.type != F32 else c))
                    then = b.block
                out = b.phi(F32)
                out.add_incoming(with_c, then)
                out.add_incoming(val, start)
                b.store(b.fptrunc(out, elem) if elem != F32 else out, self._elem(self.args["D"], addr))

        self._tile_loop(*node.shape, node.row, node.col, store)
