"""Tiles that still live in smem slots: `nvgpu.smem_load`s and their views.

A slot read is never copied into registers: it stays a `SmemView` (rows `[row, ...)` of slot
`slot` of `buf`, maybe transposed) through `tile.reshape`, `tile.extract_slice` (whole rows)
and `tile.trans`, until an op reads it as what it is: a wgmma operand (`wgmma`) or a vector
spread over the rows of a fragment (`fragments.load_columns`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue
from xdsl.rewriter import Rewriter

from tawa_xdsl.dialects import nvgpu, tile
from tawa_xdsl.dialects.nvgpu import squeeze_leading
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
    columns `[offset, offset + n)` (all rows kept: the M slice of an M-major A)."""
    src, dst = op.source.type, op.result.type
    assert isinstance(src, TensorType) and isinstance(dst, TensorType)
    offsets = list(op.offsets)
    if view.transposed or view.row is not None or view.column is not None:
        raise fail(op, "must slice an untransposed smem slot once")
    lead = [o for o in offsets[:-2] if constant_int(o) != 0]
    if src.get_shape()[-1] == dst.get_shape()[-1] and not lead and constant_int(offsets[-1]) == 0:
        return SmemView(view.buf, view.slot, offsets[-2])
    if src.get_shape()[-2] == dst.get_shape()[-2] and not lead and constant_int(offsets[-2]) == 0:
        return SmemView(view.buf, view.slot, column=offsets[-1])
    raise fail(op, "must take whole rows or whole columns of an smem slot")


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
