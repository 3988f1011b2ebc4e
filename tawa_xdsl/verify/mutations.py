"""Programmatic mutations of lowered IR (mbarrier or nvgpu level) for the mutation corpus.

Each `Mutation` changes a module in place: a planted barrier bug of one of the classes of
issue 13 (`broken`), or a change that keeps the protocol correct (`broken=False`: ops
reordered, an equivalent slot expression, a harmless constant). A mutation that finds
nothing to change in a module raises `NotApplicable`. `MUTATIONS` lists them by name;
`tests/unit/test_mutation_corpus.py` applies them to the GEMM, attention and causal attention,
persistent and not, at both levels, and checks the proof and a dynamic oracle (the mbarrier or
nvgpu interpreter) against each. `NAMED_BARRIER_MUTATIONS` (named barriers and TMA-store
staging, nvgpu level) are planted by `tests/unit/test_mutation_named_barriers.py`;
`TILE_CONDITION_MUTATIONS` (rings under a uniform condition in a loop of tiles) and
`SOME_LOOPS_MUTATIONS` (a ring used by some loops of a sequence), both at the nvgpu level,
by `tests/unit/test_mutation_conditions.py`.

    from tawa_xdsl.verify.mutations import MUTATIONS
    MUTATIONS["parity_flipped"].apply(module)      # module: lowered IR, changed in place
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, i32
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl import protocol
from tawa_xdsl.dialects import aref, nvgpu
from tawa_xdsl.verify.extract import (
    Group,
    Ring,
    _ancestors,
    find_rings,
    is_thread_guard,
    kernel_groups,
)
from tawa_xdsl.verify.named_barriers import NAMED, uniform_key


class NotApplicable(Exception):
    """The module has nothing this mutation changes."""


@dataclass(frozen=True)
class Mutation:
    """A named change of lowered IR; `unseen` says why a dynamic oracle cannot observe it."""

    name: str
    kind: str  # the class of issue 13 it plants (or "safe")
    apply: Callable[[ModuleOp], None]
    broken: bool = True
    unseen: str = ""


class Site:
    """The rings and warp groups of a lowered module, and its ops by role."""

    def __init__(self, module: ModuleOp):
        self.module = module
        self.rings: list[Ring] = find_rings(module)
        self.groups: list[Group] = kernel_groups(module, [r.full for r in self.rings])

    def group(self, role: str) -> Group:
        return next(g for g in self.groups if g.role == role)

    def ops(self, kind: type | tuple, role: str) -> list[Operation]:
        found = [op for op in self.group(role).body.walk() if isinstance(op, kind)]
        if not found:
            raise NotApplicable(f"no {kind} in the {role}")
        return found

    def barrier(self, kind: type | tuple, role: str, which: str) -> list[Operation]:
        bars = {id(getattr(r, which)) for r in self.rings}
        found = [op for op in self.ops(kind, role) if id(op.bars) in bars]  # type: ignore[attr-defined]
        if not found:
            raise NotApplicable(f"no {which} barrier op in the {role}")
        return found

    def releases(self, lagged: bool | None = None) -> list[Operation]:
        found = [
            op
            for op in self.barrier(nvgpu.MBarrierArriveOp, "consumer", "empty")
            if lagged is None or (aref.LAG_ATTR in op.attributes) == lagged
        ]
        if not found:
            raise NotApplicable("no such release")
        return found

    def main_loop(self, role: str) -> scf.ForOp:
        """The innermost loop holding the role's last wait outside its peeled stages."""
        waits = [
            w
            for w in self.ops(nvgpu.MBarrierWaitOp, role)
            if not any(aref.PEELED_ATTR in o.attributes for o in _ancestors(w))
        ]
        if not waits:
            raise NotApplicable("no wait outside the peeled stages")
        wait = waits[-1]
        loop = _enclosing(wait, scf.ForOp)
        if loop is None:
            raise NotApplicable("no loop around the waits")
        return loop

    def drain(self) -> scf.ForOp:
        loops = [o for o in self.ops(scf.ForOp, "consumer") if aref.DRAIN_ATTR in o.attributes]
        if not loops:
            raise NotApplicable("no drain")
        return loops[0]  # type: ignore[return-value]

    def warpgroup_index(self, before: Operation) -> SSAValue:
        """A warpgroup index at this level, defined right before `before`."""
        op: Operation = (
            aref.WarpgroupIndexOp()
            if any(isinstance(o, aref.GroupOp) for o in self.module.walk())
            else nvgpu.WarpgroupIndexOp()
        )
        Rewriter.insert_op(op, InsertPoint.before(before))
        return op.results[0]


def _enclosing(op: Operation, kind: type) -> Operation | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, kind):
        parent = parent.parent_op()
    return parent


def _const(value: int, before: Operation) -> SSAValue:
    c = arith.ConstantOp(IntegerAttr(value, i32))
    Rewriter.insert_op(c, InsertPoint.before(before))
    return c.result


def _insert(ops: list[Operation], before: Operation) -> SSAValue:
    Rewriter.insert_op(ops, InsertPoint.before(before))
    return ops[-1].results[0]


def _offset_slot(op: Operation, index: int, offset: int) -> None:
    """Replace operand `index` of `op` (a `(i + c) mod D` slot) by `(i + c + offset) mod D`."""
    rem = op.operands[index].owner
    assert isinstance(rem, arith.RemUIOp | arith.RemSIOp)
    plus = arith.AddiOp(rem.lhs, _const(offset, op))
    new = arith.RemUIOp(plus.result, rem.rhs)
    op.operands[index] = _insert([plus, new], op)


def _rebase_slot(op: Operation, index: int, base: SSAValue) -> None:
    """Replace operand `index` of `op` by `base mod D`."""
    rem = op.operands[index].owner
    assert isinstance(rem, arith.RemUIOp | arith.RemSIOp)
    op.operands[index] = _insert([arith.RemUIOp(base, rem.rhs)], op)


def _parity_offset(wait: nvgpu.MBarrierWaitOp, offset: int) -> None:
    """The parity `((i + c) div D) & 1 [^ 1]` of `wait` with `c + offset`."""
    value, ops, flip = wait.parity, [], None
    op = value.owner
    if isinstance(op, arith.XOrIOp):
        flip, op = op.rhs, op.lhs.owner
    assert isinstance(op, arith.AndIOp)
    div = op.lhs.owner
    assert isinstance(div, arith.DivUIOp | arith.DivSIOp)
    plus = arith.AddiOp(div.lhs, _const(offset, wait))
    ops = [plus, arith.DivUIOp(plus.result, div.rhs)]
    ops.append(arith.AndIOp(ops[-1].results[0], op.rhs))
    if flip is not None:
        ops.append(arith.XOrIOp(ops[-1].results[0], flip))
    wait.operands[2] = _insert(ops, wait)


def _detach_with_slot(op: Operation) -> list[Operation]:
    """`op` and the ops computing its slot operand in its block, detached (in order)."""
    rem = op.operands[1].owner
    moved = [op]
    if isinstance(rem, Operation) and rem.parent_block() is op.parent_block():
        moved.insert(0, rem)
        modulus = rem.operands[1].owner
        if isinstance(modulus, Operation) and modulus.parent_block() is op.parent_block():
            moved.insert(0, modulus)
    for o in moved:
        o.detach()
    return moved


# ------------------------------------------------------------------------ the mutations


def lag_guard_on_program_id(m: ModuleOp) -> None:
    guard = _lag_guard(Site(m))
    pid = [o for o in Site(m).ops(Operation, "consumer") if o.name == "tile.program_id"]
    if not pid:
        raise NotApplicable("no program id")
    guard.operands[0] = pid[0].results[0]


def lag_guard_on_warpgroup(m: ModuleOp) -> None:
    site = Site(m)
    guard = _lag_guard(site)
    guard.operands[0] = site.warpgroup_index(guard)


def _lag_guard(site: Site) -> arith.CmpiOp:
    """The `held >= L` comparison guarding the first lagged release."""
    guard = _enclosing(site.releases(lagged=True)[0], scf.IfOp)
    while guard is not None:
        cond = guard.cond.owner  # type: ignore[attr-defined]
        if isinstance(cond, arith.CmpiOp) and cond.predicate.value.data in (5, 9):
            return cond
        guard = _enclosing(guard, scf.IfOp)
    raise NotApplicable("no lag guard")


def drain_removed(m: ModuleOp) -> None:
    Rewriter.erase_op(Site(m).drain())


def drain_wrong_start(m: ModuleOp) -> None:
    """Drain from one use earlier: one release too many."""
    drain = Site(m).drain()
    low = drain.lb.owner
    assert isinstance(low, arith.MaxSIOp)
    sub = low.lhs.owner
    assert isinstance(sub, arith.SubiOp)
    lag = protocol.constant_of(sub.rhs)
    assert lag is not None
    sub.operands[1] = _const(lag + 1, sub)


def drain_wrong_slot(m: ModuleOp) -> None:
    drain = Site(m).drain()
    arrive = next(o for o in drain.walk() if isinstance(o, nvgpu.MBarrierArriveOp))
    _offset_slot(arrive, 1, 1)


def slot_on_induction_variable(m: ModuleOp) -> None:
    """The consumer's wait and reads use the loop's induction variable (restarts per tile)."""
    site = Site(m)
    loop = site.main_loop("consumer")
    iv = loop.body.block.args[0]
    wait = next(o for o in loop.body.block.ops if isinstance(o, nvgpu.MBarrierWaitOp))
    base = protocol.match_slot(wait.slot)
    assert base is not None
    for op in loop.body.block.walk():
        for n, operand in enumerate(op.operands):
            if operand == base.base and op.name in ("arith.remui", "arith.divui"):
                op.operands[n] = iv


def counter_restarts_per_tile(m: ModuleOp) -> None:
    """The consumer's inner loop counter starts at 0 in every tile."""
    loop = Site(m).main_loop("consumer")
    outer = _enclosing(loop, scf.ForOp)
    if outer is None:
        raise NotApplicable("not persistent")
    for n, init in enumerate(loop.iter_args):
        if init.type == i32:
            loop.operands[3 + n] = _const(0, loop)
            return
    raise NotApplicable("no counter")


def slot_plus_warpgroup(m: ModuleOp) -> None:
    site = Site(m)
    wait = site.barrier(nvgpu.MBarrierWaitOp, "consumer", "full")[-1]
    rem = wait.slot.owner
    assert isinstance(rem, arith.RemUIOp)
    wg = site.warpgroup_index(wait)
    plus = arith.AddiOp(rem.lhs, wg)
    wait.operands[1] = _insert([plus, arith.RemUIOp(plus.result, rem.rhs)], wait)


def slot_far_offset(m: ModuleOp) -> None:
    """The consumer's wait on slot `(i + 5 D + 1) mod D`: five turns and one slot off."""
    site = Site(m)
    wait = site.barrier(nvgpu.MBarrierWaitOp, "consumer", "full")[-1]
    depth = wait.bars.type.num_barriers  # type: ignore[attr-defined]
    if depth == 1:
        raise NotApplicable("a one-slot ring has no other slot")
    _offset_slot(wait, 1, 5 * depth + 1)


def parity_one_turn(m: ModuleOp) -> None:
    """The consumer's parity one ring turn off: the other phase."""
    wait = Site(m).barrier(nvgpu.MBarrierWaitOp, "consumer", "full")[-1]
    _parity_offset(wait, wait.bars.type.num_barriers)  # type: ignore[attr-defined]


def parity_flipped(m: ModuleOp) -> None:
    wait = Site(m).barrier(nvgpu.MBarrierWaitOp, "producer", "empty")[0]
    par = wait.parity.owner
    if isinstance(par, arith.XOrIOp):
        wait.operands[2] = par.lhs
    else:
        one = _const(1, wait)
        wait.operands[2] = _insert([arith.XOrIOp(wait.parity, one)], wait)


