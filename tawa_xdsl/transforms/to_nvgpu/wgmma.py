"""`tile.dot` as a wgmma, and the wait groups that retire wgmmas.

The operand types choose the form: A and B read from smem slots (`slots.SmemView`) give an
SS `nvgpu.wgmma_mma_async` (B read N-major when its view is not transposed: an NxK slot
through `tile.trans` is K-major; A read M-major, `transpose_a`, when its view is transposed:
a KxM slot through `tile.trans`, 16-bit inputs only), A a register fragment
(`wgmma_operand_a`) an RS `nvgpu.wgmma_mma_async_rs`. Each dot is `wgmma_fence`, the wgmma,
`wgmma_commit_group`.

**Retiring.** A wgmma whose result only its loop carries (the accumulator of a K loop, O of
P V) stays in flight; the loop retires it: after the body's last commit
`wgmma_wait_group L`, L the smallest lag of the slot releases in the body (`release_lag`:
an arrive on slot `(i - L) mod D` needs only the MMAs older than L groups done), and
`wgmma_wait_group 0` after the loop. Any other result is read where it is (a softmax reads
S, a branch yields it), so its wgmma is retired right after its commit (`wait_group 0`).

**MMA overlap** (`overlap_mmas`, in a loop that `software-pipeline` gave a lookahead dot): the
lookahead wgmma (QK^T(j+1) of an attention) is issued at the top of iteration j and waited
for only after the loop's RS wgmma (P V(j)), so it runs under the fragment math of j:

    if (j+1 < ub) { wait K(j+1) full; QK^T(j+1); commit } else { S(j+1) = undef }
    softmax(j) on S(j)                           -- QK^T(j+1) in flight
    wait V(j) full; [arrive V(j-L) empty]        -- a lagged release (MMA depth > 1)
    O *= alpha; P V(j); commit
    wgmma_wait_group 0                           -- QK^T(j+1) and P V(j) done
    if (j+1 < ub) { arrive K(j+1) empty }; [arrive V(j) empty]

Nothing is in flight across the back edge and no register of an in-flight wgmma is read or
written: otherwise ptxas serializes every wgmma of the kernel (C7514 when O was rescaled with
P V(j-1) still in flight from the previous iteration, C7515 when the else-branch wrote zeros
into the lookahead's accumulator; hence the undefined fragment, which only reaches the loop's
unused result). No barrier op moves: `place-releases` put the releases
there at the aref level, so the mbarrier-level protocol `tawa-verify` proves after
`lower-aref` is the one the GPU runs.

**Ping-pong** (option `pingpong`, a group of two warpgroups, in every loop `overlap_mmas`
rewrote): the two warpgroups take turns issuing their MMAs (`ping_pong`).

**Placed waits** (a loop `software-pipeline` rotated): the schedule is data on the tile ops,
read here and nowhere decided: a dot with `tawa.in_flight` is not waited for after its
commit, an op with `tawa.mma_wait = N` gets `wgmma_wait_group N` right before it
(`wait_before`), and the loop keeps those waits (no closing wait after its last commit; the
lookahead's else-branch S is left undefined, it only reaches the branch on the same guard).
With `pingpong` the turn covers the issue of both MMAs only (`ping_pong_issue`), in turn
order round the group's two or three warpgroups.
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr, i32
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.dialects import aref, nvgpu, tile
from tawa_xdsl.dialects.nvgpu import PINGPONG_BARRIER_IDS, FragmentType
from tawa_xdsl.transforms.to_nvgpu.common import fail, insert_after, insert_before
from tawa_xdsl.transforms.to_nvgpu.slots import SmemView


def dot(op: tile.DotOp, views: dict[SSAValue, SmemView], dead: list[Operation]) -> None:
    """`tile.dot %a, %b, %acc` -> fence, an SS or RS wgmma, commit (and wait, if its result
    is read here: `stays_in_flight`)."""
    b = views.get(op.rhs)
    if b is None:
        raise fail(op, "needs B read from an smem slot")
    acc = fresh_acc(op, dead)
    a = views.get(op.lhs)
    if a is not None:
        if a.transposed and isinstance(nvgpu.smem_type(a.buf).element_type, nvgpu.FP8_TYPES):
            raise fail(op, "needs a K-major A for fp8 inputs (an untransposed MxK slot)")
        if a.transposed and a.row is not None or not a.transposed and a.column is not None:
            raise fail(op, "needs A slot rows (K-major) or columns (M-major) of all of K")
        mma: Operation = nvgpu.WgmmaMmaAsyncOp(
            a.buf, a.slot, b.buf, b.slot, acc, a_row=a.column if a.transposed else a.row,
            transpose_a=a.transposed, transpose_b=not b.transposed,
        )  # fmt: skip
    elif isinstance(op.lhs.type, FragmentType):
        mma = nvgpu.WgmmaMmaAsyncRsOp(op.lhs, b.buf, b.slot, acc, transpose_b=not b.transposed)
    else:
        raise fail(op, "needs A from an smem slot or a register fragment")
    tail: list[Operation] = [nvgpu.WgmmaCommitGroupOp()]
    if not stays_in_flight(op) and aref.IN_FLIGHT_ATTR not in op.attributes:
        tail.append(nvgpu.WgmmaWaitGroupOp(0))
    Rewriter.replace_op(op, [nvgpu.WgmmaFenceOp(), mma, *tail], [mma.results[0]])


def wait_before(op: Operation) -> None:
    """The `wgmma_wait_group N` a schedule pass placed before `op` (`tawa.mma_wait = N`),
    marked as placed so the loop keeps it (`schedule_loop`)."""
    depth = op.attributes.get(aref.MMA_WAIT_ATTR)
    if isinstance(depth, IntegerAttr):
        wait = nvgpu.WgmmaWaitGroupOp(depth.value.data)
        wait.attributes[aref.MMA_WAIT_ATTR] = depth
        insert_before(op, [wait])


def placed_waits(body: Block) -> bool:
    """Whether a schedule pass placed the waits of `body` (`wait_before`): its own, in its
    branches; those of a loop inside it (a persistent kernel's key loop) are that loop's."""
    return any(
        isinstance(op, nvgpu.WgmmaWaitGroupOp) and aref.MMA_WAIT_ATTR in op.attributes
        for op in _outside_loops(body)
    )


def _outside_loops(block: Block) -> Iterator[Operation]:
    """The ops of `block` and of the branches in it, not those of the loops in it."""
    for op in block.ops:
        yield op
        if not isinstance(op, scf.ForOp):
            for region in op.regions:
                for inner in region.blocks:
                    yield from _outside_loops(inner)


def stays_in_flight(op: tile.DotOp) -> bool:
    """Whether the dot's result only goes to the yield of the loop around it (a carried
    accumulator, retired by the loop); else the wgmma is retired after its commit."""
    block = op.parent_block()
    if block is None or not isinstance(block.parent_op(), scf.ForOp):
        return False
    uses = list(op.results[0].uses)
    return bool(uses) and all(u.operation is block.last_op for u in uses)


def fresh_acc(op: tile.DotOp, dead: list[Operation]) -> SSAValue:
    """The accumulator; a splat gets a clone of its own right before the dot, so the
    wgmma accumulates in place into registers nothing else reads (a splat hoisted out of
    the loop would otherwise be overwritten by the first iteration)."""
    acc = op.acc
    owner = acc.owner
    if isinstance(owner, nvgpu.FragmentSplatOp):
        clone = nvgpu.FragmentSplatOp(owner.value, owner.result.type)  # type: ignore[arg-type]
        insert_before(op, [clone])
        dead.append(owner)  # erased with the block's views once unused
        return clone.result
    return acc


def schedule_loop(loop: scf.ForOp, pingpong: bool = False, warpgroups: int = 1) -> None:
    """The wgmma schedule of a lowered loop: the MMA overlap (and ping-pong) where the loop
    has a lookahead dot, then the waits that retire the wgmmas it carries."""
    if overlap_mmas(loop) and pingpong:
        if warpgroups != 2:
            raise fail(
                loop,
                f"pingpong over an unrotated loop alternates two consumer warpgroups; this "
                f"group has {warpgroups} (rotate the loop: its turns go round up to three)",
            )
        ping_pong(loop)
    body = loop.body.block
    placed = placed_waits(body)
    if placed:
        for op in body.ops:
            if isinstance(op, scf.IfOp) and aref.stage_of(op) == 0 and op.results:
                _leave_undefined(op, loop)
        if pingpong and warpgroups in (2, 3):
            ping_pong_issue(loop, warpgroups)
    commits = [o for o in body.ops if isinstance(o, nvgpu.WgmmaCommitGroupOp)]
    if commits:
        # A body that already waits right after its last commit, or whose waits the
        # schedule placed, keeps its own waits.
        if not placed and not isinstance(commits[-1].next_op, nvgpu.WgmmaWaitGroupOp):
            insert_after(commits[-1], [nvgpu.WgmmaWaitGroupOp(release_lag(body))])
        insert_after(loop, [nvgpu.WgmmaWaitGroupOp(0)])


def release_lag(body: Block) -> int:
    """How many wgmma groups may stay in flight when the body's releases run: the smallest
    `tawa.lag` (what lower-aref copied from `aref.consumed ... lag(L)`) over the arrives in
    `body`; 0 for an unlagged release."""
    lags = []
    for op in body.walk():
        if isinstance(op, nvgpu.MBarrierArriveOp):
            lag = op.attributes.get(aref.LAG_ATTR)
            lags.append(lag.value.data if isinstance(lag, IntegerAttr) else 0)
    return min(lags) if lags else 0


def _lookahead_mma(body: Block) -> tuple[scf.IfOp, nvgpu.WgmmaWaitGroupOp] | None:
    """The lookahead of `body` (the `scf.if` that `software-pipeline` marked stage 0 and that
    yields the next iteration's S) and the `wait_group` its wgmma ends with."""
    for op in body.ops:
        if isinstance(op, scf.IfOp) and aref.stage_of(op) == 0 and op.results:
            then = op.true_region.block
            waits = [o for o in then.ops if isinstance(o, nvgpu.WgmmaWaitGroupOp)]
            if len(waits) == 1:
                return op, waits[0]
    return None


def overlap_mmas(loop: scf.ForOp) -> bool:
    """Keep QK^T(j+1) in flight under softmax(j) (see the module docstring).

    Applies to a loop body with one lookahead `scf.if` (an SS wgmma, `wait_group 0`, then the
    K slot's release) and one RS wgmma (P V) whose result is loop-carried; anything else is
    left as it is. Returns whether the loop was rewritten."""
    body = loop.body.block
    found = _lookahead_mma(body)
    rs = [op for op in body.ops if isinstance(op, nvgpu.WgmmaMmaAsyncRsOp)]
    terminator = body.last_op
    if found is None or len(rs) != 1 or not isinstance(terminator, scf.YieldOp):
        return False
    ahead, wait = found
    pv = rs[0]
    commit = pv.next_op
    if not isinstance(commit, nvgpu.WgmmaCommitGroupOp) or pv.result not in terminator.operands:
        return False
    # A release inside the lookahead needs QK^T(j+1) done there: keep the synchronous form.
    # (`place-releases` puts K(j+1)'s release after P V(j): this lowering
    # moves no release, so the protocol `tawa-verify` proves after `lower-aref` is the one the
    # GPU runs.)
    if any(isinstance(o, nvgpu.MBarrierArriveOp) for o in ahead.true_region.block.walk()):
        return False
    Rewriter.erase_op(wait)
    Rewriter.insert_op(nvgpu.WgmmaWaitGroupOp(0), InsertPoint.after(commit))
    _leave_undefined(ahead, loop)
    return True


def _leave_undefined(ahead: scf.IfOp, loop: scf.ForOp) -> None:
    """The lookahead's else-branch runs in the last iteration only, so the S(j+1) it yields
    reaches nothing but the loop's result: when that is unused, yield an undefined fragment
    instead of zeros. ptxas serializes every wgmma of a kernel that writes a wgmma
    accumulator's registers with other instructions in a branch (C7515)."""
    else_yield = ahead.false_region.block.last_op
    loop_yield = loop.body.block.last_op
    assert isinstance(else_yield, scf.YieldOp) and isinstance(loop_yield, scf.YieldOp)
    operands = list(else_yield.operands)
    for k, (result, value) in enumerate(zip(ahead.results, operands, strict=True)):
        uses = list(result.uses)
        if not isinstance(value.type, FragmentType) or not uses:
            continue
        unused = (
            len(uses) == 1
            and uses[0].operation is loop_yield
            and not loop.results[uses[0].index].uses
        )
        if not unused and not all(_under(use.operation, ahead.cond) for use in uses):
            continue
        undef = nvgpu.FragmentUndefOp(value.type)
        Rewriter.insert_op(undef, InsertPoint.before(else_yield))
        operands[k] = undef.result
    zeros = [v.owner for v in else_yield.operands if isinstance(v.owner, nvgpu.FragmentSplatOp)]
    else_yield.operands = operands
    for splat in zeros:
        if not splat.result.uses:
            scalar = splat.value.owner
            Rewriter.erase_op(splat)
            if isinstance(scalar, arith.ConstantOp) and not scalar.result.uses:
                Rewriter.erase_op(scalar)


def _under(op: Operation, cond: SSAValue) -> bool:
    """Whether `op` runs only when `cond` holds (in the then-region of an `scf.if` on it)."""
    while (parent := op.parent_op()) is not None:
        if isinstance(parent, scf.IfOp) and parent.cond is cond:
            if op.parent_region() is parent.true_region:
                return True
        op = parent
    return False


# The named barrier of consumer warpgroup 0 and 1 (1: lower-aref's producer barrier, 2: the
# TMA epilogue's): a warpgroup waits at its own for its turn and arrives at the other's.
PINGPONG_THREADS = 256  # one warpgroup syncs, the other arrives


def _by_warpgroup(wg: SSAValue, first: list[Operation], second: list[Operation]) -> list[Operation]:
    """`scf.if (wg == 0) { first } else { second }` (warpgroup-uniform), with its condition."""
    zero = arith.ConstantOp(IntegerAttr(0, i32))
    is_first = arith.CmpiOp(wg, zero, "eq")
    branch = scf.IfOp(is_first, [], [*first, scf.YieldOp()], [*second, scf.YieldOp()])
    return [zero, is_first, branch]


def _arrive(barrier: int) -> list[Operation]:
    return [nvgpu.NamedBarrierArriveOp(barrier, PINGPONG_THREADS)]


def _sync(barrier: int) -> list[Operation]:
    return [nvgpu.NamedBarrierSyncOp(barrier, PINGPONG_THREADS)]


def _guarded(cond: SSAValue, ops: list[Operation]) -> scf.IfOp:
    return scf.IfOp(cond, [], [*ops, scf.YieldOp()])


def ping_pong(loop: scf.ForOp) -> None:
    """Take turns with the other consumer warpgroup issuing MMAs (FlashAttention-3's
    warpgroup ping-pong), so that one's softmax runs under the other's wgmmas.

    A turn of iteration j runs from P V(j) to QK^T(j+2) (the lookahead at the top of j+1):

        if (wg == 1 && lb < ub) arrive(bar[0])          -- warpgroup 0 goes first
        for j:
          if (j > lb) arrive(bar[1 - wg])               -- end of the turn of j-1
          softmax(j) ...
          sync(bar[wg])                                 -- my turn: the other's turn is over
          P V(j); ...
        if (wg == 0 && lb < ub) arrive(bar[1])          -- end of warpgroup 0's last turn

    Each barrier completes once per turn: 128 threads sync at their own, the other 128
    arrive (n arrivals and n syncs on each for n iterations, none left pending). Both
    warpgroups run the same trip count (the loop bounds are per CTA)."""
    body = loop.body.block
    pv = next(op for op in body.ops if isinstance(op, nvgpu.WgmmaMmaAsyncRsOp))
    fence = pv.prev_op
    anchor = fence if isinstance(fence, nvgpu.WgmmaFenceOp) else pv
    ahead = next(op for op in body.ops if isinstance(op, scf.IfOp) and aref.stage_of(op) == 0)
    mine, other = PINGPONG_BARRIER_IDS[:2]
    wg = aref.WarpgroupIndexOp()
    runs = arith.CmpiOp(loop.lb, loop.ub, "slt")
    insert_before(loop, [wg, runs])

    insert_before(loop, [_guarded(runs.result, _by_warpgroup(wg.result, [], _arrive(mine)))])
    after = _by_warpgroup(wg.result, _arrive(other), [])
    Rewriter.insert_op(_guarded(runs.result, after), InsertPoint.after(loop))
    insert_before(anchor, _by_warpgroup(wg.result, _sync(mine), _sync(other)))
    later = arith.CmpiOp(body.args[0], loop.lb, "ne")
    top = _guarded(later.result, _by_warpgroup(wg.result, _arrive(other), _arrive(mine)))
    Rewriter.insert_op([later, top], InsertPoint.after(ahead))


def ping_pong_issue(loop: scf.ForOp, warpgroups: int = 2) -> None:
    """Take turns with the other consumer warpgroups issuing the MMAs of a rotated loop, in
    order 0, 1, ..., n-1, 0, ...: the turn covers the issue of QK^T(j+1) and P V(j) only, so
    one warpgroup's softmax runs under the others' wgmmas (FlashAttention-3's ping-pong with
    its two-stage pipeline; over three warpgroups its scheduler barrier):

        if (wg == n-1 && lb < ub) arrive(bar[0])        -- warpgroup 0 goes first
        for j:
          sync(bar[wg])                                 -- my turn
          QK^T(j+1); P V(j)
          if (wg < n-1) arrive(bar[wg+1]) else if (j+1 < ub) arrive(bar[0])
          softmax(j+1) ...

    Warpgroup w syncs n times at bar[w]; warpgroup w - 1 arrives there n times, and the last
    warpgroup n times at bar[0] (once before the loop, then in every iteration but the last):
    none is left pending."""
    body = loop.body.block
    pv = next(op for op in body.ops if isinstance(op, nvgpu.WgmmaMmaAsyncRsOp))
    commit = pv.next_op
    ahead = next(op for op in body.ops if isinstance(op, scf.IfOp) and aref.stage_of(op) == 0)
    assert isinstance(commit, nvgpu.WgmmaCommitGroupOp)
    ids = PINGPONG_BARRIER_IDS[:warpgroups]
    wg = aref.WarpgroupIndexOp()
    runs = arith.CmpiOp(loop.lb, loop.ub, "slt")
    insert_before(loop, [wg, runs])

    last = [[] for _ in ids[1:]] + [_arrive(ids[0])]
    insert_before(loop, [_guarded(runs.result, _per_warpgroup(wg.result, last))])
    insert_before(ahead, _per_warpgroup(wg.result, [_sync(b) for b in ids]))
    passes = [_arrive(b) for b in ids[1:]] + [[_guarded(ahead.cond, _arrive(ids[0]))]]
    insert_after(commit, _per_warpgroup(wg.result, passes))


def _per_warpgroup(wg: SSAValue, bodies: list[list[Operation]]) -> list[Operation]:
    """`bodies[w]` in warpgroup w: `scf.if (wg == 0) {...} else { scf.if (wg == 1) ... }`."""
    if len(bodies) == 1:
        return bodies[0]
    return _by_warpgroup(wg, bodies[0], _shifted(wg, bodies[1:]))


def _shifted(wg: SSAValue, bodies: list[list[Operation]]) -> list[Operation]:
    """`bodies[k]` in warpgroup k + 1 (the else-branch of `wg == 0`)."""
    if len(bodies) == 1:
        return bodies[0]
    one = arith.ConstantOp(IntegerAttr(1, i32))
    less = arith.SubiOp(wg, one.result)
    return [one, less, *_per_warpgroup(less.result, bodies)]
