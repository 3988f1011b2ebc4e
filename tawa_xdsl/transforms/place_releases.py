"""`place-releases`: release a software-pipelined loop's slots where the overlapped MMAs free
them.

`lower-to-nvgpu` keeps QK^T(j+1) and P V(j) in flight under softmax(j) (the MMA overlap of a
loop with a stage-0 lookahead), so the slots are free later than the synchronous `tile.dot`
suggests; this pass puts the releases, at the aref level, where the hardware frees them, and
every later level keeps that order (the barrier proof after `lower-aref` sees the protocol
the GPU runs). In a loop that `software-pipeline` gave a lookahead (`scf.if` with
`tawa.stage = 0` in the body):

* K(j+1), read by the lookahead QK^T: its release moves out of the lookahead to right after
  the body's last dot (P V(j)), under the lookahead's guard, in an `scf.if` that carries
  `tawa.stage = 0` too (it releases a use of stage 0, the next iteration's);
* V(j-L), a release `mma-lag` lagged by L >= 1 uses (`aref.consumed ... lag(L)`): released
  right before the carried accumulator is read (O *= alpha) or P V's A operand is computed,
  where the nvgpu level waits for P V(j-1).

Run after software-pipeline and mma-lag; it reads their data (stage, lag) and nothing else.

No options. Refused: input not produced by distribute.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.dialects import aref, tile
from tawa_xdsl.transforms.ws_utils import ancestor_in, consumer_groups, find_kernel

PASS = "place-releases"


def _is_lookahead(op: Operation) -> bool:
    """The stage-0 `scf.if` of a loop body that yields the next iteration's S."""
    return isinstance(op, scf.IfOp) and aref.stage_of(op) == 0 and bool(op.results)


def _holds_lagged_release(op: Operation) -> bool:
    """An `scf.if` whose then-block releases a use `mma-lag` lagged."""
    return isinstance(op, scf.IfOp) and any(
        isinstance(inner, aref.ConsumedOp) and inner.lag_value for inner in op.walk()
    )


def _operands_in(op: Operation, body: Block, after: Operation) -> list[Operation]:
    """The ops of `body` after `after` whose results `op` (transitively) reads, in order."""
    needed: set[Operation] = set()
    frontier = [op]
    while frontier:
        cur = frontier.pop()
        for operand in (v for inner in cur.walk() for v in inner.operands):
            owner = operand.owner
            if (
                isinstance(owner, Operation)
                and owner.parent_block() is body
                and owner not in needed
                and body.get_operation_index(owner) > body.get_operation_index(after)
            ):
                needed.add(owner)
                frontier.append(owner)
    return [o for o in body.ops if o in needed]


def place_attention_releases(loop: scf.ForOp) -> None:
    """Release the attention loop's slots where the overlapped MMA schedule frees them.

    See the module docstring; an unlagged release (MMA depth 1) stays after its dot."""
    body = loop.body.block
    ahead = next((op for op in body.ops if _is_lookahead(op)), None)
    dots = [op for op in body.ops if isinstance(op, tile.DotOp)]
    if ahead is None or not dots:
        return
    last = dots[-1]
    then = ahead.true_region.block
    released = [op for op in then.ops if isinstance(op, aref.ConsumedOp)]
    if released:
        for op in released:
            op.detach()
        late = scf.IfOp(ahead.cond, [], [*released, scf.YieldOp()])
        late.attributes[aref.STAGE_ATTR] = IntegerAttr(0, i32)  # releases uses of stage 0
        Rewriter.insert_op(late, InsertPoint.after(last))
    # P V(j-1) is done where its accumulator is read or its A registers are rewritten.
    terminator = body.last_op
    assert isinstance(terminator, scf.YieldOp)
    carried = [body.args[n + 1] for n, v in enumerate(terminator.operands) if v is last.result]
    touch = [ancestor_in(use.operation, body) for arg in carried for use in arg.uses]
    if isinstance(last.lhs.owner, Operation):
        touch.append(ancestor_in(last.lhs.owner, body))
    touch = [op for op in touch if op is not None]
    if not touch:
        return
    anchor = min(touch, key=body.get_operation_index)
    for release in [op for op in body.ops if _holds_lagged_release(op)]:
        if body.get_operation_index(release) < body.get_operation_index(anchor):
            continue
        for op in [*_operands_in(release, body, anchor), release]:
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(anchor))


@dataclass(frozen=True)
class PlaceReleasesPass(ModulePass):
    """Releases of software-pipelined loops where the overlapped MMAs free the slots."""

    name = "place-releases"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for group in consumer_groups(find_kernel(op, PASS), PASS):
            for loop in [o for o in group.body.walk() if isinstance(o, scf.ForOp)]:
                place_attention_releases(loop)
