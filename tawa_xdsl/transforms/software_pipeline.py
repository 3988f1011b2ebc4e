"""`software-pipeline`: overlap the MMAs of the next iteration with this one's softmax.

In a consumer loop whose first dot (S = Q K^T) feeds a later dot of the same iteration
(O += P V, through the softmax) and depends on no loop-carried value but ring counters, the
ops of that first dot (its gets, the dot, its releases and counter steps: stage 0) are
issued one iteration ahead:

    %s0, %k0 = scf.if (lb < ub) { stage 0 for iteration lb } {tawa.stage = 0, tawa.peeled}
    scf.for %j = lb to ub iter_args(..., %s = %s0) {
      %s_next, ... = scf.if (j + step < ub) { stage 0 for j + step } {tawa.stage = 0}
      the rest of the body (stage 1) on the carried S of j
    }

The peeled copy runs under `lb < ub`, so a zero-trip loop (causal masking) issues nothing;
the else-branches yield a zero S and the counters unchanged. The stage attributes are the
decision as data: place-releases, lower-to-nvgpu (the MMA overlap) and the verifier's
extractor read them (the dialect verifies them, `aref.STAGE_ATTR`). Other loops are left
alone, and so is a loop whose dots do not feed each other within an iteration.

**Rotated** (`rotate`, FlashAttention-3's two-stage pipeline): stage 0 is everything but the
last dot (QK^T and the softmax, the rescale of O and P's conversion), stage 1 the last dot
(P V) with its ring traffic; the loop carries O and P (16-bit, in wgmma's A registers):

    %... = scf.if (lb < ub) { all of stage 0 for lb } {tawa.stage = 0, tawa.peeled}
    scf.for %j = lb to ub iter_args(..., %o, %p) {
      %s_next = scf.if (j + step < ub) { get K; S = QK^T {tawa.in_flight} } {tawa.stage = 0}
      get V; %o_new = P V on %p, %o {tawa.in_flight}
      %... = scf.if (j + step < ub) {                                {tawa.stage = 0}
        the softmax of j + 1 on %s_next ({tawa.mma_wait = 1} on the first op reading it,
        K released right after: QK^T(j+1) done, P V(j) in flight), the rescale of %o_new
        and the next P ({tawa.mma_wait = 0} on the first op reading %o_new or writing P)
      } else { yield the carried values, %o_new {tawa.mma_wait = 0} }
      release V
    }

so the softmax of j + 1 runs under P V(j) and nothing is in flight across the back edge (the
loop has no epilogue: its last iteration issues the last P V). The waits are data too
(`aref.IN_FLIGHT_ATTR`, `aref.MMA_WAIT_ATTR`), placed by data dependence (before the first
reader of a result, counting the groups issued after it that the reader does not need) and
read by lower-to-nvgpu. A loop that does not fit (its last dot's result read in the
iteration, its A operand read from a slot) gets the plain lookahead.

**Peeled** (`peel`, with `rotate`; `rotate_peeled`): the rotated loop runs to `ub - step`
with QK^T(j+1), P V(j) and the softmax of j + 1 unconditional, and the last iteration's stage
1 (get V, P V(last), waited for, release V) follows the loop under `lb < ub`, marked
`tawa.stage = 1, tawa.peeled`: no branch in the body, so no path leaves S undefined. The
verifier's extractor reads the pair as the rotated loop to `ub` (the stage is its last
iteration, the unguarded QK^T(j+1) its lookahead).

Options:
  rotate: bool = False   the rotated schedule where it fits.
  peel: bool = False     with rotate: the peeled last iteration.

Refused: input not produced by distribute.
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
    LAYOUT_OPS,
    add_iter_args,
    ancestor_in,
    consumer_groups,
    find_kernel,
)

PASS = "software-pipeline"


def _in_body(value: SSAValue, body: Block) -> Operation | None:
    owner = value.owner
    return ancestor_in(owner, body) if isinstance(owner, Operation) else None


def _ring_traffic(body: Block, counters: set[SSAValue]) -> list[Operation]:
    """The ops of `body` that release or step the ring counters `counters`: a stage's gets'
    consumed and counter increments."""
    return [
        op
        for op in body.ops
        if isinstance(op, aref.ConsumedOp)
        and op.index in counters
        or isinstance(op, arith.AddiOp)
        and op.lhs in counters
    ]


def _feeds_later_dot(dot: tile.DotOp, body: Block) -> bool:
    """Whether the result of `dot` reaches another dot of `body` within the iteration."""
    frontier: list[SSAValue] = [dot.result]
    seen: set[Operation] = set()
    while frontier:
        for use in frontier.pop().uses:
            user = ancestor_in(use.operation, body)
            if user is None or user in seen or isinstance(user, scf.YieldOp):
                continue
            if isinstance(user, tile.DotOp):
                return True
            seen.add(user)
            frontier.extend(user.results)
    return False


def _attention_loops(group: aref.GroupOp) -> list[tuple[scf.ForOp, tile.DotOp]]:
    """The loops whose first dot feeds a later dot of the same iteration (a loop written
    rotated, with P V(j-1) beside QK^T(j), already overlaps them and is left alone)."""
    found = []
    for loop in group.body.walk():
        if not isinstance(loop, scf.ForOp):
            continue
        body = loop.body.block
        dots = [op for op in body.ops if isinstance(op, tile.DotOp)]
        if len(dots) >= 2 and _feeds_later_dot(dots[0], body):
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
    stage.update(_ring_traffic(body, counters))
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


def _last_stage(loop: scf.ForOp, dot: tile.DotOp) -> list[Operation] | None:
    """The ops of stage 1 of a rotated loop: the last dot, the gets its B operand is read
    from (through layout ops), their releases and counter steps; None when B comes from
    anything else or a stage-1 value other than the dot's result and the counters leaves it."""
    body = loop.body.block
    stage: set[Operation] = {dot}
    counters: set[SSAValue] = set()
    frontier = [dot.rhs]
    while frontier:
        value = frontier.pop()
        owner = _in_body(value, body)
        if owner is None:
            continue
        if isinstance(owner, aref.GetOp) and isinstance(owner.index, BlockArgument):
            counters.add(owner.index)
        elif not isinstance(owner, LAYOUT_OPS):
            return None
        stage.add(owner)
        frontier.extend(owner.operands if not isinstance(owner, aref.GetOp) else [])
    stage.update(_ring_traffic(body, counters))
    for op in stage:
        for result in op.results:
            for use in result.uses:
                user = ancestor_in(use.operation, body)
                if user not in stage and not isinstance(user, scf.YieldOp):
                    return None  # read within the iteration: nothing to overlap it with
    return [op for op in body.ops if op in stage]


