"""Fragment layouts cover their tiles exactly once, and agree with the PTX ISA formulas."""

from __future__ import annotations

import re

import pytest
from xdsl.dialects.builtin import BFloat16Type, Float32Type

from tawa_xdsl.dialects.nvgpu import FragmentType
from tawa_xdsl.dialects.nvgpu.layout import (
    INT_ARITH,
    WGMMA_ACC,
    WGMMA_COL,
    WGMMA_OPERAND_A,
    WGMMA_OPERAND_A8,
    WGMMA_ROW,
    FragmentLayout,
    layout_of,
    registers_per_thread,
)


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


# ------------------------------------------------------------- the layout object's new answers


class RecordingArith:
    """`IndexArith` on strings: shows that the origin is one formula, evaluated symbolically."""

    def shr(self, x: str, bits: int) -> str:
        return f"({x} >> {bits})"

    def shl(self, x: str, bits: int) -> str:
        return f"({x} << {bits})"

    def mask(self, x: str, bits: int) -> str:
        return f"({x} & {bits})"

    def add(self, x: str, y: str) -> str:
        return f"({x} + {y})"


def test_thread_origin_is_the_isa_formula_symbolically_and_on_ints():
    row, col = WGMMA_ACC.thread_origin("t", RecordingArith())
    assert row == "(((t >> 5) << 4) + ((t & 31) >> 2))"
    assert col == "(((t & 31) & 3) << 1)"
    for t in range(128):
        assert WGMMA_ACC.thread_origin(t, INT_ARITH) == (
            16 * (t >> 5) + ((t & 31) >> 2),
            2 * (t & 3),
        )


@pytest.mark.parametrize("shape", [(64, 16), (128, 64)])
def test_coords_are_origin_plus_value_offset(shape):
    for layout in (WGMMA_ACC, WGMMA_OPERAND_A):
        for t in (0, 5, 37, 127):
            row0, col0 = layout.thread_origin(t, INT_ARITH)
            for v in range(layout.values_per_thread(shape)):
                drow, dcol = layout.value_offset(shape, v)
                assert layout.coords(shape, t, v) == (row0 + drow, col0 + dcol)


def test_row_layout_owner_is_the_first_lane_of_the_quad():
    shape = (128,)
    for row in range(128):
        thread, value = WGMMA_ROW.owner(shape, row)
        assert thread % 4 == 0
        for lane in range(4):
            assert WGMMA_ROW.coords(shape, thread + lane, value) == (row,)


