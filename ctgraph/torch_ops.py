"""``ctgraph.matmul`` and ``torch.ops.ctgraph.matmul``: the GEMM on torch tensors, as a PyTorch user calls one.

``matmul(a, b, *, out=None, c=None, alpha=1.0, beta=0.0)`` returns ``D = alpha * a @ b + beta * c`` for 2-D
tensors of one dtype (``float16`` or ``float32``; fp32 accumulation) on one device. CUDA tensors run the CUDA
backend on torch's current stream; CPU tensors the CPU backend. The kernel comes from the default selection
(``macro_tile="auto"``, ``transform="auto"``; ``CTGRAPH_AUTOTUNE=1`` times the ranker's top candidates once per
shape) and is compiled once per (m, n, k, dtype, target): later calls of that shape go straight to the launch, so
``CTGRAPH_OBJECTIVE`` and ``CTGRAPH_AUTOTUNE`` are read when a shape is first called (``ctgraph.compile`` reads
them at each compile). A compiled binary serves every shape of its configuration, so a new shape costs selection
and lowering, rarely nvcc. At most :data:`KERNELS` shapes are kept. An empty product (``m``, ``n`` or ``k`` zero)
is answered as torch answers it, with no kernel: an empty D, or ``beta * c`` (zeros without ``c``) for ``k = 0``.

The same function is registered with ``torch.library`` as ``ctgraph::matmul`` (and ``ctgraph::matmul_out``, which
writes ``out``), each with a fake implementation, so ``torch.compile(fullgraph=True)`` and CUDA graphs take a
function that calls ``ctgraph.matmul``: eager calls skip the dispatcher; traced ones (dynamo, ``make_fx``, AOT
autograd, fake tensors: any dispatch mode or tensor subclass) go through it. The ops are registered as soon as both
torch and ctgraph are imported, in either order (a post-import hook on torch, by wrapt).
Tensors that require grad go through ``ctgraph::matmul`` too, whose backward is two more ctgraph GEMMs
(``dA = alpha dD B^T``, ``dB = alpha A^T dD``; ``dC = beta dD``); ``out=`` takes no part in autograd, as in torch.
"""

from __future__ import annotations

import re
import sys
import threading
import warnings
from typing import Any

from .cache import LRU
from .operands import check_scalars

__all__ = ["KERNELS", "matmul", "register_torch_ops"]

KERNELS = 1024  # compiled shapes kept by matmul (a kernel holds host objects; binaries are shared)
# a kernel's checks name its parameters A, B and C; matmul's caller passed a, b and c
_KERNEL_NAMES = re.compile(r"\b([ABC])\b")
DTYPES = ("float16", "float32")
_KERNELS: LRU[Any] = LRU(KERNELS)  # (a.shape, b.shape, dtype, is_cuda) -> kernel
_LOCK = threading.RLock()  # NOTE: re-entrant: importing torch under it runs the post-import hook, which takes it
_REGISTERED = False
SCHEMA = "(Tensor a, Tensor b, Tensor? c=None, float alpha=1.0, float beta=0.0) -> Tensor"
# NOTE: out is positional and so nothing before it has a default: custom_op takes no keyword-only tensors
SCHEMA_OUT = "(Tensor a, Tensor b, Tensor? c, float alpha, float beta, Tensor(a!) out) -> ()"


def matmul(a: Any, b: Any, *, out: Any = None, c: Any = None, alpha: float = 1.0, beta: float = 0.0) -> Any:
    """``alpha * a @ b + beta * c`` into ``out`` (a new tensor when None); module docstring. ``c`` is needed when
    ``beta != 0`` and ignored, with a :class:`ctgraph.api.CIgnoredWarning`, when ``beta == 0``. Inputs that are not
    contiguous are copied (``.contiguous()``); ``out`` must be contiguous."""
    torch = sys.modules.get("torch")
    if torch is not None and _through_dispatcher(torch, a, b, c, out):
        if out is None:  # NOTE: through the dispatcher: traced, or recorded for autograd
            return torch.ops.ctgraph.matmul(a, b, c, alpha, beta)
        if not torch.compiler.is_compiling() and torch.is_grad_enabled() and _requires_grad(a, b, c, out):
            raise RuntimeError(
                "ctgraph.matmul(..., out=...) does not support automatic differentiation (as torch.matmul's out= "
                "does not); leave out= unset for tensors that require grad"
            )
        torch.ops.ctgraph.matmul_out(a, b, c, alpha, beta, out)
        return out
    if not _REGISTERED:
        register_torch_ops()
    result = _run(a, b, c, alpha, beta, out)
    if out is not None:  # NOTE: written behind autograd's back: a saved out is now stale, as after an in-place op
        torch.autograd.graph.increment_version(out)  # type: ignore[union-attr]
    return result