@dataclass
class _Rotation:
    """The parts of a loop body that `rotate_attention` rearranges."""

    first: tile.DotOp  # S = Q K^T
    last: tile.DotOp  # O += P V
    issue: list[Operation]  # the first dot with its gets and counter steps
    rest: list[Operation]  # the rest of stage 0 (the softmax), with the first dot's releases
    last_stage: list[Operation]  # stage 1: the last dot and its ring traffic
    acc_slot: int  # the carried value the last dot's result is yielded as

    def produced_in(self, value: SSAValue, ops: Sequence[Operation]) -> bool:
        owner = value.owner
        return isinstance(owner, Operation) and owner in ops


def _from_slot(value: SSAValue, body: Block) -> bool:
    """Whether `value` is read from a ring slot of this iteration (through layout ops)."""
    owner = _in_body(value, body)
    while isinstance(owner, LAYOUT_OPS):
        owner = _in_body(owner.operands[0], body)
    return isinstance(owner, aref.GetOp)


def _rotation(loop: scf.ForOp, first: tile.DotOp) -> _Rotation | None:
    """The parts of a loop with two dots whose last one takes its A operand from registers
    and whose result only the loop carries; None for any other loop."""
    body = loop.body.block
    dots = _dots(list(body.ops))
    if len(dots) != 2 or _from_slot(dots[-1].lhs, body):
        return None
    stage0 = _stage0(loop, first)
    last_stage = _last_stage(loop, dots[-1])
    terminator = body.last_op
    assert isinstance(terminator, scf.YieldOp)
    yielded = list(terminator.operands)
    if stage0 is None or last_stage is None or yielded.count(dots[-1].result) != 1:
        return None
    issue = [op for op in stage0 if not isinstance(op, aref.ConsumedOp)]
    rest = [op for op in body.ops if op not in issue and op not in last_stage]
    rest.remove(terminator)
    if not any(_reads(op, first.result) for op in rest):
        return None
    return _Rotation(first, dots[-1], issue, rest, last_stage, yielded.index(dots[-1].result))


