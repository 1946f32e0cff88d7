"""A program's workspaces: fp32 partial tiles and the flags of Stream-K's fixup (or split-K's partials), one set per
(device, stream), zeroed on the stream that will use them.

- **Whose memory.** With torch operands, torch's caching allocator (``caching_allocator_alloc`` on the launch
  stream: the memory counts in ``torch.cuda.memory_allocated`` and a CUDA graph capture takes it from the graph's
  pool); otherwise ``cuMemAlloc``.
- **Zeroed where used.** Only the flags need zeros (a partial is read only after its flag says it was written).
  They are zeroed once, by ``cuMemsetD32Async`` on the stream that then launches, so the zeros land before the
  kernel that reads them and after anything queued there before; the kernels leave the flags at zero again.
- **CUDA graphs.** A call made while its stream captures gets a workspace of that capture and stream, zeroed
  inside the captured work: each replay zeroes its own flags before its kernels run. Calls of one program on one
  stream of one capture share it. A capture's workspace lives as long as the program (the graph may replay it);
  dropping the program returns it to the graph's pool, which no other tensor takes while the graph lives, unless
  graphs share a pool.
- **One per stream, not per handle.** The handle ``CU_STREAM_PER_THREAD`` (2) names each calling thread's own
  default stream, so under it each thread gets its own workspace: two threads' kernels on their own streams would
  otherwise write each other's partials and flags at once.
- **Bounded.** At most :data:`STREAMS` workspaces outside captures per program; past that the oldest is retired,
  not freed at once (another thread may have read its pointers a moment ago), and freed :data:`STREAMS` retirements
  later or with the program. torch's streams come from a small pool per device, so a program rarely sees that many.
"""

from __future__ import annotations

import threading
from typing import Any

from . import memory
from .contexts import bound

__all__ = ["STREAMS", "Workspaces"]

STREAMS = 64  # workspaces a program keeps in use, each for one (device, stream)
PER_THREAD = 2  # CU_STREAM_PER_THREAD: the handle of the calling thread's own default stream
ALIGN = 256


class Workspaces:
    """Workspace and flags of ``partial_bytes`` and ``flag_words`` per (device, stream) (module docstring)."""

    def __init__(self, partial_bytes: int, flag_words: int) -> None:
        self.partial_bytes = -(-partial_bytes // ALIGN) * ALIGN
        self.flag_words = flag_words
        self._blocks: dict[tuple[int, int], tuple[int, int, Any]] = {}  # (device, stream) -> block, oldest first
        self._pointers: dict[tuple[int, int], tuple[int, int]] = {}  # (device, stream) -> (workspace, flags)
        self._captures: dict[tuple[int, int, int], tuple[int, int, Any]] = {}  # (device, capture, stream) -> block
        self._retired: list[tuple[int, int, Any]] = []
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return self.partial_bytes + 4 * self.flag_words

    def get(self, device: int, stream: int, torch_alloc: bool, capture: int | None) -> tuple[int, int]:
        """``(workspace, flags)`` pointers for a launch on ``stream`` of ``device`` (the current context's);
        ``capture``: the id of the graph capture ``stream`` takes part in (None: not capturing)."""
        slot = stream if stream != PER_THREAD else -threading.get_ident()  # NOTE: one stream per thread, one handle
        if capture is None:
            ptrs = self._pointers.get((device, slot))  # NOTE: every call's case, without the lock
            if ptrs is not None:
                return ptrs
        with self._lock:
            if capture is None:
                key = (device, slot)
                if key not in self._blocks:
                    if len(self._blocks) >= STREAMS:
                        oldest = next(iter(self._blocks))
                        del self._pointers[oldest]
                        self._retired.append(self._blocks.pop(oldest))
                        if len(self._retired) > STREAMS:  # retired 64 new streams ago: long since launched on
                            _release(self._retired.pop(0))
                    self._blocks[key] = self._new(device, stream, torch_alloc)
                block = self._blocks[key]
            else:
                if not torch_alloc:
                    raise ValueError(
                        "capturing a CUDA graph of a kernel with a workspace (Stream-K, split-K) needs torch "
                        "tensors: the workspace comes from torch's allocator, which gives a capture its own pool"
                    )
                ckey = (device, capture, slot)
                if ckey not in self._captures:
                    self._captures[ckey] = self._new(device, stream, torch_alloc)
                block = self._captures[ckey]
            ptrs = (block[0], block[0] + self.partial_bytes)
            if capture is None:
                self._pointers[(device, slot)] = ptrs
            return ptrs

    def _new(self, device: int, stream: int, torch_alloc: bool) -> tuple[int, int, Any]:
        if torch_alloc:
            ptr, owner = torch_alloc_on(self.nbytes, device, stream), torch_free
        else:
            ptr, owner = memory.alloc(self.nbytes), None
        try:
            memory.zero_words(ptr + self.partial_bytes, self.flag_words, stream)
        except BaseException:  # NOTE: e.g. a handle of another device's stream: the block is not kept, so give it back
            _release((ptr, device, owner))
            raise
        return ptr, device, owner

    def release(self) -> None:
        """Give every workspace back (stream-ordered for torch's allocator; ``cuMemFree`` waits for the device)."""
        with self._lock:
            blocks = [*self._blocks.values(), *self._captures.values(), *self._retired]
            self._blocks.clear()
            self._pointers.clear()
            self._captures.clear()
            self._retired.clear()
        for b in blocks:
            _release(b)


def torch_alloc_on(nbytes: int, device: int, stream: int) -> int:
    """``nbytes`` from torch's caching allocator for ``stream`` of ``device`` (a capture's pool while it captures)."""
    import torch

    return int(torch.cuda.caching_allocator_alloc(nbytes, device, stream))


def torch_free(ptr: int) -> None:
    import torch

    torch.cuda.caching_allocator_delete(ptr)


def _release(block: tuple[int, int, Any]) -> None:
    ptr, device, owner = block
    try:
        if owner is not None:
            owner(ptr)
        else:
            with bound(device):
                memory.free(ptr)
    except Exception:  # NOTE: at interpreter exit torch or the driver may be gone first; the memory goes with them
        pass
