"""`mma-lag`: keep the slots of the last P uses held while their MMAs run.

With MMA depth P, in a consumer loop the release of a ring feeding a dot runs L = min(P, D) - 1
uses late (D: the ring depth; holding more uses than slots would deadlock the producer):

    %oldest = arith.subi %i, %lag              %held = arith.subi %i, %start
    %full = arith.cmpi sge, %held, %lag
    scf.if %full { aref.consumed %ring[%oldest] lag(L) }
    ...
    aref.drain %ring[%start, %end] lag(L)      after the loop: uses max(end - L, start) .. end-1

so at most L + 1 uses are held, and P larger than the trip count releases everything in the
drain. The lag is data on the release (`lag(L)`) and the drain an op: lower-aref expands the
drain and copies the lag onto the arrive it emits, lower-to-nvgpu waits for all but L wgmma
groups before it, the interpreters and the verifier's extractor read it.

Options:
  mma_depth: int | None = 1   MMA depth P >= 1 (1: every release stays right after its use;
                              None: chosen per loop, `chosen_depth`).

Chosen depth: 2 where every dot of the loop accumulates into a loop-carried value or a dot's
result, 1 where a dot accumulates into a value the loop computes otherwise (attention's O,
rescaled by the new row max before P V): a wgmma left in flight across the back edge under
that rescale makes ptxas wait for every wgmma of the loop (bench/NOTES.md, attention).

A loop whose MMA retirement a schedule already fixed (software-pipeline's rotation) keeps its
releases: the rotated key loop retires each P V within its iteration, so a lagged release would
free a slot for a wgmma the schedule no longer waits for (the proof refused exactly that).

Refused: input not produced by distribute, mma_depth < 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import ModuleOp, i32
from xdsl.ir import Block, BlockArgument
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.dialects import aref, tile
from tawa_xdsl.transforms.ws_utils import LAYOUT_OPS, consumer_groups, error, find_kernel

PASS = "mma-lag"


def _feeds_dot(get: aref.GetOp) -> bool:
    frontier = list(get.values)
    while frontier:
        value = frontier.pop()
        for use in value.uses:
            if isinstance(use.operation, tile.DotOp):
                return True
            if isinstance(use.operation, (*LAYOUT_OPS, tile.ExtractSliceOp)):
                frontier.append(use.operation.results[0])
    return False


def scheduled(loop: scf.ForOp) -> bool:
    """Whether a schedule pass already decided when the loop's MMAs retire (software-pipeline's
    rotation: `aref.IN_FLIGHT_ATTR` on its dots): their slots are released where that
    schedule retires them (place-releases), not MMA depth uses late."""
    return any(aref.IN_FLIGHT_ATTR in op.attributes for op in loop.body.walk())


CHOSEN_DEPTH = 2  # where the loop's accumulators are the MMAs' alone


def rescales_accumulator(loop: scf.ForOp) -> bool:
    """Whether a dot of `loop` accumulates into a value the loop computes by other ops."""
    for dot in loop.body.walk():
        if isinstance(dot, tile.DotOp):
            acc = dot.acc.owner
            if not isinstance(acc, (tile.DotOp, Block)) and loop.is_ancestor(acc):
                return True
    return False


def chosen_depth(loop: scf.ForOp) -> int:
    """The MMA depth mma-lag takes for `loop` when none is given (the module docstring)."""
    return 1 if rescales_accumulator(loop) else CHOSEN_DEPTH


def delay_releases(group: aref.GroupOp, depth: int | None) -> None:
    """Release every dot-feeding use of `group`'s loops min(depth, D) - 1 uses late (depth
    None: `chosen_depth` of each loop)."""
    for consumed in [op for op in group.body.walk() if isinstance(op, aref.ConsumedOp)]:
        ring_type = consumed.ring.type
        assert isinstance(ring_type, aref.RingType)
        loop = consumed.parent_op()
        index = consumed.index
        if not isinstance(loop, scf.ForOp) or not isinstance(index, BlockArgument):
            continue
        # Holding more uses than the ring has slots would deadlock the producer.
        lag_value = min(depth or chosen_depth(loop), ring_type.depth.data) - 1
        if lag_value == 0:
            continue
        if scheduled(loop):
            continue
        if index.block is not loop.body.block or index.index == 0:
            continue
        gets = [
            op
            for op in loop.body.block.ops
            if isinstance(op, aref.GetOp) and op.ring is consumed.ring and op.index is index
        ]
        if not gets or not _feeds_dot(gets[0]):
            continue
        slot = index.index - 1
        start, end = loop.iter_args[slot], loop.results[slot]
        # In the loop: release use i - (P-1) once i - start >= P-1.
        lag = arith.ConstantOp.from_int_and_width(lag_value, i32)
        older = arith.SubiOp(index, lag.result)
        done = arith.SubiOp(index, start)
        ready = arith.CmpiOp(done.result, lag.result, "sge")
        lag.result.name_hint, older.result.name_hint = "lag", "oldest"
        done.result.name_hint, ready.result.name_hint = "held", "full"
        late = aref.ConsumedOp(consumed.ring, older.result, lag_value)
        release = scf.IfOp(ready.result, [], [late, scf.YieldOp()])
        Rewriter.replace_op(consumed, [lag, older, done, ready, release])
        # After the loop: release the last min(trip count, L) uses.
        Rewriter.insert_op(
            aref.DrainOp(consumed.ring, start, end, lag_value), InsertPoint.after(loop)
        )


@dataclass(frozen=True)
class MmaLagPass(ModulePass):
    """Releases of dot-feeding uses lagged by min(P, D) - 1 uses, drained after the loop.

    Options:
      mma_depth: int | None = 1   MMA depth P: uses held before the oldest is released
                                  (None: chosen per loop).
    """

    name = "mma-lag"

    mma_depth: int | None = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernel = find_kernel(op, PASS)
        if self.mma_depth is not None and self.mma_depth < 1:
            raise error(kernel, PASS, f"mma-depth must be at least 1, got {self.mma_depth}")
        for group in consumer_groups(kernel, PASS):
            if self.mma_depth != 1:
                delay_releases(group, self.mma_depth)
