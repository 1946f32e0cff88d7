"""Integer index algebra (ctgraph.expr): folding rules, simplify, ceildiv, to_int."""

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from ctgraph.expr import FloorDiv, Mod, ceildiv, free_indices, index, simplify, size, to_int

x = index("x")
y = index("y")
c = size("c")


@pytest.mark.parametrize(("a", "b"), [(7, 2), (0, 3), (6, 3), (5, 7), (100, 1), (4095, 512)])
def test_constants_fold(a, b):
    q, r = FloorDiv(a, b), Mod(a, b)
    assert isinstance(q, sympy.Integer) and isinstance(r, sympy.Integer)
    assert (int(q), int(r)) == (a // b, a % b)


def test_unit_divisor():
    assert FloorDiv(x, 1) == x
    assert Mod(x, 1) == 0
    assert FloorDiv(x + 3 * y, 1) == x + 3 * y


def test_zero_dividend():
    assert FloorDiv(0, c) == 0
    assert Mod(0, c) == 0


def test_division_by_zero_raises():
    with pytest.raises(ZeroDivisionError):
        FloorDiv(x, 0)
    with pytest.raises(ZeroDivisionError):
        Mod(x, 0)


def test_nested_floordiv_merges():
    assert FloorDiv(FloorDiv(x, 3), 4) == FloorDiv(x, 12)
    assert FloorDiv(FloorDiv(x, c), 2) == FloorDiv(x, 2 * c)


def test_nested_mod_when_divisor_divides():
    assert Mod(Mod(x, 12), 4) == Mod(x, 4)
    assert Mod(Mod(x, 2 * c), c) == Mod(x, c)
    # 5 does not divide 12: must stay nested (Mod(x, 5) would be wrong, e.g. x = 13)
    e = Mod(Mod(x, 12), 5)
    assert e != Mod(x, 5)
    assert e.subs(x, 13) == (13 % 12) % 5


def test_multiples_of_the_divisor():
    assert FloorDiv(6 * x, 3) == 2 * x
    assert FloorDiv(6 * x + 1, 3) == 2 * x
    assert FloorDiv(6 * x + 4, 3) == 2 * x + 1
    assert Mod(6 * x + 1, 3) == 1
    assert Mod(6 * x + y, 3) == Mod(y, 3)
    assert FloorDiv(c * x + y, c) == x + FloorDiv(y, c)
    assert Mod(c * x + y, c) == Mod(y, c)
    # 3x is not a multiple of 6: no folding
    assert FloorDiv(3 * x, 6) != x / 2
    assert FloorDiv(3 * x, 6).subs(x, 3) == 1


def test_simplify_recombines_quotient_and_remainder():
    assert simplify(Mod(x, 5) + FloorDiv(x, 5) * 5) == x
    assert simplify(Mod(x, c) + FloorDiv(x, c) * c) == x
    assert simplify(3 * Mod(x, c) + 3 * c * FloorDiv(x, c)) == 3 * x
    assert simplify(Mod(x, 4) + 4 * FloorDiv(x, 4) + y) == x + y


def test_simplify_nested_recombination():
    # Flatten(2, 3, 4) reverse then forward: 12*(f//12) + 4*((f//4) % 3) + f % 4 == f
    e = 12 * FloorDiv(x, 12) + 4 * Mod(FloorDiv(x, 4), 3) + Mod(x, 4)
    assert simplify(e) == x


def test_simplify_leaves_unrelated_sums():
    e = Mod(x, 5) + 4 * FloorDiv(x, 5)
    assert simplify(e) == e


def test_integer_and_sign_assumptions():
    assert FloorDiv(x, c).is_integer and Mod(x, c).is_integer
    assert FloorDiv(x, c).is_nonnegative
    assert Mod(x, c).is_nonnegative


def test_ceildiv():
    assert ceildiv(7, 2) == 4
    assert ceildiv(8, 2) == 4
    assert ceildiv(0, 5) == 0
    assert ceildiv(1, 5) == 1
    assert ceildiv(61440, 32) == 1920
    e = ceildiv(x, c)
    for xv, cv in [(0, 3), (1, 3), (3, 3), (4, 3), (10, 1)]:
        assert e.subs({x: xv, c: cv}) == -(-xv // cv)


def test_to_int():
    assert to_int(sympy.Integer(5)) == 5
    assert to_int(7) == 7
    assert isinstance(to_int(FloorDiv(9, 2)), int)
    with pytest.raises(ValueError, match="x"):
        to_int(x + 1)
    with pytest.raises(ValueError):
        to_int(sympy.Rational(1, 2))


def test_free_indices_sorted_by_name():
    b, a = index("b"), index("a")
    assert free_indices([b + 1, FloorDiv(a, c)]) == [a, b, c]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 10**4))
def test_constants_match_python(a, b):
    assert FloorDiv(a, b) == a // b
    assert Mod(a, b) == a % b


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 50), st.integers(0, 50), st.integers(1, 12), st.integers(1, 12), st.integers(0, 1000))
def test_rules_preserve_value(p, q, d, e, v):
    """Whatever the rules fold at construction, substituting a value gives Python's // and %."""
    exprs = {
        FloorDiv(p * x + q, d): (p * v + q) // d,
        Mod(p * x + q, d): (p * v + q) % d,
        FloorDiv(FloorDiv(p * x + q, d), e): ((p * v + q) // d) // e,
        Mod(Mod(p * x + q, d * e), d): ((p * v + q) % (d * e)) % d,
        Mod(FloorDiv(x, d), e) * d + Mod(x, d) + FloorDiv(x, d * e) * d * e: v,
    }
    for expr, want in exprs.items():
        got = expr.subs(x, v)
        assert isinstance(got, sympy.Integer), expr
        assert int(got) == want, expr
        assert int(simplify(expr).subs(x, v)) == want, expr
