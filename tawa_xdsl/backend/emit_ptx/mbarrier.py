"""emit-ptx for the mbarrier family and the smem allocations: `mbarrier.*` lines (§2)."""

from __future__ import annotations

from tawa_xdsl.backend.emit_ptx.kernel import Handlers, KernelPrinter
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import MBARRIER_BYTES, MBarrierType

HANDLERS = Handlers()


@HANDLERS.on(nvgpu.SmemAllocOp, nvgpu.MBarrierAllocOp)
def alloc(p: KernelPrinter, op: nvgpu.SmemAllocOp | nvgpu.MBarrierAllocOp) -> None:
    result = op.results[0]
    assert p.smem_base is not None
    p.b.binary("add.u32", p.reg(result), p.smem_base, p.smem.offsets[result])


@HANDLERS.on(nvgpu.MBarrierInitOp)
def mbarrier_init(p: KernelPrinter, op: nvgpu.MBarrierInitOp) -> None:
    assert isinstance(op.bars.type, MBarrierType)
    for i in range(op.bars.type.num_barriers):
        addr = f"{p.reg(op.bars)}+{MBARRIER_BYTES * i}" if i else str(p.reg(op.bars))
        p.b.mbarrier_init(addr, op.count.value.data)


@HANDLERS.on(nvgpu.MBarrierArriveOp)
def mbarrier_arrive(p: KernelPrinter, op: nvgpu.MBarrierArriveOp) -> None:
    p.b.mbarrier_arrive(p.slot_addr(op.bars, op.slot))


@HANDLERS.on(nvgpu.MBarrierArriveExpectTxOp)
def mbarrier_arrive_expect_tx(p: KernelPrinter, op: nvgpu.MBarrierArriveExpectTxOp) -> None:
    p.b.mbarrier_arrive_expect_tx(p.slot_addr(op.bars, op.slot), op.tx_bytes.value.data)


@HANDLERS.on(nvgpu.MBarrierWaitOp)
def mbarrier_wait(p: KernelPrinter, op: nvgpu.MBarrierWaitOp) -> None:
    p.b.mbarrier_try_wait_parity(p.slot_addr(op.bars, op.slot), p.operand(op.parity))


HANDLERS.on(nvgpu.FenceMBarrierInitOp)(lambda p, op: p.b.fence_mbarrier_init())
HANDLERS.on(nvgpu.CtaBarrierOp)(lambda p, op: p.b.bar_sync(nvgpu.CTA_BARRIER_ID))
