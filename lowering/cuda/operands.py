"""Operands of a CUDA kernel call: numpy arrays (copied to the GPU), pycuda GPUArrays and any object
with ``__cuda_array_interface__`` (torch tensors; no copy). Validation happens before any launch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ctgraph.counts import itemsize
from ctgraph.gemm import GemmProblem
from ctgraph.operands import check_array, expected_shapes

__all__ = ["Operand", "classify", "is_torch_cuda"]

TYPESTR = {"<f2": "float16", "<f4": "float32"}


@dataclass
class Operand:
    name: str
    obj: Any
    host: bool  # a numpy array that must be copied
    ptr: int = 0

    @property
    def aligned16(self) -> bool:
        return self.host or self.ptr % 16 == 0


def is_torch_cuda(x: Any) -> bool:
    """Whether ``x`` is a CUDA torch tensor (without importing torch)."""
    return type(x).__module__.startswith("torch") and bool(getattr(x, "is_cuda", False))


def classify(p: GemmProblem, name: str, x: Any) -> Operand:
    """Check one operand and say how to reach it; errors name the argument."""
    shape = expected_shapes(p)[name]
    if isinstance(x, np.ndarray):
        check_array(p, name, x, shape, p.dtype, x.shape, x.dtype, x.flags.c_contiguous)
        return Operand(name, x, host=True)
    if is_torch_cuda(x):
        # NOTE: the same facts as torch's __cuda_array_interface__, without building its dict on every call
        dtype = str(x.dtype).removeprefix("torch.")
        check_array(p, name, x, shape, p.dtype, tuple(x.shape), dtype, x.is_contiguous())
        return Operand(name, x, host=False, ptr=x.data_ptr())
    iface = getattr(x, "__cuda_array_interface__", None)
    if iface is None:
        raise TypeError(
            f"{name} must be a numpy array, a pycuda GPUArray or an object with "
            f"__cuda_array_interface__ (e.g. a CUDA torch tensor), got {type(x).__name__}"
        )
    dims = tuple(iface["shape"])
    dtype = TYPESTR.get(iface["typestr"], iface["typestr"])
    strides = iface.get("strides")
    size = itemsize(dtype)
    contiguous = strides is None or tuple(strides) == (dims[1] * size, size)
    check_array(p, name, x, shape, p.dtype, dims, dtype, contiguous)
    return Operand(name, x, host=False, ptr=int(iface["data"][0]))
