"""nvcc for the CUDA backend: cubins through pycuda's compiler, and PTX text / compile-only checks through the nvcc
binary (no GPU or pycuda needed); both cached in ``CTGRAPH_CACHE_DIR`` by source, arch, options and nvcc's version.

The cache is ours, not pycuda's: pycuda writes its cache files in place, so processes that share one (``pytest -n 8``,
a pool that compiles ahead of a benchmark) could read a partly written cubin. Ours are written whole
(:func:`ctgraph.cache.write_whole`)."""

from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from ctgraph import knobs
from ctgraph.cache import write_whole
from ctgraph.deps import require, require_program

__all__ = ["NVCC_OPTIONS", "cubin", "nvcc_available", "nvcc_version", "ptx"]

NVCC_OPTIONS = ("-O3", "-std=c++17")


def nvcc_available() -> bool:
    return shutil.which("nvcc") is not None


@functools.cache
def nvcc_version() -> str:
    """What ``nvcc --version`` prints (empty without nvcc): part of every cache key, so a new toolkit compiles anew."""
    if not nvcc_available():
        return ""
    return subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout


def _cached(kind: str, source: str, arch: str, target: str, build: Callable[[], bytes]) -> bytes:
    """``source`` compiled to ``target`` for ``arch`` by ``kind`` ("pycuda" or "nvcc"): read from the cache, else
    ``build()`` written there whole. The key: source, arch, target, options and nvcc's version."""
    key = hashlib.sha256("\0".join((source, arch, target, *NVCC_OPTIONS, nvcc_version())).encode()).hexdigest()
    path = knobs.cache_dir() / kind / f"{key}.{target}"
    if path.exists():
        return path.read_bytes()
    data = build()
    write_whole(path, data)
    return data


def cubin(source: str, arch: str) -> bytes:
    """Compile with pycuda (``pycuda.compiler.compile``, the compile step of ``SourceModule``; its own cache off)."""
    pycuda_compile = require("pycuda.compiler", "compiling a CUDA kernel").compile

    def build() -> bytes:
        require_program("nvcc", "compiling a CUDA kernel")
        return pycuda_compile(source, options=list(NVCC_OPTIONS), no_extern_c=True, arch=arch, cache_dir=False)

    return _cached("pycuda", source, arch, "cubin", build)


def _run_nvcc(source: str, arch: str, target: str) -> bytes:
    require_program("nvcc", f"compiling CUDA source to {target}")

    def build() -> bytes:
        with tempfile.TemporaryDirectory() as tmp:
            src, out = Path(tmp) / "kernel.cu", Path(tmp) / f"kernel.{target}"
            src.write_text(source)
            cmd = ["nvcc", f"-arch={arch}", f"-{target}", *NVCC_OPTIONS, "-o", str(out), str(src)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode:
                raise RuntimeError(f"nvcc failed ({' '.join(cmd)}):\n{r.stderr}")
            return out.read_bytes()

    return _cached("nvcc", source, arch, target, build)


def ptx(source: str, arch: str) -> str:
    """The PTX text nvcc makes of ``source`` (cached on disk by source, arch and options)."""
    return _run_nvcc(source, arch, "ptx").decode()


def check_cubin(source: str, arch: str) -> bytes:
    """Compile to a cubin with the nvcc binary (CI's compile-only check)."""
    return _run_nvcc(source, arch, "cubin")
