"""The CUDA runtime's operand checks, without a GPU: objects exposing ``__cuda_array_interface__`` stand in for
device tensors (only their pointers are read)."""

from __future__ import annotations

import numpy as np
import pytest

from ctgraph.gemm import check_problem
from lowering.cuda.operands import classify
from lowering.cuda.runtime import byte_range, check_out

P = check_problem(64, 32, 16, (64, 32, 16), "float16")


class Device:
    """A contiguous device buffer as torch, cupy or numba expose it."""

    def __init__(self, ptr: int, shape: tuple[int, int]) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": "<f2",
            "data": (ptr, False),
            "version": 3,
            "strides": None,
        }


def ops(**xs):
    return {n: classify(P, n, x) for n, x in xs.items()}


def test_device_ranges_come_from_the_pointers():
    a = classify(P, "A", Device(1 << 20, (64, 16)))
    assert byte_range(P, a) == (1 << 20, (1 << 20) + 64 * 16 * 2)


@pytest.mark.parametrize(("out_ptr", "hit"), [(0x100000, "A"), (0x100000 + 64 * 16 * 2 - 2, "A"), (0x300000, "C")])
def test_out_sharing_device_bytes_with_an_input_raises(out_ptr, hit):
    o = ops(
        A=Device(0x100000, (64, 16)),
        B=Device(0x200000, (16, 32)),
        C=Device(0x300000, (64, 32)),
        out=Device(out_ptr, (64, 32)),
    )
    with pytest.raises(ValueError, match=f"out overlaps {hit}"):
        check_out(P, o)


def test_adjacent_device_buffers_and_other_memory_spaces_pass():
    check_out(P, ops(A=Device(0x100000, (64, 16)), B=Device(0x200000, (16, 32)), out=Device(0x100000 + 2048, (64, 32))))
    host_a = np.zeros((64, 16), np.float16)
    check_out(P, ops(A=host_a, B=Device(0x200000, (16, 32)), out=Device(host_a.ctypes.data, (64, 32))))
    host = np.zeros((64, 32), np.float16)
    with pytest.raises(ValueError, match="out overlaps C"):
        check_out(P, ops(A=host_a, B=Device(0x200000, (16, 32)), C=host, out=host))
