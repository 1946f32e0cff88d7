"""The current CUDA device as a :class:`ctgraph.target.Target`, from the driver's attributes.

SMs, L2, shared memory, registers, clocks and the memory bus come from ``cuDeviceGetAttribute``; HBM bandwidth is
``2 x memory clock x bus width`` (double data rate). Tensor FLOP/s per SM and clock is the architecture's (4096 dense
fp16 FLOP per clock on an SM90 SM, at the clock the driver reports). A known device
(:data:`ctgraph.target.KNOWN`, matched by name, SMs and compute capability) is returned as known, so selection on
the device and off it (``build=False``, ``CTGRAPH_TARGET_DEVICE``) agree; another SM90 device gets the H100's resident
clusters scaled by SMs, a device of another family ``SMs / cluster``.
"""

from __future__ import annotations

import ctypes
import functools

from ctgraph.target import H100_SXM, KNOWN, Target

from .contexts import current_device
from .driver import _check, _lib

__all__ = ["device_target"]

ATTRIBUTES = {
    "sms": 16,
    "clock_khz": 13,
    "memory_clock_khz": 36,
    "bus_bits": 37,
    "l2_bytes": 38,
    "major": 75,
    "minor": 76,
    "smem_per_sm": 81,
    "registers_per_sm": 82,
}
FLOP_PER_SM_CLOCK = {(9, 0): 4096, (8, 0): 2048, (8, 9): 1024, (8, 6): 512}


def _attributes(ordinal: int) -> tuple[str, dict[str, int]]:
    lib = _lib()
    _check(lib.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    _check(lib.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
    name = ctypes.create_string_buffer(256)
    _check(lib.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
    out = {}
    for key, attribute in ATTRIBUTES.items():
        value = ctypes.c_int()
        _check(lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, dev), "cuDeviceGetAttribute")
        out[key] = value.value
    return name.value.decode(), out


def device_target(ordinal: int | None = None) -> Target:
    """The device ``ordinal`` (default: the current context's, else 0) as a :class:`Target`."""
    return _target(current_device() if ordinal is None else ordinal)


@functools.cache
def _target(ordinal: int) -> Target:
    name, a = _attributes(ordinal)
    cc = (a["major"], a["minor"])
    sms = a["sms"]
    known = KNOWN.get(name)
    if known is not None and known.sms == sms and known.compute_capability == cc:
        return known  # the same figures as without a GPU: selection is the same on the device and off it
    family = f"sm{cc[0]}{cc[1]}"
    if cc == (9, 0):
        clusters = tuple((c, max(1, r * sms // H100_SXM.sms)) for c, r in H100_SXM.resident_clusters)
    else:
        clusters = ((1, sms),)
    return Target(
        name=name,
        family=family,
        compute_capability=cc,
        sms=sms,
        l2_bytes=a["l2_bytes"],
        hbm_bandwidth=2.0 * a["memory_clock_khz"] * 1e3 * a["bus_bits"] / 8,
        smem_per_sm=a["smem_per_sm"],
        registers_per_sm=a["registers_per_sm"],
        tensor_flops=float(sms * a["clock_khz"] * 1e3 * FLOP_PER_SM_CLOCK.get(cc, 1024)),
        resident_clusters=clusters,
        arch="sm_90a" if cc == (9, 0) else f"sm_{cc[0]}{cc[1]}",
    )
