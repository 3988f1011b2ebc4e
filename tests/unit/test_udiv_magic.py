"""Division by a constant as a multiply-high (`backend.ptx.udiv_magic`, printed for a ring's
slot and phase): exact for every u32 numerator, and `exact_udiv`, the translation validator's
check of a printed (magic, shift), accepts exactly the exact pairs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tawa_xdsl.backend.ptx import exact_udiv, udiv_magic

DIVISORS = [d for d in range(1, 65) if udiv_magic(d) is not None]
EDGES = [0, 1, 2, (1 << 31) - 1, 1 << 31, (1 << 32) - 2, (1 << 32) - 1]


def test_ring_depths_have_a_magic_or_keep_div():
    assert {3, 5, 6} <= set(DIVISORS)
    assert udiv_magic(7) is None  # no 32-bit magic: printed as div.u32
    assert all(udiv_magic(d) is None for d in (1, 2, 4, 8, 64))  # shifts already


@pytest.mark.parametrize("divisor", DIVISORS)
def test_the_magic_divides_the_edges(divisor: int):
    magic, shift = udiv_magic(divisor)
    for x in EDGES + [k * divisor + r for k in (1, 1000, 2**20) for r in (-1, 0, 1)]:
        assert (x * magic) >> (32 + shift) == x // divisor


@given(st.sampled_from(DIVISORS), st.integers(0, (1 << 32) - 1))
def test_the_magic_divides_every_numerator(divisor: int, x: int):
    magic, shift = udiv_magic(divisor)
    assert (x * magic) >> (32 + shift) == x // divisor


@given(
    st.sampled_from(DIVISORS), st.integers(-3, 3), st.integers(-1, 1),
    st.integers(0, (1 << 32) - 1),
)  # fmt: skip
def test_exact_udiv_is_sound(divisor: int, magic_change: int, shift_change: int, x: int):
    """A pair near a true one that the validator accepts divides every numerator (this one
    included) by the divisor it names."""
    magic, shift = udiv_magic(divisor)
    magic, shift = magic + magic_change, max(shift + shift_change, 0)
    named = exact_udiv(magic, shift)
    if named is not None:
        assert (x * magic) >> (32 + shift) == x // named


def test_exact_udiv_refuses_a_wrong_magic():
    magic, shift = udiv_magic(3)
    assert exact_udiv(magic, shift) == 3
    assert exact_udiv(magic - 1, shift) is None  # one below: 2^33 - 1 / 3 rounds down
    assert exact_udiv(magic, shift + 1) != 3
