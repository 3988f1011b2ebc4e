"""mbarrier ops: arrays of barriers in shared memory, addressed by an i32 slot (§2)."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    I32,
    IntegerAttr,
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
)
from xdsl.utils.exceptions import VerifyException

from tawa_xdsl.dialects.nvgpu.hardware import (
    MAX_MBARRIER_COUNT,
    MBARRIER_BYTES,
)
from tawa_xdsl.dialects.nvgpu.types import (
    MBarrierType,
    constant_value,
    verify_placement,
    verify_slot,
)


@irdl_op_definition
class MBarrierAllocOp(IRDLOperation):
    """Reserve shared memory for an array of mbarriers (a `.shared .b64` array).

    Placement (`legalize-nvgpu`): `offset` is the first barrier's byte in the dynamic smem
    window (8-byte aligned)."""

    name = "nvgpu.mbarrier_alloc"

    bars = result_def(MBarrierType)
    offset = opt_prop_def(IntegerAttr[I32])

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($bars)"

    def __init__(self, bars_type: MBarrierType):
        super().__init__(result_types=[bars_type])

    def verify_(self) -> None:
        verify_placement(self, self.offset, MBARRIER_BYTES)

    def placed_bytes(self) -> int:
        """Bytes the placed array takes: one 8-byte barrier per slot."""
        assert isinstance(self.bars.type, MBarrierType)
        return MBARRIER_BYTES * self.bars.type.num_barriers


@irdl_op_definition
class MBarrierInitOp(IRDLOperation):
    """Initialise every barrier of the array to phase 0 expecting `count` arrivals per phase.

    Becomes one `mbarrier.init.shared::cta.b64 [a], count;` per barrier; one thread runs it,
    followed by `nvgpu.fence_mbarrier_init` and `nvgpu.cta_barrier` (§2.4)."""

    name = "nvgpu.mbarrier_init"

    bars = operand_def(MBarrierType)
    count = prop_def(IntegerAttr[I32])

    assembly_format = "$bars `,` `count` $count attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, count: int):
        super().__init__(operands=[bars], properties={"count": IntegerAttr(count, i32)})

    def verify_(self) -> None:
        count = self.count.value.data
        if not 1 <= count <= MAX_MBARRIER_COUNT:
            raise VerifyException(
                f"'nvgpu.mbarrier_init' count must be in 1..{MAX_MBARRIER_COUNT}, got {count}"
            )


class _MBarrierSlotOp(IRDLOperation):
    bars = operand_def(MBarrierType)
    slot = operand_def(i32)

    def verify_(self) -> None:
        assert isinstance(self.bars.type, MBarrierType)
        verify_slot(self, self.slot, self.bars.type.num_barriers, "barrier")


@irdl_op_definition
class MBarrierArriveOp(_MBarrierSlotOp):
    """Arrive once on barrier `slot` (`mbarrier.arrive.shared::cta.b64 _, [a];`)."""

    name = "nvgpu.mbarrier_arrive"

    assembly_format = "$bars `[` $slot `]` attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, slot: SSAValue):
        super().__init__(operands=[bars, slot])


@irdl_op_definition
class MBarrierArriveExpectTxOp(_MBarrierSlotOp):
    """Raise the tx-count of barrier `slot` by `bytes`, then arrive once, atomically
    (`mbarrier.arrive.expect_tx.shared::cta.b64 _, [a], bytes;`)."""

    name = "nvgpu.mbarrier_arrive_expect_tx"

    tx_bytes = prop_def(IntegerAttr[I32], prop_name="bytes")

    assembly_format = "$bars `[` $slot `]` `,` `bytes` $bytes attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, slot: SSAValue, tx_bytes: int):
        super().__init__(operands=[bars, slot], properties={"bytes": IntegerAttr(tx_bytes, i32)})

    def verify_(self) -> None:
        super().verify_()
        tx_bytes = self.tx_bytes.value.data
        if not 0 < tx_bytes <= MAX_MBARRIER_COUNT:
            raise VerifyException(
                f"'nvgpu.mbarrier_arrive_expect_tx' bytes must be in 1..{MAX_MBARRIER_COUNT} "
                f"(the 20-bit tx-count), got {tx_bytes}"
            )


@irdl_op_definition
class MBarrierWaitOp(IRDLOperation):
    """Block until the phase of barrier `slot` with parity `parity` (0 or 1) has completed:
    a `mbarrier.try_wait.parity.shared::cta.b64` loop (§2.1)."""

    name = "nvgpu.mbarrier_wait"

    bars = operand_def(MBarrierType)
    slot = operand_def(i32)
    parity = operand_def(i32)

    assembly_format = "$bars `[` $slot `]` `,` $parity attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, slot: SSAValue, parity: SSAValue):
        super().__init__(operands=[bars, slot, parity])

    def verify_(self) -> None:
        assert isinstance(self.bars.type, MBarrierType)
        verify_slot(self, self.slot, self.bars.type.num_barriers, "barrier")
        parity = constant_value(self.parity)
        if parity is not None and parity not in (0, 1):
            raise VerifyException(f"'nvgpu.mbarrier_wait' parity must be 0 or 1, got {parity}")


@irdl_op_definition
class FenceMBarrierInitOp(IRDLOperation):
    """Make mbarrier inits visible to the async proxy and the cluster
    (`fence.mbarrier_init.release.cluster;`)."""

    name = "nvgpu.fence_mbarrier_init"

    assembly_format = "attr-dict"


@irdl_op_definition
class CtaBarrierOp(IRDLOperation):
    """Synchronise all threads of the CTA (`bar.sync 0;`, i.e. `__syncthreads`)."""

    name = "nvgpu.cta_barrier"

    assembly_format = "attr-dict"
