"""Fragment layouts cover their tiles exactly once, and agree with the PTX ISA formulas."""

from __future__ import annotations

import pytest

from tawa_xdsl.backend.layout import WGMMA_ACC, WGMMA_OPERAND_A, WGMMA_ROW


@pytest.mark.parametrize("shape", [(64, 8), (64, 128), (128, 256), (128, 64)])
def test_wgmma_acc_is_a_bijection_with_owner_as_inverse(shape):
    seen = set()
    for t in range(128):
        for v in range(WGMMA_ACC.values_per_thread(shape)):
            rc = WGMMA_ACC.coords(shape, t, v)
            assert rc not in seen
            seen.add(rc)
            assert WGMMA_ACC.owner(shape, *rc) == (t, v)
    assert seen == {(r, c) for r in range(shape[0]) for c in range(shape[1])}


def test_wgmma_acc_matches_the_isa_figure():
    # thread 5 = warp 0, lane 5: rows 1 and 9, columns 2, 3 of each 8-column group
    assert [WGMMA_ACC.coords((64, 16), 5, v) for v in range(8)] == [
        (1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)
    ]  # fmt: skip


def test_operand_a_registers_are_the_isa_a_fragment():
    # register j of a k16 slice packs values 2j, 2j + 1 at (r, k), (r + 8, k), (r, 8 + k), ...
    lane = 6  # r = 1, k = 4
    got = [WGMMA_OPERAND_A.coords((64, 16), lane, 2 * j) for j in range(4)]
    assert got == [(1, 4), (9, 4), (1, 12), (9, 12)]


def test_row_layout_is_the_row_of_each_accumulator_value():
    shape = (128, 32)
    for t in (0, 37, 127):
        for v in range(WGMMA_ACC.values_per_thread(shape)):
            row = WGMMA_ACC.coords(shape, t, v)[0]
            j = WGMMA_ROW.acc_value_row(v, shape[1])
            assert WGMMA_ROW.coords((128,), t, j) == (row,)
