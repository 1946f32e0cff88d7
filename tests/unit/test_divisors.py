"""Division by kernel parameters as a multiply-shift: the algebra, the printed C++, which parameters qualify."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctgraph
from ctgraph.expr import FloorDiv, Mod, index, size
from lowering.cuda.divisors import Divisor, fast_divisors, magic
from lowering.cuda.printer import IndexPrinter, cxx

INT_MAX = 2**31 - 1


def divide(x: int, d: int) -> int:
    """What the generated ``operator/`` computes: ``umulhi(x, mul) >> shr``, or ``x`` when ``mul == 0``."""
    mul, shr = magic(d)
    return (x * mul >> 32) >> shr if mul else x


@pytest.mark.parametrize("d", [1, 2, 3, 5, 7, 64, 100, 641, 2**16 + 1, 2**30, 2**30 + 1, 2**31 - 2, INT_MAX])
def test_magic_divides_the_extremes(d):
    mul, shr = magic(d)
    assert 0 <= mul < 2**32 and 0 <= shr < 32
    for x in (0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, INT_MAX - d, INT_MAX - 1, INT_MAX):
        if x <= INT_MAX:
            assert divide(x, d) == x // d, (x, d)


def test_magic_divides_every_small_case():
    for d in range(1, 300):
        for x in range(0, 4 * d + 3):
            assert divide(x, d) == x // d


@settings(max_examples=2000, deadline=None)
@given(st.integers(1, INT_MAX), st.integers(0, INT_MAX))
def test_magic_divides_any_int(d, x):
    assert divide(x, d) == x // d


@pytest.mark.parametrize("d", [0, -3, 2**31, True, 2.0])
def test_magic_refuses_what_is_not_a_divisor(d):
    with pytest.raises(ValueError, match="divisor"):
        magic(d)


def test_divisor_parameter_is_value_mul_shr():
    d = Divisor.of(100)
    assert (d.value, d.mul, d.shr) == (100, *magic(100))


a, b, x = size("numTilesK"), size("numTilesN"), index("x")


def python(text: str, **values: int) -> int:
    """Evaluate printed C++ index math in Python (every operand is a nonnegative int: ``/`` is ``//``)."""
    return eval(text.replace("/", "//"), {}, values)  # the printer's own output


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 50), st.integers(1, 50), st.integers(0, 10**6), st.integers(1, 4))
def test_products_of_divisors_divide_factor_by_factor(va, vb, vx, c):
    printer = IndexPrinter(frozenset({a, b}))
    for e, want in ((FloorDiv(x, c * a * b), vx // (c * va * vb)), (Mod(x, c * a * b), vx % (c * va * vb))):
        text = cxx(e, printer)
        assert "numTilesK*numTilesN" not in text  # one fast division per factor
        assert python(text, x=vx, numTilesK=va, numTilesN=vb) == want


def test_only_divisor_parameters_are_split():
    level = index("level")
    printer = IndexPrinter(frozenset({a}))
    assert cxx(FloorDiv(x, a * b), printer) == "(x / (numTilesK*numTilesN))"  # numTilesN is a plain int
    assert cxx(Mod(x, 2 * level), IndexPrinter(frozenset({a}))) == "(x % (2*level))"
    assert cxx(FloorDiv(x, a), printer) == "(x / numTilesK)"


@pytest.mark.parametrize(
    ("transform", "expected"),
    [
        ("dataparallel", {"numTilesK", "numTilesN"}),
        ("streamk", {"numTilesK", "numTilesN"}),
        ("streamk2tile", {"numTilesK", "numTilesN"}),
        ("splitk_reduce", {"numChunks", "numTilesN"}),
    ],
)
def test_divisor_parameters_of_each_transform(transform, expected):
    kern = ctgraph.compile(
        ctgraph.gemm(1000, 1000, 1000, macro_tile=(128, 128, 64)), transform, workgroups=132, target="cuda", build=False
    )
    assert {s.name for s in fast_divisors(kern.control)} == expected
    src = kern.source
    declared = set(re.findall(r"const ctg::Divisor (\w+)", src))
    assert declared == expected
    # NOTE: the fixup tree divides by loop counters (2*level): those stay generic divisions
    assert all(f"/ ({name}*" not in src for name in expected)
    assert re.search(r" / numTiles[KN]\)| / numChunks\)", src)


def test_a_printed_expression_is_remembered_per_divisors():
    """``cxx`` keeps each expression's text per set of divisors (sizes are parameters, so kernels print the same
    expressions again): the text a printer of other divisors gives is its own, and always a fresh print's."""
    e = FloorDiv(x, a * b)
    split, plain = IndexPrinter(frozenset({a, b})), IndexPrinter()
    for _ in range(2):  # the second round reads what the first remembered
        assert cxx(e, split) == split.doprint(e) == "((x / numTilesK) / numTilesN)"
        assert cxx(e, plain) == plain.doprint(e) == "(x / (numTilesK*numTilesN))"
