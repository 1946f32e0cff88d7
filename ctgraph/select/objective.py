"""What the ranker minimises: a kernel's GPU time, or the time of a call as a Python caller sees it.

``"kernel"`` (the default) orders configs by their predicted GPU seconds ``t``: what a CUDA graph replays, and what
the fit was timed by. ``"call"`` (``CTGRAPH_OBJECTIVE=call``) orders them by what back-to-back eager calls take,
the larger of the host's time and the GPU's::

    call(c) = max(HOST_CALL + (launches(c) - 1) * HOST_LAUNCH, t(c))      ties: the smaller t(c)

A GEMM shorter than the host's time per call leaves the GPU waiting for the host, so there one launch beats two:
split-K's reduction kernel (``splitk_reduce``) costs the host a second ``cuLaunchKernelEx`` whatever it saves the
GPU. On the H100's held-out test set (899a254) its 44 shapes ran 1.15x cuBLAS by kernel time and 0.88x by call
time, the data-parallel ones 1.04x and 1.00x (docs/benchmarks.md). So by call time the candidates include each such
split-K's twin with its fixup in the kernel (``splitk``: the chunk that owns a tile adds the others' partials; one
launch; :func:`~.candidates.schedules`), priced at the predicted kernel time of the split-K it mirrors times
:data:`~.model.IN_KERNEL_SPLITK`. Where every config is shorter than the host, ``call`` keeps the fastest kernel
among those of the fewest launches; where the kernels outlast the host it orders as ``kernel`` does.

The host's times are not the GPU's :class:`~ctgraph.target.Target`: they vary by machine (a faster host moves the
crossing to shorter kernels, never the order of long ones). They are fitted on calls measured on the GPU machines'
hosts: every probe's ``heldout`` CSV gives both kernels' times and their calls' ratio, and the same form with torch's
own host time for cuBLAS predicts that ratio (``docs/results/host_fit.py``, the quoted sets left out).
"""

from __future__ import annotations

from ..config import Config

__all__ = [
    "BY_CALL",
    "HOST_CALL",
    "HOST_LAUNCH",
    "OBJECTIVES",
    "by",
    "call_seconds",
    "check_objective",
    "launches",
    "order_key",
]

OBJECTIVES = ("kernel", "call")
# a ctgraph call of one launch, and each further launch, as back-to-back calls see them: fitted on the probes' calls
# (docs/results/host_fit.py): 14.5 and 2.5 us on the H100's host (25 shapes; bootstrap 10-90% 13.5-15.6, 1.5-3.5),
# 14.0 and 2.0 on the H200's (1,199 shapes; 13.0-14.5, 2.0-2.5). The host's own time for the second launch is
# longer (3.5-5.7 us, results/splitk-host-h200.md), but part of it passes while the GPU runs the first kernel.
HOST_CALL = 14.5e-6
HOST_LAUNCH = 2.5e-6
BY_CALL = ", by call time"  # what a selection's reason says where the call objective chose


def check_objective(objective: str, name: str = "objective") -> str:
    """``objective`` if it is one of :data:`OBJECTIVES`, else a ``ValueError`` naming ``name`` and the choices."""
    if objective not in OBJECTIVES:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, OBJECTIVES))}, got {objective!r}")
    return objective


def by(objective: str) -> str:
    """What ``objective`` adds to a selection's reason: :data:`BY_CALL`, or nothing for the default."""
    return BY_CALL if objective == "call" else ""


def launches(c: Config) -> int:
    """The kernels one call of ``c`` launches: split-K with a separate reduction two, every other schedule one."""
    return 2 if c.transform == "splitk_reduce" else 1


def call_seconds(c: Config, kernel: float) -> float:
    """A back-to-back call of ``c`` whose kernels take ``kernel`` GPU seconds: the host's time or the GPU's."""
    return max(HOST_CALL + (launches(c) - 1) * HOST_LAUNCH, kernel)


def order_key(c: Config, kernel: float, objective: str) -> tuple[float, float]:
    """What ``objective`` orders ``c`` by (smaller first), from its predicted kernel seconds: the objective's
    seconds, then the kernel's (so that configs the host hides are ordered by their GPU time)."""
    return (call_seconds(c, kernel) if objective == "call" else kernel), kernel
