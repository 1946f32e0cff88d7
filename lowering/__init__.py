"""Backends of ctgraph: ``lowering.cpu`` (llvmlite JIT) and ``lowering.cuda`` (CUDA C++ + inline PTX via pycuda).

Each backend takes a kernel's control graph and turns it into a program; ``ctgraph.backends`` imports
them by target name when first asked. ``lowering`` imports ``ctgraph``, never the reverse.
"""
