"""LLVM IR text -> machine code for this host, with llvmlite's MCJIT; compiled once per IR text, the last
:data:`CACHE_SIZE` kept.

The cache key is the SHA-256 of the IR text: the same control graph and options give the same text,
so a kernel for a new GEMM shape (sizes are parameters) reuses the compiled code.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

from ctgraph.cache import LRU

__all__ = ["Compiled", "cache_info", "compile_ir"]

SIGNATURE = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.c_int64,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_float,
    ctypes.c_float,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
)


@dataclass(frozen=True)
class Compiled:
    """A JIT-compiled module; keeps its engine alive as long as its functions are used."""

    key: str
    engine: llvm.ExecutionEngine
    optimized_ir: str

    def function(self, name: str) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
        """The kernel function ``name`` of the module (see :data:`SIGNATURE`)."""
        return SIGNATURE(self.engine.get_function_address(name))


CACHE_SIZE = 256  # compiled modules kept for reuse (a program keeps its own alive)
_CACHE: LRU[Compiled] = LRU(CACHE_SIZE)
_LOCK = threading.Lock()
_STATS = {"hits": 0, "compiles": 0}


@functools.cache
def _native() -> llvm.Target:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return llvm.Target.from_triple(llvm.get_process_triple())


def _target_machine() -> llvm.TargetMachine:
    """A target machine for this host, one per engine. NOTE: an MCJIT engine owns its target machine and frees it
    with itself; one machine shared by several engines is freed under the others once the cache drops an engine."""
    return _native().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
    )


def compile_ir(ir_text: str) -> Compiled:
    """Optimise (O3) and JIT-compile ``ir_text``. Cached by the text."""
    key = hashlib.sha256(ir_text.encode()).hexdigest()
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _STATS["hits"] += 1
            return hit
        tm = _target_machine()
        mod = llvm.parse_assembly(ir_text)
        mod.triple = llvm.get_process_triple()
        mod.data_layout = str(tm.target_data)
        mod.verify()
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
        pb.getModulePassManager().run(mod, pb)
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        _STATS["compiles"] += 1
        return _CACHE.put(key, Compiled(key, engine, str(mod)))


def cache_info() -> dict[str, int]:
    """``{"hits": ..., "compiles": ..., "entries": ...}`` of the in-memory cache."""
    return {**_STATS, "entries": len(_CACHE)}