def _through_dispatcher(torch: Any, a: Any, b: Any, c: Any, out: Any) -> bool:
    """Whether the call must go through ``torch.ops.ctgraph``, not straight to the kernel: dynamo traces it, a
    dispatch mode is on (``make_fx``, AOT autograd, ``FakeTensorMode``, ``FlopCounterMode``), an operand is a tensor
    subclass (fake, functional: no data to run on), or autograd must record it. Each would otherwise see the kernel's
    answer as a constant (spelt out: this runs on every eager call)."""
    if torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack():
        return True
    tensor = torch.Tensor
    if (type(a) is not tensor and isinstance(a, tensor)) or (type(b) is not tensor and isinstance(b, tensor)):
        return True
    return torch.is_grad_enabled() and _requires_grad(a, b, c, out)


def _requires_grad(a: Any, b: Any, c: Any, out: Any) -> bool:
    """Whether autograd must see the call (spelt out: this runs on every eager call)."""
    return bool(
        getattr(a, "requires_grad", False)
        or getattr(b, "requires_grad", False)
        or getattr(c, "requires_grad", False)
        or getattr(out, "requires_grad", False)
    )


def _run(a: Any, b: Any, c: Any, alpha: float, beta: float, out: Any) -> Any:
    """Eager: the kernel of this shape (compiled on first use), called on the tensors."""
    try:
        kern = _KERNELS.get((a.shape, b.shape, a.dtype, a.is_cuda))
    except (AttributeError, TypeError):
        kern = None
    if kern is None:
        kern = _kernel(a, b, c, out)
        if kern is None:
            return _empty(a, b, c, alpha, beta, out)
    if c is not None and beta == 0:
        from .api import CIgnoredWarning

        warnings.warn(
            "c is ignored because beta == 0: ctgraph.matmul computes alpha*a@b + beta*c with beta=0.0 by default; "
            "pass beta=1.0 to add c, or leave c out",
            CIgnoredWarning,
            stacklevel=3,
        )
    if not a.is_contiguous():  # NOTE: spelt out rather than a helper: this runs on every eager call
        a = a.contiguous()
    if not b.is_contiguous():
        b = b.contiguous()
    if c is not None and not c.is_contiguous():
        c = c.contiguous()
    try:
        if kern.target == "cuda":
            return kern.program(a, b, c, alpha=alpha, beta=beta, out=out)
        return _run_cpu(kern, a, b, c, alpha, beta, out)
    except (ValueError, TypeError) as e:  # NOTE: costs nothing until a check fails
        raise type(e)(_KERNEL_NAMES.sub(lambda x: x.group(1).lower(), str(e))) from None


def _run_cpu(kern: Any, a: Any, b: Any, c: Any, alpha: float, beta: float, out: Any) -> Any:
    import torch

    where = {n: str(x.device) for n, x in (("a", a), ("b", b), ("c", c), ("out", out)) if x is not None}
    if set(where.values()) != {"cpu"}:
        raise ValueError(f"a, b, c and out must be on one device, got {where}")
    arrays = [None if x is None else x.detach().numpy() for x in (a, b, c)]
    d = kern.program(*arrays, alpha=alpha, beta=beta, out=None if out is None else out.detach().numpy())
    return out if out is not None else torch.from_numpy(d)


def _empty(a: Any, b: Any, c: Any, alpha: float, beta: float, out: Any) -> Any:
    """An empty product, as torch's: ``m = 0`` or ``n = 0`` give an empty D, ``k = 0`` gives ``beta * c`` (or zeros)."""
    import torch

    shape = (a.shape[0], b.shape[1])
    alpha, beta = check_scalars(alpha, beta)  # NOTE: the checks a kernel's call makes, with no kernel to make them
    if c is None and beta != 0:
        raise ValueError("c is required when beta != 0 (pass c, or beta=0.0)")
    for name, x in (("c", c), ("out", out)):
        if x is not None and tuple(x.shape) != shape:
            raise ValueError(
                f"{name} must have shape {shape} for this {shape[0]}x{shape[1]}x{a.shape[1]} GEMM, got {tuple(x.shape)}"
            )
        if x is not None and x.dtype != a.dtype:
            raise TypeError(f"{name} must be {a.dtype} like a and b, got {x.dtype}")
    d = torch.zeros(shape, dtype=a.dtype, device=a.device)
    if c is not None and beta != 0:
        d = d + beta * c
    if out is None:
        return d
    out.copy_(d)
    return out