def _cloned(ops: Sequence[Operation], mapper: dict[SSAValue, SSAValue]) -> list[Operation]:
    return [op.clone(value_mapper=mapper) for op in ops]


def _dots(ops: Sequence[Operation]) -> list[tile.DotOp]:
    return [op for op in ops if isinstance(op, tile.DotOp)]


def _stage1_slots(rot: _Rotation, yielded: Sequence[SSAValue]) -> list[int]:
    """The carried values only stage 1 changes (its ring counters)."""
    return [
        k for k, y in enumerate(yielded) if k != rot.acc_slot and rot.produced_in(y, rot.last_stage)
    ]


def _rest_slots(rot: _Rotation, yielded: Sequence[SSAValue]) -> list[int]:
    """The carried values the rest of stage 0 makes: those its ops yield, the accumulator
    of the next P V and (the last slot) its A operand."""
    made = [k for k, y in enumerate(yielded) if rot.produced_in(y, rot.rest)]
    return sorted({*made, rot.acc_slot, len(yielded)})


def _reads(op: Operation, value: SSAValue) -> bool:
    return any(v is value for inner in op.walk() for v in inner.operands)


def _retire_first(ops: list[Operation], s: SSAValue, newer: int) -> list[Operation]:
    """QK^T(j+1) must be done before the first op that reads S: `wait_group newer` there
    (the P V issued after it stays in flight), and K(j+1) released right after."""
    releases = [op for op in ops if isinstance(op, aref.ConsumedOp)]
    ops = [op for op in ops if op not in releases]
    reader = next(n for n, op in enumerate(ops) if _reads(op, s))
    ops[reader].attributes[aref.MMA_WAIT_ATTR] = IntegerAttr(newer, i32)
    return [*ops[: reader + 1], *releases, *ops[reader + 1 :]]


def _mark_retire(ops: Sequence[Operation], pv: SSAValue, next_a: SSAValue) -> None:
    """P V(j) must be done (`wait_group 0`) before the first op that reads its result or
    writes the next A operand (the loop carries it in the registers P V(j) reads)."""
    for op in ops:
        if _reads(op, pv) or next_a in op.results:
            op.attributes[aref.MMA_WAIT_ATTR] = IntegerAttr(0, i32)
            return


def _stage0_yields(
    rot: _Rotation,
    stage0: Sequence[Operation],
    yielded: Sequence[SSAValue],
    mapper: dict[SSAValue, SSAValue],
    inits: Sequence[SSAValue],
) -> list[SSAValue]:
    """After stage 0: each carried value, the next P V's accumulator and A operand."""
    values = [
        mapper.get(y, y) if rot.produced_in(y, stage0) else init
        for y, init in zip(yielded, inits, strict=True)
    ]
    values[rot.acc_slot] = mapper.get(rot.last.acc, rot.last.acc)
    return [*values, mapper.get(rot.last.lhs, rot.last.lhs)]


