"""``ctgraph.matmul`` and ``torch.ops.ctgraph.matmul`` on CPU tensors: eager, the fake implementation under
``torch.compile(fullgraph=True)``, the ``out`` variant and torch's own op checks (the CUDA side: tests/gpu)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import ctgraph

torch = pytest.importorskip("torch")


def operands(m, n, k, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=g), torch.randn(k, n, generator=g), torch.randn(m, n, generator=g)


@pytest.mark.parametrize("shape", [(1, 1, 1), (33, 17, 5), (64, 48, 40)], ids=str)
def test_eager_matches_torch(shape):
    a, b, c = operands(*shape)
    torch.testing.assert_close(ctgraph.matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        ctgraph.matmul(a, b, c=c, alpha=0.5, beta=2.0), 0.5 * a @ b + 2 * c, rtol=1e-5, atol=1e-5
    )
    out = torch.empty_like(c)
    assert ctgraph.matmul(a, b, out=out) is out
    torch.testing.assert_close(out, a @ b, rtol=1e-5, atol=1e-5)


def test_compile_fullgraph_and_the_out_variant():
    a, b, c = operands(64, 48, 40)

    def f(x, y, z):
        return torch.relu(ctgraph.matmul(x, y, c=z, beta=1.0)) * 2

    torch.testing.assert_close(torch.compile(f, fullgraph=True)(a, b, c), f(a, b, c))

    def g(x, y, o):
        ctgraph.matmul(x, y, out=o)
        return o + 1

    o = torch.empty(64, 48)
    torch.testing.assert_close(torch.compile(g, fullgraph=True)(a, b, o), a @ b + 1, rtol=1e-5, atol=1e-5)


def test_the_ops_pass_torchs_checks():
    a, b, c = operands(16, 24, 8)
    torch.library.opcheck(torch.ops.ctgraph.matmul.default, (a, b, c, 1.0, 1.0))
    torch.library.opcheck(torch.ops.ctgraph.matmul_out.default, (a, b, None, 1.0, 0.0, torch.empty(16, 24)))


def test_the_ops_take_matmuls_defaults():
    """``torch.ops.ctgraph.matmul(a, b, c=None, alpha=1.0, beta=0.0)``, the defaults of ``ctgraph.matmul``."""
    a, b, c = operands(16, 24, 8)
    ref = a.double() @ b.double()
    torch.testing.assert_close(torch.ops.ctgraph.matmul(a, b).double(), ref, rtol=1e-5, atol=1e-5)
    got = torch.ops.ctgraph.matmul(a, b, c=c, beta=0.5)
    torch.testing.assert_close(got.double(), ref + 0.5 * c.double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.ops.ctgraph.matmul(a, b, alpha=2.0).double(), 2 * ref, rtol=1e-5, atol=1e-5)


def test_registered_when_torch_comes_after_ctgraph():
    code = textwrap.dedent("""
        import ctgraph, torch
        a, b = torch.ones(4, 3), torch.ones(3, 2)
        print(torch.compile(lambda x, y: ctgraph.matmul(x, y), fullgraph=True)(a, b).sum().item())
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "24.0"


def test_errors_name_the_argument():
    a, b, _ = operands(8, 6, 4)
    with pytest.raises(ValueError, match="columns"):
        ctgraph.matmul(a, a)
    with pytest.raises(TypeError, match="float16 or float32"):
        ctgraph.matmul(a.double(), b.double())
    with pytest.raises(TypeError, match="torch tensors"):
        ctgraph.matmul(a.numpy(), b)
    with pytest.raises(ValueError, match="2-D"):
        ctgraph.matmul(a[0], b)
    with pytest.warns(ctgraph.api.CIgnoredWarning):
        ctgraph.matmul(a, b, c=torch.zeros(8, 6))
    # the shape's kernel is compiled now: what its own checks find still names matmul's arguments
    with pytest.raises(ValueError, match=r"^c must have shape \(8, 6\)"):
        ctgraph.matmul(a, b, c=torch.zeros(3, 3), beta=1.0)
    with pytest.raises(ValueError, match=r"^c is required when beta != 0 \(pass c, or beta=0.0\)"):
        ctgraph.matmul(a, b, beta=1.0)
    with pytest.raises(TypeError, match=r"^b must have dtype float32"):
        ctgraph.matmul(a, b.half())
    with pytest.raises(ValueError, match=r"^out must have shape"):
        ctgraph.matmul(a, b, out=torch.empty(6, 8))


