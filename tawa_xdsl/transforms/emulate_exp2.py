"""`emulate-exp2`: compute a share of a loop's exp2s on the FMA units (aref level).

    tawa-opt k.mlir -p 'tawa-warp-specialize{...},emulate-exp2'            (share chosen)
    tawa-opt k.mlir -p 'tawa-warp-specialize{...},emulate-exp2{share=2}'   (2 of every 8 values)

An SM retires 16 `ex2.approx` a clock on its MUFU unit and 4096 flops of 16-bit wgmma (8192
of fp8). Attention's key loop at d = 64 has one exp2 per score against 4 d = 256 flops per
score, so on paper its exp2s keep the MUFU unit as long as its dots keep the tensor cores. A
value computed by `nvgpu.EXP2_POLY` instead (ten instructions on the FMA and ALU pipes) takes
that time off the MUFU unit and adds nine issue slots. Measured on the H200 (bench/NOTES.md,
round 14): at that balance the slots cost more than the MUFU time saves, 2 of 8 values made
d = 64 up to 10% slower (8-10% from 4K keys) and fp8 2-6%; so the choice emulates only past
it.

Chosen (no `share`): per loop, the MUFU clocks of its exp2s against the tensor-core clocks of
its dots, a branch counting its costlier arm; where the ratio passes `MUFU_TARGET`, the
eighths (to the nearest) that bring it there, at most `MAX_SHARE`. Only innermost loops are
chosen for (the hot ones; a persistent kernel's loop of tiles runs its peeled iterations once
a tile). Every exp2 of a tile in that loop (its branches included) gets
`tawa.exp2_emulated = share`; row vectors (a thread holds one or two of their values) keep
the MUFU unit. With `share`, 0 marks nothing and 1..8 marks every exp2 of a
tile in the kernel, in a loop or not. lower-to-nvgpu carries the mark onto
`nvgpu.fragment_unary`, which the printer and the nvgpu interpreter compute the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import math as mathd
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType, i32
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from tawa_xdsl.dialects import aref, tile
from tawa_xdsl.dialects.nvgpu import EXP2_EMULATION_PERIOD
from tawa_xdsl.dialects.nvgpu.hardware import MUFU_EX2_PER_CLOCK, WGMMA_FLOPS_PER_CLOCK
from tawa_xdsl.transforms.ws_utils import error, find_kernel, own_ops

PASS = "emulate-exp2"
# A loop whose exp2s take the MUFU unit longer than its dots take the tensor cores moves
# exp2s to the FMA units until they take no longer; at equality (d = 64, fp8 d = 128) it
# measured slower (round 14).
MUFU_TARGET = 1.0
# At most half the values: each emulated value costs ten issue slots where the MUFU unit's
# costs one, and the softmax already spends about five per score on the FMA and ALU pipes.
MAX_SHARE = 4


def is_tile_exp2(op: Operation) -> bool:
    """An exp2 of a 2-D tile (a row vector's values are too few to matter)."""
    result = op.results[0].type if isinstance(op, mathd.Exp2Op) else None
    return isinstance(result, TensorType) and len(result.get_shape()) == 2


def op_clocks(op: Operation) -> tuple[float, float]:
    """(MUFU, tensor-core) clocks of one op: its exp2s' values, its dots' flops."""
    result = op.results[0].type if op.results else None
    if isinstance(op, mathd.Exp2Op | mathd.ExpOp) and isinstance(result, TensorType):
        return math.prod(result.get_shape()) / MUFU_EX2_PER_CLOCK, 0.0
    if isinstance(op, tile.DotOp):
        lhs, rhs = op.lhs.type, op.rhs.type
        assert isinstance(lhs, TensorType) and isinstance(rhs, TensorType)
        (rows, depth), columns = lhs.get_shape(), rhs.get_shape()[-1]
        width = lhs.element_type.bitwidth  # type: ignore[attr-defined]
        rate = WGMMA_FLOPS_PER_CLOCK.get(width, WGMMA_FLOPS_PER_CLOCK[16])
        return 0.0, 2 * rows * depth * columns / rate
    return 0.0, 0.0


def iteration_clocks(block: Block) -> tuple[float, float]:
    """(MUFU, tensor-core) clocks of one run of `block`: a branch counts its costlier arm
    (one of them runs)."""
    mufu = mma = 0.0
    for op in block.ops:
        arms = [iteration_clocks(b) for region in op.regions for b in region.blocks]
        own = op_clocks(op)
        mufu += own[0] + max((arm[0] for arm in arms), default=0.0)
        mma += own[1] + max((arm[1] for arm in arms), default=0.0)
    return mufu, mma


def chosen_share(loop: scf.ForOp) -> int:
    """The eighths whose emulation brings `loop`'s MUFU time nearest `MUFU_TARGET` of its
    MMA time (0 where it is under already or the loop has no dot), at most `MAX_SHARE`."""
    mufu, mma = iteration_clocks(loop.body.block)
    if mma == 0 or mufu <= MUFU_TARGET * mma:
        return 0
    needed = EXP2_EMULATION_PERIOD * (1 - MUFU_TARGET * mma / mufu)
    return min(round(needed), MAX_SHARE)


def is_innermost(op: Operation) -> bool:
    """A loop with no loop in it: where a kernel spends its time (a persistent kernel's loop
    of tiles holds its key loops and, once per tile, their peeled iterations)."""
    return isinstance(op, scf.ForOp) and not any(
        isinstance(inner, scf.ForOp) for inner in op.body.walk()
    )


def mark(op: Operation, share: int) -> None:
    op.attributes[aref.EXP2_EMULATED_ATTR] = IntegerAttr(share, i32)


@dataclass(frozen=True)
class EmulateExp2Pass(ModulePass):
    """Mark the exp2s whose share of values the FMA units compute (none given: chosen per
    loop from its MUFU and tensor-core time)."""

    name = "emulate-exp2"

    share: int | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernel = find_kernel(op, PASS)
        if self.share is not None:
            if not 0 <= self.share <= EXP2_EMULATION_PERIOD:
                raise error(
                    kernel, PASS, f"share must be 0..{EXP2_EMULATION_PERIOD}, got {self.share}"
                )
            for exp2 in filter(is_tile_exp2, kernel.walk()):
                if self.share:
                    mark(exp2, self.share)
            return
        for loop in filter(is_innermost, kernel.walk()):
            share = chosen_share(loop)
            for exp2 in filter(is_tile_exp2, own_ops(loop)) if share else ():
                mark(exp2, share)