def _peel_first(
    rot: _Rotation, loop: scf.ForOp, stage0: Sequence[Operation], yielded: Sequence[SSAValue]
) -> tuple[arith.CmpiOp, list[SSAValue]]:
    """All of stage 0 for the first iteration in front of the loop, when it runs at all; it
    yields what stage 0 changes (the stage-1 counters start where they were). Returns the
    guard `lb < ub` and the rotated loop's initial values (the last: P V's A operand)."""
    body = loop.body.block
    iv, args = body.args[0], list(body.args[1:])
    a_type = rot.last.lhs.type
    assert isinstance(a_type, TensorType)
    inits = list(loop.iter_args)
    changed = [k for k in range(len(yielded) + 1) if k not in _stage1_slots(rot, yielded)]
    nonempty = arith.CmpiOp(loop.lb, loop.ub, "slt")
    mapper: dict[SSAValue, SSAValue] = {iv: loop.lb, **dict(zip(args, inits, strict=True))}
    then_ops = _cloned(stage0, mapper)
    first_values = _stage0_yields(rot, stage0, yielded, mapper, inits)
    then_ops.append(scf.YieldOp(*(first_values[k] for k in changed)))
    zero = _zero_tile(a_type)
    else_values = [*inits, zero[-1].results[0]]
    else_ops = [*zero, scf.YieldOp(*(else_values[k] for k in changed))]
    carried_types = [*(v.type for v in inits), a_type]
    prologue = scf.IfOp(nonempty, [carried_types[k] for k in changed], then_ops, else_ops)
    prologue.attributes[aref.STAGE_ATTR] = IntegerAttr(0, i32)
    prologue.attributes[aref.PEELED_ATTR] = UnitAttr()
    Rewriter.insert_op([nonempty, prologue], InsertPoint.before(loop))
    loop_inits = list(else_values)
    for k, result in zip(changed, prologue.results, strict=True):
        loop_inits[k] = result
    return nonempty, loop_inits


def _in_flight(ops: Sequence[Operation], mapper: dict[SSAValue, SSAValue]) -> list[Operation]:
    """Clones of `ops` whose dots are left in flight after their commit."""
    cloned = _cloned(ops, mapper)
    for dot in _dots(cloned):
        dot.attributes[aref.IN_FLIGHT_ATTR] = UnitAttr()
    return cloned


def _rest_for_next(
    rot: _Rotation,
    args: Sequence[SSAValue],
    yielded: Sequence[SSAValue],
    ahead: dict[SSAValue, SSAValue],
    now: dict[SSAValue, SSAValue],
    in_flight: int,
) -> list[Operation]:
    """The rest of stage 0 for j+1 on what P V(j) (`now`) yields: QK^T(j+1) waited for with
    `in_flight` P V groups still running, P V(j) retired before its result or A is touched."""
    for y, arg in zip(yielded, args, strict=True):
        if rot.produced_in(y, rot.last_stage):
            ahead[arg] = now[y]
    rest_ops = _retire_first(_cloned(rot.rest, ahead), ahead[rot.first.result], in_flight)
    _mark_retire(rest_ops, now[rot.last.result], ahead[rot.last.lhs])
    return rest_ops


def _replacing_loop(
    loop: scf.ForOp, ub: SSAValue, inits: Sequence[SSAValue], body: Block
) -> scf.ForOp:
    """A loop on `body` in front of `loop`, with its attributes, location and names."""
    new_loop = scf.ForOp(loop.lb, ub, loop.step, inits, body)
    new_loop.attributes.update(loop.attributes)
    new_loop.location = loop.location
    for old, new in zip(loop.results, new_loop.results, strict=False):
        new.name_hint = old.name_hint
    Rewriter.insert_op(new_loop, InsertPoint.before(loop))
    return new_loop


