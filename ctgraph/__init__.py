"""ctgraph: a coordinate-transform graph compiler for GEMM.

Pipeline: :func:`gemm` builds the precondition coordinate graph; :func:`compile` runs a transform
(data-parallel, Stream-K, two-tile Stream-K) as a list of pure graph passes, lowers the result to a
control graph and hands it to a backend (``lowering.cpu``, ``lowering.cuda``).
"""

from __future__ import annotations

from .api import Kernel, compile
from .dump import dump
from .gemm import gemm
from .graph import CoordinateGraph
from .passes import TRANSFORMS
from .plot import plot_schedule

__all__ = ["TRANSFORMS", "CoordinateGraph", "Kernel", "compile", "dump", "gemm", "plot_schedule"]
__version__ = "0.1.0"
