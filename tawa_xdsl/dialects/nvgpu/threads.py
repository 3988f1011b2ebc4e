"""Threads and registers: setmaxnreg, named barriers, elect, warpgroup and thread index (§5, §6)."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    I32,
    IntegerAttr,
    i1,
    i32,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from tawa_xdsl.dialects.nvgpu.hardware import (
    CTA_BARRIER_ID,
    MAX_CTA_THREADS,
    MAX_NAMED_BARRIER_ID,
    MAX_SETMAXNREG,
    MIN_SETMAXNREG,
    WARP_THREADS,
)
from tawa_xdsl.dialects.nvgpu.types import (
    RegisterAction,
    RegisterActionAttr,
)


@irdl_op_definition
class SetMaxNRegOp(IRDLOperation):
    """Set this warpgroup's registers per thread, giving them back to or taking them from the
    CTA's pool (`setmaxnreg.inc.sync.aligned.u32 N;` / `setmaxnreg.dec...`, §5)."""

    name = "nvgpu.setmaxnreg"

    action = prop_def(RegisterActionAttr)
    registers = prop_def(IntegerAttr[I32])

    assembly_format = "$action $registers attr-dict"

    def __init__(self, action: RegisterAction, registers: int):
        super().__init__(
            properties={
                "action": RegisterActionAttr(action),
                "registers": IntegerAttr(registers, i32),
            }
        )

    def verify_(self) -> None:
        registers = self.registers.value.data
        if not (MIN_SETMAXNREG <= registers <= MAX_SETMAXNREG and registers % 8 == 0):
            raise VerifyException(
                f"'nvgpu.setmaxnreg' registers must be a multiple of 8 in 24..256, got {registers}"
            )


@irdl_op_definition
class NamedBarrierSyncOp(IRDLOperation):
    """Wait until `threads` threads (whole warps) have reached named barrier `id`
    (`bar.sync id, threads;`)."""

    name = "nvgpu.named_barrier_sync"

    barrier_id = prop_def(IntegerAttr[I32], prop_name="id")
    threads = prop_def(IntegerAttr[I32])

    assembly_format = "$id `,` $threads attr-dict"

    def __init__(self, barrier_id: int, threads: int):
        super().__init__(
            properties={"id": IntegerAttr(barrier_id, i32), "threads": IntegerAttr(threads, i32)}
        )

    def verify_(self) -> None:
        barrier_id, threads = self.barrier_id.value.data, self.threads.value.data
        if barrier_id == CTA_BARRIER_ID:
            raise VerifyException(
                "'nvgpu.named_barrier_sync' id 0 is reserved for the CTA-wide barrier "
                "(use nvgpu.cta_barrier)"
            )
        if not 1 <= barrier_id <= MAX_NAMED_BARRIER_ID:
            raise VerifyException(
                f"'nvgpu.named_barrier_sync' id must be in 1..15, got {barrier_id}"
            )
        if not (0 < threads <= MAX_CTA_THREADS and threads % WARP_THREADS == 0):
            raise VerifyException(
                f"'nvgpu.named_barrier_sync' threads must be a multiple of 32 in 32..1024, "
                f"got {threads}"
            )


@irdl_op_definition
class NamedBarrierArriveOp(IRDLOperation):
    """Arrive at named barrier `id` without waiting (`bar.arrive id, threads;`): the
    `threads` a `named_barrier_sync` of the same id waits for count these arrivals too
    (the consumer warpgroups' ping-pong hands the MMA turn over this way)."""

    name = "nvgpu.named_barrier_arrive"

    barrier_id = prop_def(IntegerAttr[I32], prop_name="id")
    threads = prop_def(IntegerAttr[I32])

    assembly_format = "$id `,` $threads attr-dict"

    def __init__(self, barrier_id: int, threads: int):
        super().__init__(
            properties={"id": IntegerAttr(barrier_id, i32), "threads": IntegerAttr(threads, i32)}
        )

    def verify_(self) -> None:
        barrier_id, threads = self.barrier_id.value.data, self.threads.value.data
        if not 1 <= barrier_id <= MAX_NAMED_BARRIER_ID:
            raise VerifyException(
                f"'nvgpu.named_barrier_arrive' id must be in 1..15, got {barrier_id}"
            )
        if not (0 < threads <= MAX_CTA_THREADS and threads % WARP_THREADS == 0):
            raise VerifyException(
                f"'nvgpu.named_barrier_arrive' threads must be a multiple of 32 in 32..1024, "
                f"got {threads}"
            )


@irdl_op_definition
class ElectSyncOp(IRDLOperation):
    """True in exactly one lane of the warp, the same lane every time
    (`elect.sync _|%p, 0xffffffff;`)."""

    name = "nvgpu.elect_sync"

    result = result_def(i1)

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self):
        super().__init__(result_types=[i1])


@irdl_op_definition
class WarpgroupIndexOp(IRDLOperation):
    """The index of this thread's warpgroup in the CTA (`%tid.x >> 7`)."""

    name = "nvgpu.warpgroup_index"

    result = result_def(i32)

    assembly_format = "attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self):
        super().__init__(result_types=[i32])


@irdl_op_definition
class ThreadIndexOp(IRDLOperation):
    """The index of this thread within its warpgroup, 0..127 (`%tid.x & 127`)."""

    name = "nvgpu.thread_index"

    result = result_def(i32)

    assembly_format = "attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self):
        super().__init__(result_types=[i32])
