"""The typed target: what a backend reports of its device, and all that selection reads of it.

A :class:`Target` is a frozen value (Triton's ``GPUTarget``, tinygrad's ``Renderer``): the backend builds it once
per device (``backend.target()``), and the front end resolves every ``"auto"`` from it and from data files, never
from a device name alone. Devices of one chip share a :attr:`Target.family` (``"sm90"``: H100 SXM, H100 PCIe,
H800, H200): the fitted ranker is per family and reads each device's own SMs, L2 and bandwidth.

Known devices (:data:`KNOWN`) let selection run without a GPU (``compile(..., build=False)``, tests, the CLI): a
device's figures are the datasheet's; ``resident_clusters`` is what ``cuOccupancyMaxActiveClusters`` answers for a
kernel of one CTA per SM (clusters of 4 and 8 do not pack into the H100's GPCs: 30 and 15 of them, not 33 and 16).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

__all__ = ["CPU", "H100_SXM", "H200", "KNOWN", "PATHS", "Target", "known_target", "same_chip"]

# the instruction paths a GEMM kernel can take, fastest first: Hopper's wgmma + TMA, mma.sync with 16-byte cp.async
# loads, mma.sync (or FMA) with element loads. Each needs operands of some alignment (Target.paths).
PATHS = ("wgmma", "vector", "scalar")


@dataclass(frozen=True)
class Target:
    """A device as selection sees it. Rates in bytes or FLOP per second, sizes in bytes.

    ``resident_clusters`` maps a cluster size (CTAs per workgroup) to the workgroups of one CTA per SM the device
    holds at once; sizes it lacks run ``sms // size``."""

    name: str
    family: str  # "sm90", "sm80", "cpu": the fitted ranker is per family
    compute_capability: tuple[int, int]
    sms: int
    l2_bytes: int
    hbm_bandwidth: float  # bytes/s
    smem_per_sm: int
    registers_per_sm: int
    tensor_flops: float  # dense fp16 tensor-core FLOP/s of the whole device
    l2_bandwidth: float = 0.0  # bytes/s; 0: 2.5x hbm_bandwidth
    resident_clusters: tuple[tuple[int, int], ...] = field(default=())
    arch: str = "sm_90a"

    def __post_init__(self) -> None:
        for name in ("sms", "l2_bytes", "smem_per_sm", "registers_per_sm"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Target.{name} must be a positive integer, got {value!r}")
        for name in ("hbm_bandwidth", "tensor_flops"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Target.{name} must be positive, got {getattr(self, name)!r}")

    @property
    def l2_rate(self) -> float:
        """L2 bandwidth in bytes/s (datasheets rarely give it: 2.5x HBM's where unset)."""
        return self.l2_bandwidth or 2.5 * self.hbm_bandwidth

    def resident(self, cluster: int = 1) -> int:
        """Workgroups of ``cluster`` CTAs (one CTA per SM) held at once."""
        return dict(self.resident_clusters).get(cluster, max(1, self.sms // cluster))

    def paths(self, dtype: str, k: int, n: int, aligned_pointers: bool = True) -> tuple[str, ...]:
        """The instruction paths that can run a ``dtype`` GEMM whose rows of A hold ``k`` and of B ``n`` elements,
        fastest first. TMA (wgmma) and 16-byte vector loads need rows that are whole 16-byte vectors (``k`` and
        ``n`` multiples of 8 halves) and 16-byte aligned pointers; wgmma needs sm_90a and fp16 here; element
        loads run anything."""
        if self.family == "cpu":
            return ("cpu",)
        rows = dtype == "float16" and k % 8 == 0 and n % 8 == 0 and aligned_pointers
        out = []
        if rows and self.arch == "sm_90a" and self.compute_capability == (9, 0):
            out.append("wgmma")
        if rows:
            out.append("vector")
        out.append("scalar")
        return tuple(out)

    def with_(self, **changes: object) -> Target:
        """A copy with ``changes`` (a frozen value: tests and what-ifs build variants this way)."""
        return replace(self, **changes)  # type: ignore[arg-type]


_SM90_CLUSTERS = ((1, 132), (2, 66), (4, 30), (8, 15))

# NOTE: the figures the driver reports (lowering/cuda/device.py): tensor FLOP/s at the 1.98 GHz clock it gives
# (132 SMs x 4096 FLOP a clock; the datasheet's 989 TFLOP/s is at 1.83 GHz), HBM at 2 x memory clock x bus width.
# The driver's figures of a known device are replaced by these, so a machine without a GPU selects as the GPU does.
H100_SXM = Target(
    name="NVIDIA H100 80GB HBM3",
    family="sm90",
    compute_capability=(9, 0),
    sms=132,
    l2_bytes=50 * 2**20,
    hbm_bandwidth=3.35232e12,
    smem_per_sm=228 * 2**10,
    registers_per_sm=65536,
    tensor_flops=1.07053056e15,
    resident_clusters=_SM90_CLUSTERS,
)
H200 = H100_SXM.with_(name="NVIDIA H200", hbm_bandwidth=4.814304e12, l2_bytes=60 * 2**20)
KNOWN: dict[str, Target] = {
    t.name: t
    for t in (
        H100_SXM,
        H200,
        H100_SXM.with_(name="NVIDIA H800"),
        H100_SXM.with_(
            name="NVIDIA H100 PCIe",
            sms=114,
            hbm_bandwidth=2.0e12,
            tensor_flops=756e12,
            resident_clusters=((1, 114), (2, 57)),
        ),
    )
}
CPU = Target(
    name="cpu",
    family="cpu",
    compute_capability=(0, 0),
    sms=8,
    l2_bytes=2**20,
    hbm_bandwidth=20e9,
    smem_per_sm=2**16,
    registers_per_sm=2**16,
    tensor_flops=1e11,
    arch="cpu",
)


def same_chip(target: Target) -> tuple[Target, ...]:
    """The other :data:`KNOWN` devices built on ``target``'s chip: the same family, SMs, shared memory, registers,
    tensor rate and co-resident clusters (an H200 and an H800 are an H100 SXM's die with other memory or links), so a
    config measured on one runs the same kernel on the same grid on the others; in :data:`KNOWN`'s order."""

    def chip(t: Target) -> tuple[object, ...]:
        return (t.family, t.sms, t.smem_per_sm, t.registers_per_sm, t.tensor_flops, t.resident_clusters)

    return tuple(t for t in KNOWN.values() if t.name != target.name and chip(t) == chip(target))


def known_target(name: str | None = None) -> Target:
    """The :data:`KNOWN` target named ``name`` (default: the H100 SXM, what ``macro_tile="auto"`` assumes without
    a GPU); ``ValueError`` naming the known ones otherwise."""
    if name is None:
        return H100_SXM
    if name not in KNOWN:
        raise ValueError(f"unknown target device {name!r}; known: {', '.join(map(repr, KNOWN))}")
    return KNOWN[name]
