"""emit-ptx for threads and registers: setmaxnreg, named barriers, elect, thread indices
(§5, §6)."""

from __future__ import annotations

from tawa_xdsl.backend.emit_ptx.kernel import Handlers, KernelPrinter
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import WARPGROUP_THREADS

HANDLERS = Handlers()


@HANDLERS.on(nvgpu.SetMaxNRegOp)
def setmaxnreg(p: KernelPrinter, op: nvgpu.SetMaxNRegOp) -> None:
    action = "inc" if op.action.data == nvgpu.RegisterAction.INCREASE else "dec"
    p.b.setmaxnreg(action, op.registers.value.data)


@HANDLERS.on(nvgpu.NamedBarrierSyncOp)
def named_barrier_sync(p: KernelPrinter, op: nvgpu.NamedBarrierSyncOp) -> None:
    p.b.bar_sync(op.barrier_id.value.data, op.threads.value.data)


@HANDLERS.on(nvgpu.NamedBarrierArriveOp)
def named_barrier_arrive(p: KernelPrinter, op: nvgpu.NamedBarrierArriveOp) -> None:
    p.b.emit(f"bar.arrive {op.barrier_id.value.data}, {op.threads.value.data}")


@HANDLERS.on(nvgpu.ElectSyncOp)
def elect_sync(p: KernelPrinter, op: nvgpu.ElectSyncOp) -> None:
    p.b.elect_sync(p.reg(op.result))


@HANDLERS.on(nvgpu.WarpgroupIndexOp)
def warpgroup_index(p: KernelPrinter, op: nvgpu.WarpgroupIndexOp) -> None:
    out = p.reg(op.result)
    p.b.special(out, "%tid.x")
    p.b.binary("shr.u32", out, out, WARPGROUP_THREADS.bit_length() - 1)
    # Lane 0's copy: ptxas then knows the index is warp-uniform and keeps what is computed
    # from it (a consumer's slice of A, its wgmma descriptors) on the uniform datapath.
    p.b.emit(f"shfl.sync.idx.b32 {out}, {out}, 0, 31, -1")


@HANDLERS.on(nvgpu.ThreadIndexOp)
def thread_index(p: KernelPrinter, op: nvgpu.ThreadIndexOp) -> None:
    out = p.reg(op.result)
    p.b.special(out, "%tid.x")
    p.b.binary("and.b32", out, out, WARPGROUP_THREADS - 1)