def _kernel(a: Any, b: Any, c: Any, out: Any) -> Any:
    """Check the operands (errors name the argument) and compile this shape's kernel, once; None for an empty
    product (:func:`_empty`)."""
    import torch

    for name, x in (("a", a), ("b", b), ("c", c), ("out", out)):
        if (x is not None or name in ("a", "b")) and not isinstance(x, torch.Tensor):
            raise TypeError(f"ctgraph.matmul takes torch tensors; {name} is a {type(x).__name__}")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be 2-D (m x k and k x n), got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns must equal b's rows")
    dtype = str(a.dtype).removeprefix("torch.")
    if dtype not in DTYPES or b.dtype != a.dtype:
        raise TypeError(f"a and b must both be float16 or float32, got {a.dtype} and {b.dtype}")
    devices = {str(x.device) for x in (a, b, c, out) if x is not None}
    if len(devices) > 1:
        raise ValueError(f"a, b, c and out must be on one device, got {', '.join(sorted(devices))}")
    if a.device.type not in ("cuda", "cpu"):
        raise ValueError(f"ctgraph.matmul runs CUDA and CPU tensors, got a tensor on {a.device}")
    if out is not None and not out.is_contiguous():
        raise ValueError("out must be contiguous (row-major): D is written in place")
    from .api import compile
    from .gemm import gemm

    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    if 0 in (m, n, k):  # no GEMM to compile: _empty answers, as torch.matmul does
        return None
    key = (a.shape, b.shape, a.dtype, a.is_cuda)
    with _LOCK:
        kern = _KERNELS.get(key)
        if kern is None:
            target = "cuda" if a.is_cuda else "cpu"
            kern = _KERNELS.put(
                key, compile(gemm(m, n, k, macro_tile="auto", dtype=dtype), transform="auto", target=target)
            )
    return kern


def register_torch_ops() -> None:
    """Register ``torch.ops.ctgraph.matmul`` and ``torch.ops.ctgraph.matmul_out`` with torch.library (once). A torch
    older than the ``torch.library.custom_op`` API (2.4) gets a warning and no ops; ``ctgraph.matmul`` still runs."""
    global _REGISTERED
    import torch  # NOTE: before the lock as well as under it: a first import runs the hook that calls this

    with _LOCK:
        if _REGISTERED:
            return
        _REGISTERED = True
        try:
            _register(torch)
        except (AttributeError, TypeError) as e:  # an old torch: no custom_op / register_fake / register_autograd
            warnings.warn(
                f"torch {torch.__version__} lacks torch.library.custom_op ({e}): torch.ops.ctgraph.matmul "
                "is not registered; ctgraph.matmul runs eagerly",
                stacklevel=2,
            )


def _register(torch: Any) -> None:
    """The two ops, their fake implementations and ``ctgraph::matmul``'s autograd formula."""

    @torch.library.custom_op("ctgraph::matmul", mutates_args=(), schema=SCHEMA)
    def matmul_op(
        a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None, alpha: float = 1.0, beta: float = 0.0
    ) -> torch.Tensor:
        return _run(a, b, c, alpha, beta, None)

    @matmul_op.register_fake
    def _(
        a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None, alpha: float = 1.0, beta: float = 0.0
    ) -> torch.Tensor:
        torch._check(a.shape[1] == b.shape[0], lambda: "a's columns must equal b's rows")
        return a.new_empty((a.shape[0], b.shape[1]))

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        a, b, c, alpha, beta = inputs
        ctx.save_for_backward(a, b)
        ctx.alpha, ctx.beta, ctx.has_c = alpha, beta, c is not None

    def backward(ctx: Any, grad: Any) -> tuple[Any, ...]:
        """``dA = alpha dD B^T``, ``dB = alpha A^T dD``, ``dC = beta dD``: GEMMs of row-major copies."""
        a, b = ctx.saved_tensors
        g = grad.contiguous()
        need = ctx.needs_input_grad
        # NOTE: matmul, not the kernel: a backward being traced (AOT autograd) goes through the op again
        grad_a = matmul(g, b.t().contiguous(), alpha=ctx.alpha) if need[0] else None
        grad_b = matmul(a.t().contiguous(), g, alpha=ctx.alpha) if need[1] else None
        grad_c = grad * ctx.beta if ctx.has_c and need[2] else None
        return grad_a, grad_b, grad_c, None, None

    matmul_op.register_autograd(backward, setup_context=setup_context)

    @torch.library.custom_op("ctgraph::matmul_out", mutates_args=("out",), schema=SCHEMA_OUT)
    def matmul_out_op(
        a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, alpha: float, beta: float, out: torch.Tensor
    ) -> None:
        _run(a, b, c, alpha, beta, out)

    @matmul_out_op.register_fake
    def _(
        a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, alpha: float, beta: float, out: torch.Tensor
    ) -> None:
        return None
