"""emit-ptx for TMA: `cp.async.bulk.tensor` loads and stores, their groups, the proxy fence (§3).

A load prints one `cp.async.bulk.tensor` per box of its box plan (`legalize-nvgpu`)."""

from __future__ import annotations

from tawa_xdsl.backend.emit_ptx.kernel import Handlers, KernelPrinter, fail
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import SmemType

HANDLERS = Handlers()


@HANDLERS.on(nvgpu.TmaLoadOp)
def tma_load(p: KernelPrinter, op: nvgpu.TmaLoadOp) -> None:
    buf = op.buf.type
    assert isinstance(buf, SmemType)
    if op.box_smem_offsets is None or op.box_col_offsets is None:
        raise fail(op, "has no box plan; run legalize-nvgpu first")
    boxes = list(
        zip(op.box_smem_offsets.get_values(), op.box_col_offsets.get_values(), strict=True)
    )
    coords = [p.reg(o) for o in reversed(op.offsets)]  # innermost first
    dst = p.slot_addr(op.buf, op.slot)
    mbar = p.slot_addr(op.bars, op.bar_slot)
    if boxes == [(0, 0)]:
        p.b.cp_async_bulk_tensor(dst, p.tmaps[op.desc], coords, mbar)
        return
    base = p.addr_reg(dst)
    for smem_offset, col_offset in boxes:
        inner = coords[0]
        if col_offset:
            inner = p.b.new("b32")
            p.b.binary("add.s32", inner, coords[0], col_offset)
        target = f"{base}+{smem_offset}" if smem_offset else str(base)
        p.b.cp_async_bulk_tensor(target, p.tmaps[op.desc], [inner, *coords[1:]], mbar)


@HANDLERS.on(nvgpu.TmaStoreOp)
def tma_store(p: KernelPrinter, op: nvgpu.TmaStoreOp) -> None:
    buf = op.buf.type
    assert isinstance(buf, SmemType)
    coords = [p.reg(o) for o in reversed(op.offsets)]
    src = p.slot_addr(op.buf, op.slot)
    p.b.cp_async_bulk_tensor_store(p.tmaps[op.desc], coords, src)


@HANDLERS.on(nvgpu.TmaStoreWaitOp)
def tma_store_wait(p: KernelPrinter, op: nvgpu.TmaStoreWaitOp) -> None:
    p.b.cp_async_bulk_wait_group_read(op.pending.value.data)


HANDLERS.on(nvgpu.TmaStoreCommitOp)(lambda p, op: p.b.cp_async_bulk_commit_group())
HANDLERS.on(nvgpu.FenceProxyAsyncOp)(lambda p, op: p.b.fence_proxy_async())
