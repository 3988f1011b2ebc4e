"""`ring-depth`: how far the producer may run ahead -- the one place a ring's depth is set.

insert-aref creates every ring with one slot; this pass gives every ring a loop streams (one
used inside an innermost loop) `stages` slots (`!aref.ring<[...], D>`), so the producer can
put up to D uses before the consumers release the oldest. Rings used once per program keep
one slot. A ring used once per iteration of a loop around other loops (Q of a persistent
attention, once per tile) gets `min(D, 2)` slots, the next tile's use loaded under this
one's, or one when that does not fit shared memory beside the streamed rings (Q's tile is as
big as one K and one V slot at d = 128). Later passes read the depth from the ring type
(mma-lag caps its lag below it; lower-aref allocates D slots).

With `stages` unset the depth is fitted to shared memory: the deepest D up to
`DEFAULT_MAX_STAGES` whose rings, and with `epilogue=tma` the staging buffers of the TMA
stores (`smem_budget.staging_needs`), fit one sm_90 block (one of the kernel's
`tawa.ctas_per_sm` blocks sharing an SM: `nvgpu.cta_smem_limit`). A depth that does not fit (given,
or 1) is refused here in one line, before any proof or lowering runs.

Ping-pong (two consumer warpgroups taking MMA turns, lower-to-nvgpu's `pingpong`) needs
two slots: with one, the second consumer waits for the next K/V use before it hands the
turn back, and the producer can put that use only after the first consumer -- waiting
for the turn -- releases the current one (the named-barrier proof finds the cycle from
three uses). So with `pingpong` a given `stages=1` is refused, and the fitted depth is at
least 2.

Options:
  stages: int | None = 2   ring depth D of streamed rings (at least 1; None: fitted).
  epilogue: str = "global" the epilogue lower-to-nvgpu will use (its staging is counted).
  pingpong: bool = False   the consumers will take ping-pong turns (D >= 2).

Refused: stages < 1; stages = 1 with pingpong; rings that need more shared memory than a
block may use.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tawa_xdsl.dialects import aref
from tawa_xdsl.dialects.nvgpu import cta_smem_limit, ctas_per_sm
from tawa_xdsl.transforms.smem_budget import (
    check_shared_memory,
    ring_needs,
    shared_memory_need,
    staging_needs,
)
from tawa_xdsl.transforms.ws_utils import error, find_kernel, in_loop

PASS = "ring-depth"
DEFAULT_MAX_STAGES = 4  # deeper rings gained nothing measurable on the H200 GEMMs
PINGPONG_MIN_STAGES = 2  # one slot closes a cycle of turns and ring waits (module docstring)
OUTER_MAX_STAGES = 2  # a ring of an outer loop needs only the next iteration's use ahead


def _in_innermost_loop(op: Operation) -> bool:
    """Whether the loop nearest around `op` holds no other loop (it streams the ring)."""
    loop = op.parent_op()
    while loop is not None and not isinstance(loop, scf.ForOp):
        loop = loop.parent_op()
    return loop is not None and not any(isinstance(inner, scf.ForOp) for inner in loop.body.walk())


def _set_depth(create: aref.CreateOp, depth: int) -> None:
    ring = create.ring.type
    assert isinstance(ring, aref.RingType)
    if ring.depth.data != depth:
        hint = create.ring.name_hint
        new = Rewriter.replace_value_with_new_type(
            create.ring, aref.RingType(ring.payload_types(), depth)
        )
        new.name_hint = hint


def set_ring_depth(
    kernel: func.FuncOp, stages: int, epilogue: str = "global", least: int = 1
) -> None:
    """Give every ring a loop streams `stages` slots, and every ring of an outer loop only
    the deepest of `min(stages, OUTER_MAX_STAGES)` .. `least` slots that fits."""
    if stages < 1:
        raise error(kernel, PASS, f"stages must be at least 1, got {stages}")
    outer: list[aref.CreateOp] = []
    for create in [op for op in kernel.body.block.ops if isinstance(op, aref.CreateOp)]:
        uses = [use.operation for use in create.ring.uses]
        if any(_in_innermost_loop(user) for user in uses):
            _set_depth(create, stages)
        elif any(in_loop(user) for user in uses):
            outer.append(create)
    for depth in range(min(stages, OUTER_MAX_STAGES), least - 1, -1):
        for create in outer:
            _set_depth(create, depth)
        if _fits(kernel, epilogue):
            return


def _fits(kernel: func.FuncOp, epilogue: str) -> bool:
    staging = staging_needs(kernel) if epilogue == "tma" else []
    return shared_memory_need(ring_needs(kernel) + staging) <= cta_smem_limit(ctas_per_sm(kernel))


def fit_ring_depth(kernel: func.FuncOp, epilogue: str = "global", least: int = 1) -> int:
    """Set, and return, the deepest ring depth from `least` up to `DEFAULT_MAX_STAGES` that
    fits shared memory beside the epilogue's staging buffers (`least` when none fits:
    refused afterwards)."""
    for stages in range(DEFAULT_MAX_STAGES, least - 1, -1):
        set_ring_depth(kernel, stages, epilogue, least)
        if _fits(kernel, epilogue):
            return stages
    return least


@dataclass(frozen=True)
class RingDepthPass(ModulePass):
    """Ring depth D of every ring a loop streams (an outer loop's rings: up to 2).

    Options:
      stages: int | None = 2     slots of each streamed ring (None: fitted to shared memory).
      epilogue: str = "global"   lower-to-nvgpu's epilogue (`tma` stages stores in smem).
      pingpong: bool = False     lower-to-nvgpu's ping-pong turns (at least two slots).
    """

    name = "ring-depth"

    stages: int | None = 2
    epilogue: str = "global"
    pingpong: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernel = find_kernel(op, PASS)
        least = PINGPONG_MIN_STAGES if self.pingpong else 1
        if self.stages is None:
            fit_ring_depth(kernel, self.epilogue, least)
        elif 1 <= self.stages < least:
            raise error(
                kernel,
                PASS,
                f"stages={self.stages} with pingpong: one-slot rings deadlock the ping-pong "
                f"turns (a consumer waits for the next use before handing the turn back); "
                f"use stages >= {least}",
            )
        else:
            set_ring_depth(kernel, self.stages, self.epilogue, least)
        # the depth is known: refuse before any proof or lowering
        check_shared_memory(op, epilogue=self.epilogue)
