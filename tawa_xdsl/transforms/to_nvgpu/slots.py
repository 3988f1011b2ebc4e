"""Tiles that still live in smem slots: `nvgpu.smem_load`s and their views.

A slot read stays a `SmemView` (rows `[row, ...)` of slot `slot` of `buf`, maybe transposed)
through `tile.reshape`, `tile.extract_slice` (whole rows) and `tile.trans`, until an op reads
it as what it is: a wgmma operand (`wgmma`), a vector spread over the rows of a fragment
(`fragments.Vectors.load_columns`), or anything else: then it is read into registers where it
was loaded (`registers`): a 2-D tile as an accumulator-layout `fragment_load`, a 1-D tile as a
row vector (`fragment_load_rows`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import VerifyException

from tawa_xdsl.dialects import nvgpu, tile
from tawa_xdsl.dialects.nvgpu import FP8_TYPES, FragmentLayout, FragmentType, squeeze_leading
from tawa_xdsl.transforms.to_nvgpu.common import constant_int, fail, insert_before


@dataclass(frozen=True)
class SmemView:
    """A tile that still lives in an smem slot: rows [row, ...) (or, with `column`, columns
    [column, ...)) of slot `slot` of `buf`."""

    buf: SSAValue
    slot: SSAValue
    row: SSAValue | None = None
    transposed: bool = False
    column: SSAValue | None = None


def read(op: nvgpu.SmemLoadOp) -> SmemView:
    return SmemView(op.buf, op.slot)


def transpose(view: SmemView) -> SmemView:
    return SmemView(view.buf, view.slot, view.row, not view.transposed, view.column)


def row_slice(op: tile.ExtractSliceOp, view: SmemView) -> SmemView:
    """Rows `[offset, offset + n)` of an untransposed slot (every other offset 0), or its
    columns `[offset, offset + n)` (all rows kept: the M slice of an M-major A); of a 1-D
    slot, elements `[offset, offset + n)` (a consumer's rows of a row vector)."""
    src, dst = op.source.type, op.result.type
    assert isinstance(src, TensorType) and isinstance(dst, TensorType)
    offsets = list(op.offsets)
    if view.transposed or view.row is not None or view.column is not None:
        raise fail(op, "must slice an untransposed smem slot once")
    if all(d == 1 for d in src.get_shape()[:-1]):  # a vector, maybe with leading unit dims
        if any(constant_int(o) != 0 for o in offsets[:-1]):
            raise fail(op, "must take one slice of the elements of a vector slot")
        return SmemView(view.buf, view.slot, offsets[-1])
    lead = [o for o in offsets[:-2] if constant_int(o) != 0]
    if src.get_shape()[-1] == dst.get_shape()[-1] and not lead and constant_int(offsets[-1]) == 0:
        return SmemView(view.buf, view.slot, offsets[-2])
    if src.get_shape()[-2] == dst.get_shape()[-2] and not lead and constant_int(offsets[-2]) == 0:
        return SmemView(view.buf, view.slot, column=offsets[-1])
    raise fail(op, "must take whole rows or whole columns of an smem slot")


def squeezes(op: tile.ReshapeOp) -> bool:
    """Whether a reshape only adds or drops leading unit dims (a view stays a view)."""
    source, result = op.source.type, op.result.type
    assert isinstance(source, TensorType | FragmentType) and isinstance(result, TensorType)
    return _without_leading_units(source.get_shape()) == _without_leading_units(result.get_shape())


def _without_leading_units(shape: tuple[int, ...]) -> tuple[int, ...]:
    """`shape` without its leading unit dims (a `1 x n` vector slot is `n` elements)."""
    kept = list(shape)
    while len(kept) > 1 and kept[0] == 1:
        kept.pop(0)
    return tuple(kept)


def registers(op: Operation, value: SSAValue, view: SmemView) -> Operation:
    """The load that reads the tile `value` (a view) into a fragment: a 2-D tile in the
    accumulator layout, a 1-D tile as a row vector; `op` is the first op that needs it."""
    ty = value.type
    assert isinstance(ty, TensorType)
    shape = squeeze_leading(ty.get_shape())
    if view.transposed:
        raise fail(op, "reads a transposed smem tile into registers (only tl.dot takes one)")
    layout = FragmentLayout.WGMMA_ROW if len(shape) == 1 else FragmentLayout.WGMMA_ACC
    try:
        frag = FragmentType(layout, shape, ty.element_type)
    except (ValueError, VerifyException) as error:
        raise fail(op, f"reads {ty} into registers: {error}") from None
    if isinstance(ty.element_type, FP8_TYPES):
        raise fail(op, "reads an fp8 tile into registers (only tl.dot takes fp8 tiles)")
    if layout == FragmentLayout.WGMMA_ROW:
        return nvgpu.FragmentLoadRowsOp(view.buf, view.slot, frag, view.row)
    return nvgpu.FragmentLoadOp(view.buf, view.slot, frag, view.row)


def hoist_allocations(kernel: func.FuncOp) -> None:
    """Move every top-level smem and mbarrier allocation to the kernel's entry, in order.

    `lower-aref` allocates and initializes each ring in turn; the barrier inits are gathered
    into one thread-0 block at the first init, which must not read the barriers of later
    rings before they are allocated (e.g. the Q, K, V rings, or a GEMM's bias ring)."""
    block = kernel.body.block
    allocs = [o for o in block.ops if isinstance(o, nvgpu.SmemAllocOp | nvgpu.MBarrierAllocOp)]
    for op in allocs:
        op.detach()
    first = block.first_op
    assert first is not None
    insert_before(first, allocs)


def squeeze_slots(kernel: func.FuncOp) -> None:
    """Drop the leading unit dims of smem slots (a 1x128x64 box fills a 128x64 slot)."""
    for op in list(kernel.walk()):
        if not isinstance(op, nvgpu.SmemAllocOp):
            continue
        ty = op.buf.type
        assert isinstance(ty, nvgpu.SmemType)
        slot = squeeze_leading(ty.slot_shape)
        if slot != ty.slot_shape:
            new = nvgpu.SmemType((ty.slot_count, *slot), ty.element_type, ty.swizzle_bytes)
            hint = op.buf.name_hint
            Rewriter.replace_value_with_new_type(op.buf, new).name_hint = hint
