"""`pipeline`: multi-granularity pipelining of a distributed (aref-level) kernel.

Runs on the output of `distribute`, in this order:

1. stages (coarse pipeline): every ring used inside a loop gets depth D, so the producer runs
   up to D uses ahead of the consumers (0 keeps what insert-aref chose).
2. consumers = 2 (cooperative warpgroups): the consumer group runs on 2 warpgroups that split
   the M rows of each output tile. A dataflow analysis finds the row dimension of every
   consumer tile (dot lhs/acc/result rows, through elementwise ops, reductions, expand_dims,
   broadcast, reshape, trans and loop-carried values); each warpgroup w takes rows
   [w*R, w*R + R) of every ring payload (`tile.extract_slice` after each get), builds its own
   R-row splats and aranges, and writes its rows with `tile.store_slice`; R = M / 2.
3. attention (consumer software pipelining): in a consumer loop whose first dot (S = Q K^T)
   feeds a later dot (O += P V) and depends on no loop-carried value but ring counters, the
   first QK^T is peeled in front of the loop (under `lb < ub`, so zero-trip loops from causal
   masking stay correct) and each iteration j issues the QK^T of j+1 (under `j+step < ub`)
   before the softmax and PV of j, carrying S to the next iteration.
4. mma-depth P (fine-grained MMA pipeline): in a consumer loop, the slot of a ring feeding a
   dot is released P-1 uses late: after the dot of use i the consumer releases use i-P+1
   (`scf.if` on i - i_start >= P-1), and a drain loop after the loop releases the last
   min(trip count, P-1) uses; so at most P uses are held, and P larger than the trip count
   releases everything in the drain. A ring of depth D holds at most min(P, D) uses (more
   would deadlock the producer).
5. attention release placement (`place_attention_releases`): in a loop pipelined by 3, the
   releases go where the overlapped MMA schedule of `lower-to-nvgpu` frees the slots: K(j+1)
   after the body's last dot (P V(j)), under the lookahead's guard; a release lagged by 4
   (V(j-L)) right before the first op that reads P V's carried accumulator or computes its
   A operand. Later levels keep this order, so the barrier proof after `lower-aref` covers
   the protocol the GPU runs.

Options:
  stages: int = 0       ring depth D for looped rings (0: keep).
  mma_depth: int = 1    MMA depth P >= 1.
  consumers: int = 1    cooperative consumer warpgroups: 1 or 2.
  attention: bool = True  pipeline attention-like consumer loops (others are left alone).

Persistence is a tile-level rewrite (the `persistent` pass, run before partition, or
`tawa-warp-specialize{persistent=true}`), so the use counters run across tiles by construction.

Refused: input not produced by distribute, stages < 0, mma_depth < 1, consumers not in
{1, 2}, a tile whose rows cannot be split (a reduction along the rows, a dot whose B operand
depends on the rows, row counts that differ or are not a multiple of 64 per warpgroup).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import (
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    TensorType,
    i32,
)
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.dialects import aref, tile
from tawa_xdsl.transforms.ws_utils import LAYOUT_OPS, add_iter_args, error, find_kernel

PASS = "pipeline"


def _const(value: int, block_or_point: InsertPoint) -> SSAValue:
    op = arith.ConstantOp.from_int_and_width(value, i32)
    Rewriter.insert_op(op, block_or_point)
    return op.result


def _specialized(kernel: func.FuncOp) -> aref.WarpSpecializeOp:
    for op in kernel.body.block.ops:
        if isinstance(op, aref.WarpSpecializeOp):
            return op
    raise error(kernel, PASS, "no aref.warp_specialize in the kernel; run distribute first")


def _consumer_groups(ws: aref.WarpSpecializeOp) -> list[aref.GroupOp]:
    return [g for g in ws.groups() if g.role.data == aref.Role.CONSUMER]


# ---------------------------------------------------------------------- 1. ring depth


def set_stages(kernel: func.FuncOp, stages: int) -> None:
    for create in [op for op in kernel.body.block.ops if isinstance(op, aref.CreateOp)]:
        ring = create.ring.type
        assert isinstance(ring, aref.RingType)
        looped = any(_in_loop(use.operation) for use in create.ring.uses)
        if not looped or ring.depth.data == stages:
            continue
        Rewriter.replace_value_with_new_type(
            create.ring, aref.RingType(ring.payload_types(), stages)
        )


def _in_loop(op: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, aref.GroupOp):
        if isinstance(parent, scf.ForOp):
            return True
        parent = parent.parent_op()
    return False


# ------------------------------------------------------------- 2. cooperative consumers

# An equality between a dim of one value and a dim of another.
_Link = tuple[SSAValue, int, SSAValue, int]


def _tensor_rank(value: SSAValue) -> int | None:
    return len(value.type.get_shape()) if isinstance(value.type, TensorType) else None


def _links(op: Operation) -> list[_Link]:
    links: list[_Link] = []
    if isinstance(op, tile.ReduceOp):
        axis = op.axis.value.data
        for d in range(len(tile.shape_of(op.source))):
            if d != axis:
                links.append((op.source, d, op.result, d - (d > axis)))
    elif isinstance(op, tile.ExpandDimsOp):
        axis = op.axis.value.data
        for d in range(len(tile.shape_of(op.source))):
            links.append((op.source, d, op.result, d + (d >= axis)))
    elif isinstance(op, tile.BroadcastOp):
        for d, size in enumerate(tile.shape_of(op.source)):
            if size != 1:
                links.append((op.source, d, op.result, d))
    elif isinstance(op, tile.ReshapeOp):
        src = [(d, n) for d, n in enumerate(tile.shape_of(op.source)) if n != 1]
        dst = [(d, n) for d, n in enumerate(tile.shape_of(op.result)) if n != 1]
        if [n for _, n in src] == [n for _, n in dst]:
            links += [(op.source, a, op.result, b) for (a, _), (b, _) in zip(src, dst, strict=True)]
    elif isinstance(op, tile.TransOp):
        links += [(op.source, 0, op.result, 1), (op.source, 1, op.result, 0)]
    elif isinstance(op, tile.DotOp):
        links += [(op.lhs, 0, op.result, 0), (op.acc, 0, op.result, 0)]
        links += [(op.acc, 1, op.result, 1)]
    elif isinstance(op, scf.ForOp):
        terminator = op.body.block.last_op
        assert terminator is not None
        for k, init in enumerate(op.iter_args):
            for d in range(_tensor_rank(init) or 0):
                arg, out = op.body.block.args[k + 1], op.results[k]
                links += [(init, d, arg, d), (arg, d, terminator.operands[k], d)]
                links += [(terminator.operands[k], d, out, d)]
    elif op.name.startswith(("arith.", "math.")) or isinstance(
        op, tile.ConvertOp | tile.WhereOp | tile.CmpOp
    ):
        for result in op.results:
            rank = _tensor_rank(result)
            for operand in op.operands:
                if rank is not None and _tensor_rank(operand) == rank:
                    links += [(operand, d, result, d) for d in range(rank)]
    return links


def _row_axes(group: aref.GroupOp) -> dict[SSAValue, int]:
    axes: dict[SSAValue, int] = {}
    ops = list(group.body.walk())
    links = [link for op in ops for link in _links(op)]

    def assign(value: SSAValue, dim: int, why: Operation) -> bool:
        if axes.get(value, dim) != dim:
            raise error(
                why,
                PASS,
                f"cannot split rows across consumer warpgroups: a tile of "
                f"{value.type} would be split along dims {axes[value]} and {dim}",
            )
        changed = value not in axes
        axes[value] = dim
        return changed

    for op in ops:
        if isinstance(op, tile.DotOp):
            assign(op.lhs, 0, op)
            assign(op.acc, 0, op)
            assign(op.result, 0, op)
    changed = True
    while changed:
        changed = False
        for a, da, b, db in links:
            if axes.get(a) == da:
                changed |= assign(b, db, a.owner if isinstance(a.owner, Operation) else group)
            if axes.get(b) == db:
                changed |= assign(a, da, b.owner if isinstance(b.owner, Operation) else group)
    for op in ops:
        if isinstance(op, tile.DotOp) and op.rhs in axes:
            raise error(op, PASS, "cannot split rows: the dot's B operand depends on the rows")
        if isinstance(op, tile.ReduceOp) and axes.get(op.source) == op.axis.value.data:
            raise error(op, PASS, "cannot split rows: a reduction runs along the rows")
    return axes


def split_rows(group: aref.GroupOp, consumers: int) -> None:
    axes = _row_axes(group)
    sizes = {value.type.get_shape()[d] for value, d in axes.items()}  # type: ignore[attr-defined]
    if not axes:
        return
    if len(sizes) != 1 or next(iter(sizes)) % (64 * consumers):
        raise error(
            group,
            PASS,
            f"cannot split rows {sorted(sizes)} into {consumers} warpgroups of a "
            "multiple of 64 rows",
        )
    rows = next(iter(sizes)) // consumers
    block = group.body.block
    first = block.first_op
    assert first is not None
    wg = aref.WarpgroupIndexOp()
    rows_c = arith.ConstantOp.from_int_and_width(rows, i32)
    row0 = arith.MuliOp(wg.result, rows_c.result)
    zero = arith.ConstantOp.from_int_and_width(0, i32)
    wg.result.name_hint, row0.result.name_hint = "wg", "row0"
    Rewriter.insert_op([wg, rows_c, row0, zero], InsertPoint.before(first))

    stores = [
        (op, axes[op.value])
        for op in group.body.walk()
        if isinstance(op, tile.StoreOp) and op.value in axes
    ]
    for value, dim in list(axes.items()):
        assert isinstance(value.type, TensorType)
        shape = list(value.type.get_shape())
        shape[dim] = rows
        owner = value.owner
        if isinstance(owner, aref.GetOp):
            offsets = [row0.result if d == dim else zero.result for d in range(len(shape))]
            part = tile.ExtractSliceOp(value, offsets, shape)
            part.result.name_hint = value.name_hint
            Rewriter.insert_op(part, InsertPoint.after(owner))
            value.replace_uses_with_if(part.result, lambda use, p=part: use.operation is not p)
        elif isinstance(owner, tile.ArangeOp):
            start = owner.start.value.data
            local = tile.ArangeOp(start, start + rows)
            shift = tile.SplatOp(row0.result, local.result.type)  # type: ignore[arg-type]
            total = arith.AddiOp(local.result, shift.result)
            total.result.name_hint = value.name_hint
            Rewriter.replace_op(owner, [local, shift, total])
        elif isinstance(owner, arith.ConstantOp):
            raise error(owner, PASS, "cannot split a dense tensor constant across warpgroups")
        else:
            Rewriter.replace_value_with_new_type(value, TensorType(value.type.element_type, shape))
    for store, dim in stores:
        _split_store(store, dim, row0.result)
    group.properties["warpgroups"] = IntegerAttr(consumers, i32)


def _split_store(op: tile.StoreOp, dim: int, row0: SSAValue) -> None:
    offsets = list(op.offsets)
    shifted = arith.AddiOp(offsets[dim], row0)
    Rewriter.insert_op(shifted, InsertPoint.before(op))
    offsets[dim] = shifted.result
    Rewriter.replace_op(op, tile.StoreSliceOp(op.desc, offsets, op.value))


# ----------------------------------------------------------- 3. attention pipelining


def _in_body(value: SSAValue, body: Block) -> Operation | None:
    owner = value.owner
    if isinstance(owner, Operation):
        top = owner
        while top is not None and top.parent_block() is not body:
            top = top.parent_op()
        return top
    return None


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
                user = _in_body_op(use.operation, body)
                if user in stage:
                    continue
                if result is dot.result or (
                    isinstance(user, scf.YieldOp) and isinstance(op, arith.AddiOp)
                ):
                    continue
                return None
    return [op for op in body.ops if op in stage]


def _in_body_op(op: Operation, body: Block) -> Operation:
    top = op
    while top.parent_block() is not body:
        parent = top.parent_op()
        assert parent is not None
        top = parent
    return top


def _zero_tile(type_: TensorType) -> list[Operation]:
    scalar = arith.ConstantOp(FloatAttr(0.0, type_.element_type))  # type: ignore[arg-type]
    return [scalar, tile.SplatOp(scalar.result, type_)]


def _clone_stage(
    stage: Sequence[Operation], mapper: dict[SSAValue, SSAValue], block: Block
) -> None:
    for op in stage:
        block.add_op(op.clone(value_mapper=mapper))


def pipeline_attention(loop: scf.ForOp, dot: tile.DotOp) -> scf.ForOp | None:
    """Peel the first QK^T and issue QK^T(j+1) in iteration j (module docstring, 3).

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