@pytest.mark.parametrize("shape", [(64, 8), (128, 64), (192, 256)])
def test_block_values_are_the_rows_of_that_block(shape):
    blocks = [WGMMA_ACC.block_values(shape, b) for b in range(shape[0] // 64)]
    assert [v for block in blocks for v in block] == list(range(WGMMA_ACC.values_per_thread(shape)))
    for b, block in enumerate(blocks):
        rows = {WGMMA_ACC.coords(shape, t, v)[0] // 64 for t in range(128) for v in block}
        assert rows == {b}


@pytest.mark.parametrize("shape", [(64, 8), (128, 48)])
def test_values_by_column_pair_group_every_value_by_its_columns(shape):
    pairs = WGMMA_ACC.values_by_column_pair(shape)
    assert sorted(v for values in pairs.values() for v in values) == list(
        range(WGMMA_ACC.values_per_thread(shape))
    )
    assert sorted(pairs) == list(range(0, shape[1], 8))
    for first_col, values in pairs.items():
        for t in range(128):
            col0 = WGMMA_ACC.thread_origin(t, INT_ARITH)[1]
            cols = {WGMMA_ACC.coords(shape, t, v)[1] for v in values}
            assert cols == {col0 + first_col, col0 + first_col + 1}


@pytest.mark.parametrize(("layout", "shape"), [(WGMMA_ROW, (128,)), (WGMMA_COL, (64,))])
def test_copy_axis_picks_one_copy_of_every_element(layout, shape):
    stores = [
        layout.coords(shape, t, v)
        for t in range(128)
        if layout.thread_origin(t, INT_ARITH)[layout.copy_axis] == 0
        for v in range(layout.values_per_thread(shape))
    ]
    assert sorted(stores) == [(i,) for i in range(shape[0])]


def test_copy_lane_masks_join_the_lanes_of_each_column():
    shape, masks = (32,), WGMMA_COL.copy_lane_masks()
    assert masks == (4, 8, 16)
    for t in range(128):
        mine = [WGMMA_COL.coords(shape, t, v) for v in range(WGMMA_COL.values_per_thread(shape))]
        reached = {t}
        for mask in masks:
            reached |= {u ^ mask for u in reached}
            assert [WGMMA_COL.coords(shape, t ^ mask, v) for v in range(len(mine))] == mine
        # the butterfly reaches every lane of the warp holding these columns
        same = {u for u in range(t & ~31, (t & ~31) + 32) if (u & 3) == (t & 3)}
        assert reached == same


def test_operand_a_k_slice_registers_hold_that_slice():
    shape = (128, 64)
    for block in range(2):
        for kk in range(4):
            regs = WGMMA_OPERAND_A.k_slice_registers(shape, block, kk)
            for reg in regs:
                for value in (2 * reg, 2 * reg + 1):  # two 16-bit values per register
                    row, col = WGMMA_OPERAND_A.coords(shape, 0, value)
                    assert 64 * block <= row < 64 * (block + 1)
                    assert 16 * kk <= col < 16 * (kk + 1)


@pytest.mark.parametrize("shape", [(64, 32), (128, 128), (64, 64)])
def test_operand_a8_is_cutes_fp8_a_layout(shape):
    """Every (thread, value) lands where CuTe's `ALayout_64x32 = ((4,8,4),(4,2,2)):
    ((256,1,16),(64,8,1024))` (m + 64 k of one 64x32 slice) puts it, once, and `owner`
    inverts `coords`."""
    seen = set()
    for t in range(128):
        for v in range(WGMMA_OPERAND_A8.values_per_thread(shape)):
            row, col = WGMMA_OPERAND_A8.coords(shape, t, v)
            assert WGMMA_OPERAND_A8.owner(shape, row, col) == (t, v)
            block, i = divmod(v, shape[1] // 2)
            k_slice, w = divmod(i, 16)
            index = 256 * (t % 4) + (t // 4) % 8 + 16 * (t // 32)
            index += 64 * (w % 4) + 8 * ((w // 4) % 2) + 1024 * (w // 8)
            assert (row - 64 * block, col - 32 * k_slice) == (index % 64, index // 64)
            seen.add((row, col))
    assert len(seen) == shape[0] * shape[1]


def test_operand_a8_k_slice_registers_hold_that_slice():
    shape = (128, 64)
    for block in range(2):
        for kk in range(2):
            for reg in WGMMA_OPERAND_A8.k_slice_registers(shape, block, kk):
                for value in range(4 * reg, 4 * reg + 4):  # four 8-bit values per register
                    row, col = WGMMA_OPERAND_A8.coords(shape, 0, value)
                    assert 64 * block <= row < 64 * (block + 1)
                    assert 32 * kk <= col < 32 * (kk + 1)


@pytest.mark.parametrize(
    ("kind", "shape", "message"),
    [
        (FragmentLayout.WGMMA_ACC, (32, 64), "rows must be a positive multiple of 64, got 32"),
        (FragmentLayout.WGMMA_ACC, (64, 12), "columns must be a multiple of 8 in 8..256"),
        (FragmentLayout.WGMMA_ROW, (96,), "rows must be a positive multiple of 64, got 96"),
        (FragmentLayout.WGMMA_OPERAND_A, (64, 8), "multiple of 16 (wgmma K), got 8"),
        (FragmentLayout.WGMMA_OPERAND_A8, (64, 48), "multiple of 32 (wgmma K), got 48"),
    ],
)
def test_check_rejects_shapes_the_layout_cannot_hold(kind, shape, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        layout_of(kind).check(shape)


def test_fragment_type_asks_its_layout():
    ty = FragmentType(FragmentLayout.WGMMA_ACC, [128, 64], BFloat16Type())
    assert ty.layout_object is WGMMA_ACC
    assert ty.values_per_thread() == WGMMA_ACC.values_per_thread((128, 64)) == 64
    assert ty.registers_per_thread() == registers_per_thread(64, 16) == 32
    row = FragmentType(FragmentLayout.WGMMA_ROW, [128], Float32Type())
    assert row.values_per_thread() == 4 and row.registers_per_thread() == 4