@pytest.mark.parametrize("shape", [(0, 5, 3), (4, 0, 3), (4, 5, 0), (0, 0, 0)], ids=str)
def test_empty_products_match_torch(shape):
    """As ``torch.matmul`` and ``torch.addmm``: no rows or columns give an empty D; ``k = 0`` gives ``beta * c``."""
    m, n, k = shape
    a, b, c = torch.randn(m, k), torch.randn(k, n), torch.randn(m, n)
    assert torch.equal(ctgraph.matmul(a, b), a @ b)
    torch.testing.assert_close(ctgraph.matmul(a, b, c=c, beta=2.0), torch.addmm(c, a, b, beta=2.0))
    out = torch.full((m, n), 7.0)
    assert ctgraph.matmul(a, b, out=out) is out and torch.equal(out, a @ b)
    with pytest.raises(ValueError, match="out must have shape"):
        ctgraph.matmul(a, b, out=torch.empty(m + 1, n))


def test_autograd():
    a, b, c = (x.requires_grad_() for x in operands(24, 16, 8, seed=1))
    (ctgraph.matmul(a, b, c=c, alpha=0.5, beta=2.0) ** 2).sum().backward()
    ours = [x.grad.clone() for x in (a, b, c)]
    for x in (a, b, c):
        x.grad = None
    ((0.5 * a @ b + 2.0 * c) ** 2).sum().backward()
    for got, want in zip(ours, (a.grad, b.grad, c.grad), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        ctgraph.matmul(a, b, out=torch.empty(24, 16))


def test_a_first_call_before_torch_is_imported_does_not_hang():
    """The first call imports torch, whose post-import hook registers the ops under the same lock."""
    code = textwrap.dedent("""
        import numpy as np, ctgraph
        try:
            ctgraph.matmul(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32))
        except TypeError as e:
            print("TypeError", "torch tensors" in str(e))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "TypeError True"


def test_out_is_refused_for_autograd_and_marked_written():
    a, b, _ = operands(8, 6, 4, seed=2)
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        ctgraph.matmul(a, b, out=torch.zeros(8, 6, requires_grad=True))
    o, x = torch.zeros(8, 6), torch.ones(8, 6, requires_grad=True)
    y = (x * o).sum()  # saves o for backward
    ctgraph.matmul(a, b, out=o)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_strided_inputs_are_copied():
    a, b, c = operands(12, 10, 6, seed=3)
    torch.testing.assert_close(ctgraph.matmul(a.t().contiguous().t(), b, c=c.t().contiguous().t(), beta=1.0), a @ b + c)
    with pytest.raises(ValueError, match="out must be contiguous"):
        ctgraph.matmul(torch.randn(5, 7), torch.randn(7, 9), out=torch.empty(9, 5).t())


@pytest.mark.parametrize("mode", ["real", "fake", "symbolic"])
def test_a_tracer_records_the_op_not_its_answer(mode):
    """make_fx (and AOT autograd, FakeTensorMode) trace outside dynamo: the call goes through the op, so the graph
    holds a ctgraph.matmul node, not the kernel's answer on the tracing inputs as a constant."""
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(lambda x, y: ctgraph.matmul(x, y, alpha=2.0), tracing_mode=mode)(*operands(4, 5, 6)[:2])
    assert "ctgraph.matmul" in gm.code
    a, b, _ = operands(4 if mode != "symbolic" else 7, 5, 6, seed=3)
    torch.testing.assert_close(gm(a, b).double(), 2 * a.double() @ b.double(), rtol=1e-5, atol=1e-5)


def test_the_op_passes_torchs_checks_with_autograd():
    a, b, c = (x.requires_grad_() for x in operands(16, 24, 8))
    torch.library.opcheck(torch.ops.ctgraph.matmul.default, (a, b, c, 0.5, 2.0))


def test_an_empty_product_checks_what_a_kernel_checks():
    a, b = torch.randn(3, 0), torch.randn(0, 4)
    with pytest.raises(TypeError, match=r"^c must be torch.float32 like a and b, got torch.float64"):
        ctgraph.matmul(a, b, c=torch.randn(3, 4, dtype=torch.float64), beta=1.0)
    with pytest.raises(TypeError, match=r"^out must be torch.float32"):
        ctgraph.matmul(a, b, out=torch.empty(3, 4, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"^c is required when beta != 0"):
        ctgraph.matmul(a, b, beta=2.0)
    with pytest.raises(TypeError, match=r"^alpha must be a real number"):
        ctgraph.matmul(a, b, alpha="x")
    with pytest.raises(TypeError, match=r"b is a NoneType"):
        ctgraph.matmul(a, None)
