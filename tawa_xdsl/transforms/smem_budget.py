"""The shared memory a kernel's rings need, refused above what one sm_90 block may use.

    from tawa_xdsl.transforms.smem_budget import check_shared_memory
    check_shared_memory(module)   # a one-line SharedMemoryError naming the rings and the bytes

The ring depth D and the payload tiles fix most of a kernel's shared memory as soon as the
rings exist: every payload of a D-deep ring becomes one `nvgpu.smem_alloc` of D slots, and every
ring two arrays of D mbarriers. `shared_memory_need` counts them the way the backend places
them (each buffer 1024-byte aligned, then the 8-byte barriers, then the 1 KiB of alignment
slack the launch passes), at the aref level (`aref.create`) and at the mbarrier and nvgpu levels
(the allocations themselves), so a ring too deep is refused before the barrier-protocol proof
and before any PTX exists. What a later pass adds, the staging buffers of the TMA-store
epilogue, is foreseen at the aref level by `staging_needs` (one whole output tile per stored
descriptor of each consumer group, as `to_nvgpu.stores` allocates them), so that ring-depth
can fit the rings beside it; the backend's exact check (`SmemPlan`) must then agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

from tawa_xdsl.diagnostics import TawaError, op_location
from tawa_xdsl.dialects import aref, nvgpu
from tawa_xdsl.dialects.nvgpu import (
    MBARRIER_BYTES,
    SMEM_ALIGN,
    cta_smem_limit,
    ctas_per_sm,
    smem_allowance,
)
from tawa_xdsl.dialects.tile import StoreOp
from tawa_xdsl.transforms.to_nvgpu.stores import tma_store_box

ALIGN_SLACK = 1024  # the kernel aligns the window base by hand (see emit_ptx.SmemPlan)


class SharedMemoryError(TawaError):
    """A kernel needs more shared memory than a block may use; `need` is how much."""

    def __init__(self, message: str, need: int):
        super().__init__(message)
        self.need = need


@dataclass(frozen=True)
class RingNeed:
    """One ring's share: `slots` slots of `slot_bytes` bytes (every payload of a slot)."""

    name: str
    op: Operation
    buffers: tuple[int, ...]  # bytes of each payload buffer (all slots)
    barriers: int  # mbarriers of the ring (full and empty)
    slots: int
    slot: str  # what one slot holds
    slot_bytes: int

    def describe(self) -> str:
        return f"{self.name} ({self.slots} slots of {self.slot}, {self.slot_bytes} bytes each)"


def _tile_bytes(t: TensorType) -> int:
    return math.prod(t.get_shape()) * nvgpu.element_bytes(t.element_type)


def ring_needs(kernel: func.FuncOp) -> list[RingNeed]:
    """Every ring of `kernel` with its buffers: `aref.create` rings, or lowered smem buffers."""
    needs: list[RingNeed] = []
    for op in kernel.walk():
        if isinstance(op, aref.CreateOp):
            ring = op.ring.type
            assert isinstance(ring, aref.RingType)
            depth = ring.depth.data
            payload = [t for t in ring.payload_types() if isinstance(t, TensorType)]
            tiles = [_tile_bytes(t) for t in payload]
            slot = " + ".join(map(str, payload))
            name = op.ring.name_hint or f"ring{len(needs)}"
            needs.append(RingNeed(name, op, tuple(depth * b for b in tiles), 2 * depth, depth,
                                  slot, sum(tiles)))  # fmt: skip
        elif isinstance(op, nvgpu.SmemAllocOp):
            buf = op.buf.type
            assert isinstance(buf, nvgpu.SmemType)
            size = buf.slot_count * buf.slot_bytes()
            name = op.buf.name_hint or f"buffer{len(needs)}"
            slot = str(buf.slot_type())
            needs.append(RingNeed(name, op, (size,), 0, buf.slot_count, slot, buf.slot_bytes()))
        elif isinstance(op, nvgpu.MBarrierAllocOp):
            bars = op.bars.type
            assert isinstance(bars, nvgpu.MBarrierType)
            name = op.bars.name_hint or f"barriers{len(needs)}"
            needs.append(RingNeed(name, op, (), bars.num_barriers, 0, "", 0))
    return needs


def staging_needs(kernel: func.FuncOp) -> list[RingNeed]:
    """The staging buffers `epilogue=tma` will give `kernel` (asked at the aref level, before
    or after distribute): one whole tile per descriptor each consumer group stores through
    TMA (stores are the consumers'; before distribute the kernel is one group)."""
    staged: dict[tuple[Operation | None, SSAValue], RingNeed] = {}
    for store in kernel.walk():
        if not isinstance(store, StoreOp) or tma_store_box(store) is None:
            continue
        value = store.value.type
        assert isinstance(value, TensorType)
        size = _tile_bytes(value)
        need = RingNeed("c_stage", store, (size,), 0, 1, str(value), size)
        staged.setdefault((_enclosing_group(store), store.desc), need)
    return list(staged.values())


def _enclosing_group(op: Operation) -> Operation | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, aref.GroupOp):
        parent = parent.parent_op()
    return parent


def shared_memory_need(needs: list[RingNeed]) -> int:
    """Bytes of dynamic shared memory for `needs`, placed as the backend places them."""
    end = 0
    for size in (b for need in needs for b in need.buffers):
        end = -(-end // SMEM_ALIGN) * SMEM_ALIGN + size
    barriers = sum(need.barriers for need in needs)
    if barriers:
        end = -(-end // MBARRIER_BYTES) * MBARRIER_BYTES + MBARRIER_BYTES * barriers
    return end + ALIGN_SLACK


def check_shared_memory(
    module: ModuleOp, limit: int | None = None, epilogue: str = "global"
) -> None:
    """Refuse, in one line naming the rings, a kernel whose rings (and, with the TMA-store
    `epilogue`, its staging buffers) need more than `limit` (by default what one of the
    kernel's `ctas_per_sm` CTAs may use)."""
    for kernel in [op for op in module.ops if isinstance(op, func.FuncOp)]:
        needs = ring_needs(kernel) + (staging_needs(kernel) if epilogue == "tma" else [])
        total = shared_memory_need(needs)
        ctas = ctas_per_sm(kernel)
        kernel_limit = cta_smem_limit(ctas) if limit is None else limit
        if total <= kernel_limit:
            continue
        allowance = (
            smem_allowance(ctas) if limit is None else f"an sm_90 block may use at most {limit}"
        )
        rings = sorted((n for n in needs if n.buffers), key=lambda n: -sum(n.buffers))
        place = op_location(rings[0].op if rings else kernel)
        kernel_name = f"@{kernel.sym_name.data}"
        head = (
            f"{kernel_name}: error:" if place == "<unknown>" else f"{place}: error: {kernel_name}:"
        )
        named = ", ".join(n.describe() for n in rings)
        what = f"ring {named}" if len(rings) == 1 else f"rings {named}"
        raise SharedMemoryError(
            f"{head} needs {total} bytes of shared memory for {what}; "
            f"{allowance}: use fewer stages or smaller blocks",
            total,
        )
