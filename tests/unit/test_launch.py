"""The prepared launch without a GPU: the driver's entry points replaced by recorders, the parameter array read
back from the addresses it holds."""

from __future__ import annotations

import ctypes
import math

import pytest

from lowering.cuda import driver as driver_module
from lowering.cuda import launch
from lowering.cuda.divisors import Divisor
from lowering.cuda.driver import (
    CU_TENSOR_MAP_L2_PROMOTION_128B,
    CU_TENSOR_MAP_SWIZZLE,
    Launch,
    LaunchConfig,
    TensorMap,
    tensor_map,
)
from lowering.cuda.launch import OPERAND_A, OPERAND_B, OPERAND_D, MapSpec, Prepared


class FakeFunction:
    def __init__(self, handle: int, pdl: bool = False) -> None:
        self.handle = ctypes.c_void_p(handle)
        self.spec = Launch(threads=384, smem_bytes=1024, cluster=2, pdl=pdl)

    def config(self, grid: int, stream: int = 0) -> LaunchConfig:
        c = self.spec
        return LaunchConfig(grid * c.ctas_per_workgroup, 1, 1, c.threads, 1, 1, c.smem_bytes, stream, None, 0)


@pytest.fixture
def driver(monkeypatch):
    calls: dict[str, list] = {"launch": [], "replace": [], "encode": []}

    class Lib:
        @staticmethod
        def cuLaunchKernelEx(config_ref, handle, params, extra):
            config = config_ref._obj
            calls["launch"].append((handle.value, config.gridDimX, config.hStream, ctypes.addressof(params)))
            return 0

    def tensor_map(ptr, rows, cols, box_rows, box_cols, swizzle):
        calls["encode"].append(ptr)
        tm = TensorMap()
        tm.opaque[0] = ptr
        return tm

    def replace_address(tm, ptr):
        calls["replace"].append(ptr)
        tm.opaque[0] = ptr

    monkeypatch.setattr(launch, "_lib", lambda: Lib)
    monkeypatch.setattr(launch, "tensor_map", tensor_map)
    monkeypatch.setattr(launch, "replace_address", replace_address)
    return calls


def params(prepared: Prepared, types: list) -> list:
    """The kernel parameters as the driver reads them: each address in the array, read as its type."""
    return [t.from_address(address) for t, address in zip(types, prepared._params, strict=True)]


def test_parameters_are_written_in_place_and_read_by_the_driver(driver):
    sizes = [ctypes.c_int(1000), Divisor.of(7)]
    maps = [
        MapSpec(OPERAND_A, 64, 32, 64, 32, 64),
        MapSpec(OPERAND_B, 32, 48, 32, 64, 128),
        MapSpec(OPERAND_D, 64, 48, 64, 64, 128),
    ]
    kernels = [(FakeFunction(11), 66), (FakeFunction(22, pdl=True), 33)]
    p = Prepared(kernels, sizes, maps, (0x1000, 0x2000, 0, 0x3000))
    p((0x1000, 0x2000, 0x5000, 0x3000), 1.5, -0.25, 0x7000, 0x7400, stream=99)
    types = (
        [ctypes.c_uint64] * 4 + [ctypes.c_float] * 2 + [ctypes.c_uint64] * 2 + [ctypes.c_int, Divisor] + [TensorMap] * 3
    )
    values = params(p, types)
    assert [v.value for v in values[:4]] == [0x1000, 0x2000, 0x5000, 0x3000]
    assert [v.value for v in values[4:6]] == [1.5, -0.25]
    assert [v.value for v in values[6:8]] == [0x7000, 0x7400]
    seven = Divisor.of(7)
    assert values[8].value == 1000
    assert (values[9].value, values[9].mul, values[9].shr) == (seven.value, seven.mul, seven.shr)
    assert [v.opaque[0] for v in values[10:]] == [0x1000, 0x2000, 0x3000]
    # every kernel in order, on the call's stream, each with its grid of CTAs (a workgroup is a cluster of 2)
    assert [(h, g, s) for h, g, s, _ in driver["launch"]] == [(11, 132, 99), (22, 66, 99)]
    assert driver["replace"] == []  # the maps were encoded with these pointers


def test_a_descriptor_is_replaced_only_where_its_pointer_changed(driver):
    maps = [
        MapSpec(OPERAND_A, 64, 32, 64, 32, 64),
        MapSpec(OPERAND_D, 64, 48, 64, 64, 128),
        MapSpec(OPERAND_D, 64, 48, 64, 16, 0),
    ]
    p = Prepared([(FakeFunction(1), 1)], [], maps, (0x1000, 0x2000, 0, 0x3000))
    p((0x1000, 0x2000, 0, 0x3000), 1.0, 0.0, 0, 0, stream=0)
    assert driver["replace"] == []
    p((0x1000, 0x9000, 0, 0x8000), 1.0, 0.0, 0, 0, stream=0)  # B has no map here; D has two
    assert driver["replace"] == [0x8000, 0x8000]
    p((0x4000, 0x9000, 0, 0x8000), 1.0, 0.0, 0, 0, stream=0)
    assert driver["replace"] == [0x8000, 0x8000, 0x4000]
    values = params(p, [ctypes.c_uint64] * 8 + [TensorMap] * 3)
    assert [v.opaque[0] for v in values[8:]] == [0x4000, 0x8000, 0x8000]