def parity_on_other_counter(m: ModuleOp) -> None:
    """The producer's parity counts the loop's induction variable, its slot the uses."""
    site = Site(m)
    wait = site.barrier(nvgpu.MBarrierWaitOp, "producer", "empty")[0]
    loop = _enclosing(wait, scf.ForOp)
    if loop is None:
        raise NotApplicable("no loop")
    div = wait.parity.owner
    while not isinstance(div, arith.DivUIOp):
        div = div.operands[0].owner  # type: ignore[union-attr]
    one = _const(1, div)
    shifted = arith.AddiOp(loop.body.block.args[0], one)  # a different count: iv + 1
    Rewriter.insert_op(shifted, InsertPoint.before(div))
    div.operands[0] = shifted.result


def counter_starts_at_one(m: ModuleOp) -> None:
    loop = Site(m).main_loop("consumer")
    for n, init in enumerate(loop.iter_args):
        if init.type == i32:
            loop.operands[3 + n] = _insert([arith.AddiOp(init, _const(1, loop))], loop)
            return
    raise NotApplicable("no loop-carried counter")


def counter_not_incremented(m: ModuleOp) -> None:
    loop = Site(m).main_loop("consumer")
    block = loop.body.block
    yield_op = block.last_op
    assert isinstance(yield_op, scf.YieldOp)
    for n, arg in enumerate(block.args[1:]):
        if arg.type == i32 and protocol.split_offset(yield_op.operands[n]) == (arg, 1):
            yield_op.operands[n] = arg
            return
    raise NotApplicable("no incremented counter")


def release_out_of_lookahead(m: ModuleOp) -> None:
    """The stage-0 release of the lookahead moved after its `scf.if`."""
    for release in Site(m).releases(lagged=False):
        guard = _enclosing(release, scf.IfOp)
        while guard is not None and aref.stage_of(guard) != 0:
            guard = _enclosing(guard, scf.IfOp)
        if guard is None or aref.is_peeled(guard) or guard.results:
            continue
        body = guard.true_region.blocks[0]  # type: ignore[attr-defined]
        moved = [o for o in body.ops if not isinstance(o, scf.YieldOp)]
        for o in moved:
            o.detach()
        Rewriter.insert_op(moved, InsertPoint.after(guard))
        return
    raise NotApplicable("no release in a lookahead")


def wait_on_unused_barrier(m: ModuleOp) -> None:
    """The consumer waits on a fresh barrier array nobody arrives on."""
    site = Site(m)
    wait = site.barrier(nvgpu.MBarrierWaitOp, "consumer", "full")[-1]
    ring = next(r for r in site.rings if r.full == wait.bars)
    alloc = nvgpu.MBarrierAllocOp(ring.full.type)  # type: ignore[arg-type]
    Rewriter.insert_op(alloc, InsertPoint.after(ring.alloc))
    init = next(o for o in m.walk() if isinstance(o, nvgpu.MBarrierInitOp) and o.bars == ring.full)
    Rewriter.insert_op(nvgpu.MBarrierInitOp(alloc.bars, 1), InsertPoint.after(init))
    wait.operands[0] = alloc.bars


def consumer_waits_on_empty(m: ModuleOp) -> None:
    site = Site(m)
    wait = site.barrier(nvgpu.MBarrierWaitOp, "consumer", "full")[-1]
    ring = next(r for r in site.rings if r.full == wait.bars)
    wait.operands[0] = ring.empty


def arrive_at_top_level(m: ModuleOp) -> None:
    """An extra release of slot 0 at the kernel's top level, after the CTA barrier."""
    site = Site(m)
    ring = site.rings[-1]
    sync = next(o for o in m.walk() if isinstance(o, nvgpu.CtaBarrierOp))
    zero = arith.ConstantOp(IntegerAttr(0, i32))
    arrive = nvgpu.MBarrierArriveOp(ring.empty, zero.result)
    Rewriter.insert_op([zero, arrive], InsertPoint.after(sync))


def release_in_extra_loop(m: ModuleOp) -> None:
    """The consumer's release inside a loop of two trips: two arrivals."""
    release = Site(m).releases()[-1]
    zero, two, one = (arith.ConstantOp(IntegerAttr(v, i32)) for v in (0, 2, 1))
    Rewriter.insert_op([zero, two, one], InsertPoint.before(release))
    body = Block(arg_types=[i32])
    loop = scf.ForOp(zero.result, two.result, one.result, [], body)
    Rewriter.insert_op(loop, InsertPoint.before(release))
    release.detach()
    body.add_ops([release, scf.YieldOp()])


def copy_on_other_barrier(m: ModuleOp) -> None:
    """A TMA copy completes on another ring's full barrier (or, with one ring, on empty)."""
    site = Site(m)
    tma = site.ops(nvgpu.TmaLoadOp, "producer")[-1]
    ring = next(r for r in site.rings if r.full == tma.bars)  # type: ignore[attr-defined]
    others = [r.full for r in site.rings if r is not ring and r.full.type == ring.full.type]
    tma.operands[_bars_index(tma)] = others[0] if others else ring.empty


def _bars_index(tma: Operation) -> int:
    return next(n for n, v in enumerate(tma.operands) if isinstance(v.type, nvgpu.MBarrierType))


def copy_removed(m: ModuleOp) -> None:
    """The last copy of the producer is gone: its slot buffer is read but never filled."""
    tma = Site(m).ops(nvgpu.TmaLoadOp, "producer")[-1]
    Rewriter.erase_op(tma)


def second_init_in_consumer(m: ModuleOp) -> None:
    """The consumer initializes the full barrier again when it starts."""
    site = Site(m)
    ring = site.rings[0]
    count = next(
        o.count.value.data
        for o in m.walk()
        if isinstance(o, nvgpu.MBarrierInitOp) and o.bars == ring.full
    )
    group = site.group("consumer")
    first = group.body.first_op
    assert first is not None
    Rewriter.insert_op(nvgpu.MBarrierInitOp(ring.full, count), InsertPoint.before(first))


def second_init_at_top(m: ModuleOp) -> None:
    init = next(o for o in m.walk() if isinstance(o, nvgpu.MBarrierInitOp))
    Rewriter.insert_op(init.clone(), InsertPoint.after(init))


def init_fence_removed(m: ModuleOp) -> None:
    for fence in [o for o in m.walk() if isinstance(o, nvgpu.FenceMBarrierInitOp)]:
        Rewriter.erase_op(fence)


def ring_attribute_removed(m: ModuleOp) -> None:
    alloc = Site(m).rings[-1].alloc
    del alloc.attributes[aref.RING_ATTR]


def buffer_too_few_slots(m: ModuleOp) -> None:
    site = Site(m)
    ring = next((r for r in site.rings if r.depth > 1), None)
    if ring is None:
        raise NotApplicable("no ring deeper than 1")
    buf = ring.buffers[0]
    kind = buf.type
    assert isinstance(kind, nvgpu.SmemType)
    smaller = nvgpu.SmemType(
        [kind.slot_count - 1, *kind.slot_shape], kind.element_type, kind.swizzle_bytes
    )
    alloc = buf.owner
    assert isinstance(alloc, nvgpu.SmemAllocOp)
    new = nvgpu.SmemAllocOp(smaller)
    for key, value in alloc.properties.items():
        new.properties[key] = value
    Rewriter.insert_op(new, InsertPoint.after(alloc))
    buf.replace_all_uses_with(new.buf)
    Rewriter.erase_op(alloc)


def trips_depend_on_warpgroup(m: ModuleOp) -> None:
    """The consumer's loop runs `ub - wg` iterations (warpgroup-dependent)."""
    site = Site(m)
    loop = site.main_loop("consumer")
    wg = site.warpgroup_index(loop)
    loop.operands[1] = _insert([arith.SubiOp(loop.ub, wg)], loop)


def loop_repeated(m: ModuleOp) -> None:
    """The consumer runs its main loop twice, the second continuing the first's counter."""
    loop = Site(m).main_loop("consumer")
    if any(isinstance(o, scf.IfOp) and aref.is_peeled(o) for o in loop.parent_block().ops):  # type: ignore[union-attr]
        raise NotApplicable("a lookahead loop")
    again = loop.clone()
    Rewriter.insert_op(again, InsertPoint.after(loop))
    for n, result in enumerate(loop.results):
        again.operands[3 + n] = result


def wait_duplicated(m: ModuleOp) -> None:
    wait = Site(m).barrier(nvgpu.MBarrierWaitOp, "consumer", "full")[-1]
    Rewriter.insert_op(wait.clone(), InsertPoint.after(wait))


def producer_wait_duplicated(m: ModuleOp) -> None:
    wait = Site(m).barrier(nvgpu.MBarrierWaitOp, "producer", "empty")[0]
    Rewriter.insert_op(wait.clone(), InsertPoint.after(wait))


def consumer_arrives_on_full(m: ModuleOp) -> None:
    site = Site(m)
    release = site.releases()[-1]
    ring = next(r for r in site.rings if r.empty == release.bars)  # type: ignore[attr-defined]
    release.operands[0] = ring.full


