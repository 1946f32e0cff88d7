"""ctgraph: a coordinate-transform graph compiler for GEMM.

Pipeline: :func:`gemm` builds the precondition coordinate graph; :func:`compile` runs a transform
(data-parallel, Stream-K, two-tile Stream-K) as a list of pure graph passes, lowers the result to a
control graph and hands it to a backend (``lowering.cpu``, ``lowering.cuda``). :func:`evaluate` and
:func:`lambdify` turn the index expressions read off a graph into numbers; a missing optional
dependency (pycuda, a GPU, nvcc, torch, matplotlib, graphviz's ``dot``) raises :class:`MissingDependency`.
"""

from __future__ import annotations

from .api import Kernel, compile
from .deps import MissingDependency
from .dump import dump
from .evaluate import evaluate, lambdify
from .gemm import gemm
from .graph import CoordinateGraph
from .passes import TRANSFORMS
from .plot import plot_schedule

__all__ = [
    "TRANSFORMS",
    "CoordinateGraph",
    "Kernel",
    "MissingDependency",
    "compile",
    "dump",
    "evaluate",
    "gemm",
    "lambdify",
    "plot_schedule",
]
__version__ = "0.1.0"