def test_a_call_with_the_operands_of_the_last_writes_its_scalars_alone(driver):
    """Back-to-back calls on the same tensors skip the pointers and the descriptors (one tuple compare), but the
    scalars are written every call (0.0 == -0.0 in Python, not in the epilogue) and a moved operand still is."""
    p = Prepared([(FakeFunction(1), 1)], [], [MapSpec(OPERAND_A, 64, 32, 64, 32, 64)], (0x1000, 0x2000, 0, 0x3000))
    types = [ctypes.c_uint64] * 4 + [ctypes.c_float] * 2 + [ctypes.c_uint64] * 2 + [TensorMap]
    p((0x1000, 0x2000, 0, 0x3000), 0.0, 1.0, 0x10, 0x20, stream=0)
    p((0x1000, 0x2000, 0, 0x3000), -0.0, 2.0, 0x30, 0x40, stream=0)
    values = params(p, types)
    assert math.copysign(1.0, values[4].value) == -1.0 and values[5].value == 2.0
    assert [v.value for v in values[6:8]] == [0x30, 0x40] and driver["replace"] == []
    p((0x5000, 0x2000, 0, 0x3000), 1.0, 0.0, 0, 0, stream=0)
    p((0x1000, 0x2000, 0, 0x3000), 1.0, 0.0, 0, 0, stream=0)  # back where it was: written again
    values = params(p, types)
    assert values[0].value == 0x1000 and values[8].opaque[0] == 0x1000 and driver["replace"] == [0x5000, 0x1000]


def test_a_failed_launch_raises(driver, monkeypatch):
    class Failing:
        @staticmethod
        def cuLaunchKernelEx(*args):
            return 1  # CUDA_ERROR_INVALID_VALUE

        @staticmethod
        def cuGetErrorString(code, out):
            return 0

    monkeypatch.setattr(launch, "_lib", lambda: Failing)
    monkeypatch.setattr(driver_module, "_lib", lambda: Failing)
    p = Prepared([(FakeFunction(1), 1)], [], [], (0x1000, 0x2000, 0, 0x3000))
    with pytest.raises(driver_module.CudaError, match="cuLaunchKernelEx"):
        p((0x1000, 0x2000, 0, 0x3000), 1.0, 0.0, 0, 0, stream=0)


@pytest.mark.parametrize("cols", [8, 24, 64, 72, 128, 4096, 5224, 5944, 50264, 57344])
def test_a_descriptor_says_what_the_driver_needs(monkeypatch, cols):
    """Dimensions innermost first, the row pitch in bytes, the box, the swizzle, and one 128-byte line of L2
    promotion on rows on the lines and off them (measured: docs/results/l2-promotion*-h100.csv)."""
    encoded = []

    class Lib:
        @staticmethod
        def cuTensorMapEncodeTiled(tm, dtype, rank, ptr, dims, strides, box, unit, interleave, swizzle, promo, oob):
            encoded.append((rank, ptr.value, list(dims), list(strides), list(box), swizzle, promo, oob))
            return 0

    monkeypatch.setattr(driver_module, "_lib", lambda: Lib)
    tm = tensor_map(0x10000, 300, cols, 64, 64, 128)
    assert ctypes.addressof(tm) % 64 == 0
    swizzle = CU_TENSOR_MAP_SWIZZLE[128]
    assert encoded == [(2, 0x10000, [cols, 300], [2 * cols], [64, 64], swizzle, CU_TENSOR_MAP_L2_PROMOTION_128B, 0)]


def test_a_call_whose_writes_fail_leaves_the_next_writing_everything(driver, monkeypatch):
    """A descriptor write that raises (or an interrupt) midway leaves the parameters half moved: the next call, even
    on the operands before, writes every pointer and descriptor again instead of skipping them as unchanged."""
    maps = [MapSpec(OPERAND_A, 64, 32, 64, 32, 64), MapSpec(OPERAND_B, 32, 48, 32, 64, 128)]
    before, moved = (0x1000, 0x2000, 0, 0x3000), (0x5000, 0x6000, 0, 0x7000)
    p = Prepared([(FakeFunction(1), 1)], [], maps, before)
    replace = launch.replace_address

    def failing_on_b(tm, ptr):
        if ptr == moved[OPERAND_B]:
            raise driver_module.CudaError("cuTensorMapReplaceAddress failed")
        replace(tm, ptr)

    monkeypatch.setattr(launch, "replace_address", failing_on_b)
    with pytest.raises(driver_module.CudaError):
        p(moved, 1.0, 0.0, 0, 0, stream=0)
    assert driver["launch"] == []
    p(before, 1.0, 0.0, 0, 0, stream=0)
    values = params(p, [ctypes.c_uint64] * 8 + [TensorMap] * 2)
    assert [v.value for v in values[:4]] == list(before)
    assert [v.opaque[0] for v in values[8:]] == [0x1000, 0x2000]
    assert len(driver["launch"]) == 1
