"""The runtime with torch: streams, threads, devices, CUDA graphs, torch.compile, aliasing and memory (issue 50)."""

from __future__ import annotations

import ctypes
import gc
import os
import threading

import numpy as np
import pytest

import ctgraph

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

# every schedule: data-parallel, Stream-K (flags and partials), the hybrids, split-K with and without a reduction
TRANSFORMS = ["dataparallel", "streamk", "streamk2tile", "streamk_hybrid", "splitk", "splitk_reduce"]


def tensors(m, n, k, seed=0, device="cuda"):
    g = torch.Generator(device="cpu").manual_seed(seed)
    make = lambda r, c: torch.randn(r, c, generator=g, dtype=torch.float32).to(torch.float16).to(device)  # noqa: E731
    return make(m, k), make(k, n), make(m, n)


def reference(A, B, C=None, alpha=1.0, beta=0.0):
    ref = alpha * (A.double() @ B.double())
    return ref if C is None else ref + beta * C.double()


def close(D, ref):
    err = (D.double() - ref).abs().max().item() / max(1.0, ref.abs().max().item())
    return err < 3e-3


def kernel(transform, m=700, n=520, k=3000, **kw):
    split = {"split": 3} if transform.startswith("splitk") else {}
    return ctgraph.compile(ctgraph.gemm(m, n, k), transform=transform, target="cuda", **split, **kw)


@pytest.mark.parametrize("transform", ["streamk", "streamk2tile", "splitk_reduce"])
def test_two_threads_on_their_own_streams(transform):
    """One program called from two threads at once, each on its own stream, many times: correct, and bit-identical
    to a single-threaded call."""
    A, B, C = tensors(700, 520, 3000)
    kern = kernel(transform)
    expected = kern(A, B, C, alpha=1.5, beta=0.5)
    torch.cuda.synchronize()
    results, errors = {}, []

    def work(i):
        try:
            s = torch.cuda.Stream()
            outs = []
            with torch.cuda.stream(s):
                for _ in range(50):
                    outs.append(kern(A, B, C, alpha=1.5, beta=0.5))
            s.synchronize()
            results[i] = outs
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert close(expected, reference(A, B, C, 1.5, 0.5))
    for outs in results.values():
        assert all(torch.equal(D, expected) for D in outs)


def test_a_thread_that_never_touched_cuda():
    """A plain thread with numpy operands: the device's primary context is bound for the call only."""
    A, B, _ = (x.cpu().numpy() for x in tensors(129, 136, 1000))
    kern = kernel("streamk", 129, 136, 1000)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("D", kern(A, B)))
    t.start()
    t.join()
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.abs(out["D"] - ref).max() / np.abs(ref).max() < 3e-3


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_first_call_on_a_fresh_stream_while_the_default_stream_is_busy(transform):
    """Nothing of a call runs on the legacy or default stream: with the default stream asleep, the first call on a
    new non-blocking stream (workspace allocated and zeroed there) finishes, correct."""
    A, B, C = tensors(700, 520, 3000, seed=1)
    torch.cuda.synchronize()
    kern = kernel(transform)
    s = torch.cuda.Stream()  # torch's streams are non-blocking
    torch.cuda._sleep(2_000_000_000)  # ~1 s of the default stream
    with torch.cuda.stream(s):
        D = kern(A, B, C, beta=1.0)
    s.synchronize()
    assert close(D, reference(A, B, C, 1.0, 1.0))
    torch.cuda.synchronize()


