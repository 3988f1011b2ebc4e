"""P V in fp8 from a permuted P (tests/unit/test_fp8_own_columns.py) launched on the H200: the
convert into the fp8 A operand with the A layout's own columns (each thread packs its own
values) and in the columns' own order (the quad exchange), against numpy. fp8 wgmma keeps
about 11 of the f32 sum's bits (outputs near 4 come in steps of 2^-8), so the bound is 2^-9 of
each output's sum of |p v| products."""

from __future__ import annotations

import numpy as np
import pytest

from tests.unit.test_fp8_own_columns import SIZES, _args, weighted_sum

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("order", [1, 0], ids=["own-order", "in-order"])
def test_p_into_fp8_a_matches_numpy_on_the_gpu(order: int) -> None:
    expected, o, descs = _args(ordered=order == 1)
    weighted_sum[(1,)](*descs, **SIZES, ORDER=order, interpret=False)
    magnitude = _args(ordered=order == 1, magnitudes=True)[0]
    assert np.all(np.abs(o - expected) <= 2.0**-9 * magnitude)