def rotate_attention(loop: scf.ForOp, first: tile.DotOp) -> scf.ForOp | None:
    """Rotate the loop so iteration j issues QK^T(j+1) and P V(j) back to back and then
    runs the softmax of j+1 (the module docstring, `rotate`). Returns the new loop, or None
    when the loop does not fit the pattern."""
    rot = _rotation(loop, first)
    if rot is None:
        return None
    body = loop.body.block
    iv, args = body.args[0], list(body.args[1:])
    terminator = body.last_op
    assert isinstance(terminator, scf.YieldOp)
    yielded = list(terminator.operands)
    a_operand = rot.last.lhs
    a_type = a_operand.type
    assert isinstance(a_type, TensorType)
    acc_in = rot.last.acc

    stage0 = [op for op in body.ops if op in rot.issue or op in rot.rest]
    _, loop_inits = _peel_first(rot, loop, stage0, yielded)
    carried_types = [v.type for v in loop_inits]
    # The rotated body.
    new_body = Block(arg_types=[iv.type, *carried_types])
    new_iv, new_args = new_body.args[0], list(new_body.args[1:])
    new_acc, new_a = new_args[rot.acc_slot], new_args[-1]
    nxt = arith.AddiOp(new_iv, loop.step)
    more = arith.CmpiOp(nxt.result, loop.ub, "slt")
    new_body.add_ops([nxt, more])
    # QK^T(j+1): issued, left in flight.
    carried = dict(zip(args, new_args[:-1], strict=True))
    ahead: dict[SSAValue, SSAValue] = {iv: nxt.result, **carried}
    issue_ops = _in_flight(rot.issue, ahead)
    issue_out = [rot.first.result] + [y for y in yielded if rot.produced_in(y, rot.issue)]
    issue_counters = [args[yielded.index(y)] for y in issue_out[1:]]
    issue_ops.append(scf.YieldOp(*(ahead[v] for v in issue_out)))
    qk_type = rot.first.result.type
    assert isinstance(qk_type, TensorType)
    zero_s = _zero_tile(qk_type)
    keep = [ahead[c] for c in issue_counters]
    issue_if = scf.IfOp(
        more.result,
        [qk_type, *(i32 for _ in keep)],
        issue_ops,
        [*zero_s, scf.YieldOp(zero_s[-1].results[0], *keep)],
    )
    issue_if.attributes[aref.STAGE_ATTR] = IntegerAttr(0, i32)
    issue_if.results[0].name_hint = f"{rot.first.result.name_hint or 'qk'}_next"
    new_body.add_op(issue_if)
    for value, result in zip(issue_out, issue_if.results, strict=True):
        ahead[value] = result
    # P V(j): on the carried accumulator and A operand.
    now: dict[SSAValue, SSAValue] = {iv: new_iv, **carried}
    now[acc_in], now[a_operand] = new_acc, new_a
    releases = [op for op in rot.last_stage if isinstance(op, aref.ConsumedOp)]
    last_ops = _in_flight([op for op in rot.last_stage if op not in releases], now)
    new_body.add_ops(last_ops)
    # The rest of stage 0 for j+1 (QK^T(j+1) waited for, P V(j) still in flight) ...
    rest_ops = _rest_for_next(rot, args, yielded, ahead, now, len(_dots(last_ops)))
    slots = _rest_slots(rot, yielded)
    outs = _stage0_yields(rot, stage0, yielded, ahead, new_args[:-1])
    rest_out = [outs[k] for k in slots]
    # The last iteration has no j+1: the carried values stay, O is the last P V's.
    unchanged = [now[rot.last.result] if k == rot.acc_slot else new_args[k] for k in slots]
    else_yield = scf.YieldOp(*unchanged)
    else_yield.attributes[aref.MMA_WAIT_ATTR] = IntegerAttr(0, i32)
    rest_if = scf.IfOp(
        more.result,
        [v.type for v in rest_out],
        [*rest_ops, scf.YieldOp(*rest_out)],
        [else_yield],
    )
    rest_if.attributes[aref.STAGE_ATTR] = IntegerAttr(0, i32)
    new_body.add_op(rest_if)
    new_body.add_ops(_cloned(releases, now))
    final = []
    rest_results = dict(zip(slots, rest_if.results, strict=True))
    for k, y in enumerate([*yielded, a_operand]):
        if k in rest_results:
            final.append(rest_results[k])
        elif y in issue_out:
            final.append(issue_if.results[issue_out.index(y)])
        else:
            final.append(now.get(y, y))
    new_body.add_op(scf.YieldOp(*final))
    new_loop = _replacing_loop(loop, loop.ub, loop_inits, new_body)
    Rewriter.replace_op(loop, [], list(new_loop.results[: len(loop.results)]))
    return new_loop


