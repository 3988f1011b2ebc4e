"""Shared-memory buffers, TMA copies between them and global memory, and the proxy fence (§3)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I32,
    DenseArrayBase,
    IntegerAttr,
    TensorType,
    i32,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.utils.exceptions import VerifyException

from tawa_xdsl.dialects.nvgpu.hardware import SMEM_ALIGN
from tawa_xdsl.dialects.nvgpu.types import (
    MBarrierType,
    SmemType,
    smem_type,
    swizzle_repeat,
    verify_offsets,
    verify_placement,
    verify_slot,
    verify_tma_box,
)
from tawa_xdsl.dialects.tile import (
    DescType,
)


@irdl_op_definition
class SmemAllocOp(IRDLOperation):
    """Reserve a shared-memory buffer (a slice of the dynamic `.shared` window, 1024-byte
    aligned so that every swizzle pattern starts on its repeat boundary).

    Placement (`legalize-nvgpu`): `offset` is the buffer's first byte in the window and
    `slot_stride` the bytes from one slot to the next: slot k starts at byte
    `offset + k * slot_stride`, the address every op on the buffer prints. The stride is
    the slot's bytes, a multiple of the swizzle's repeat (each slot starts the pattern)."""

    name = "nvgpu.smem_alloc"

    buf = result_def(SmemType)
    offset = opt_prop_def(IntegerAttr[I32])
    slot_stride = opt_prop_def(IntegerAttr[I32])

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($buf)"

    def __init__(self, buf_type: SmemType):
        super().__init__(result_types=[buf_type])

    def verify_(self) -> None:
        verify_placement(self, self.offset, SMEM_ALIGN)
        if (self.offset is None) != (self.slot_stride is None):
            raise VerifyException(f"'{self.name}' needs offset and slot_stride, or neither")
        buf = smem_type(self.buf)
        if self.slot_stride is not None and self.slot_stride.value.data != buf.slot_bytes():
            raise VerifyException(
                f"'{self.name}' slot_stride must be the {buf.slot_bytes()} bytes of a slot of "
                f"{buf}, got {self.slot_stride.value.data}"
            )
        if buf.slot_bytes() % swizzle_repeat(buf.swizzle_bytes):
            raise VerifyException(
                f"'{self.name}' slots of {buf} are {buf.slot_bytes()} bytes, not a multiple of "
                f"the {swizzle_repeat(buf.swizzle_bytes)}-byte swizzle repeat"
            )

    def placed_bytes(self) -> int:
        """Bytes the placed buffer takes: every slot at its stride."""
        assert self.slot_stride is not None
        return smem_type(self.buf).slot_count * self.slot_stride.value.data


@irdl_op_definition
class TmaLoadOp(IRDLOperation):
    """Copy the descriptor block at element offsets `[o0, ...]` into smem slot `slot`; the copy
    completes on barrier `bar_slot` with `complete_tx` of the slot's bytes
    (`cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes`).

    Elements outside the global tensor are filled with zeros (and still counted).

    Box plan (`legalize-nvgpu`): box j of the copy lands at byte `box_smem_offsets[j]` of
    the slot from innermost coordinate `o_last + box_col_offsets[j]` (a slot wider than the
    swizzle span is filled one column slab per box)."""

    name = "nvgpu.tma_load"

    desc = operand_def(DescType)
    offsets = var_operand_def(i32)
    buf = operand_def(SmemType)
    slot = operand_def(i32)
    bars = operand_def(MBarrierType)
    bar_slot = operand_def(i32)
    box_smem_offsets = opt_prop_def(DenseArrayBase)
    box_col_offsets = opt_prop_def(DenseArrayBase)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$desc `[` $offsets `]` `->` $buf `[` $slot `]` `,` $bars `[` $bar_slot `]` attr-dict "
        "`:` type($desc) `,` type($buf) `,` type($bars)"
    )

    def __init__(
        self,
        desc: SSAValue,
        offsets: Sequence[SSAValue],
        buf: SSAValue,
        slot: SSAValue,
        bars: SSAValue,
        bar_slot: SSAValue,
    ):
        super().__init__(operands=[desc, offsets, buf, slot, bars, bar_slot])

    def verify_(self) -> None:
        assert isinstance(self.desc.type, DescType)
        assert isinstance(self.bars.type, MBarrierType)
        buf = smem_type(self.buf)
        verify_offsets(self, self.desc.type, self.offsets)
        verify_tma_box(self, self.desc.type, buf)
        verify_slot(self, self.slot, buf.slot_count, "buffer")
        verify_slot(self, self.bar_slot, self.bars.type.num_barriers, "barrier")
        smem, cols = self.box_smem_offsets, self.box_col_offsets
        if (smem is None) != (cols is None) or (
            smem is not None
            and cols is not None
            and not 0 < len(smem.get_values()) == len(cols.get_values())
        ):
            raise VerifyException(
                "'nvgpu.tma_load' needs box_smem_offsets and box_col_offsets of one equal, "
                "positive length, or neither"
            )


@irdl_op_definition
class TmaStoreOp(IRDLOperation):
    """Copy smem slot `slot` to the descriptor block at element offsets `[o0, ...]`
    (`cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group`).

    Elements outside the global tensor are dropped. The source slot may be overwritten only
    after `nvgpu.tma_store_commit` and `nvgpu.tma_store_wait`, in the issuing thread."""

    name = "nvgpu.tma_store"

    desc = operand_def(DescType)
    offsets = var_operand_def(i32)
    buf = operand_def(SmemType)
    slot = operand_def(i32)

    assembly_format = (
        "$desc `[` $offsets `]` `,` $buf `[` $slot `]` attr-dict `:` type($desc) `,` type($buf)"
    )

    def __init__(self, desc: SSAValue, offsets: Sequence[SSAValue], buf: SSAValue, slot: SSAValue):
        super().__init__(operands=[desc, offsets, buf, slot])

    def verify_(self) -> None:
        assert isinstance(self.desc.type, DescType)
        buf = smem_type(self.buf)
        verify_offsets(self, self.desc.type, self.offsets)
        verify_tma_box(self, self.desc.type, buf)
        verify_slot(self, self.slot, buf.slot_count, "buffer")


@irdl_op_definition
class TmaStoreCommitOp(IRDLOperation):
    """Close the group of this thread's pending TMA stores (`cp.async.bulk.commit_group;`)."""

    name = "nvgpu.tma_store_commit"

    assembly_format = "attr-dict"


