"""A program's workspaces: fp32 partial tiles and the flags of Stream-K's fixup (or split-K's partials), one set per
(device, stream), zeroed on the stream that will use them.

- **Whose memory.** With torch operands, torch's caching allocator (``caching_allocator_alloc`` on the launch
  stream: the memory counts in ``torch.cuda.memory_allocated`` and a CUDA graph capture takes it from the graph's
  pool); otherwise ``cuMemAlloc``.
- **Zeroed where used.** Only the flags need zeros (a partial is read only after its flag says it was written).
  They are zeroed once, by ``cuMemsetD32Async`` on the stream that then launches, so the zeros land before the
  kernel that reads them and after anything queued there before; the kernels leave the flags at zero again.
- **CUDA graphs.** A call made while its stream captures gets a workspace of that capture, zeroed inside the
  captured work: each replay zeroes its own flags before its kernels run. Calls of one program in one capture
  share it, as they share a stream.
- **Bounded.** At most :data:`STREAMS` per program, the oldest first out; all go with the program.
"""

from __future__ import annotations

import threading
from typing import Any

from . import memory
from .contexts import bound

__all__ = ["STREAMS", "Workspaces"]

STREAMS = 8  # workspaces a program keeps, each for one (device, stream)
ALIGN = 256


class Workspaces:
    """Workspace and flags of ``partial_bytes`` and ``flag_words`` per (device, stream) (module docstring)."""

    def __init__(self, partial_bytes: int, flag_words: int) -> None:
        self.partial_bytes = -(-partial_bytes // ALIGN) * ALIGN
        self.flag_words = flag_words
        self._blocks: dict[tuple[int, int], tuple[int, int, Any]] = {}  # (device, stream) -> block, oldest first
        self._pointers: dict[tuple[int, int], tuple[int, int]] = {}  # (device, stream) -> (workspace, flags)
        self._captures: dict[int, tuple[int, tuple[int, int, Any]]] = {}  # device -> (capture id, its block)
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return self.partial_bytes + 4 * self.flag_words

    def get(self, device: int, stream: int, torch_alloc: bool, capture: int | None) -> tuple[int, int]:
        """``(workspace, flags)`` pointers for a launch on ``stream`` of ``device`` (the current context's);
        ``capture``: the id of the graph capture ``stream`` takes part in (None: not capturing)."""
        if capture is None:
            ptrs = self._pointers.get((device, stream))  # NOTE: every call's case, without the lock
            if ptrs is not None:
                return ptrs
        with self._lock:
            if capture is None:
                key = (device, stream)
                if key not in self._blocks:
                    if len(self._blocks) >= STREAMS:
                        oldest = next(iter(self._blocks))
                        del self._pointers[oldest]
                        _release(self._blocks.pop(oldest))
                    self._blocks[key] = self._new(device, stream, torch_alloc)
                block = self._blocks[key]
            else:
                held = self._captures.get(device)
                if held is None or held[0] != capture:
                    if not torch_alloc:
                        raise ValueError(
                            "capturing a CUDA graph of a kernel with a workspace (Stream-K, split-K) needs torch "
                            "tensors: the workspace comes from torch's allocator, which gives a capture its own pool"
                        )
                    if held is not None:
                        _release(held[1])
                    held = self._captures[device] = (capture, self._new(device, stream, torch_alloc))
                block = held[1]
            ptrs = (block[0], block[0] + self.partial_bytes)
            if capture is None:
                self._pointers[(device, stream)] = ptrs
            return ptrs

    def _new(self, device: int, stream: int, torch_alloc: bool) -> tuple[int, int, Any]:
        if torch_alloc:
            import torch

            ptr = int(torch.cuda.caching_allocator_alloc(self.nbytes, device, stream))
            owner: Any = torch.cuda.caching_allocator_delete
        else:
            ptr, owner = memory.alloc(self.nbytes), None
        memory.zero_words(ptr + self.partial_bytes, self.flag_words, stream)
        return ptr, device, owner

    def release(self) -> None:
        """Give every workspace back (stream-ordered for torch's allocator; ``cuMemFree`` waits for the device)."""
        with self._lock:
            blocks = [*self._blocks.values(), *(b for _, b in self._captures.values())]
            self._blocks.clear()
            self._pointers.clear()
            self._captures.clear()
        for b in blocks:
            _release(b)


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