def rotate_peeled(loop: scf.ForOp, first: tile.DotOp) -> scf.ForOp | None:
    """`rotate_attention` with the last iteration's stage 1 (P V(last) and V's release)
    peeled after the loop, under `lb < ub`, and the loop running to `ub - step`: no guard in
    the body, so no path leaves S undefined and the printer zeroes nothing (H200: +4 to
    +10%, bench/NOTES.md round 17); `peel` of the pass. Returns the new loop, or None when
    the loop does not fit."""
    rot = _rotation(loop, first)
    if rot is None:
        return None
    body = loop.body.block
    iv, args = body.args[0], list(body.args[1:])
    terminator = body.last_op
    assert isinstance(terminator, scf.YieldOp)
    yielded = list(terminator.operands)
    stage0 = [op for op in body.ops if op in rot.issue or op in rot.rest]
    a_operand, acc_in = rot.last.lhs, rot.last.acc
    stage1_slots = _stage1_slots(rot, yielded)
    nonempty, loop_inits = _peel_first(rot, loop, stage0, yielded)
    carried_types = [v.type for v in loop_inits]
    last_start = arith.SubiOp(loop.ub, loop.step)
    Rewriter.insert_op(last_start, InsertPoint.before(loop))

    # The rotated body, for every iteration but the last.
    new_body = Block(arg_types=[iv.type, *carried_types])
    new_iv, new_args = new_body.args[0], list(new_body.args[1:])
    nxt = arith.AddiOp(new_iv, loop.step)
    new_body.add_op(nxt)
    # QK^T(j+1): issued, left in flight.
    carried = dict(zip(args, new_args[:-1], strict=True))
    ahead: dict[SSAValue, SSAValue] = {iv: nxt.result, **carried}
    new_body.add_ops(_in_flight(rot.issue, ahead))
    # P V(j): on the carried accumulator and A operand.
    now: dict[SSAValue, SSAValue] = {iv: new_iv, **carried}
    now[acc_in], now[a_operand] = new_args[rot.acc_slot], new_args[-1]
    releases = [op for op in rot.last_stage if isinstance(op, aref.ConsumedOp)]
    pv_ops = [op for op in rot.last_stage if op not in releases]
    last_ops = _in_flight(pv_ops, now)
    new_body.add_ops(last_ops)
    # The rest of stage 0 for j+1 (QK^T(j+1) waited for, P V(j) still in flight), then
    # V(j) released.
    new_body.add_ops(_rest_for_next(rot, args, yielded, ahead, now, len(_dots(last_ops))))
    new_body.add_ops(_cloned(releases, now))
    outs = _stage0_yields(rot, stage0, yielded, ahead, new_args[:-1])
    for k in stage1_slots:
        outs[k] = now[yielded[k]]
    new_body.add_op(scf.YieldOp(*outs))
    new_loop = _replacing_loop(loop, last_start.result, loop_inits, new_body)

    # Epilogue: stage 1 of the last iteration, P V(last), retired before V's release.
    ends = list(new_loop.results)
    last: dict[SSAValue, SSAValue] = dict(zip(args, ends[:-1], strict=True))
    last[acc_in], last[a_operand] = ends[rot.acc_slot], ends[-1]
    drained = [rot.acc_slot, *stage1_slots]
    tail_ops = [*_cloned(pv_ops, last), *_cloned(releases, last)]
    tail_ops.append(scf.YieldOp(*(last[yielded[k]] for k in drained)))
    epilogue = scf.IfOp(
        nonempty,
        [ends[k].type for k in drained],
        tail_ops,
        [scf.YieldOp(*(ends[k] for k in drained))],
    )
    epilogue.attributes[aref.STAGE_ATTR] = IntegerAttr(1, i32)
    epilogue.attributes[aref.PEELED_ATTR] = UnitAttr()
    Rewriter.insert_op(epilogue, InsertPoint.after(new_loop))
    results = ends[: len(loop.results)]
    for k, value in zip(drained, epilogue.results, strict=True):
        results[k] = value
        value.name_hint = loop.results[k].name_hint
    Rewriter.replace_op(loop, [], results)
    return new_loop


@dataclass(frozen=True)
class SoftwarePipelinePass(ModulePass):
    """Issue the first dot of iteration j + 1 before the rest of iteration j.

    Options:
      rotate: bool = False   stage 0 is everything but the last dot (FA3's two-stage
                             pipeline); else only the first dot and its ring traffic.
      peel: bool = False     with rotate: the last iteration's stage 1 peeled after the
                             loop (`rotate_peeled`).
    """

    name = "software-pipeline"

    rotate: bool = False
    peel: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rotate = rotate_peeled if self.peel else rotate_attention
        for group in consumer_groups(find_kernel(op, PASS), PASS):
            for loop, dot in _attention_loops(group):
                if not self.rotate or rotate(loop, dot) is None:
                    pipeline_attention(loop, dot)
