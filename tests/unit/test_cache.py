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
