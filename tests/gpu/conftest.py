"""GPU tests run only where pycuda finds a CUDA device; elsewhere they skip with the reason."""

from __future__ import annotations

import pytest

from ctgraph.backends import cuda_available


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with pycuda (run `pytest -m gpu` on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