@irdl_op_definition
class TmaStoreWaitOp(IRDLOperation):
    """Wait until at most `pending` of this thread's store groups still read shared memory
    (`cp.async.bulk.wait_group.read pending;`)."""

    name = "nvgpu.tma_store_wait"

    pending = prop_def(IntegerAttr[I32])

    assembly_format = "$pending attr-dict"

    def __init__(self, pending: int = 0):
        super().__init__(properties={"pending": IntegerAttr(pending, i32)})

    def verify_(self) -> None:
        if self.pending.value.data < 0:
            raise VerifyException(
                f"'nvgpu.tma_store_wait' pending must be >= 0, got {self.pending.value.data}"
            )


@irdl_op_definition
class SmemLoadOp(IRDLOperation):
    """Read smem slot `slot` as a tile value (`ld.shared`, unswizzling as the buffer says)."""

    name = "nvgpu.smem_load"

    buf = operand_def(SmemType)
    slot = operand_def(i32)
    result = result_def(TensorType)

    assembly_format = "$buf `[` $slot `]` attr-dict `:` type($buf) `->` type($result)"

    def __init__(self, buf: SSAValue, slot: SSAValue):
        super().__init__(operands=[buf, slot], result_types=[smem_type(buf).slot_type()])

    def verify_(self) -> None:
        buf = smem_type(self.buf)
        if self.result.type != buf.slot_type():
            raise VerifyException(
                f"'nvgpu.smem_load' of a slot of {buf} must produce {buf.slot_type()}, "
                f"got {self.result.type}"
            )
        verify_slot(self, self.slot, buf.slot_count, "buffer")


@irdl_op_definition
class SmemStoreOp(IRDLOperation):
    """Write a tile value into smem slot `slot` (`st.shared`, swizzling as the buffer says).

    Before TMA or wgmma read the slot: `nvgpu.fence_proxy_async` and a barrier."""

    name = "nvgpu.smem_store"

    value = operand_def(TensorType)
    buf = operand_def(SmemType)
    slot = operand_def(i32)

    assembly_format = "$value `,` $buf `[` $slot `]` attr-dict `:` type($value) `,` type($buf)"

    def __init__(self, value: SSAValue, buf: SSAValue, slot: SSAValue):
        super().__init__(operands=[value, buf, slot])

    def verify_(self) -> None:
        buf = smem_type(self.buf)
        if self.value.type != buf.slot_type():
            raise VerifyException(
                f"'nvgpu.smem_store' into a slot of {buf} needs a {buf.slot_type()} value, "
                f"got {self.value.type}"
            )
        verify_slot(self, self.slot, buf.slot_count, "buffer")


@irdl_op_definition
class FenceProxyAsyncOp(IRDLOperation):
    """Order this thread's generic-proxy smem writes before later async-proxy (TMA, wgmma)
    accesses (`fence.proxy.async.shared::cta;`)."""

    name = "nvgpu.fence_proxy_async"

    assembly_format = "attr-dict"
