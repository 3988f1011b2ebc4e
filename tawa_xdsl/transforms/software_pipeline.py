"""`software-pipeline`: overlap the first MMA of the next iteration with this one's softmax.

In a consumer loop whose first dot (S = Q K^T) feeds a later dot (O += P V) and depends on no
loop-carried value but ring counters, the ops of that first dot (its gets, the dot, its
releases and counter steps: stage 0) are issued one iteration ahead:

    %s0, %k0 = scf.if (lb < ub) { stage 0 for iteration lb } {tawa.stage = 0, tawa.peeled}
    scf.for %j = lb to ub iter_args(..., %s = %s0) {
      %s_next, ... = scf.if (j + step < ub) { stage 0 for j + step } {tawa.stage = 0}
      the rest of the body (stage 1) on the carried S of j
    }

The peeled copy runs under `lb < ub`, so a zero-trip loop (causal masking) issues nothing;
the else-branches yield a zero S and the counters unchanged. The stage attributes are the
decision as data: place-releases, lower-to-nvgpu (the MMA overlap) and the verifier's
extractor read them (the dialect verifies them, `aref.STAGE_ATTR`). Other loops are left
alone.

No options. Refused: input not produced by distribute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, TensorType, UnitAttr, i32
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.dialects import aref, tile
from tawa_xdsl.transforms.ws_utils import (
    add_iter_args,
    ancestor_in,
    consumer_groups,
    find_kernel,
)

PASS = "software-pipeline"


def _in_body(value: SSAValue, body: Block) -> Operation | None:
    owner = value.owner
    return ancestor_in(owner, body) if isinstance(owner, Operation) else None


def _attention_loops(group: aref.GroupOp) -> list[tuple[scf.ForOp, tile.DotOp]]:
    found = []
    for loop in group.body.walk():
        if not isinstance(loop, scf.ForOp):
            continue
        dots = [op for op in loop.body.block.ops if isinstance(op, tile.DotOp)]
        if len(dots) >= 2:
            found.append((loop, dots[0]))
    return found


def _stage0(loop: scf.ForOp, dot: tile.DotOp) -> list[Operation] | None:
    """The ops of the QK^T stage, in order, or None when the loop does not fit the pattern."""
    body = loop.body.block
    counters: set[SSAValue] = set()
    stage: set[Operation] = set()
    frontier: list[Operation] = [dot]
    while frontier:
        op = frontier.pop()
        if op in stage:
            continue
        stage.add(op)
        for operand in op.operands:
            if isinstance(operand, BlockArgument) and operand.block is body:
                if operand.index == 0:
                    continue
                if not isinstance(op, aref.GetOp):
                    return None  # depends on a loop-carried value
                counters.add(operand)
                continue
            top = _in_body(operand, body)
            if top is not None:
                frontier.append(top)
    # The ring traffic of the stage: its gets' consumed and counter steps.
    for op in body.ops:
        if isinstance(op, aref.ConsumedOp) and op.index in counters:
            stage.add(op)
        if isinstance(op, arith.AddiOp) and op.lhs in counters:
            stage.add(op)
    for op in stage:
        for result in op.results:
            for use in result.uses:
                user = ancestor_in(use.operation, body)
                if user in stage:
                    continue
                if result is dot.result or (
                    isinstance(user, scf.YieldOp) and isinstance(op, arith.AddiOp)
                ):
                    continue
                return None
    return [op for op in body.ops if op in stage]


def _zero_tile(type_: TensorType) -> list[Operation]:
    scalar = arith.ConstantOp(FloatAttr(0.0, type_.element_type))  # type: ignore[arg-type]
    return [scalar, tile.SplatOp(scalar.result, type_)]


def _clone_stage(
    stage: Sequence[Operation], mapper: dict[SSAValue, SSAValue], block: Block
) -> None:
    for op in stage:
        block.add_op(op.clone(value_mapper=mapper))


def pipeline_attention(loop: scf.ForOp, dot: tile.DotOp) -> scf.ForOp | None:
    """Peel the first QK^T and issue QK^T(j+1) in iteration j (see the module docstring).

    Returns the rewritten loop, or None when the loop does not fit the pattern."""
    stage = _stage0(loop, dot)
    if stage is None:
        return None
    body = loop.body.block
    steps = [op for op in stage if isinstance(op, arith.AddiOp)]
    counter_args = [step.lhs for step in steps]
    terminator = body.last_op
    assert isinstance(terminator, scf.YieldOp)
    counter_slots = [list(terminator.operands).index(step.result) for step in steps]
    qk_type = dot.result.type
    assert isinstance(qk_type, TensorType)
    result_types = [qk_type, *(i32 for _ in steps)]

    def guarded(cond: SSAValue, iv: SSAValue, counters: Sequence[SSAValue]) -> scf.IfOp:
        then_block, else_block = Block(), Block()
        mapper: dict[SSAValue, SSAValue] = {body.args[0]: iv}
        mapper.update(zip(counter_args, counters, strict=True))
        _clone_stage(stage, mapper, then_block)
        then_block.add_op(scf.YieldOp(mapper[dot.result], *(mapper[s.result] for s in steps)))
        zero = _zero_tile(qk_type)
        else_block.add_ops([*zero, scf.YieldOp(zero[-1].results[0], *counters)])
        return scf.IfOp(cond, result_types, Region(then_block), Region(else_block))

    # Prologue: the first QK^T, when the loop runs at all.
    inits = [loop.iter_args[slot] for slot in counter_slots]
    nonempty = arith.CmpiOp(loop.lb, loop.ub, "slt")
    prologue = guarded(nonempty.result, loop.lb, inits)
    prologue.attributes[aref.STAGE_ATTR] = IntegerAttr(0, i32)
    prologue.attributes[aref.PEELED_ATTR] = UnitAttr()
    Rewriter.insert_op([nonempty, prologue], InsertPoint.before(loop))
    for slot, value in zip(counter_slots, prologue.results[1:], strict=True):
        loop.operands = [*loop.operands[: 3 + slot], value, *loop.operands[4 + slot :]]
    new_loop, (s_cur,) = add_iter_args(loop, [prologue.results[0]])
    s_cur.name_hint = dot.result.name_hint
    body = new_loop.body.block
    # In the loop: the QK^T of the next iteration first, then the rest on the carried S.
    first = body.first_op
    assert first is not None
    nxt = arith.AddiOp(body.args[0], new_loop.step)
    more = arith.CmpiOp(nxt.result, new_loop.ub, "slt")
    ahead = guarded(more.result, nxt.result, counter_args)
    ahead.attributes[aref.STAGE_ATTR] = IntegerAttr(0, i32)
    Rewriter.insert_op([nxt, more, ahead], InsertPoint.before(first))
    ahead.results[0].name_hint = f"{dot.result.name_hint or 'qk'}_next"
    dot.result.replace_all_uses_with(s_cur)
    terminator = body.last_op
    assert isinstance(terminator, scf.YieldOp)
    operands = list(terminator.operands)
    for slot, value in zip(counter_slots, ahead.results[1:], strict=True):
        operands[slot] = value
    operands[-1] = ahead.results[0]
    terminator.operands = operands
    for op in reversed(stage):  # every outside use was rewired above
        Rewriter.erase_op(op, safe_erase=False)
    return new_loop


@dataclass(frozen=True)
class SoftwarePipelinePass(ModulePass):
    """Issue the first dot of iteration j + 1 before the rest of iteration j (no options)."""

    name = "software-pipeline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for group in consumer_groups(find_kernel(op, PASS), PASS):
            for loop, dot in _attention_loops(group):
                pipeline_attention(loop, dot)