def tx_halved(m: ModuleOp) -> None:
    arrive = Site(m).ops(nvgpu.MBarrierArriveExpectTxOp, "producer")[0]
    arrive.tx_bytes = IntegerAttr(arrive.tx_bytes.value.data // 2, i32)  # type: ignore[attr-defined]


def count_low(m: ModuleOp) -> None:
    site = Site(m)
    empties = {id(r.empty) for r in site.rings}
    init = next(
        o for o in m.walk() if isinstance(o, nvgpu.MBarrierInitOp) and id(o.bars) in empties
    )
    if init.count.value.data < 2:
        raise NotApplicable("one consumer warpgroup")
    init.count = IntegerAttr(init.count.value.data - 1, i32)


def release_before_read(m: ModuleOp) -> None:
    """The consumer's unlagged release moved right after its wait, before the reads."""
    site = Site(m)
    release = site.releases(lagged=False)[-1]
    ring = next(r for r in site.rings if r.empty == release.bars)  # type: ignore[attr-defined]
    waits = site.barrier(nvgpu.MBarrierWaitOp, "consumer", "full")
    wait = next(o for o in waits if o.bars == ring.full)  # type: ignore[attr-defined]
    release.operands[1] = wait.slot  # type: ignore[attr-defined]
    guard = release.parent_op()
    moved = guard if isinstance(guard, scf.IfOp) and is_thread_guard(guard.cond) else release
    moved.detach()
    Rewriter.insert_op(moved, InsertPoint.after(wait))


# ---------------------------------------------------------------- nvgpu-level mutations


def wgmma_wait_removed(m: ModuleOp) -> None:
    """The wait_group in front of the first release is gone."""
    site = Site(m)
    release = site.releases()[0]
    waits = [o for o in site.ops(nvgpu.WgmmaWaitGroupOp, "consumer") if _precedes(o, release)]
    if not waits:
        raise NotApplicable("no wgmma wait_group")
    Rewriter.erase_op(waits[-1])


def wgmma_wait_deeper(m: ModuleOp) -> None:
    """The wait_group in front of the first release leaves one more group in flight."""
    site = Site(m)
    release = site.releases()[0]
    waits = [o for o in site.ops(nvgpu.WgmmaWaitGroupOp, "consumer") if _precedes(o, release)]
    if not waits:
        raise NotApplicable("no wgmma wait_group")
    wait = waits[-1]
    wait.pending = IntegerAttr(wait.pending.value.data + 1, i32)  # type: ignore[attr-defined]


def wgmma_wait_under_condition(m: ModuleOp) -> None:
    """The wait_group between the consumer's loop and its drain runs in program 0 only."""
    site = Site(m)
    drain = site.drain()
    block = drain.parent_block()
    waits = [
        o
        for o in site.ops(nvgpu.WgmmaWaitGroupOp, "consumer")
        if o.parent_block() is block
        and block.get_operation_index(o) < block.get_operation_index(drain)
    ]
    pids = [o for o in site.ops(Operation, "consumer") if o.name == "tile.program_id"]
    if not waits or not pids:
        raise NotApplicable("no wait_group before the drain, or no program id")
    wait = waits[-1]
    first = arith.CmpiOp(pids[0].results[0], _const(0, wait), "eq")
    Rewriter.insert_op(first, InsertPoint.before(wait))
    body = Block()
    Rewriter.insert_op(scf.IfOp(first.result, [], [body]), InsertPoint.before(wait))
    wait.detach()
    body.add_ops([wait, scf.YieldOp()])


def _precedes(a: Operation, b: Operation) -> bool:
    loop = _enclosing(b, scf.ForOp)
    order = [o for o in (loop.walk() if loop else [])]
    return a in order and order.index(a) < order.index(b)


def release_by_every_thread(m: ModuleOp) -> None:
    """The consumer's release taken out of its one-thread guard."""
    release = Site(m).releases()[-1]
    guard = release.parent_op()
    if not (isinstance(guard, scf.IfOp) and is_thread_guard(guard.cond)):
        raise NotApplicable("no thread guard")
    release.detach()
    Rewriter.insert_op(release, InsertPoint.before(guard))


# --------------------------------------------------------------------- safe mutations


def copies_swapped(m: ModuleOp) -> None:
    """The producer issues its first two copies in the other order (independent ops)."""
    copies = Site(m).ops(nvgpu.TmaLoadOp, "producer")
    pairs = [(a, b) for a, b in zip(copies, copies[1:], strict=False) if a.next_op is b]
    if not pairs:
        raise NotApplicable("no adjacent copies")
    a, b = pairs[0]
    a.detach()
    Rewriter.insert_op(a, InsertPoint.after(b))


def slot_plus_depth(m: ModuleOp) -> None:
    """The consumer's wait on slot `(i + D) mod D`: the same slot, written differently."""
    wait = Site(m).barrier(nvgpu.MBarrierWaitOp, "consumer", "full")[-1]
    _offset_slot(wait, 1, wait.bars.type.num_barriers)  # type: ignore[attr-defined]


def parity_two_turns(m: ModuleOp) -> None:
    """The consumer's parity two ring turns on: the same phase."""
    wait = Site(m).barrier(nvgpu.MBarrierWaitOp, "consumer", "full")[-1]
    _parity_offset(wait, 2 * wait.bars.type.num_barriers)  # type: ignore[attr-defined]


def extra_constant(m: ModuleOp) -> None:
    wait = Site(m).barrier(nvgpu.MBarrierWaitOp, "consumer", "full")[-1]
    _const(12345, wait)


# ------------------------------------------------- sequences of loops and uniform conditionals
# Planted in kernels whose rings are used by several loops in sequence (the use counter
# continuing from one loop into the next), some under a uniform `scf.if` (issue 13 item 5).


def _segment_loops(site: Site, role: str) -> list[scf.ForOp]:
    """The loops (not drains) directly around the role's ring waits, in program order."""
    loops: list[scf.ForOp] = []
    for wait in site.ops(nvgpu.MBarrierWaitOp, role):
        loop = _enclosing(wait, scf.ForOp)
        if isinstance(loop, scf.ForOp) and loop not in loops:
            loops.append(loop)
    if len(loops) < 2:
        raise NotApplicable(f"the {role} has no sequence of loops")
    return loops


def _counter_index(loop: scf.ForOp) -> int:
    """The loop-carried value that is a use counter (incremented by one, maybe in an if)."""
    block = loop.body.block
    yielded = block.last_op
    assert isinstance(yielded, scf.YieldOp)
    for n, arg in enumerate(block.args[1:]):
        step = yielded.operands[n]
        if isinstance(step.owner, scf.IfOp):
            results = list(step.owner.results)
            step = step.owner.true_region.blocks[0].last_op.operands[results.index(step)]  # type: ignore[union-attr]
        if arg.type == i32 and protocol.split_offset(step) == (arg, 1):
            return n
    raise NotApplicable("no use counter")


def _after(op: Operation, anchor: Operation, order: dict[int, int]) -> bool:
    return order[id(op)] > max(order[id(o)] for o in anchor.walk())


def _restart_next_segment(
    m: ModuleOp, role: str, start: Callable[[SSAValue], list[Operation]]
) -> None:
    """Every use of the first loop's counter result past the loop (and its drain) reads the
    value `start(result)` computes instead: the next segment no longer continues the first."""
    site = Site(m)
    order = _order(site, role)
    first = _segment_loops(site, role)[0]
    result = first.results[_counter_index(first)]
    anchor: Operation = first
    for op in first.parent_block().ops:  # type: ignore[union-attr]
        if (
            isinstance(op, scf.ForOp)
            and aref.DRAIN_ATTR in op.attributes
            and _after(op, first, order)
        ):
            anchor = op
            break
    uses = [u for u in list(result.uses) if _after(u.operation, anchor, order)]
    if not uses:
        raise NotApplicable("the counter does not continue")
    ops = start(result)
    Rewriter.insert_op(ops, InsertPoint.after(anchor))
    for use in uses:
        use.operation.operands[use.index] = ops[-1].results[0]


def _order(site: Site, role: str) -> dict[int, int]:
    return {id(op): n for n, op in enumerate(site.group(role).body.walk())}


def seq_counter_restarts(m: ModuleOp) -> None:
    """The consumer's second loop counts its uses from 0 again (the producer continues)."""
    _restart_next_segment(m, "consumer", lambda _: [arith.ConstantOp(IntegerAttr(0, i32))])


def seq_producer_counter_restarts(m: ModuleOp) -> None:
    """The producer's second loop counts its uses from 0 again (the consumers continue)."""
    _restart_next_segment(m, "producer", lambda _: [arith.ConstantOp(IntegerAttr(0, i32))])


def seq_counter_skips_one(m: ModuleOp) -> None:
    """The consumer's second loop starts one use past where the first loop ended."""

    def plus_one(end: SSAValue) -> list[Operation]:
        one = arith.ConstantOp(IntegerAttr(1, i32))
        return [one, arith.AddiOp(end, one.result)]

    _restart_next_segment(m, "consumer", plus_one)


def seq_second_trips_fewer(m: ModuleOp) -> None:
    """The consumer's second loop starts one step later: one trip fewer than the producer's."""
    loop = _segment_loops(Site(m), "consumer")[1]
    loop.operands[0] = _insert([arith.AddiOp(loop.lb, loop.step)], loop)


def seq_producer_loop_dropped(m: ModuleOp) -> None:
    """The producer runs one loop fewer than the consumers (its second loop is gone)."""
    loop = _segment_loops(Site(m), "producer")[1]
    for result, init in zip(loop.results, loop.iter_args, strict=True):
        result.replace_all_uses_with(init)
    Rewriter.erase_op(loop)


def _uniform_if(site: Site, role: str) -> scf.IfOp:
    """The `scf.if` around the role's second loop."""
    loop = _segment_loops(site, role)[1]
    guard = loop.parent_op()
    if not isinstance(guard, scf.IfOp):
        raise NotApplicable("the second loop is not under a conditional")
    return guard


def seq_condition_negated(m: ModuleOp) -> None:
    """The consumer takes the branch around its second loop when the producer does not."""
    guard = _uniform_if(Site(m), "consumer")
    true = arith.ConstantOp(IntegerAttr(1, 1))
    guard.operands[0] = _insert([true, arith.XOrIOp(guard.cond, true.result)], guard)


def seq_condition_on_warpgroup(m: ModuleOp) -> None:
    """The consumer's second loop runs in warpgroup 0 only (`if wg == 0`)."""
    site = Site(m)
    guard = _uniform_if(site, "consumer")
    wg = site.warpgroup_index(guard)
    guard.operands[0] = _insert([arith.CmpiOp(wg, _const(0, guard), "eq")], guard)


def seq_drain_takes_next(m: ModuleOp) -> None:
    """The drain after the first loop also releases the second loop's first use."""
    site = Site(m)
    first = _segment_loops(site, "consumer")[0]
    order = _order(site, "consumer")
    drains = [
        op
        for op in first.parent_block().ops  # type: ignore[union-attr]
        if isinstance(op, scf.ForOp)
        and aref.DRAIN_ATTR in op.attributes
        and _after(op, first, order)
    ]
    if not drains:
        raise NotApplicable("no drain after the first loop")
    drain = drains[0]
    drain.operands[1] = _insert([arith.AddiOp(drain.ub, _const(1, drain))], drain)


def seq_release_moved_to_first(m: ModuleOp) -> None:
    """The second loop's lagged release moved into the first loop (released twice there)."""
    site = Site(m)
    first, second = _segment_loops(site, "consumer")[:2]
    releases = site.releases(lagged=True)
    mine = [r for r in releases if _enclosing(r, scf.ForOp) is first]
    theirs = [r for r in releases if _enclosing(r, scf.ForOp) is second]
    if not mine or not theirs:
        raise NotApplicable("no lagged release in both loops")
    guard = _enclosing(theirs[0], scf.IfOp)
    while guard is not None and guard.parent_op() is not second:
        guard = _enclosing(guard, scf.IfOp)
    held = _enclosing(mine[0], scf.IfOp)
    while held is not None and held.parent_op() is not first:
        held = _enclosing(held, scf.IfOp)
    assert guard is not None and held is not None
    Rewriter.erase_op(guard)
    Rewriter.insert_op(held.clone(), InsertPoint.after(held))


def _next_tile_from_first_loop(m: ModuleOp, role: str) -> None:
    """The tile loop around the role's sequence of loops hands the next tile the counter
    where the tile's first loop ended, not its last: the next tile recounts uses."""
    loops = _segment_loops(Site(m), role)
    tiles = loops[0].parent_op()
    if not isinstance(tiles, scf.ForOp) or loops[-1].parent_op() is not tiles:
        raise NotApplicable("the sequence is not inside a loop of tiles")
    first_end = loops[0].results[_counter_index(loops[0])]
    last_end = loops[-1].results[_counter_index(loops[-1])]
    yielded = tiles.body.block.last_op
    assert isinstance(yielded, scf.YieldOp)
    hits = [n for n, value in enumerate(yielded.operands) if value == last_end]
    if not hits:
        raise NotApplicable("the tile loop does not carry the last loop's counter")
    for n in hits:
        yielded.operands[n] = first_end


def seq_next_tile_from_first_loop(m: ModuleOp) -> None:
    """The consumer's next tile continues from its first loop's end (the producer's from its
    last loop's)."""
    _next_tile_from_first_loop(m, "consumer")


def seq_producer_next_tile_from_first_loop(m: ModuleOp) -> None:
    """The producer's next tile continues from its first loop's end."""
    _next_tile_from_first_loop(m, "producer")


def inner_trip_one_more(m: ModuleOp) -> None:
    """The consumer's inner loop runs one more trip per tile than the producer's."""
    loop = Site(m).main_loop("consumer")
    if not isinstance(loop.parent_op(), scf.ForOp):
        raise NotApplicable("the main loop is not nested in a loop of tiles")
    loop.operands[1] = _insert([arith.AddiOp(loop.ub, loop.step)], loop)


MUTATIONS: dict[str, Mutation] = {
    m.name: m
    for m in [
        Mutation("lag_guard_on_program_id", "lag guard operand", lag_guard_on_program_id),
        Mutation("lag_guard_on_warpgroup", "lag guard operand", lag_guard_on_warpgroup),
        Mutation("drain_removed", "drains", drain_removed),
        Mutation("drain_wrong_start", "drains", drain_wrong_start),
        Mutation("drain_wrong_slot", "drains", drain_wrong_slot),
        Mutation("slot_on_induction_variable", "slot/parity base", slot_on_induction_variable),
        Mutation("counter_restarts_per_tile", "slot/parity base", counter_restarts_per_tile),
        Mutation("slot_plus_warpgroup", "slot/parity base", slot_plus_warpgroup),
        Mutation("slot_far_offset", "slot/parity offset", slot_far_offset),
        Mutation("parity_one_turn", "slot/parity offset", parity_one_turn),
        Mutation("parity_flipped", "slot/parity offset", parity_flipped),
        Mutation("parity_on_other_counter", "slot/parity base", parity_on_other_counter),
        Mutation("counter_starts_at_one", "counter start/increment", counter_starts_at_one),
        Mutation("counter_not_incremented", "counter start/increment", counter_not_incremented),
        Mutation("release_out_of_lookahead", "lookahead guard", release_out_of_lookahead),
        Mutation("wait_on_unused_barrier", "unmodelled ops", wait_on_unused_barrier),
        Mutation("consumer_waits_on_empty", "unmodelled ops", consumer_waits_on_empty),
        Mutation("arrive_at_top_level", "unmodelled ops", arrive_at_top_level),
        Mutation("release_in_extra_loop", "unmodelled ops", release_in_extra_loop),
        Mutation("copy_on_other_barrier", "unmodelled ops", copy_on_other_barrier),
        Mutation("copy_removed", "unmodelled ops", copy_removed),
        Mutation("second_init_in_consumer", "inits", second_init_in_consumer),
        Mutation(
            "second_init_at_top",
            "inits",
            second_init_at_top,
            unseen="an init repeated before any arrival changes no barrier state",
        ),  # fmt: skip
        Mutation(
            "init_fence_removed",
            "inits",
            init_fence_removed,
            unseen="the interpreters make every init visible at once (no memory model)",
        ),  # fmt: skip
        Mutation(
            "ring_attribute_removed",
            "ring attribute",
            ring_attribute_removed,
            unseen="the attribute is the certificate's input; the barriers run the same",
        ),  # fmt: skip
        Mutation("buffer_too_few_slots", "smem slots", buffer_too_few_slots),
        Mutation("trips_depend_on_warpgroup", "warpgroup control flow", trips_depend_on_warpgroup),
        Mutation("loop_repeated", "sequential loops", loop_repeated),
        Mutation("consumer_arrives_on_full", "roles", consumer_arrives_on_full),
        Mutation("tx_halved", "tx bytes", tx_halved),
        Mutation("count_low", "init counts", count_low),
        Mutation("release_before_read", "release order", release_before_read),
        Mutation("wgmma_wait_removed", "wgmma retirement", wgmma_wait_removed),
        Mutation("wgmma_wait_deeper", "wgmma retirement", wgmma_wait_deeper),
        Mutation("wgmma_wait_under_condition", "wgmma retirement", wgmma_wait_under_condition),
        Mutation("release_by_every_thread", "elected thread", release_by_every_thread),
        Mutation("wait_duplicated", "safe", wait_duplicated, broken=False),
        Mutation("producer_wait_duplicated", "safe", producer_wait_duplicated, broken=False),
        Mutation("copies_swapped", "safe", copies_swapped, broken=False),
        Mutation("slot_plus_depth", "safe", slot_plus_depth, broken=False),
        Mutation("parity_two_turns", "safe", parity_two_turns, broken=False),
        Mutation("extra_constant", "safe", extra_constant, broken=False),
        # sequences of loops and uniform conditionals (issue 13 item 5)
        Mutation("seq_counter_restarts", "loop sequences", seq_counter_restarts),
        Mutation("seq_producer_counter_restarts", "loop sequences", seq_producer_counter_restarts),
        Mutation("seq_counter_skips_one", "loop sequences", seq_counter_skips_one),
        Mutation("seq_second_trips_fewer", "loop sequences", seq_second_trips_fewer),
        Mutation("seq_producer_loop_dropped", "loop sequences", seq_producer_loop_dropped),
        Mutation("seq_condition_negated", "uniform conditionals", seq_condition_negated),
        Mutation("seq_condition_on_warpgroup", "uniform conditionals", seq_condition_on_warpgroup),
        Mutation("seq_drain_takes_next", "loop sequences", seq_drain_takes_next),
        Mutation("seq_release_moved_to_first", "loop sequences", seq_release_moved_to_first),
        Mutation("seq_next_tile_from_first_loop", "loop sequences", seq_next_tile_from_first_loop),
        Mutation(
            "seq_producer_next_tile_from_first_loop",
            "loop sequences",
            seq_producer_next_tile_from_first_loop,
        ),
        Mutation("inner_trip_one_more", "nested loops", inner_trip_one_more),
    ]
}


# ------------------------------------- rings under a uniform condition in a loop of tiles
# Planted in persistent kernels whose K loop sits under an `scf.if` inside the loop of tiles
# (`if K > 0:`, the same in every tile; `if pid_m * BLOCK_M < M:`, per tile): the conditional
# yields the loop's counter when taken and the tile's start when not, and the tile loop hands
# it to the next tile (issue 13 item 5).


def _tile_if(site: Site, role: str) -> tuple[scf.IfOp, scf.ForOp, int]:
    """The `scf.if` around the role's K loop in its loop of tiles, that loop, and the index of
    the if result the tile loop yields as its use counter."""
    guard = site.main_loop(role).parent_op()
    tiles = guard.parent_op() if guard is not None else None
    if not (isinstance(guard, scf.IfOp) and isinstance(tiles, scf.ForOp)):
        raise NotApplicable(f"the {role}'s loop is not under a conditional in a loop of tiles")
    yielded = tiles.body.block.last_op
    assert isinstance(yielded, scf.YieldOp)
    for value in yielded.operands:
        if value.owner is guard:
            return guard, tiles, list(guard.results).index(value)
    raise NotApplicable("the loop of tiles does not carry the conditional's counter")


def _branch_yield(guard: scf.IfOp, taken: bool) -> scf.YieldOp:
    region = guard.true_region if taken else guard.false_region
    yielded = region.blocks[0].last_op
    assert isinstance(yielded, scf.YieldOp)
    return yielded


def tile_if_taken_keeps_start(m: ModuleOp) -> None:
    """The consumers' conditional yields the tile's start when taken (the counter is not
    advanced by the K loop's uses): the next tile recounts them, the producer's does not."""
    guard, _, at = _tile_if(Site(m), "consumer")
    taken, untaken = _branch_yield(guard, True), _branch_yield(guard, False)
    taken.operands[at] = untaken.operands[at]


def tile_if_untaken_advances(m: ModuleOp) -> None:
    """The consumers' conditional yields one use past the tile's start when not taken: after
    a tile that skips its K loop the consumers count one use ahead of the producer."""
    guard, _, at = _tile_if(Site(m), "consumer")
    untaken = _branch_yield(guard, False)
    start = untaken.operands[at]
    untaken.operands[at] = _insert([arith.AddiOp(start, _const(1, untaken))], untaken)


def tile_if_differs_between_tiles(m: ModuleOp) -> None:
    """The consumers also skip the K loop of their program's first tile (`tile != pid` added
    to the condition; the producer's condition is unchanged): in that tile the producer
    fills slots the consumers read as the next tile's."""
    guard, tiles, _ = _tile_if(Site(m), "consumer")
    tile = tiles.body.block.args[0]
    other = arith.CmpiOp(tile, tiles.lb, "ne")
    guard.operands[0] = _insert([other, arith.AndIOp(guard.cond, other.result)], guard)


def tile_if_producer_on_tile(m: ModuleOp) -> None:
    """The producer's condition is replaced by one on the tile (`tile != pid`), the
    consumers' kept: the producer puts uses the consumers never take, or skips ones they
    wait for."""
    guard, tiles, _ = _tile_if(Site(m), "producer")
    guard.operands[0] = _insert([arith.CmpiOp(tiles.body.block.args[0], tiles.lb, "ne")], guard)


def tile_if_counter_by_tile_index(m: ModuleOp) -> None:
    """Every group's K loop walks its iteration index j (0 to K / step by 1, k = j * step) and
    counts its uses as `tile index * (K / step) + j`, as if every tile before ran the loop:
    under a condition that skips tiles, a skipped tile's uses never happen, so the next
    tile's parities name phases that completed long ago (a consumer reads a slot before its
    copy lands)."""
    site = Site(m)
    for role in ("producer", "consumer"):
        _count_by_tile_index(site, role)


def _count_by_tile_index(site: Site, role: str) -> None:
    guard, tiles, _ = _tile_if(site, role)
    loop = site.main_loop(role)
    step = protocol.constant_of(loop.step)
    if step is None or protocol.constant_of(loop.lb) != 0:
        raise NotApplicable("the K loop does not run from 0 by a constant step")
    counter = loop.body.block.args[1 + _counter_index(loop)]
    trip = _insert([arith.DivSIOp(loop.ub, _const(step, tiles))], tiles)
    loop.operands[1], loop.operands[2] = trip, _const(1, tiles)
    index = arith.DivSIOp(
        _insert([arith.SubiOp(tiles.body.block.args[0], tiles.lb)], guard), tiles.step
    )
    start = _insert([index, arith.MuliOp(index.result, trip)], guard)
    iv = loop.body.block.args[0]
    k = arith.MuliOp(iv, _const(step, tiles))
    use = arith.AddiOp(iv, start)
    Rewriter.insert_op([k, use], InsertPoint.at_start(loop.body.block))
    iv.replace_uses_with_if(k.result, lambda u: u.operation not in (k, use))
    counter.replace_uses_with_if(use.result, lambda u: u.operation is not use)


TILE_CONDITION_MUTATIONS: dict[str, Mutation] = {
    m.name: m
    for m in [
        Mutation("tile_if_taken_keeps_start", "uniform conditionals", tile_if_taken_keeps_start),
        Mutation("tile_if_untaken_advances", "uniform conditionals", tile_if_untaken_advances),
        Mutation(
            "tile_if_differs_between_tiles", "uniform conditionals", tile_if_differs_between_tiles
        ),
        Mutation("tile_if_producer_on_tile", "uniform conditionals", tile_if_producer_on_tile),
        Mutation(
            "tile_if_counter_by_tile_index", "uniform conditionals", tile_if_counter_by_tile_index
        ),
    ]
}


# --------------------------------------------- a ring used in some loops of a sequence
# Planted in kernels with two loops in sequence where one ring runs through both and another
# through the second only (the two-loop RMSnorm's x and weight rings): that ring's ops moved
# into the first loop in one role only, counted there on the first loop's use counter (the
# same uses: both loops start their counters at 0 and walk the same bounds), so each ring
# alone is still a correct protocol and only the rings together deadlock (issue 13 item 5).


def _second_loop_ring(site: Site, role: str) -> tuple[Ring, scf.ForOp, scf.ForOp]:
    """The ring the role uses in its second loop but not its first, and the two loops."""
    first, second = _segment_loops(site, role)[:2]
    for ring in site.rings:
        if {_enclosing(op, scf.ForOp) for op in _ring_ops(site, role, ring)} == {second}:
            return ring, first, second
    raise NotApplicable("no ring used by the second loop only")


def _ring_ops(site: Site, role: str, ring: Ring) -> list[Operation]:
    """The role's ops on the ring's barriers and buffers (waits, arrives, copies, reads)."""
    found = []
    for op in site.group(role).body.walk():
        if getattr(op, "bars", None) in (ring.full, ring.empty):
            found.append(op)
        elif getattr(op, "buf", None) in ring.buffers:
            found.append(op)
    if not found:
        raise NotApplicable(f"the {role} does not use ring {ring.name}")
    return found


def _counter_arg(loop: scf.ForOp, ops: list[Operation]) -> SSAValue:
    """The loop-carried use counter the slot expressions of `ops` are built on."""
    for arg in loop.body.block.args[1:]:
        if any(arg in _roots_of(op) for op in ops):
            return arg
    raise NotApplicable("the ring's ops use no counter of their loop")


def _roots_of(op: Operation) -> set[SSAValue]:
    out: set[SSAValue] = set()
    for value in op.operands:
        out.add(value)
        if isinstance(value.owner, Operation) and not value.owner.regions:
            out |= _roots_of(value.owner)
    return out


def _move_ring_to_first_loop(m: ModuleOp, role: str) -> None:
    """The role's ops on the second loop's ring, with the slot and parity arithmetic they
    use, moved to the end of its first loop's body and built there on the first loop's use
    counter and induction variable; a value read from the ring that the second loop used is
    replaced by ones (the protocol, not the data, is what the mutation is about)."""
    site = Site(m)
    ring, first, second = _second_loop_ring(site, role)
    ring_ops = _ring_ops(site, role, ring)
    mine = [op for op in second.body.block.ops if any(o in ring_ops for o in op.walk())]
    others = [op for op in first.body.block.ops if any(_touches(o, site.rings) for o in op.walk())]
    mapping: dict[SSAValue, SSAValue] = {
        _counter_arg(second, mine): _counter_arg(first, others),
        second.body.block.args[0]: first.body.block.args[0],
    }
    end = first.body.block.last_op
    assert end is not None
    for op in mine:
        _clone_into(op, second, mapping, end)
    for op in reversed(mine):
        for result in op.results:
            if result.uses:
                result.replace_all_uses_with(_ones_like(result, op))
        Rewriter.erase_op(op)


def _touches(op: Operation, rings: list[Ring]) -> bool:
    bars = {id(b) for r in rings for b in (r.full, r.empty)}
    bufs = {id(b) for r in rings for b in r.buffers}
    return id(getattr(op, "bars", None)) in bars or id(getattr(op, "buf", None)) in bufs


def _clone_into(
    op: Operation, source: scf.ForOp, mapping: dict[SSAValue, SSAValue], before: Operation
) -> None:
    """Clone `op` before `before`, first the ops of `source`'s body that its operands (and
    those of the ops nested in it) come from; `mapping` maps the values already moved."""
    for inner in op.walk():
        for value in inner.operands:
            owner = value.owner
            if (
                value not in mapping
                and isinstance(owner, Operation)
                and owner.parent_block() is source.body.block
            ):
                _clone_into(owner, source, mapping, before)
    copy = op.clone(value_mapper=mapping)
    Rewriter.insert_op(copy, InsertPoint.before(before))
    for old, new in zip(op.results, copy.results, strict=True):
        mapping[old] = new


def _ones_like(value: SSAValue, before: Operation) -> SSAValue:
    frag = value.type
    if not isinstance(frag, nvgpu.FragmentType):
        raise NotApplicable(f"a ring read of type {frag} is used after it")
    one = arith.ConstantOp(FloatAttr(1.0, frag.element_type))
    return _insert([one, nvgpu.FragmentSplatOp(one.result, frag)], before)


def ring_put_in_first_loop(m: ModuleOp) -> None:
    """The producer puts the second loop's ring in its first loop (the consumers still take
    it in their second loop): past D uses the producer waits for a slot the consumers free
    only after the first loop, whose later uses it has not put."""
    _move_ring_to_first_loop(m, "producer")


def ring_taken_in_first_loop(m: ModuleOp) -> None:
    """The consumers take the second loop's ring in their first loop (the producer still
    puts it in its second): they wait for a use the producer puts only after the first
    loop, whose slots they no longer free."""
    _move_ring_to_first_loop(m, "consumer")


def ring_wait_before_other_rings(m: ModuleOp) -> None:
    """Safe: the consumers wait for the second loop's ring (with its slot and parity
    arithmetic) before the other rings' waits of that loop: the producer puts each ring's
    use u whatever the consumers wait for, so no order of one iteration's waits deadlocks."""
    site = Site(m)
    ring, _, second = _second_loop_ring(site, "consumer")
    waits = [op for op in second.body.block.ops if isinstance(op, nvgpu.MBarrierWaitOp)]
    mine = [op for op in waits if op.bars == ring.full]
    if not mine or waits[0] in mine:
        raise NotApplicable("the ring's wait is the loop's first")
    _clone_into(mine[0], second, {}, waits[0])
    Rewriter.erase_op(mine[0])


SOME_LOOPS_MUTATIONS: dict[str, Mutation] = {
    m.name: m
    for m in [
        Mutation("ring_put_in_first_loop", "cross-ring loops", ring_put_in_first_loop),
        Mutation("ring_taken_in_first_loop", "cross-ring loops", ring_taken_in_first_loop),
        Mutation(
            "ring_wait_before_other_rings", "safe", ring_wait_before_other_rings, broken=False
        ),
    ]
}


# ------------------------------------------- named barriers and TMA-store staging (nvgpu)


def _named(m: ModuleOp, kind: type, ident: int | None = None) -> list[Operation]:
    """The consumers' named-barrier ops of `kind` (with id `ident`), in program order."""
    found = [
        op
        for op in Site(m).ops((nvgpu.NamedBarrierSyncOp, nvgpu.NamedBarrierArriveOp), "consumer")
        if isinstance(op, kind) and (ident is None or op.barrier_id.value.data == ident)
    ]
    if not found:
        raise NotApplicable(f"no {kind.__name__} {ident or ''} in the consumers")
    return found


def _looped(ops: list[Operation]) -> list[Operation]:
    inside = [op for op in ops if _enclosing(op, scf.ForOp) is not None]
    if not inside:
        raise NotApplicable("no such op in a loop")
    return inside


def _renumber(op: Operation, ident: int) -> None:
    op.properties["id"] = IntegerAttr(ident, i32)


def turn_arrive_dropped(m: ModuleOp) -> None:
    """A consumer's in-loop ping-pong hand-off (`named_barrier_arrive`) is gone."""
    Rewriter.erase_op(_looped(_named(m, nvgpu.NamedBarrierArriveOp))[-1])


def turn_sync_dropped(m: ModuleOp) -> None:
    """A consumer no longer waits for its ping-pong turn (`named_barrier_sync`)."""
    Rewriter.erase_op(_looped(_named(m, nvgpu.NamedBarrierSyncOp))[-1])


def turn_first_arrive_renumbered(m: ModuleOp) -> None:
    """The hand-off before the turn loop arrives on the other turn's barrier (ids swapped)."""
    arrives = _named(m, nvgpu.NamedBarrierArriveOp)
    loop = _enclosing(_looped(_named(m, nvgpu.NamedBarrierSyncOp))[0], scf.ForOp)
    first = [op for op in arrives if not _precedes(op, loop.body.block.last_op)]  # type: ignore[union-attr]
    other = sorted({op.barrier_id.value.data for op in arrives} - {_id(first[0])})
    if not other:
        raise NotApplicable("one turn barrier")
    _renumber(first[0], other[0])


def _id(op: Operation) -> int:
    return op.barrier_id.value.data  # type: ignore[attr-defined]


def turn_order_swapped(m: ModuleOp) -> None:
    """The first two consumers wait on each other's turn barrier (the turn read in the
    wrong order)."""
    syncs = _looped(_named(m, nvgpu.NamedBarrierSyncOp))
    ids = list(dict.fromkeys(op.barrier_id.value.data for op in syncs))
    if len(ids) < 2:
        raise NotApplicable("fewer than two turn barriers")
    swap = {ids[0]: ids[1], ids[1]: ids[0]}
    for op in syncs:
        if _id(op) in swap:
            _renumber(op, swap[_id(op)])


def turn_threads_wrong(m: ModuleOp) -> None:
    """One consumer's turn wait counts one warpgroup instead of two."""
    sync = _looped(_named(m, nvgpu.NamedBarrierSyncOp))[0]
    sync.properties["threads"] = IntegerAttr(sync.threads.value.data // 2, i32)


def staging_threads_wrong(m: ModuleOp) -> None:
    """The staging barrier before the TMA store counts one warpgroup of the two."""
    sync = _named(m, nvgpu.NamedBarrierSyncOp)[-1]
    sync.properties["threads"] = IntegerAttr(sync.threads.value.data // 2, i32)


def _staging_writes(m: ModuleOp) -> list[Operation]:
    stored = {id(op.buf) for op in Site(m).ops(nvgpu.TmaStoreOp, "consumer")}
    writes = [
        op
        for op in Site(m).ops((nvgpu.FragmentStoreOp, nvgpu.SmemStoreOp), "consumer")
        if id(op.buf) in stored  # type: ignore[attr-defined]
    ]
    if not writes:
        raise NotApplicable("no staging buffer")
    return writes


def _store_waits(m: ModuleOp) -> list[Operation]:
    """The `scf.if` (thread guard) around each of the consumers' `tma_store_wait`s."""
    return [op.parent_op() for op in Site(m).ops(nvgpu.TmaStoreWaitOp, "consumer")]  # type: ignore[misc]


def _is_staging_barrier(op: Operation | None) -> bool:
    """A named barrier sync, or the `scf.if` chain on the warpgroup index that gives each
    consumer warpgroup its own one."""
    if isinstance(op, nvgpu.NamedBarrierSyncOp):
        return True
    return isinstance(op, scf.IfOp) and any(
        isinstance(o, nvgpu.NamedBarrierSyncOp) for o in op.walk()
    )


def _staging_barrier(m: ModuleOp) -> Operation:
    """The barrier (or per-warpgroup chain) between thread 0's wait and the staging write."""
    sync = _staging_writes(m)[0].prev_op
    if not _is_staging_barrier(sync):
        raise NotApplicable("no barrier before the staging write")
    assert sync is not None
    return sync


def staging_sync_dropped(m: ModuleOp) -> None:
    """The barrier between thread 0's `tma_store_wait` and the staging write is gone (every
    warpgroup's)."""
    Rewriter.erase_op(_staging_barrier(m))


def staging_written_before_wait(m: ModuleOp) -> None:
    """The staging buffer is written before the wait for the previous TMA store to read it."""
    write = _staging_writes(m)[0]
    wait = _store_waits(m)[0]
    if not _precedes(wait, write) and wait.parent_block() is not write.parent_block():
        raise NotApplicable("no wait before the staging write")
    write.detach()
    Rewriter.insert_op(write, InsertPoint.before(wait))


def _after_staging_write(m: ModuleOp, kind: type) -> Operation:
    """The first op of `kind` between the first staging write and the TMA store (for a named
    barrier sync, also the per-warpgroup chain of them)."""
    op = _staging_writes(m)[0].next_op
    barrier = kind is nvgpu.NamedBarrierSyncOp
    while op is not None and not (isinstance(op, kind) or (barrier and _is_staging_barrier(op))):
        op = op.next_op
    if op is None:
        raise NotApplicable(f"no {kind.__name__} after the staging write")
    return op


def staging_store_sync_dropped(m: ModuleOp) -> None:
    """The barrier between the staging writes and thread 0's TMA store is gone."""
    Rewriter.erase_op(_after_staging_write(m, nvgpu.NamedBarrierSyncOp))


def staging_fence_dropped(m: ModuleOp) -> None:
    """The `fence.proxy.async` between the staging writes and the barrier is gone."""
    Rewriter.erase_op(_after_staging_write(m, nvgpu.FenceProxyAsyncOp))


def store_wait_dropped(m: ModuleOp) -> None:
    """The `tma_store_wait` before the staging buffer is rewritten is gone."""
    Rewriter.erase_op(_store_waits(m)[0])


def store_wait_at_exit_dropped(m: ModuleOp) -> None:
    """The last `tma_store_wait`: the warpgroup exits while its TMA store still reads smem."""
    Rewriter.erase_op(_store_waits(m)[-1])


def store_wait_pending_one(m: ModuleOp) -> None:
    """The wait before the staging write leaves one store group unread."""
    guard = _store_waits(m)[0]
    wait = next(o for o in guard.walk() if isinstance(o, nvgpu.TmaStoreWaitOp))
    wait.properties["pending"] = IntegerAttr(1, i32)


def staging_barriers_merged(m: ModuleOp) -> None:
    """Every consumer warpgroup meets the first one's staging barrier (each with its own 128
    threads): one phase can complete with warps of both."""
    chain = _staging_barrier(m)
    if not isinstance(chain, scf.IfOp):
        raise NotApplicable("one staging barrier for the whole group")
    first = next(o for o in chain.true_region.walk() if isinstance(o, nvgpu.NamedBarrierSyncOp))
    for op in chain.false_region.walk():
        if isinstance(op, nvgpu.NamedBarrierSyncOp):
            _renumber(op, _id(first))


def staging_slots_shared(m: ModuleOp) -> None:
    """Every consumer warpgroup writes and TMA-stores the first warpgroup's staging slots (the
    warpgroup's first slot, `local * slabs`, becomes 0)."""
    slot = _staging_writes(m)[0].slot  # type: ignore[attr-defined]
    first = slot.owner
    if not isinstance(first, arith.MuliOp):
        raise NotApplicable("the staging slot is not the warpgroup's multiple of its slabs")
    zero = arith.ConstantOp(IntegerAttr(0, i32))
    Rewriter.insert_op(zero, InsertPoint.before(first))
    first.operands[1] = zero.result


def staging_barrier_renumbered(m: ModuleOp) -> None:
    """Safe: the staging barrier uses another free id (both of its syncs)."""
    used = {op.barrier_id.value.data for op in m.walk() if hasattr(op, "barrier_id")}
    free = next(i for i in range(6, 16) if i not in used)
    ident = _named(m, nvgpu.NamedBarrierSyncOp)[-1].barrier_id.value.data
    for op in _named(m, nvgpu.NamedBarrierSyncOp, ident):
        _renumber(op, free)


def _hand_off_guard(m: ModuleOp) -> scf.IfOp:
    """The `scf.if (iv + step < ub)` around the rotated ping-pong's in-loop hand-off."""
    for op in _looped(_named(m, nvgpu.NamedBarrierArriveOp)):
        guard = op.parent_op()
        cmp = guard.cond.owner if isinstance(guard, scf.IfOp) else None
        if isinstance(cmp, arith.CmpiOp) and isinstance(cmp.lhs.owner, arith.AddiOp):
            return guard  # type: ignore[return-value]
    raise NotApplicable("no hand-off under a not-last-iteration guard")


def _reguard(guard: scf.IfOp, ops: list[Operation], cond: SSAValue) -> None:
    """Put `ops` before `guard` and make `cond` its condition."""
    for op in ops:
        Rewriter.insert_op(op, InsertPoint.before(guard))
    guard.operands = [cond]


def hand_off_guard_dropped(m: ModuleOp) -> None:
    """The second consumer hands the turn back in the last iteration too (one arrival left)."""
    guard = _hand_off_guard(m)
    arrive = next(o for o in guard.walk() if isinstance(o, nvgpu.NamedBarrierArriveOp))
    arrive.detach()
    Rewriter.insert_op(arrive, InsertPoint.before(guard))
    Rewriter.erase_op(guard)


def turn_after_lookahead(m: ModuleOp) -> None:
    """Safe: the turn is taken after the lookahead's QK^T(j+1), around P V(j) only (the
    guarded hand-off unchanged)."""
    guard = _hand_off_guard(m)
    loop = _enclosing(guard, scf.ForOp)
    assert isinstance(loop, scf.ForOp)
    sync = _enclosing(_looped(_named(m, nvgpu.NamedBarrierSyncOp))[0], scf.IfOp)
    ahead = next(
        (o for o in loop.body.block.ops if isinstance(o, scf.IfOp) and o.cond == guard.cond),
        None,
    )
    if sync is None or ahead is None or not _precedes(sync, ahead):
        raise NotApplicable("no turn before a guarded lookahead")
    sync.detach()
    Rewriter.insert_op(sync, InsertPoint.after(ahead))


def hand_off_arrive_dropped(m: ModuleOp) -> None:
    """The arrive under the not-last-iteration guard is gone (the first consumer starves)."""
    guard = _hand_off_guard(m)
    arrive = next(o for o in guard.walk() if isinstance(o, nvgpu.NamedBarrierArriveOp))
    Rewriter.erase_op(arrive)


def hand_off_bound_changed(m: ModuleOp) -> None:
    """The second consumer's guard compares with `ub - step`: it skips two hand-offs."""
    guard = _hand_off_guard(m)
    cmp = guard.cond.owner
    step = cmp.lhs.owner.rhs  # type: ignore[union-attr]
    bound = arith.SubiOp(cmp.rhs, step)  # type: ignore[union-attr]
    less = arith.CmpiOp(cmp.lhs, bound.result, "slt")  # type: ignore[union-attr]
    _reguard(guard, [bound, less], less.result)


def hand_off_guard_by_warpgroup(m: ModuleOp) -> None:
    """The guard reads `iv + wg * step < ub` (the warpgroup index scales the lookahead)."""
    guard = _hand_off_guard(m)
    cmp = guard.cond.owner
    iv, step = cmp.lhs.owner.operands  # type: ignore[union-attr]
    wg = next(o.result for o in m.walk() if isinstance(o, nvgpu.WarpgroupIndexOp))
    scaled = arith.MuliOp(wg, step)
    ahead = arith.AddiOp(iv, scaled.result)
    less = arith.CmpiOp(ahead.result, cmp.rhs, "slt")  # type: ignore[union-attr]
    _reguard(guard, [scaled, ahead, less], less.result)


def hand_off_guard_not_first(m: ModuleOp) -> None:
    """The hand-off runs in every iteration but the first (`iv != lb`) instead of every one
    but the last: as often, in the wrong iterations (the turns deadlock from two blocks)."""
    guard = _hand_off_guard(m)
    loop = _enclosing(guard, scf.ForOp)
    assert isinstance(loop, scf.ForOp)
    other = arith.CmpiOp(loop.body.block.args[0], loop.lb, "ne")
    _reguard(guard, [other], other.result)


LOCKSTEP = (
    "the interpreter runs a warpgroup's threads in lockstep, so no thread still reads the "
    "slot when thread 0 releases it (on the GPU the other warps can lag behind)"
)


def _slot_read_sync(m: ModuleOp) -> nvgpu.NamedBarrierSyncOp:
    """The consumers' `bar.sync` between reading a ring slot into registers and releasing it
    (under the lag guard of a lagged release)."""
    for op in _looped(_named(m, nvgpu.NamedBarrierSyncOp, nvgpu.SLOT_READ_BARRIER_ID)):
        guard = op.parent_op()
        if isinstance(guard, scf.IfOp) and any(
            aref.LAG_ATTR in o.attributes for o in guard.walk() if o is not guard
        ):
            return op  # type: ignore[return-value]
    raise NotApplicable("no slot-read barrier under a lag guard")


def _release_guard(sync: Operation) -> Operation:
    """The thread guard around the release that follows `sync`."""
    after = sync.next_op
    while after is not None and not any(
        isinstance(o, nvgpu.MBarrierArriveOp) for o in after.walk()
    ):
        after = after.next_op
    if after is None:
        raise NotApplicable("no release after the slot-read barrier")
    return after


def slot_read_sync_dropped(m: ModuleOp) -> None:
    """Thread 0 releases a slot the other threads read into registers with no barrier."""
    Rewriter.erase_op(_slot_read_sync(m))


def slot_read_sync_after_release(m: ModuleOp) -> None:
    """The slot-read barrier comes after thread 0's release (too late to order the reads)."""
    sync = _slot_read_sync(m)
    release = _release_guard(sync)
    sync.detach()
    Rewriter.insert_op(sync, InsertPoint.after(release))


def slot_read_sync_one_warpgroup(m: ModuleOp) -> None:
    """Only the first consumer warpgroup takes the slot-read barrier of all (the guard
    differs between the consumers): it waits for threads that never come."""
    _in_first_consumer(m, _slot_read_sync(m))


def _first_consumer(m: ModuleOp, before: Operation) -> SSAValue:
    """`wg == the first consumer warpgroup`, computed right before `before`."""
    wg = next(o.result for o in m.walk() if isinstance(o, nvgpu.WarpgroupIndexOp))
    groups = Site(m).groups
    consumer = next(n for n, g in enumerate(groups) if g.role == "consumer")
    first = _const(sum(g.count for g in groups[:consumer]), before)
    return _insert([arith.CmpiOp(wg, first, "eq")], before)


def _in_first_consumer(m: ModuleOp, op: Operation) -> None:
    """Put `op` under `scf.if (wg == the first consumer warpgroup)`."""
    guard = scf.IfOp(_first_consumer(m, op), [], [scf.YieldOp()])
    Rewriter.insert_op(guard, InsertPoint.before(op))
    op.detach()
    Rewriter.insert_op(op, InsertPoint.at_start(guard.true_region.block))


def slot_read_sync_threads_wrong(m: ModuleOp) -> None:
    """The slot-read barrier counts one warpgroup of the two."""
    sync = _slot_read_sync(m)
    sync.properties["threads"] = IntegerAttr(sync.threads.value.data // 2, i32)


def slot_read_sync_hoisted(m: ModuleOp) -> None:
    """Safe: the slot-read barrier runs before the lag guard, in every iteration."""
    sync = _slot_read_sync(m)
    guard = sync.parent_op()
    assert guard is not None
    sync.detach()
    Rewriter.insert_op(sync, InsertPoint.before(guard))


def _uniform_guard(m: ModuleOp) -> scf.IfOp:
    """The consumers' `scf.if` on kernel arguments (`K > 0`) around their named barriers."""
    for op in Site(m).ops(scf.IfOp, "consumer"):
        if uniform_key(op.cond) is not None and any(isinstance(o, NAMED) for o in op.walk()):
            return op  # type: ignore[return-value]
    raise NotApplicable("no named barrier under a uniform condition")


def uniform_condition_on_warpgroup(m: ModuleOp) -> None:
    """The consumers' uniform condition also asks `wg == first consumer`: it differs between
    the consumer warpgroups (the second one skips the loop and its named barriers)."""
    guard = _uniform_guard(m)
    first = _first_consumer(m, guard)
    guard.operands = [_insert([arith.AndIOp(guard.cond, first)], guard)]


def uniform_condition_differs_from_producer(m: ModuleOp) -> None:
    """The consumers compare the argument with itself (`K > K`, never true) where the
    producer compares it with 0: the producer fills slots nobody reads."""
    guard = _uniform_guard(m)
    cmp = guard.cond.owner
    assert isinstance(cmp, arith.CmpiOp)
    guard.operands = [_insert([arith.CmpiOp(cmp.lhs, cmp.lhs, cmp.predicate.value.data)], guard)]


def uniform_sync_threads_doubled(m: ModuleOp) -> None:
    """The first named barrier under the uniform condition counts a warpgroup more than
    take part in it."""
    sync = next(o for o in _uniform_guard(m).walk() if isinstance(o, nvgpu.NamedBarrierSyncOp))
    sync.properties["threads"] = IntegerAttr(2 * sync.threads.value.data, i32)


def staging_sync_one_warpgroup(m: ModuleOp) -> None:
    """The barrier before the staging write is taken by the first consumer warpgroup only:
    the second's threads may write before its thread 0 waited for its previous TMA store (a
    persistent kernel's staging is reused tile after tile)."""
    sync = _staging_barrier(m)
    if isinstance(sync, scf.IfOp):  # each warpgroup's own: the others' are gone
        for other in [
            o for o in sync.false_region.walk() if isinstance(o, nvgpu.NamedBarrierSyncOp)
        ]:
            Rewriter.erase_op(other)
        return
    _in_first_consumer(m, sync)


def _exit_wait(m: ModuleOp) -> Operation:
    """The thread guard around the consumers' last `tma_store_wait`, after the uniform
    condition around their TMA store."""
    guard, wait = _uniform_guard(m), _store_waits(m)[-1]
    block = guard.parent_block()
    ops = list(block.ops) if block is not None else []
    if wait not in ops or ops.index(wait) < ops.index(guard):
        raise NotApplicable("no store wait after the uniform condition")
    return wait


def exit_wait_under_negated_condition(m: ModuleOp) -> None:
    """The last `tma_store_wait` runs only when the uniform condition is false (when no
    store was issued): a warpgroup exits with its store still reading shared memory."""
    guard, wait = _uniform_guard(m), _exit_wait(m)
    true = arith.ConstantOp(IntegerAttr(1, 1))
    negated = _insert([true, arith.XOrIOp(guard.cond, true.result)], wait)
    around = scf.IfOp(negated, [], [scf.YieldOp()])
    Rewriter.insert_op(around, InsertPoint.before(wait))
    wait.detach()
    Rewriter.insert_op(wait, InsertPoint.at_start(around.true_region.block))


def exit_wait_inside_condition(m: ModuleOp) -> None:
    """Safe: the last `tma_store_wait` moves into the uniform condition's branch, after the
    store (with no store issued there is nothing to wait for)."""
    guard, wait = _uniform_guard(m), _exit_wait(m)
    wait.detach()
    Rewriter.insert_op(wait, InsertPoint.before(guard.true_region.block.last_op))  # type: ignore[arg-type]


def _second_loop_sync(m: ModuleOp) -> nvgpu.NamedBarrierSyncOp:
    """The consumers' first `bar.sync` in the second loop of the ring's sequence."""
    loop = _segment_loops(Site(m), "consumer")[1]
    for op in loop.walk():
        if isinstance(op, nvgpu.NamedBarrierSyncOp):
            return op
    raise NotApplicable("no named barrier in the second loop")


def second_loop_sync_dropped(m: ModuleOp) -> None:
    """The second loop's slot-read barrier is gone (the first loop keeps its own)."""
    Rewriter.erase_op(_second_loop_sync(m))


def second_loop_sync_one_warpgroup(m: ModuleOp) -> None:
    """Only the first consumer warpgroup takes the second loop's barrier of all: it waits
    for threads that never come."""
    _in_first_consumer(m, _second_loop_sync(m))


def second_loop_extra_sync_one_warpgroup(m: ModuleOp) -> None:
    """The first consumer warpgroup takes the second loop's barrier twice per iteration (the
    slot reads stay synced): its arrivals outrun the other warpgroup's."""
    sync = _second_loop_sync(m)
    extra = sync.clone()
    Rewriter.insert_op(extra, InsertPoint.after(sync))
    _in_first_consumer(m, extra)


def second_loop_sync_threads_wrong(m: ModuleOp) -> None:
    """The second loop's barrier counts one warpgroup of the two."""
    sync = _second_loop_sync(m)
    sync.properties["threads"] = IntegerAttr(sync.threads.value.data // 2, i32)


def second_loop_sync_after_loop(m: ModuleOp) -> None:
    """The second loop's barrier moves after the loop: as many arrivals in each warpgroup
    for one trip, none between a thread's slot reads and thread 0's releases."""
    sync = _second_loop_sync(m)
    loop = _enclosing(sync, scf.ForOp)
    assert loop is not None
    sync.detach()
    Rewriter.insert_op(sync, InsertPoint.after(loop))


def second_loop_sync_renumbered(m: ModuleOp) -> None:
    """Safe: the second loop's barrier uses another free id in every warpgroup."""
    used = {op.barrier_id.value.data for op in m.walk() if hasattr(op, "barrier_id")}
    _renumber(_second_loop_sync(m), next(i for i in range(6, 16) if i not in used))


def _free_id(m: ModuleOp) -> int:
    """A named-barrier id no op of `m` uses."""
    used = {op.barrier_id.value.data for op in m.walk() if isinstance(op, NAMED)}
    return next(i for i in range(6, 16) if i not in used)


def _in_consumer(m: ModuleOp, ops: list[Operation], before: Operation, first: bool) -> None:
    """Put `ops` before `before`, under `scf.if (wg == the first consumer warpgroup)` (or
    `!=` when not `first`)."""
    is_first = _first_consumer(m, before)
    if not first:
        cmp = is_first.owner
        assert isinstance(cmp, arith.CmpiOp)
        is_first = _insert([arith.CmpiOp(cmp.lhs, cmp.rhs, "ne")], before)
    guard = scf.IfOp(is_first, [], [*ops, scf.YieldOp()])
    Rewriter.insert_op(guard, InsertPoint.before(before))


def lagged_turn_given_twice(m: ModuleOp) -> None:
    """Under the lag guard of a release lagged by L (iterations k >= L only) the first
    consumer warpgroup hands a turn on a fresh barrier twice in a row, and the second takes
    it twice after its release: the second hand-off can land in the phase the first opened,
    which it completes alone, and the second warpgroup then waits for a hand-off that never
    comes. As many arrivals in each warpgroup; wrong only in iterations L and later."""
    sync = _slot_read_sync(m)
    ident, threads = _free_id(m), sync.threads.value.data
    after = sync.next_op
    assert after is not None
    arrives = [nvgpu.NamedBarrierArriveOp(ident, threads) for _ in range(2)]
    _in_consumer(m, arrives, after, first=True)
    end = sync.parent_block().last_op  # type: ignore[union-attr]
    assert end is not None
    syncs = [nvgpu.NamedBarrierSyncOp(ident, threads) for _ in range(2)]
    _in_consumer(m, syncs, end, first=False)


NAMED_BARRIER_MUTATIONS: dict[str, Mutation] = {
    m.name: m
    for m in [
        Mutation("turn_arrive_dropped", "named barriers", turn_arrive_dropped),
        Mutation(
            "turn_sync_dropped",
            "named barriers",
            turn_sync_dropped,
            unseen="the turns order only when the two warpgroups issue their MMAs, not what they "
            "compute; the unmatched arrivals complete the barrier among themselves",
        ),  # fmt: skip
        Mutation("turn_first_arrive_renumbered", "named barriers", turn_first_arrive_renumbered),
        Mutation("turn_order_swapped", "named barriers", turn_order_swapped),
        Mutation("turn_threads_wrong", "named barriers", turn_threads_wrong),
        Mutation(
            "staging_threads_wrong",
            "named barriers",
            staging_threads_wrong,
            unseen="the interpreter arrives a warpgroup's four warps at once, so a phase of one "
            "warpgroup's count is never completed by warps of both (the GPU can)",
        ),  # fmt: skip
        Mutation(
            "staging_sync_dropped",
            "tma_store_wait",
            staging_sync_dropped,
            unseen="the interpreter runs a warpgroup's threads in lockstep, so thread 0's "
            "tma_store_wait holds the other threads back too (on the GPU they write at once)",
        ),  # fmt: skip
        Mutation("staging_written_before_wait", "tma_store_wait", staging_written_before_wait),
        Mutation(
            "staging_store_sync_dropped",
            "named barriers",
            staging_store_sync_dropped,
            unseen="the interpreter runs a warpgroup's threads in lockstep, so every staging "
            "write lands before thread 0 issues the TMA store (on the GPU warps lag behind)",
        ),  # fmt: skip
        Mutation(
            "staging_fence_dropped",
            "named barriers",
            staging_fence_dropped,
            unseen="the interpreter has one memory for both proxies (no async-proxy fence)",
        ),  # fmt: skip
        Mutation("store_wait_dropped", "tma_store_wait", store_wait_dropped),
        Mutation("store_wait_at_exit_dropped", "tma_store_wait", store_wait_at_exit_dropped),
        Mutation("store_wait_pending_one", "tma_store_wait", store_wait_pending_one),
        Mutation("staging_slots_shared", "named barriers", staging_slots_shared),
        Mutation(
            "staging_barriers_merged",
            "named barriers",
            staging_barriers_merged,
            unseen="the interpreter arrives a warpgroup's four warps at once, so a phase of one "
            "warpgroup's count is never completed by warps of both (the GPU can)",
        ),  # fmt: skip
        Mutation("staging_barrier_renumbered", "safe", staging_barrier_renumbered, broken=False),
        Mutation(
            "hand_off_guard_dropped",
            "named barriers",
            hand_off_guard_dropped,
            unseen="the extra hand-off is the last arrival on its barrier: it is left pending "
            "when the block exits, which neither the interpreter nor the GPU reports (a "
            "persistent kernel's next tile would start with its turns shifted)",
        ),  # fmt: skip
        Mutation("turn_after_lookahead", "safe", turn_after_lookahead, broken=False),
        Mutation("hand_off_arrive_dropped", "named barriers", hand_off_arrive_dropped),
        Mutation("hand_off_bound_changed", "named barriers", hand_off_bound_changed),
        Mutation("hand_off_guard_by_warpgroup", "named barriers", hand_off_guard_by_warpgroup),
        Mutation("hand_off_guard_not_first", "named barriers", hand_off_guard_not_first),
        Mutation(
            "slot_read_sync_dropped",
            "slot reads",
            slot_read_sync_dropped,
            unseen=LOCKSTEP,
        ),
        Mutation(
            "slot_read_sync_after_release",
            "slot reads",
            slot_read_sync_after_release,
            unseen=LOCKSTEP,
        ),
        Mutation("slot_read_sync_one_warpgroup", "slot reads", slot_read_sync_one_warpgroup),
        Mutation(
            "slot_read_sync_threads_wrong",
            "slot reads",
            slot_read_sync_threads_wrong,
            unseen="each warpgroup completes a phase of its own, and the interpreter's threads "
            "of a warpgroup read the slot in lockstep",
        ),  # fmt: skip
        Mutation("slot_read_sync_hoisted", "safe", slot_read_sync_hoisted, broken=False),
        Mutation(
            "uniform_condition_on_warpgroup", "uniform conditions", uniform_condition_on_warpgroup
        ),
        Mutation(
            "uniform_condition_differs_from_producer",
            "uniform conditions",
            uniform_condition_differs_from_producer,
        ),
        Mutation(
            "uniform_sync_threads_doubled", "uniform conditions", uniform_sync_threads_doubled
        ),
        Mutation(
            "staging_sync_one_warpgroup",
            "tma_store_wait",
            staging_sync_one_warpgroup,
            unseen="the interpreter runs a warpgroup's threads in lockstep, so thread 0's "
            "tma_store_wait holds the other threads back too (on the GPU they write at once)",
        ),  # fmt: skip
        Mutation(
            "exit_wait_under_negated_condition",
            "uniform conditions",
            exit_wait_under_negated_condition,
        ),
        Mutation("exit_wait_inside_condition", "safe", exit_wait_inside_condition, broken=False),
        Mutation(
            "second_loop_sync_dropped", "loop sequences", second_loop_sync_dropped, unseen=LOCKSTEP
        ),
        Mutation(
            "second_loop_sync_one_warpgroup", "loop sequences", second_loop_sync_one_warpgroup
        ),
        Mutation(
            "second_loop_extra_sync_one_warpgroup",
            "loop sequences",
            second_loop_extra_sync_one_warpgroup,
        ),
        Mutation(
            "second_loop_sync_threads_wrong",
            "loop sequences",
            second_loop_sync_threads_wrong,
            unseen="each warpgroup completes a phase of its own, and the interpreter's threads "
            "of a warpgroup read the slot in lockstep",
        ),  # fmt: skip
        Mutation(
            "second_loop_sync_after_loop",
            "loop sequences",
            second_loop_sync_after_loop,
            unseen=LOCKSTEP,
        ),
        Mutation("second_loop_sync_renumbered", "safe", second_loop_sync_renumbered, broken=False),
        Mutation("lagged_turn_given_twice", "named barriers", lagged_turn_given_twice),
    ]
}


def slot_read_drain_sync_dropped(m: ModuleOp) -> None:
    """The slot-read barrier before a drain that later uses of the ring follow (the
    persistent tile loop) is dropped: thread 0 releases the tile's last slots while other
    threads may still read them into registers, and the next tile's copy refills them."""
    for drain in m.walk():
        sync = drain.prev_op
        if (
            isinstance(drain, scf.ForOp)
            and aref.DRAIN_ATTR in drain.attributes
            and isinstance(sync, nvgpu.NamedBarrierSyncOp)
            and _id(sync) == nvgpu.SLOT_READ_BARRIER_ID
        ):
            Rewriter.erase_op(sync)
            return
    raise NotApplicable("no slot-read barrier before a drain")


# ------------------------------------------------- the peeled last iteration (rotate_peeled)
# Planted in kernels whose rotated key loop runs to `ub - step` with the last iteration's
# stage 1 (get V, P V, release V) in the `scf.if (lb < ub)` after it (`aref.is_peeled_last`).


def _epilogue(m: ModuleOp, last: bool = False) -> tuple[scf.IfOp, scf.ForOp]:
    """The consumer's first (or last) peeled last stage and the loop in front of it."""
    ifs = Site(m).ops(scf.IfOp, "consumer")
    for op in reversed(ifs) if last else ifs:
        if aref.is_peeled_last(op):
            loop = op.prev_op
            while not isinstance(loop, scf.ForOp):
                loop = loop.prev_op  # type: ignore[union-attr]
            return op, loop  # type: ignore[return-value]
    raise NotApplicable("no peeled last stage")


def _epilogue_ops(guard: scf.IfOp, kind: type) -> list[Operation]:
    found = [o for o in guard.true_region.block.walk() if isinstance(o, kind)]
    if not found:
        raise NotApplicable(f"no {kind} in the peeled last stage")
    return found


def _epilogue_counter(guard: scf.IfOp, loop: scf.ForOp) -> SSAValue:
    """The loop result the peeled stage's slots are built on."""
    wait = _epilogue_ops(guard, nvgpu.MBarrierWaitOp)[0]
    base = protocol.match_slot(wait.slot)  # type: ignore[attr-defined]
    assert base is not None and base.base in loop.results
    return base.base


def _rebuild_in(guard: scf.IfOp, old: SSAValue, new: SSAValue) -> None:
    """The slots and parities inside the peeled stage built on `old` are built on `new`
    (the counter it yields is left alone)."""
    inside = {id(o) for o in guard.true_region.block.walk()}
    for use in list(old.uses):
        if id(use.operation) in inside and isinstance(use.operation, arith.RemUIOp | arith.DivUIOp):
            use.operation.operands[use.index] = new


def peel_epilogue_dropped(m: ModuleOp) -> None:
    """The last iteration's stage 1 is gone: its V is never taken nor released."""
    guard, _ = _epilogue(m)
    kept = guard.false_region.block.last_op
    assert isinstance(kept, scf.YieldOp)
    for result, value in zip(guard.results, kept.operands, strict=True):
        result.replace_all_uses_with(value)
    Rewriter.erase_op(guard)


def peel_guard_not_strict(m: ModuleOp) -> None:
    """The peeled stage runs under `lb <= ub`: also when the loop has no iteration at all."""
    guard, _ = _epilogue(m)
    cond = guard.cond.owner
    assert isinstance(cond, arith.CmpiOp)
    weak = arith.CmpiOp(cond.lhs, cond.rhs, "sle")
    Rewriter.insert_op(weak, InsertPoint.before(guard))
    guard.operands[0] = weak.result


def peel_guard_on_short_bound(m: ModuleOp) -> None:
    """The last peeled stage runs under `lb < ub - step`: not when its loop has one key
    block (the masked loop's usual count)."""
    guard, loop = _epilogue(m, last=True)
    cond = arith.CmpiOp(loop.lb, loop.ub, "slt")
    Rewriter.insert_op(cond, InsertPoint.before(guard))
    guard.operands[0] = cond.result


def peel_loop_to_ub(m: ModuleOp) -> None:
    """The loop runs to `ub` and the peeled stage still follows: one use too many."""
    _, loop = _epilogue(m)
    short = loop.ub.owner
    assert isinstance(short, arith.SubiOp)
    loop.operands[1] = short.lhs


def peel_loop_two_short(m: ModuleOp) -> None:
    """The loop runs to `ub - 2 step`: one use too few."""
    _, loop = _epilogue(m)
    loop.operands[1] = _insert([arith.SubiOp(loop.ub, loop.step)], loop)


def peel_epilogue_one_use_later(m: ModuleOp) -> None:
    """The peeled stage takes the use after the last (its counter plus one)."""
    guard, loop = _epilogue(m)
    counter = _epilogue_counter(guard, loop)
    first = guard.true_region.block.first_op
    assert first is not None
    later = arith.AddiOp(counter, _const(1, first))
    _rebuild_in(guard, counter, later.result)
    later.operands[0] = counter
    Rewriter.insert_op(later, InsertPoint.before(first))


def peel_epilogue_on_ahead_counter(m: ModuleOp) -> None:
    """The peeled stage's slots are built on the counter of the ring the loop runs ahead."""
    guard, loop = _epilogue(m)
    counter = _epilogue_counter(guard, loop)
    ahead = [
        r
        for n, r in enumerate(loop.results)
        if r is not counter and r.type == i32 and isinstance(loop.iter_args[n].owner, scf.IfOp)
    ]
    if not ahead:
        raise NotApplicable("no counter from the peeled first stage")
    _rebuild_in(guard, counter, ahead[0])


def peel_epilogue_slot_one_later(m: ModuleOp) -> None:
    """The peeled stage waits on the next slot's full barrier, with the last use's parity."""
    guard, _ = _epilogue(m)
    _offset_slot(_epilogue_ops(guard, nvgpu.MBarrierWaitOp)[0], 1, 1)


def peel_epilogue_release_dropped(m: ModuleOp) -> None:
    """The peeled stage takes V and never releases it."""
    guard, _ = _epilogue(m)
    release = _epilogue_ops(guard, nvgpu.MBarrierArriveOp)[-1]
    holder = release.parent_op()
    gone = holder if isinstance(holder, scf.IfOp) and is_thread_guard(holder.cond) else release
    Rewriter.erase_op(gone)


def peel_epilogue_wait_dropped(m: ModuleOp) -> None:
    """The peeled stage reads V without waiting for its copy."""
    guard, _ = _epilogue(m)
    Rewriter.erase_op(_epilogue_ops(guard, nvgpu.MBarrierWaitOp)[0])


def peel_epilogue_release_before_mma_wait(m: ModuleOp) -> None:
    """The peeled stage releases V before the wait_group that retires P V(last)'s wgmma."""
    guard, _ = _epilogue(m)
    wait = _epilogue_ops(guard, nvgpu.WgmmaWaitGroupOp)[-1]
    release = _epilogue_ops(guard, nvgpu.MBarrierArriveOp)[-1]
    holder = release.parent_op()
    after = holder if isinstance(holder, scf.IfOp) and is_thread_guard(holder.cond) else release
    wait.detach()
    Rewriter.insert_op(wait, InsertPoint.after(after))


def peel_ring_wait_between(m: ModuleOp) -> None:
    """A copy of the last peeled stage's wait between its loop and it, outside its guard:
    after a loop of no key block it waits for a copy the producer never makes."""
    guard, _ = _epilogue(m, last=True)
    wait = _epilogue_ops(guard, nvgpu.MBarrierWaitOp)[0]
    moved = [o.clone() for o in _slot_ops(wait)]
    mapping = {}
    for old, new in zip(_slot_ops(wait), moved, strict=True):
        for n, operand in enumerate(new.operands):
            new.operands[n] = mapping.get(operand, operand)
        for a, b in zip(old.results, new.results, strict=True):
            mapping[a] = b
    Rewriter.insert_op(moved, InsertPoint.before(guard))


def _slot_ops(wait: Operation) -> list[Operation]:
    """`wait` and the ops of its block computing its operands, in program order."""
    block = wait.parent_block()
    needed, out = list(wait.operands), [wait]
    while needed:
        value = needed.pop()
        op = value.owner
        if isinstance(op, Operation) and op.parent_block() is block and op not in out:
            out.append(op)
            needed += op.operands
    assert block is not None
    return sorted(out, key=block.get_operation_index)


def peel_epilogue_counter_kept(m: ModuleOp) -> None:
    """The peeled stage yields the counter it was given: the next loop or tile takes the
    last use's slot again."""
    guard, loop = _epilogue(m)
    counter = _epilogue_counter(guard, loop)
    taken = guard.true_region.block.last_op
    kept = guard.false_region.block.last_op
    assert isinstance(taken, scf.YieldOp) and isinstance(kept, scf.YieldOp)
    at = next(n for n, v in enumerate(kept.operands) if v is counter)
    taken.operands[at] = counter


def peel_prologue_release_before_mma_wait(m: ModuleOp) -> None:
    """The peeled first stage releases K before the wait_group that retires QK^T(0): a
    wait later in the same block does not retire a wgmma for a release before it."""
    for op in Site(m).ops(scf.IfOp, "consumer"):
        if aref.is_peeled(op):
            waits = [o for o in op.true_region.block.ops if isinstance(o, nvgpu.WgmmaWaitGroupOp)]
            holders = [
                o
                for o in op.true_region.block.ops
                if isinstance(o, scf.IfOp) and is_thread_guard(o.cond)
                and any(isinstance(a, nvgpu.MBarrierArriveOp) for a in o.walk())
            ]  # fmt: skip
            if waits and holders and _precedes_in_block(waits[0], holders[0]):
                waits[0].detach()
                Rewriter.insert_op(waits[0], InsertPoint.after(holders[0]))
                return
    raise NotApplicable("no wait_group before a release in a peeled first stage")


def _precedes_in_block(a: Operation, b: Operation) -> bool:
    block = a.parent_block()
    assert block is not None
    return block.get_operation_index(a) < block.get_operation_index(b)


PEELED_MUTATIONS: dict[str, Mutation] = {
    m.name: m
    for m in [
        Mutation("peel_epilogue_dropped", "peeled stage", peel_epilogue_dropped),
        Mutation("peel_guard_not_strict", "peeled stage", peel_guard_not_strict),
        Mutation("peel_guard_on_short_bound", "peeled stage", peel_guard_on_short_bound),
        Mutation("peel_loop_to_ub", "peeled stage", peel_loop_to_ub),
        Mutation("peel_loop_two_short", "peeled stage", peel_loop_two_short),
        Mutation("peel_epilogue_one_use_later", "peeled stage", peel_epilogue_one_use_later),
        Mutation("peel_epilogue_on_ahead_counter", "peeled stage", peel_epilogue_on_ahead_counter),
        Mutation("peel_epilogue_slot_one_later", "peeled stage", peel_epilogue_slot_one_later),
        Mutation("peel_epilogue_release_dropped", "peeled stage", peel_epilogue_release_dropped),
        Mutation("peel_epilogue_wait_dropped", "peeled stage", peel_epilogue_wait_dropped),
        Mutation(
            "peel_epilogue_release_before_mma_wait",
            "wgmma retirement",
            peel_epilogue_release_before_mma_wait,
        ),
        Mutation(
            "peel_prologue_release_before_mma_wait",
            "wgmma retirement",
            peel_prologue_release_before_mma_wait,
        ),
        Mutation("peel_ring_wait_between", "peeled stage", peel_ring_wait_between),
        Mutation("peel_epilogue_counter_kept", "peeled stage", peel_epilogue_counter_kept),
    ]
}
