"""Context binding and capture queries without a GPU: libcuda replaced by a fake that keeps a context stack."""

from __future__ import annotations

import pytest

from lowering.cuda import contexts, memory


class FakeCuda:
    """Per-thread context stack and primary contexts as the driver keeps them (one thread here)."""

    def __init__(self, current: int = 0, capturing: dict[int, int] | None = None, v3: bool = False) -> None:
        self.stack = [current] if current else []
        self.capturing = capturing or {}
        if v3:
            self.cuStreamGetCaptureInfo_v3 = self._info
        else:
            self.cuStreamGetCaptureInfo_v2 = self._info

    def cuInit(self, flags):
        return 0

    def cuDeviceGet(self, dev, ordinal):
        dev._obj.value = ordinal
        return 0

    def cuDevicePrimaryCtxRetain(self, handle, dev):
        handle._obj.value = 0x100 + dev.value
        return 0

    def cuCtxGetCurrent(self, handle):
        handle._obj.value = self.stack[-1] if self.stack else None
        return 0

    def cuCtxGetDevice(self, dev):
        dev._obj.value = self.stack[-1] - 0x100
        return 0

    def cuCtxPushCurrent_v2(self, ctx):
        self.stack.append(ctx.value)
        return 0

    def cuCtxPopCurrent_v2(self, out):
        self.stack.pop()
        return 0

    def cuStreamIsCapturing(self, stream, status):
        status._obj.value = 1 if (stream.value or 0) in self.capturing else 0
        return 0

    def _info(self, stream, status, ident, *rest):
        ident._obj.value = self.capturing[stream.value or 0]
        return 0


@pytest.fixture
def fake(monkeypatch):
    def install(**kw):
        lib = FakeCuda(**kw)
        monkeypatch.setattr(contexts, "_lib", lambda: lib)
        monkeypatch.setattr(memory, "_lib", lambda: lib)
        monkeypatch.setattr(contexts, "_PRIMARY", {})
        return lib

    return install


def test_the_devices_context_is_pushed_only_where_another_is_current(fake):
    lib = fake(current=0x100)  # device 0's primary context is current (torch ran here)
    assert contexts.enter(0) is False and lib.stack == [0x100]
    assert contexts.enter(1) is True and lib.stack == [0x100, 0x101]
    contexts.leave()
    assert lib.stack == [0x100] and contexts.current_device() == 0


def test_a_thread_without_a_context_gets_one_for_the_call_only(fake):
    lib = fake()
    assert contexts.current_device() == 0  # the runtime's default where nothing is current
    with contexts.bound(1):
        assert lib.stack == [0x101] and contexts.current_device() == 1
    assert lib.stack == []


def test_bound_pops_on_error(fake):
    lib = fake(current=0x100)
    with pytest.raises(RuntimeError), contexts.bound(1):
        raise RuntimeError("a failed launch")
    assert lib.stack == [0x100]


@pytest.mark.parametrize("v3", [False, True], ids=["v2", "v3"])
def test_capture_id(fake, v3):
    fake(capturing={7: 42}, v3=v3)
    assert memory.capture_id(7) == 42
    assert memory.capture_id(8) is None


def test_a_buffer_is_an_int_allocated_and_freed_in_its_devices_context(fake):
    """pycuda's ``GPUArray.get`` hands ``gpudata`` to Boost.Python, which takes an ``int``, not an int-like object."""
    lib = fake(current=0x100)
    calls = []

    def cu_mem_alloc(ptr, nbytes):
        calls.append(("alloc", lib.stack[-1], nbytes.value))
        ptr._obj.value = 0xBEEF00
        return 0

    def cu_mem_free(ptr):
        calls.append(("free", lib.stack[-1], ptr.value))
        return 0

    lib.cuMemAlloc_v2, lib.cuMemFree_v2 = cu_mem_alloc, cu_mem_free
    buf = memory.Buffer(4096, 1)
    assert isinstance(buf, int) and buf == 0xBEEF00 and buf + 16 == 0xBEEF10 and buf.device == 1
    buf.free()
    buf.free()  # once only
    assert calls == [("alloc", 0x101, 4096), ("free", 0x101, 0xBEEF00)] and lib.stack == [0x100]


def test_each_thread_reads_its_current_context_into_its_own_handle(fake):
    """``cuCtxGetCurrent`` writes into a handle kept per thread (made on a thread's first call): threads calling at
    once never read each other's context."""
    import threading

    lib = fake(current=0x100)
    seen: dict[str, tuple[int, object]] = {}

    def run(name: str, ctx: int) -> None:
        lib.stack = [ctx]  # NOTE: the fake keeps one stack; each thread sets it before its call
        seen[name] = (contexts._current(), contexts._SLOT.handle[0])  # kept: an id could be reused

    for name, ctx in (("a", 0x100), ("b", 0x101)):
        t = threading.Thread(target=run, args=(name, ctx))
        t.start()
        t.join()
    assert seen["a"][0] == 0x100 and seen["b"][0] == 0x101
    assert seen["a"][1] is not seen["b"][1]  # two handles, one a thread
    assert contexts._current() == 0x101  # and this thread's own, made on its first call
