"""`set-registers`: give every warp group its role's setmaxnreg budget (aref level).

    tawa-opt k.mlir -p 'tawa-warp-specialize{...},set-registers{producer=24 consumer=240}'

`distribute` gives each `aref.group` the default budget of its role (`aref.PRODUCER_REGISTERS`,
`aref.CONSUMER_REGISTERS`); this pass replaces them: the producer group gets `producer`
registers per thread, every consumer group `consumer`. `lower-to-nvgpu` turns the budgets into
`nvgpu.setmaxnreg`. Run it after `tawa-warp-specialize`, once the cooperative split has fixed
how many warpgroups each group runs on.

Options: producer, consumer (registers per thread, multiples of 8 in 24..256; the group
verifier checks each). Refused: budgets the SM's register file cannot hold, i.e.
(producer * producer warpgroups + consumer * consumer warpgroups) * 128 > 65536.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32
from xdsl.passes import ModulePass

from tawa_xdsl.dialects import aref
from tawa_xdsl.transforms.ws_utils import error, find_kernel

PASS = "set-registers"
SM_REGISTERS = 65536  # 32-bit registers per SM on sm_90
THREADS_PER_WARPGROUP = 128


def set_registers(specialize: aref.WarpSpecializeOp, producer: int, consumer: int) -> None:
    """Set the budgets of the groups of one `aref.warp_specialize` (see the module docstring)."""
    groups = list(specialize.groups())

    def budget(group: aref.GroupOp) -> int:
        return producer if group.role.data == aref.Role.PRODUCER else consumer

    total = sum(budget(g) * g.num_warpgroups for g in groups) * THREADS_PER_WARPGROUP
    if total > SM_REGISTERS:
        warpgroups = sum(g.num_warpgroups for g in groups)
        raise error(
            specialize,
            PASS,
            f"registers ({producer}, {consumer}) over {warpgroups} warpgroups need {total} "
            f"registers; an SM has {SM_REGISTERS}",
        )
    for group in groups:
        group.registers = IntegerAttr(budget(group), i32)


@dataclass(frozen=True)
class SetRegistersPass(ModulePass):
    """Registers per thread of the producer and of each consumer warp group."""

    name = "set-registers"

    producer: int = aref.PRODUCER_REGISTERS
    consumer: int = aref.CONSUMER_REGISTERS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernel = find_kernel(op, PASS)
        specializes = [o for o in kernel.walk() if isinstance(o, aref.WarpSpecializeOp)]
        if not specializes:
            raise error(kernel, PASS, "no aref.warp_specialize: run tawa-warp-specialize first")
        for specialize in specializes:
            set_registers(specialize, self.producer, self.consumer)
