"""The backend contract (:class:`ctgraph.backends.Backend`): a fake backend registered under a fake target name is
selected through and built through, and both real backends provide the contract."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

import ctgraph
from ctgraph import backends
from ctgraph.backends import Backend, Program, backend, register, resolve_target, unregister
from ctgraph.config import Layout
from ctgraph.target import CPU

FAKE = "fake"
FAKE_TARGET = CPU.with_(name="a fake device", sms=6)  # 6 workgroups at once, where the CPU has 8
FAKE_TILE = (64, 128, 32)  # the only tile the fake path runs (one of the one-CTA menu's)


class FakeProgram:
    """A program that computes D with numpy: enough to prove that ``kern(...)`` reaches ``build()``'s result."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.control = None
        self.source = f"// fake: {kernel.transform} on {kernel.workgroups} workgroups"

    def __call__(self, A: Any, B: Any, C: Any = None, *, alpha: float = 1.0, beta: float = 0.0, **kw: Any) -> Any:
        D = alpha * (A.astype(np.float32) @ B.astype(np.float32))
        if beta:
            D += beta * C.astype(np.float32)
        return D.astype(self.kernel.problem.dtype)


class FakeBackend:
    """Records what the front end asks of it."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.built: list[Any] = []

    def target(self) -> Any:
        self.calls["target"] += 1
        return FAKE_TARGET

    def supports(self, macro_tile: tuple[int, int, int], dtype: str, layout: Layout, path: str) -> bool:
        self.calls["supports"] += 1
        return macro_tile == FAKE_TILE and layout == Layout() and path == "cpu"

    def layout_of(self, macro_tile: tuple[int, int, int], dtype: str, options: dict[str, Any]) -> Layout | None:
        self.calls["layout_of"] += 1
        return Layout()

    def options_from(self, options: dict[str, Any]) -> dict[str, Any]:
        self.calls["options_from"] += 1
        unknown = set(options) - {"build", "flavour"}
        if unknown:
            raise ValueError(f"unknown fake options {sorted(unknown)}; valid: ['build', 'flavour']")
        return dict(options)

    def build(self, kernel: Any) -> FakeProgram:
        self.calls["build"] += 1
        self.built.append(kernel)
        return FakeProgram(kernel)


@pytest.fixture
def fake():
    impl = FakeBackend()
    register(FAKE, impl)
    yield impl
    unregister(FAKE)


def test_the_fake_backend_provides_the_contract(fake):
    assert isinstance(fake, Backend)
    assert backend(FAKE) is fake
    assert resolve_target(FAKE) == FAKE and FAKE in backends.targets()


def test_compile_auto_selects_through_the_fake_backend_and_builds_through_it(fake):
    m, n, k = 300, 500, 200
    g = ctgraph.gemm(m, n, k, macro_tile="auto", dtype="float32")
    kern = ctgraph.compile(g, transform="auto", target=FAKE, flavour="plain")
    assert kern.target == FAKE
    assert fake.calls["target"] >= 1 and fake.calls["supports"] >= 1 and fake.calls["options_from"] >= 1
    # the tile is the only one the fake supports, on the fake device's 6 workgroups (the CPU's would be 8)
    assert kern.problem.macro_tile == FAKE_TILE
    assert all(c.tile == FAKE_TILE for c, _ in kern.selection.ranked)
    assert kern.workgroups <= FAKE_TARGET.sms and all(c.workgroups <= FAKE_TARGET.sms for c, _ in kern.selection.ranked)
    # built through build(): once, at compile (build=True), and called through its program
    assert fake.built == [kern] and isinstance(kern.program, FakeProgram) and isinstance(kern.program, Program)
    assert kern.source.startswith("// fake")
    rng = np.random.default_rng(0)
    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
    np.testing.assert_allclose(kern(A, B, C, alpha=2.0, beta=0.5), 2 * A @ B + 0.5 * C, rtol=1e-5, atol=1e-4)
    assert fake.calls["build"] == 1


def test_a_fixed_transform_builds_through_the_fake_backend_too(fake):
    g = ctgraph.gemm(100, 100, 64, macro_tile=(32, 32, 16), dtype="float32")
    kern = ctgraph.compile(g, transform="streamk", workgroups=5, target=FAKE, build=False)
    assert fake.calls["build"] == 0  # build=False: nothing until first use
    assert kern.source.startswith("// fake: streamk on 5 workgroups") and fake.built == [kern]


def test_the_fake_backend_checks_its_own_options(fake):
    g = ctgraph.gemm(64, 64, 64, macro_tile=(32, 32, 16), dtype="float32")
    with pytest.raises(ValueError, match="unknown fake options"):
        ctgraph.compile(g, "streamk", 4, target=FAKE, warps=4)
    assert fake.calls["build"] == 0


def test_register_refuses_what_is_not_a_backend_and_auto():
    class Half:
        def build(self, kernel: Any) -> Any: ...

    with pytest.raises(TypeError, match="lacks target, supports, layout_of, options_from"):
        register("half", Half())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'auto'"):
        register("auto", FakeBackend())
    assert "half" not in backends.targets()


def test_unknown_targets_are_refused_with_the_registered_names(fake):
    with pytest.raises(ValueError, match="valid targets: 'cpu', 'cuda', 'fake', 'auto'"):
        resolve_target("tpu")
    unregister(FAKE)
    with pytest.raises(ValueError, match="unknown target 'fake'"):
        resolve_target(FAKE)


@pytest.mark.parametrize("name", ["cpu", "cuda"])
def test_the_real_backends_provide_the_contract(name):
    impl = backend(name)
    assert isinstance(impl, Backend)
    for function in ("target", "supports", "layout_of", "options_from", "build"):
        assert callable(getattr(impl, function))
    assert impl.supports((64, 64, 32), "float16", Layout(), "cpu" if name == "cpu" else "vector")
    layout = impl.layout_of((128, 128, 64), "float16", {})
    assert layout is None or isinstance(layout, Layout)
    g = ctgraph.gemm(64, 64, 64, macro_tile=(64, 64, 32), dtype="float16")
    kern = ctgraph.compile(g, "streamk", 2, target=name, build=False)
    assert isinstance(kern.program, Program) and kern.source


def test_the_builtin_targets_are_unchanged():
    assert backends.TARGETS == ("cpu", "cuda", "auto")
    assert resolve_target("cpu") == "cpu" and resolve_target("cuda") == "cuda"
    assert resolve_target("auto") in ("cpu", "cuda")
