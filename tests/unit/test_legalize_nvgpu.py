"""legalize-nvgpu's address facts: the plan formula of ld/st.shared is TMA's swizzle of the
address, every plan the pass writes is one its op's verifier accepts, and a plan that does not
describe its buffer (slot stride, pitches, swizzle, vector slots) is refused naming the op."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import func
from xdsl.dialects.arith import ConstantOp
from xdsl.dialects.builtin import IntegerAttr, f16, f32, i32
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from tawa_xdsl.dialects.nvgpu import (
    FragmentLayout,
    FragmentLoadColumnsOp,
    FragmentLoadOp,
    FragmentLoadRowsOp,
    FragmentType,
    SmemAllocOp,
    SmemType,
)
from tawa_xdsl.dialects.nvgpu.fragment import slot_byte
from tawa_xdsl.dialects.nvgpu.types import swizzle_address
from tawa_xdsl.transforms.legalize_nvgpu import place_smem, plan_addresses

ZERO = ConstantOp(IntegerAttr(0, i32)).result


@pytest.mark.parametrize("span", [32, 64, 128])
def test_slot_byte_is_the_swizzle_of_the_address(span: int) -> None:
    """In a slot that starts a swizzle repeat, the plan's byte of (row, column byte) is the
    byte TMA writes it to: the linear address swizzled by its own bits."""
    rows, slabs = 16, 3
    r = np.arange(rows)[:, None]
    x = np.arange(slabs * span)[None, :]
    slab_pitch = rows * span
    planned = slot_byte(r, x, span, slab_pitch, span)
    linear = x // span * slab_pitch + r * span + x % span
    np.testing.assert_array_equal(planned, swizzle_address(linear, span))
    assert sorted(planned.reshape(-1)) == list(range(rows * slabs * span))  # a permutation
    # ... and it moves chunks: the first chunk of the row at byte 128 lands one chunk on.
    assert slot_byte(128 // span, 0, span, slab_pitch, span) == 128 + 16


def test_unswizzled_slot_byte_is_linear() -> None:
    assert slot_byte(3, 10, 96, 96 * 64, 0) == 3 * 96 + 10


def load(buf: SmemType, rows: int, cols: int) -> FragmentLoadOp:
    result = FragmentType(FragmentLayout.WGMMA_ACC, [rows, cols], buf.element_type)
    return FragmentLoadOp(create_ssa_value(buf), ZERO, result)


def test_plan_addresses_writes_what_the_verifier_accepts() -> None:
    buf = SmemType([2, 64, 128], f16, 128)
    op = load(buf, 64, 128)
    plan_addresses(op)
    op.verify()
    assert (op.row_pitch.value.data, op.slab_pitch.value.data, op.swizzle.value.data) == (
        128,
        8192,
        128,
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("swizzle", 64, r"= \(128, 8192, 64\) does not address .*its swizzle 128 bytes"),
        ("row_pitch", 256, r"its rows are 128 bytes apart"),
        ("slab_pitch", 16384, r"its column slabs 8192"),
        ("swizzle", None, r"needs row_pitch, slab_pitch, swizzle"),
    ],
)
def test_address_plan_not_of_the_buffer_is_refused(field: str, value: int | None, message: str):
    op = load(SmemType([2, 64, 128], f16, 128), 64, 128)
    plan_addresses(op)
    setattr(op, field, None if value is None else IntegerAttr(value, i32))
    with pytest.raises(VerifyException, match=f"'nvgpu.fragment_load' address plan.*{message}"):
        op.verify()


def test_slot_stride_is_the_slot_bytes() -> None:
    alloc = SmemAllocOp(SmemType([3, 64, 64], f16, 128))
    alloc.offset, alloc.slot_stride = IntegerAttr(0, i32), IntegerAttr(8192, i32)
    alloc.verify()
    alloc.slot_stride = IntegerAttr(4096, i32)
    with pytest.raises(VerifyException, match="slot_stride must be the 8192 bytes of a slot"):
        alloc.verify()
    alloc.slot_stride = None
    with pytest.raises(VerifyException, match="needs offset and slot_stride, or neither"):
        alloc.verify()


def test_swizzled_slots_start_the_swizzle_pattern() -> None:
    """A 4-row 128-byte swizzled slot is 512 bytes: slot 1 would start mid-pattern, where
    TMA's address swizzle and the slot's own row numbers disagree."""
    with pytest.raises(VerifyException, match="not a multiple of the 1024-byte swizzle repeat"):
        SmemAllocOp(SmemType([2, 4, 64], f16, 128)).verify()
    SmemAllocOp(SmemType([2, 4, 64], f16, 0)).verify()


def test_placement_writes_strides() -> None:
    allocs = [SmemAllocOp(SmemType([3, 64, 64], f16, 128)), SmemAllocOp(SmemType([2, 1, 8], f32))]
    kernel = func.FuncOp("k", ((), ()))
    kernel.body.block.add_ops([*allocs, func.ReturnOp()])
    place_smem(kernel)
    assert [(a.offset.value.data, a.slot_stride.value.data) for a in allocs] == [
        (0, 8192),
        (24576, 32),
    ]


@pytest.mark.parametrize("make", [FragmentLoadColumnsOp, FragmentLoadRowsOp])
def test_vector_slots_are_never_swizzled(make) -> None:
    """TMA swizzles a one-row slot by address too: its 16-byte chunks move from its second
    128 bytes on (the H200 showed it), so a vector read is refused on a swizzled slot."""
    buf = SmemType([1, 1, 128], f32, 128)
    if make is FragmentLoadColumnsOp:
        op = make(
            create_ssa_value(buf), ZERO, FragmentType(FragmentLayout.WGMMA_ACC, [64, 128], f32)
        )
    else:
        op = make(create_ssa_value(buf), ZERO, FragmentType(FragmentLayout.WGMMA_ROW, [128], f32))
    with pytest.raises(VerifyException, match="reads a vector slot, never swizzled"):
        op.verify()
