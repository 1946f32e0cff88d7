"""The CUDA runtime's workspace bookkeeping without a GPU: driver memory calls replaced by a ledger."""

from __future__ import annotations

import pytest

from lowering.cuda import memory, workspace
from lowering.cuda.driver import CudaError
from lowering.cuda.workspace import STREAMS, Workspaces


@pytest.fixture
def ledger(monkeypatch):
    """Live allocations and the zeroing calls, by address."""
    state = {"next": 1 << 20, "live": {}, "zeroed": []}

    def alloc(nbytes):
        ptr = state["next"]
        state["next"] += -(-nbytes // 4096) * 4096
        state["live"][ptr] = nbytes
        return ptr

    def free(ptr):
        assert ptr in state["live"], f"double free of {ptr:#x}"
        del state["live"][ptr]

    monkeypatch.setattr(memory, "alloc", alloc)
    monkeypatch.setattr(memory, "free", free)
    monkeypatch.setattr(workspace, "torch_alloc_on", lambda nbytes, device, stream: alloc(nbytes))
    monkeypatch.setattr(workspace, "torch_free", free)
    monkeypatch.setattr(memory, "zero_words", lambda ptr, words, stream: state["zeroed"].append((ptr, words, stream)))
    monkeypatch.setattr(workspace, "bound", lambda device: _Null())
    return state


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_one_block_per_stream_zeroed_once_on_that_stream(ledger):
    ws = Workspaces(partial_bytes=1000, flag_words=6)
    a = ws.get(0, stream=11, torch_alloc=False, capture=None)
    assert ws.get(0, 11, False, None) == a  # reused, not zeroed again
    b = ws.get(0, 22, False, None)
    assert a != b and a[1] - a[0] == ws.partial_bytes == 1024  # flags after the partials, 256-byte aligned
    assert ledger["zeroed"] == [(a[1], 6, 11), (b[1], 6, 22)]
    ws.release()
    assert ledger["live"] == {}


def test_captures_get_their_own_zeroed_block_kept_until_release(ledger):
    ws = Workspaces(512, 2)
    plain = ws.get(0, 11, True, None)
    first = ws.get(0, 11, True, capture=7)
    assert first != plain and ws.get(0, 11, True, capture=7) == first
    other_stream = ws.get(0, 12, True, capture=7)  # a capture that forks onto a second stream
    second = ws.get(0, 11, True, capture=8)
    assert len({plain, first, other_stream, second}) == 4
    assert ws.get(0, 11, True, capture=7) == first  # an earlier graph's block is not given back while it may replay
    assert [z[0] for z in ledger["zeroed"]] == [p[1] for p in (plain, first, other_stream, second)]
    ws.release()
    assert ledger["live"] == {}


def test_capturing_without_torch_is_refused(ledger):
    with pytest.raises(ValueError, match="needs torch"):
        Workspaces(512, 2).get(0, 11, torch_alloc=False, capture=3)


def test_past_the_bound_blocks_are_retired_then_freed(ledger):
    ws = Workspaces(256, 1)
    for s in range(STREAMS):
        ws.get(0, s, False, None)
    assert len(ledger["live"]) == STREAMS
    ws.get(0, STREAMS, False, None)  # the oldest is retired, not freed: a reader may still hold its pointers
    assert len(ledger["live"]) == STREAMS + 1
    for s in range(STREAMS + 1, 3 * STREAMS):
        ws.get(0, s, False, None)
    assert len(ledger["live"]) == 2 * STREAMS  # in use + retired, bounded
    ws.release()
    assert ledger["live"] == {}


def test_the_per_thread_stream_handle_gives_each_thread_its_own_block(ledger):
    """Handle 2 (CU_STREAM_PER_THREAD) is a different stream on each thread: one block between two threads would
    have their kernels, running at once, write each other's partials and flags."""
    import threading

    ws = Workspaces(512, 2)
    got: dict[str, tuple[int, int]] = {}

    def call(name: str) -> None:
        got[name] = ws.get(0, workspace.PER_THREAD, False, None)

    worker = threading.Thread(target=call, args=("one",))
    worker.start()
    worker.join()
    call("here")
    assert len({got["here"], got["one"]}) == 2 and ws.get(0, workspace.PER_THREAD, False, None) == got["here"]
    assert ws.get(0, 0, False, None) not in got.values()  # the legacy stream, shared by every thread, is another
    assert all(z[2] in (workspace.PER_THREAD, 0) for z in ledger["zeroed"])  # zeroed on the handle it runs on
    ws.release()
    assert ledger["live"] == {}


def test_a_block_whose_zeroing_fails_is_given_back(ledger, monkeypatch):
    def refuse(ptr, words, stream):
        raise CudaError("cuMemsetD32Async: invalid resource handle")

    monkeypatch.setattr(memory, "zero_words", refuse)
    ws = Workspaces(512, 2)
    for _ in range(3):
        with pytest.raises(CudaError):
            ws.get(0, 11, False, None)
    assert ledger["live"] == {}
