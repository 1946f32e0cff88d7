"""The fast path of a call on CUDA torch tensors (``runtime._TorchFacts``) without a GPU: tensors stood in for by
objects with the few attributes it reads, the launch recorded. Any operand it cannot vouch for goes back to the
general path (None), which says what is wrong; ``out`` sharing bytes with an input is one."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
import torch

import ctgraph
from lowering.cuda.runtime import _TorchFacts

M, N, K = 8, 16, 4  # fp16: A 64 bytes, B 128, C and D 256


class FakeTensor:
    """What the fast path reads of a CUDA tensor: its type, dtype, shape, device, layout and address."""

    def __init__(self, ptr: int, shape: tuple[int, int], device: int = 0, contiguous: bool = True) -> None:
        self.ptr, self.shape, self.device, self.contiguous = ptr, torch.Size(shape), device, contiguous
        self.dtype = torch.float16

    def get_device(self) -> int:
        return self.device

    def is_contiguous(self) -> bool:
        return self.contiguous

    def data_ptr(self) -> int:
        return self.ptr

    def new_empty(self, shape: torch.Size) -> FakeTensor:
        return FakeTensor(1 << 20, tuple(shape), self.device)


class Recorder:
    def __init__(self) -> None:
        self.launches: list[tuple] = []

    def launch(self, *args) -> None:
        self.launches.append(args)


@pytest.fixture
def facts() -> _TorchFacts:
    f = _TorchFacts(ctgraph.gemm(M, N, K, macro_tile=(16, 16, 16)).attrs["gemm"])
    f.tensor, f.stream, f.capturing, f.device = FakeTensor, (lambda dev: 7), (lambda: False), (lambda: 0)
    return f


def _call(facts: _TorchFacts, out: FakeTensor | None, C: FakeTensor | None = None) -> tuple[object, Recorder]:
    prog = Recorder()
    A, B = FakeTensor(0x1000, (M, K)), FakeTensor(0x2000, (K, N))
    return facts.call(prog, A, B, C, out, 1.0, 0.0 if C is None else 1.0, None), prog  # type: ignore[arg-type]


def test_a_call_on_tensors_it_vouches_for_launches_on_torchs_stream(facts):
    out = FakeTensor(0x3000, (M, N))
    done, prog = _call(facts, out, FakeTensor(0x4000, (M, N)))
    assert done is out
    assert prog.launches == [(0, 7, (0x1000, 0x2000, 0x4000, 0x3000), 1.0, 1.0, True, False)]
    fresh, prog = _call(facts, None)
    assert fresh.ptr == 1 << 20 and prog.launches[0][2] == (0x1000, 0x2000, 0, 1 << 20)


@pytest.mark.parametrize(
    "out_ptr, overlaps",
    [
        (0x1000 - 256, False),  # D ends where A starts
        (0x1000 - 255, True),  # D's last byte is A's first
        (0x1000 + 63, True),  # D starts at A's last byte
        (0x1000 + 64, False),  # D starts where A ends
        (0x2000 + 127, True),  # B's last byte
        (0x2000 + 128, False),
        (0x4000 - 256, False),  # D ends where C starts
        (0x4000 + 255, True),  # C's last byte
        (0x4000 + 256, False),
    ],
)
def test_out_sharing_bytes_with_an_input_goes_to_the_general_path(facts, out_ptr, overlaps):
    done, prog = _call(facts, FakeTensor(out_ptr, (M, N)), FakeTensor(0x4000, (M, N)))
    assert (done is None) == overlaps and len(prog.launches) == (not overlaps)


def test_without_c_no_address_stands_for_it(facts):
    done, prog = _call(facts, FakeTensor(0, (M, N)))  # a D at address 0 meets no C: there is none
    assert done is not None and prog.launches[0][2][2] == 0


@pytest.mark.parametrize(
    "bad",
    [
        FakeTensor(0x3000, (M, N), device=1),  # another device
        FakeTensor(0x3000, (M, N), contiguous=False),
        FakeTensor(0x3000, (N, M)),  # D's shape transposed
    ],
)
def test_an_out_it_cannot_vouch_for_goes_to_the_general_path(facts, bad):
    done, prog = _call(facts, bad)
    assert done is None and not prog.launches