def _lookahead(body: Block) -> scf.IfOp | None:
    """The in-loop lookahead `scf.if (iv + step < ub)` that `pipeline_attention` built."""
    for op in body.ops:
        if isinstance(op, scf.IfOp) and op.results and op.false_region.blocks:
            if any(isinstance(o, aref.GetOp) for o in op.true_region.block.ops):
                return op
    return None


def _lagged_release(op: Operation) -> bool:
    """`scf.if (held >= L) { aref.consumed ... }` of `delay_releases`."""
    if not isinstance(op, scf.IfOp) or op.false_region.blocks:
        return False
    cond = op.cond.owner
    return (
        isinstance(cond, arith.CmpiOp)
        and cond.predicate.value.data in (5, 9)
        and any(isinstance(o, aref.ConsumedOp) for o in op.true_region.block.ops)
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

    `lower-to-nvgpu` keeps QK^T(j+1) and P V(j) in flight under softmax(j)
    (`lower_to_nvgpu_attention.overlap_mmas`), so the slots are free later than the
    synchronous `tile.dot` suggests; the releases are placed here, at the aref level, where
    the hardware frees them, and every later level keeps that order (the barrier proof after
    `lower-aref` sees the protocol the GPU runs):

    * K(j+1), read by the lookahead QK^T: released after P V(j) (`scf.if (j+step < ub)`
      after the body's last dot; the nvgpu level waits for QK^T(j+1) right before it);
    * V(j-L), a release `delay_releases` lagged by L >= 1 uses: released right before the
      carried accumulator is read (O *= alpha) or P V's A operand is computed, where the
      nvgpu level waits for P V(j-1) (right before this release).

    An unlagged release (MMA depth 1) stays after its dot."""
    body = loop.body.block
    ahead = _lookahead(body)
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
        Rewriter.insert_op(late, InsertPoint.after(last))
    # P V(j-1) is done where its accumulator is read or its A registers are rewritten.
    terminator = body.last_op
    assert isinstance(terminator, scf.YieldOp)
    carried = [body.args[n + 1] for n, v in enumerate(terminator.operands) if v is last.result]
    touch = [_in_body_op(use.operation, body) for arg in carried for use in arg.uses]
    if isinstance(last.lhs.owner, Operation) and _in_body(last.lhs, body) is not None:
        touch.append(_in_body_op(last.lhs.owner, body))
    if not touch:
        return
    anchor = min(touch, key=body.get_operation_index)
    for release in [op for op in body.ops if _lagged_release(op)]:
        if body.get_operation_index(release) < body.get_operation_index(anchor):
            continue
        for op in [*_operands_in(release, body, anchor), release]:
            op.detach()
            Rewriter.insert_op(op, InsertPoint.before(anchor))


# ------------------------------------------------------------------- 4. MMA depth


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


def delay_releases(group: aref.GroupOp, depth: int) -> None:
    for consumed in [op for op in group.body.walk() if isinstance(op, aref.ConsumedOp)]:
        ring_type = consumed.ring.type
        assert isinstance(ring_type, aref.RingType)
        # Holding more uses than the ring has slots would deadlock the producer.
        lag_value = min(depth, ring_type.depth.data) - 1
        if lag_value == 0:
            continue
        loop = consumed.parent_op()
        index = consumed.index
        if not isinstance(loop, scf.ForOp) or not isinstance(index, BlockArgument):
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
        release = scf.IfOp(
            ready.result, [], [aref.ConsumedOp(consumed.ring, older.result), scf.YieldOp()]
        )
        Rewriter.replace_op(consumed, [lag, older, done, ready, release])
        # After the loop: release the last min(trip count, P-1) uses.
        lag_out = arith.ConstantOp.from_int_and_width(lag_value, i32)
        one = arith.ConstantOp.from_int_and_width(1, i32)
        back = arith.SubiOp(end, lag_out.result)
        low = arith.MaxSIOp(back.result, start)
        lag_out.result.name_hint, low.result.name_hint = "lag", "drain_from"
        drain_body = Block(arg_types=[i32])
        drain_body.args[0].name_hint = "j"
        drain_body.add_ops([aref.ConsumedOp(consumed.ring, drain_body.args[0]), scf.YieldOp()])
        drain = scf.ForOp(low.result, end, one.result, [], Region(drain_body))
        Rewriter.insert_op([lag_out, one, back, low, drain], InsertPoint.after(loop))


# ------------------------------------------------------------------------- the pass


def pipeline_kernel(
    kernel: func.FuncOp, stages: int, mma_depth: int, consumers: int, attention: bool
) -> None:
    if stages < 0:
        raise error(kernel, PASS, f"stages must be 0 (keep) or at least 1, got {stages}")
    if mma_depth < 1:
        raise error(kernel, PASS, f"mma-depth must be at least 1, got {mma_depth}")
    if consumers not in (1, 2):
        raise error(kernel, PASS, f"consumers must be 1 or 2 warpgroups, got {consumers}")
    ws = _specialized(kernel)
    if stages:
        set_stages(kernel, stages)
    for group in _consumer_groups(ws):
        if consumers > 1:
            split_rows(group, consumers)
        pipelined = []
        if attention:
            for loop, dot in _attention_loops(group):
                new_loop = pipeline_attention(loop, dot)
                if new_loop is not None:
                    pipelined.append(new_loop)
        if mma_depth > 1:
            delay_releases(group, mma_depth)
        for loop in pipelined:
            place_attention_releases(loop)


@dataclass(frozen=True)
class PipelinePass(ModulePass):
    """Ring depth, cooperative consumers, attention pipelining and MMA depth.

    Options:
      stages: int = 0         ring depth D of looped rings (0 keeps insert-aref's).
      mma_depth: int = 1      MMA depth P: uses held before the oldest is released.
      consumers: int = 1      cooperative consumer warpgroups (1 or 2).
      attention: bool = True  software-pipeline attention consumer loops.
    """

    name = "pipeline"

    stages: int = 0
    mma_depth: int = 1
    consumers: int = 1
    attention: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        pipeline_kernel(
            find_kernel(op, PASS), self.stages, self.mma_depth, self.consumers, self.attention
        )
