"""ctgraph: a coordinate-transform graph compiler for GEMM.

Pipeline: :func:`gemm` builds the precondition coordinate graph; :func:`compile` runs a transform
(data-parallel, Stream-K, two-tile Stream-K) as a list of pure graph passes, lowers the result to a
control graph and hands it to a backend (``lowering.cpu``, ``lowering.cuda``). :func:`evaluate` and
:func:`lambdify` turn the index expressions read off a graph into numbers; a missing optional
dependency (pycuda, a GPU, nvcc, torch, matplotlib, graphviz's ``dot``) raises :class:`MissingDependency`.
:func:`matmul` is the drop-in for torch users (also ``torch.ops.ctgraph.matmul``).
"""

from __future__ import annotations

from wrapt import register_post_import_hook

from .api import Kernel, compile
from .deps import MissingDependency
from .dump import dump
from .evaluate import evaluate, lambdify
from .gemm import gemm
from .graph import CoordinateGraph
from .passes import TRANSFORMS
from .plot import plot_schedule
from .torch_ops import matmul, register_torch_ops

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
    "matmul",
    "plot_schedule",
    "register_torch_ops",
]
__version__ = "0.1.0"

# torch.ops.ctgraph.matmul exists once torch is imported, before ctgraph or after it (torch_ops' docstring)
register_post_import_hook(lambda _torch: register_torch_ops(), "torch")
