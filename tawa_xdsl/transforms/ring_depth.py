"""`ring-depth`: how far the producer may run ahead -- the one place a ring's depth is set.

insert-aref creates every ring with one slot; this pass gives every ring used inside a loop
`stages` slots (`!aref.ring<[...], D>`), so the producer can put up to D uses before the
consumers release the oldest. Rings used once per program keep one slot. Later passes read
the depth from the ring type (mma-lag caps its lag below it; lower-aref allocates D slots).

Options:
  stages: int = 2   ring depth D of looped rings (at least 1).

Refused: stages < 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tawa_xdsl.dialects import aref
from tawa_xdsl.transforms.smem_budget import check_shared_memory
from tawa_xdsl.transforms.ws_utils import error, find_kernel, in_loop

PASS = "ring-depth"


def set_ring_depth(kernel: func.FuncOp, stages: int) -> None:
    """Give every ring used inside a loop `stages` slots."""
    if stages < 1:
        raise error(kernel, PASS, f"stages must be at least 1, got {stages}")
    for create in [op for op in kernel.body.block.ops if isinstance(op, aref.CreateOp)]:
        ring = create.ring.type
        assert isinstance(ring, aref.RingType)
        looped = any(in_loop(use.operation) for use in create.ring.uses)
        if looped and ring.depth.data != stages:
            hint = create.ring.name_hint
            new = Rewriter.replace_value_with_new_type(
                create.ring, aref.RingType(ring.payload_types(), stages)
            )
            new.name_hint = hint


@dataclass(frozen=True)
class RingDepthPass(ModulePass):
    """Ring depth D of every ring used inside a loop.

    Options:
      stages: int = 2   slots of each looped ring.
    """

    name = "ring-depth"

    stages: int = 2

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        set_ring_depth(find_kernel(op, PASS), self.stages)
        check_shared_memory(op)  # the depth is known: refuse before any proof or lowering
