"""A prepared launch: what one call of a program costs the host, cut to the parameters that change.

A :class:`Prepared` is built once per (device, variant) of a program: the kernel parameters as ctypes values at fixed
addresses with the array of their addresses the driver reads (``kernelParams``), each kernel's ``CUlaunchConfig``
(grid, block, shared memory, the PDL attribute) and the TMA descriptors. A call writes ``alpha``, ``beta`` and the
workspace into those values, and the pointers only where they differ from the last call's, pointing a descriptor at
a new matrix with ``cuTensorMapReplaceAddress`` only where its own pointer changed (every one after a call whose
writes raised), sets the stream and makes one ``cuLaunchKernelEx`` per kernel (the driver copies the parameters at
launch, so the next call may write them again). A lock makes that sequence one step for threads sharing the program.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .driver import Function, _check, _lib, replace_address, tensor_map

__all__ = ["OPERAND_A", "OPERAND_B", "OPERAND_C", "OPERAND_D", "MapSpec", "Prepared"]

OPERAND_A, OPERAND_B, OPERAND_C, OPERAND_D = range(4)  # the pointer parameters, in the kernels' order


@dataclass(frozen=True)
class MapSpec:
    """A TMA descriptor parameter: of operand ``operand`` (:data:`OPERAND_A`, ``_B`` or ``_D``), a row-major fp16
    ``rows x cols`` matrix copied in ``box_rows x box_cols`` boxes with a ``swizzle``-byte swizzle."""

    operand: int
    rows: int
    cols: int
    box_rows: int
    box_cols: int
    swizzle: int


class Prepared:
    """Kernels ``(function, grid)`` launched in order on one stream with the parameters
    ``A, B, C, D, alpha, beta, workspace, flags, *sizes, *tensor maps`` (module docstring)."""

    def __init__(
        self,
        kernels: Sequence[tuple[Function, int]],
        sizes: Sequence[Any],  # ctypes values (ints, or Divisor structures)
        maps: Sequence[MapSpec],
        pointers: tuple[int, int, int, int],
    ) -> None:
        self._functions = [f for f, _ in kernels]  # NOTE: keeps each module loaded while this launch may use it
        configs = [f.config(grid) for f, grid in kernels]
        self._configs = [(f.handle, c, ctypes.byref(c)) for (f, _), c in zip(kernels, configs, strict=True)]
        # NOTE: the parameters that change live in three small arrays, each written by one slice assignment
        self._pointers = (ctypes.c_uint64 * 4)(*pointers)
        self._scalars = (ctypes.c_float * 2)()
        self._buffers = (ctypes.c_uint64 * 2)()
        self._maps = [
            (s.operand, tensor_map(pointers[s.operand], s.rows, s.cols, s.box_rows, s.box_cols, s.swizzle))
            for s in maps
        ]
        # what _pointers and the descriptors hold (None: not known, after a call whose writes failed)
        self._written: tuple[int, ...] | None = tuple(pointers)
        self._sizes = list(sizes)
        addresses = [ctypes.addressof(self._pointers) + 8 * i for i in range(4)]
        addresses += [ctypes.addressof(self._scalars) + 4 * i for i in range(2)]
        addresses += [ctypes.addressof(self._buffers) + 8 * i for i in range(2)]
        addresses += [ctypes.addressof(v) for v in self._sizes] + [ctypes.addressof(tm) for _, tm in self._maps]
        self._params = (ctypes.c_void_p * len(addresses))(*addresses)
        self._launch = _lib().cuLaunchKernelEx
        self._lock = threading.Lock()

    def __call__(
        self, pointers: tuple[int, int, int, int], alpha: float, beta: float, workspace: int, flags: int, stream: int
    ) -> None:
        with self._lock:
            # NOTE: ctypes takes any sequence here; typeshed says list
            if pointers != self._written:  # NOTE: one tuple compare where a caller's operands stay put
                # NOTE: None until every write is done: a write that raises (or an interrupt) leaves the next call
                # writing every pointer and descriptor, never skipping them on a record they do not hold
                last, self._written = self._written, None
                self._pointers[:] = pointers  # type: ignore[call-overload]
                for operand, tm in self._maps:
                    if last is None or last[operand] != pointers[operand]:
                        replace_address(tm, pointers[operand])
                self._written = pointers
            self._scalars[:] = (alpha, beta)  # type: ignore[call-overload]  # NOTE: always: 0.0 == -0.0
            self._buffers[:] = (workspace, flags)  # type: ignore[call-overload]
            for handle, config, ref in self._configs:
                config.hStream = stream
                result = self._launch(ref, handle, self._params, None)
                if result:
                    _check(result, "cuLaunchKernelEx")
