"""`set-registers`: give every warp group its role's setmaxnreg budget (aref level).

    tawa-opt k.mlir -p 'tawa-warp-specialize{...},set-registers{producer=24 consumer=240}'
    tawa-opt k.mlir -p 'tawa-warp-specialize{...},set-registers'       (budgets chosen)

`distribute` gives each `aref.group` the default budget of its role (`aref.PRODUCER_REGISTERS`,
`aref.CONSUMER_REGISTERS`); this pass replaces them: the producer group gets `producer`
registers per thread, every consumer group `consumer`. `lower-to-nvgpu` turns the budgets into
`nvgpu.setmaxnreg`. Run it after `tawa-warp-specialize`, once the cooperative split has fixed
how many warpgroups each group runs on and software-pipeline which tiles one iteration keeps.

Without budgets the pass chooses: where a consumer group's tiles need more registers than
its budget (`register_demand`), the producer, which only issues copies, drops to the least
setmaxnreg takes and the consumers share the rest (`consumers_take_the_rest`: 24 / 240 for two
consumer warpgroups); elsewhere the budgets stay. The demand is an estimate: per thread of one
warpgroup, the tiles the widest loop carries plus the scores its dots start from zero
(`tile_registers`), times `DEMAND_FACTOR` for what else a thread holds.

Options: producer, consumer (registers per thread, multiples of 8 in 24..256; the group
verifier checks each), both or neither. Refused: one budget without the other; budgets the
CTA's share of the register file cannot hold, i.e. (producer * producer warpgroups + consumer *
consumer warpgroups) * 128 > 65536 / ctas_per_sm (the kernel's `tawa.ctas_per_sm`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType, i32
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from tawa_xdsl.dialects import aref, tile
from tawa_xdsl.dialects.nvgpu import WARPGROUP_THREADS, cta_registers
from tawa_xdsl.transforms.ws_utils import error, find_kernel, own_ops

PASS = "set-registers"
MIN_REGISTERS = 24  # the least setmaxnreg takes
# Tiles are about two thirds of what a consumer thread holds: addresses, indices, the softmax's
# temporaries and the wgmma descriptors take the rest. Calibrated by ptxas 13.0: attention
# d = 128 with 128 keys rotated (162 estimated) spills 16 bytes at 232; d = 64 (130) and the
# 128 x 256 GEMM tile (128) do not.
DEMAND_FACTOR = 3 / 2


def tile_registers(value: SSAValue) -> int:
    """32-bit registers per thread of one warpgroup holding the tile `value` (0 for scalars)."""
    kind = value.type
    if not isinstance(kind, TensorType):
        return 0
    bits = math.prod(kind.get_shape()) * kind.element_type.bitwidth
    return -(-bits // (32 * WARPGROUP_THREADS))


def starts_from_zero(dot: tile.DotOp) -> bool:
    return isinstance(dot.acc.owner, tile.SplatOp)


def loop_demand(loop: scf.ForOp) -> int:
    """The tiles `loop` carries and the dot results it starts from a splat, per thread."""
    carried = sum(tile_registers(arg) for arg in loop.body.block.args[1:])
    fresh = sum(
        tile_registers(op.result)
        for op in own_ops(loop)
        if isinstance(op, tile.DotOp) and starts_from_zero(op)
    )
    return carried + fresh


def register_demand(group: aref.GroupOp) -> int:
    """Registers per thread `group`'s widest loop needs, by estimate (module docstring)."""
    loops = [op for op in group.body.walk() if isinstance(op, scf.ForOp)]
    return math.ceil(max((loop_demand(loop) for loop in loops), default=0) * DEMAND_FACTOR)


def thread_registers(specialize: aref.WarpSpecializeOp) -> int:
    """Per-thread registers all groups of `specialize` may sum to (one thread of each
    warpgroup): the CTA's share of the SM."""
    return cta_registers(aref.kernel_ctas_per_sm(specialize)) // WARPGROUP_THREADS


def consumers_take_the_rest(specialize: aref.WarpSpecializeOp) -> None:
    """The producer at the minimum, the consumers sharing the rest (multiples of 8)."""
    groups = specialize.groups()
    producers = [g for g in groups if g.role.data == aref.Role.PRODUCER]
    left = thread_registers(specialize) - MIN_REGISTERS * sum(g.num_warpgroups for g in producers)
    consumer = left // sum(g.num_warpgroups for g in groups if g not in producers) // 8 * 8
    for group in groups:
        budget = MIN_REGISTERS if group in producers else min(consumer, 256)
        group.registers = IntegerAttr(budget, i32)


def fit_registers(specialize: aref.WarpSpecializeOp) -> None:
    """Budgets the CTA's share of the SM can hold: unchanged where they fit, else the producer
    at the minimum and the consumers sharing the rest (multiples of 8)."""
    groups = specialize.groups()
    if sum(g.registers.value.data * g.num_warpgroups for g in groups) > thread_registers(
        specialize
    ):
        consumers_take_the_rest(specialize)


def choose_registers(specialize: aref.WarpSpecializeOp) -> None:
    """The consumers take the rest where a consumer group needs more than it has."""
    consumers = [g for g in specialize.groups() if g.role.data == aref.Role.CONSUMER]
    if any(register_demand(g) > g.registers.value.data for g in consumers):
        consumers_take_the_rest(specialize)


def set_registers(specialize: aref.WarpSpecializeOp, producer: int, consumer: int) -> None:
    """Set the budgets of the groups of one `aref.warp_specialize` (see the module docstring)."""
    groups = list(specialize.groups())

    def budget(group: aref.GroupOp) -> int:
        return producer if group.role.data == aref.Role.PRODUCER else consumer

    total = sum(budget(g) * g.num_warpgroups for g in groups) * WARPGROUP_THREADS
    pool = thread_registers(specialize) * WARPGROUP_THREADS
    if total > pool:
        warpgroups = sum(g.num_warpgroups for g in groups)
        ctas = aref.kernel_ctas_per_sm(specialize)
        owner = "an SM has" if ctas == 1 else f"each of {ctas} CTAs sharing an SM has"
        raise error(
            specialize,
            PASS,
            f"registers ({producer}, {consumer}) over {warpgroups} warpgroups need {total} "
            f"registers; {owner} {pool}",
        )
    for group in groups:
        group.registers = IntegerAttr(budget(group), i32)


@dataclass(frozen=True)
class SetRegistersPass(ModulePass):
    """Registers per thread of the producer and of each consumer warp group (neither given:
    chosen from the consumers' demand)."""

    name = "set-registers"

    producer: int | None = None
    consumer: int | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernel = find_kernel(op, PASS)
        if (self.producer is None) != (self.consumer is None):
            raise error(kernel, PASS, "give both budgets, producer and consumer, or neither")
        specializes = [o for o in kernel.walk() if isinstance(o, aref.WarpSpecializeOp)]
        if not specializes:
            raise error(kernel, PASS, "no aref.warp_specialize: run tawa-warp-specialize first")
        for specialize in specializes:
            if self.producer is None or self.consumer is None:
                choose_registers(specialize)
            else:
                set_registers(specialize, self.producer, self.consumer)
