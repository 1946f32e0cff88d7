"""ctgraph.cache.write_whole: the caches' files are written whole or not at all."""

import os

import pytest

from ctgraph.cache import write_whole


def test_write_whole_creates_the_directory_and_leaves_no_part_files(tmp_path):
    path = tmp_path / "a" / "b" / "table.json"
    assert write_whole(path, "first") == path
    write_whole(path, b"\x00second")
    assert path.read_bytes() == b"\x00second"
    assert sorted(p.name for p in path.parent.iterdir()) == ["table.json"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_part(tmp_path, monkeypatch):
    path = tmp_path / "kernel.cubin"
    write_whole(path, b"old")

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_whole(path, b"new")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["kernel.cubin"]


def test_cubins_are_cached_whole_by_source_arch_and_nvcc_version(tmp_path, monkeypatch):
    """``lowering.cuda.nvcc.cubin`` compiles through pycuda with pycuda's own (in-place) cache off, and keeps the
    cubin in ctgraph's cache: a second call reads it back, a new nvcc compiles anew."""
    import sys
    import types

    from lowering.cuda import nvcc

    calls = []

    def fake_compile(source, options, no_extern_c, arch, cache_dir):
        calls.append(cache_dir)
        return f"cubin of {source} for {arch}".encode()

    monkeypatch.setitem(sys.modules, "pycuda", types.ModuleType("pycuda"))
    monkeypatch.setitem(sys.modules, "pycuda.compiler", types.SimpleNamespace(compile=fake_compile))
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(nvcc, "nvcc_version", lambda: "release 13.0")
    assert nvcc.cubin("k", "sm_90a") == b"cubin of k for sm_90a"
    assert nvcc.cubin("k", "sm_90a") == b"cubin of k for sm_90a"
    assert calls == [False]
    monkeypatch.setattr(nvcc, "nvcc_version", lambda: "release 13.1")
    nvcc.cubin("k", "sm_90a")
    assert calls == [False, False]
    assert all(p.suffix == ".cubin" for p in (tmp_path / "pycuda").iterdir())


def test_lru_keeps_the_most_recently_used():
    from ctgraph.cache import LRU

    lru: LRU[int] = LRU(2)
    lru.put("a", 1)
    lru.put("b", 2)
    assert lru.get("a") == 1  # "a" is now the most recent
    lru.put("c", 3)
    assert "b" not in lru and lru.get("a") == 1 and lru.get("c") == 3 and len(lru) == 2
    with pytest.raises(ValueError, match="at least one entry"):
        LRU(0)


def test_lru_made_makes_a_value_once_per_key_while_it_is_kept():
    from ctgraph.cache import LRU

    lru: LRU[str] = LRU(2)
    calls: list[str] = []

    def make(key: str) -> str:
        calls.append(key)
        return key.upper()

    assert [lru.made(k, lambda k=k: make(k)) for k in ("a", "a", "b", "a")] == ["A", "A", "B", "A"]
    assert calls == ["a", "b"]
    lru.made("c", lambda: make("c"))  # "b" was the least recently used: dropped, made again when asked
    assert lru.made("b", lambda: make("b")) == "B" and calls == ["a", "b", "c", "b"]


def test_the_cpu_jit_cache_is_bounded(monkeypatch):
    """Many distinct kernels: the in-memory cache holds the last CACHE_SIZE; a program keeps its own module."""
    import numpy as np

    import ctgraph
    from ctgraph.cache import LRU
    from lowering.cpu import jit

    monkeypatch.setattr(jit, "_CACHE", LRU(2))
    kernels = [
        ctgraph.compile(ctgraph.gemm(8, 8, 8, macro_tile=(4, 4, bk), dtype="float32"), "dataparallel", 2, target="cpu")
        for bk in (1, 2, 4)
    ]
    A, B = np.ones((8, 8), np.float32), np.ones((8, 8), np.float32)
    assert all(np.array_equal(k(A, B), A @ B) for k in kernels)  # each JIT-compiles on its first call
    assert len(jit._CACHE) == 2
    assert np.array_equal(kernels[0](A, B), A @ B)  # evicted from the cache, still held by its program


def test_write_whole_gives_the_mode_a_new_file_gets(tmp_path):
    """Not mkstemp's 0600, which would leave a shared cache directory's files to one user: what ``open`` gives."""
    import ctgraph.cache

    mask = os.umask(0o027)
    try:
        assert ctgraph.cache._file_mode() == 0o640
    finally:
        os.umask(mask)
    path = write_whole(tmp_path / "f.json", "{}")
    (tmp_path / "g").write_text("{}")
    assert os.stat(path).st_mode & 0o777 == os.stat(tmp_path / "g").st_mode & 0o777