@pytest.mark.parametrize("warmup", [False, True], ids=["no-warmup", "side-stream-warmup"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_cuda_graph_capture_and_100_replays(transform, warmup):
    """torch.cuda.graph captures calls of a fresh kernel with no warm-up (and with torch's documented recipe: warm
    up on a side stream); 100 replays on new inputs are each correct and bit-identical to an eager call."""
    A, B, C = tensors(700, 520, 3000, seed=2)
    kern = kernel(transform)
    if warmup:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                kern(A, B, C, alpha=1.5, beta=0.5)
        torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        D = kern(A, B, C, alpha=1.5, beta=0.5)
        E = kern(A, B, alpha=2.0)  # a second call of the same program in the same capture
    for i in range(100):
        if i % 25 == 0:  # new inputs in place: the graph reads them
            a, b, c = tensors(700, 520, 3000, seed=10 + i)
            A.copy_(a), B.copy_(b), C.copy_(c)
            eager_d, eager_e = kern(A, B, C, alpha=1.5, beta=0.5), kern(A, B, alpha=2.0)
            assert close(eager_d, reference(A, B, C, 1.5, 0.5))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(D, eager_d), f"replay {i}"
        assert torch.equal(E, eager_e), f"replay {i}"


def test_capturing_numpy_operands_is_refused():
    A, B, _ = tensors(64, 64, 64)
    kern = kernel("streamk", 64, 64, 64)
    kern(A, B)
    g, b = torch.cuda.CUDAGraph(), B.cpu().numpy()
    with torch.cuda.graph(g), pytest.raises(ValueError, match="captured"):
        kern(A, b)


@pytest.mark.parametrize("shape", [(1, 8, 8), (700, 520, 3000), (4096, 4096, 4096)], ids=str)
def test_matmul(shape):
    m, n, k = shape
    A, B, C = tensors(m, n, k, seed=3)
    D = ctgraph.matmul(A, B)
    assert D.dtype == torch.float16 and D.shape == (m, n) and D.device == A.device
    assert close(D, reference(A, B))
    assert close(ctgraph.matmul(A, B, c=C, alpha=0.5, beta=2.0), reference(A, B, C, 0.5, 2.0))
    out = torch.empty_like(C)
    assert ctgraph.matmul(A, B, out=out) is out and torch.equal(out, D)
    assert torch.equal(torch.ops.ctgraph.matmul(A, B, None, 1.0, 0.0), D)
    A32, B32 = A.float(), B.float()
    assert torch.allclose(ctgraph.matmul(A32, B32), A32 @ B32, rtol=1e-4, atol=1e-3 * k**0.5)


def test_matmul_errors():
    A, B, _ = tensors(64, 48, 32)
    with pytest.raises(ValueError, match="columns"):
        ctgraph.matmul(A, A)
    with pytest.raises(TypeError, match="float16 or float32"):
        ctgraph.matmul(A, B.float())
    with pytest.raises(ValueError, match="one device"):
        ctgraph.matmul(A, B.cpu())
    X = torch.ones(64, 64, dtype=torch.float16, device="cuda")
    with pytest.raises(ValueError, match="out overlaps a"):  # the kernel's check, in matmul's names
        ctgraph.matmul(X, torch.ones_like(X), out=X)


def test_torch_compile_fullgraph():
    A, B, C = tensors(1000, 1024, 512, seed=4)

    def f(a, b, c):
        return torch.relu(ctgraph.matmul(a, b, c=c, beta=1.0)) * 2

    compiled = torch.compile(f, fullgraph=True)
    got = compiled(A, B, C)
    assert close(got, torch.relu(reference(A, B, C, 1.0, 1.0)) * 2)
    assert torch.equal(got, f(A, B, C))


def test_autograd_on_the_gpu():
    A, B, C = (x.requires_grad_() for x in tensors(256, 192, 320, seed=6))
    ctgraph.matmul(A, B, c=C, beta=1.0).float().square().sum().backward()
    ours = [x.grad.clone() for x in (A, B, C)]
    for x in (A, B, C):
        x.grad = None
    (A @ B + C).float().square().sum().backward()
    for got, want in zip(ours, (A.grad, B.grad, C.grad), strict=True):
        assert close(got, want.double())


def test_aliased_out_raises_before_launch():
    A, B, C = tensors(256, 256, 256)
    kern = kernel("streamk", 256, 256, 256)
    for alias, name in ((A, "A"), (C, "C")):
        with pytest.raises(ValueError, match=f"out overlaps {name}"):
            kern(A, B, C, beta=1.0, out=alias)
    view = torch.empty(2 * 256 * 256, dtype=torch.float16, device="cuda")
    with pytest.raises(ValueError, match="out overlaps B"):
        kern(A, view[: 256 * 256].view(256, 256), out=view[128 * 256 : 128 * 256 + 256 * 256].view(256, 256))


@pytest.mark.parametrize("transform", ["dataparallel", "splitk_reduce"])
def test_operands_that_move_and_come_back(transform):
    """A prepared launch rewrites its pointers and TMA descriptors only where the operands moved since the last call
    (launch.Prepared): calls that alternate two sets of tensors, repeat one, and come back each get their own D;
    the scalars change between calls whose operands stay put."""
    kern = kernel(transform, 300, 200, 1000)
    sets = [tensors(300, 200, 1000, seed=s) for s in (1, 2)]
    outs = [torch.empty(300, 200, dtype=torch.float16, device="cuda") for _ in sets]
    for i in (0, 1, 1, 0, 1):
        A, B, C = sets[i]
        for alpha, beta in ((1.0, 0.0), (-0.5, 2.0)):
            kern(A, B, C if beta else None, alpha=alpha, beta=beta, out=outs[i])
            torch.cuda.synchronize()
            assert close(outs[i], reference(A, B, C, alpha, beta)), (i, alpha, beta)


def _free_bytes():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    torch.cuda.synchronize()
    lib = ctypes.CDLL("libcuda.so.1")
    assert lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
    return free.value


def test_memory_returns_after_a_thousand_programs():
    """Workspaces (torch's allocator) and modules go with their programs: after 1000 programs of many shapes and
    schedules are created, called and dropped, torch's allocated bytes and the device's free bytes are back."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        pytest.skip("the free bytes count every xdist worker's memory: run this test alone (make test-gpu)")
    shapes = [(64 + 8 * i, 64 + 16 * (i % 7), 256 + 64 * (i % 5)) for i in range(40)]
    transforms = ("streamk", "dataparallel", "splitk_reduce")

    def one(i):  # NOTE: a function, so nothing of a call outlives it in a local variable
        m, n, k = shapes[i % len(shapes)]
        A, B = tensors(m, n, k, seed=i % 3)[:2]
        kernel(transforms[i % 3], m, n, k)(A, B)

    for i in range(3):  # the three binaries loaded, torch's allocator warm
        one(i)
    gc.collect()
    torch.cuda.synchronize()
    allocated, free = torch.cuda.memory_allocated(), _free_bytes()
    for i in range(1000):
        one(i)
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    assert torch.cuda.memory_allocated() == allocated
    assert _free_bytes() >= free - (64 << 20)  # within torch's cached segments' granularity


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_second_gpu():
    """Tensors on cuda:1 run there (the program is loaded on the device its operands are on), with or without
    torch.cuda.set_device(1); torch's current device is what it was; operands on two devices raise."""
    A, B, C = tensors(700, 520, 3000, seed=5, device="cuda:1")
    kern = kernel("streamk2tile")
    before = torch.cuda.current_device()
    D = kern(A, B, C, beta=1.0)
    assert D.device == A.device and torch.cuda.current_device() == before
    assert close(D, reference(A, B, C, 1.0, 1.0))
    assert close(ctgraph.matmul(A, B), reference(A, B))
    with torch.cuda.device(1):
        assert torch.equal(kern(A, B, C, beta=1.0), D)
        assert torch.cuda.current_device() == 1
    assert torch.cuda.current_device() == before
    A0, B0, _ = tensors(700, 520, 3000, seed=5, device="cuda:0")
    assert torch.equal(kern(A0, B0, C.to("cuda:0"), beta=1.0).cpu(), D.cpu())
    with pytest.raises(ValueError, match="different devices"):
        kern(A0, B, C, beta=1.0)
    with pytest.raises(ValueError, match="stream is on cuda:0"):
        kern(A, B, stream=torch.cuda.Stream(device=0))
