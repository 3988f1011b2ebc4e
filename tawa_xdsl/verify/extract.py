"""Extract each ring's barrier protocol from lowered IR: the mbarrier level (what lower-aref
produced) or the nvgpu level (what lower-to-nvgpu and legalize-nvgpu produced, what emit-ptx
prints).

Per ring (a `full` mbarrier array carrying the `tawa.ring` certificate parameters, its `empty`
partner and the smem buffers its copies fill), per warp group, the ring's ops of the group's
loop body, in program order, each with its slot and parity expression read back by
`protocol.match_slot` / `match_parity` relative to the body's use counter:

    producer:  wait empty[(k+o) mod D], parity   arrive(_expect_tx) full[...]   tma / store
    consumer:  wait full[...], parity            read buf[...]                  arrive empty[...]

Groups. At the mbarrier level a group is an `aref.group` (its role and warpgroup count are
attributes), run once per warpgroup. At the nvgpu level the groups are the branches of the
`scf.if` chain on `nvgpu.warpgroup_index` (`wg < c`) at the kernel's top level, run by all 128
threads of each warpgroup: an arrive or a copy must be under a one-thread guard
(`thread_index == c`), so that each warpgroup arrives once, as the init counts expect; a
group's role is what it does (the group that arrives on a ring's full barrier is its
producer). A consumer's read of a slot is an `nvgpu.smem_load` (mbarrier level) or a wgmma
operand (nvgpu level). A wgmma reads shared memory until the `wgmma_wait_group` that retires
it: a release of the slot must come after a wait_group that provably retired every wgmma
reading it (`_check_retired`).

Every assumption of the model is checked on the IR, or the IR is refused (`ExtractionError`,
naming the op's location):

* counters: every slot and parity expression of a ring op is built on the use counter of the
  loop that holds it (a loop-carried value starting at the tile's start and incremented by
  one each iteration; the lookahead counter starts one ahead and is incremented by the
  lookahead's `scf.if`), or on the tile's start outside the loop; the tile's start is 0,
  or, in a loop of tiles, the counter the previous tile left (through the uniform
  conditionals around the tile's loops: each yields their end when taken and the tile's
  start when not; a condition may differ from tile to tile, as a trip count may: the
  rings' proofs take every tile's number of uses as arbitrary, a skipped tile has none,
  and the groups compute it alike, compared structurally with the trip counts; a start of
  the tile index times the trip count, which counts skipped tiles' uses, is refused under a
  condition); slot and parity are taken modulo the ring's depth and their argument is never
  negative (offsets are then reduced to one ring turn, exactly);
* guards: a release carrying `tawa.lag = L` is under `scf.if (counter - start >= L)`; the
  loop marked `tawa.drain = L` after the main loop releases `[max(end - L, start), end)`; an
  `scf.if` marked `tawa.stage = 0` in the loop body (the lookahead) is guarded by
  `iv + step < ub` and acts on use k + 1, the one marked `tawa.peeled` in front of the loop
  by `lb < ub`; any other guard around ring ops (warpgroup-dependent ones included), ring ops
  in an else-branch or in any other region op are refused;
* the peeled last iteration (`rotate_peeled`): a loop to `ub - step` followed, with only
  index arithmetic and wgmma waits in between, by an `scf.if (lb < ub)` marked `tawa.stage =
  1, tawa.peeled` is modelled as the loop to `ub` (`modelled_ub`, in the trip count): its
  steps on a counter the peeled first stage started one ahead act on use k + 1 (the model's
  lookahead, skipped in the last iteration), the others on k; the stage after it, built on
  the loop's results of those other counters, must hold exactly their steps (the last use)
  in the body's order across rings, and its counter results, one use on, end the loop;
  releases in the peeled stages are checked for wgmma retirement like the body's;
* barriers: each array is initialized exactly once, before the groups, followed by
  `fence_mbarrier_init` and a CTA barrier; every barrier op of a group is on a ring's full or
  empty array; copies complete on the full barrier of the ring whose buffer they fill; the
  roles hold (producers wait on empty and arrive on full, consumers the other way round);
* buffers: each ring buffer has D slots and is filled by the ring's copies (or stores);
* trip counts: the loop nest around a ring's ops is kept as an expression of its bounds
  (never of the warpgroup or thread index), compared structurally across groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from io import StringIO

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.printer import Printer

from tawa_xdsl import protocol
from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.dialects import aref, nvgpu
from tawa_xdsl.dialects.nvgpu import THREADS_ATTR, WARPGROUP_THREADS


class ExtractionError(Exception):
    """The IR is not in the shape the verifier models (reported, never silently accepted)."""


@dataclass(frozen=True)
class Step:
    """One barrier-relevant op of a loop body. `kind`: wait | arrive | tma | store | read."""

    kind: str
    barrier: str  # "full" | "empty" | "" (reads and stores)
    slot_off: int
    slot_mod: int
    parity_off: int = 0
    parity_div: int = 1
    parity_flip: int = 0
    tx: int = 0  # expect_tx bytes of an arrive; bytes a copy delivers
    buffer: int = -1  # which payload buffer a copy / store / read touches
    bar_slot_off: int = 0  # a copy completes on full[(k + bar_slot_off) mod slot_mod]
    lag: int = 0  # the step acts on use k - lag (guarded k >= lag, drained after the loop)
    loc: str = "<unknown>"
    text: str = ""
    pos: int = -1  # program-order index of the op in its group (`compose.py`; not in the key)
    ahead: bool = False  # under the lookahead guard `iv + step < ub`: acts on use k + 1

    def slot(self, use: int) -> int:
        return (use + self.slot_off) % self.slot_mod

    def bar_slot(self, use: int) -> int:
        return (use + self.bar_slot_off) % self.slot_mod

    def parity(self, use: int) -> int:
        return (((use + self.parity_off) // self.parity_div) & 1) ^ self.parity_flip


@dataclass
class Segment:
    """One loop of an actor's sequence of loops over the ring (`compose.py` orders them):
    its steps with their program positions, its peeled use, its drain's position."""

    steps: list[Step]
    prologue: list[Step]
    drain_pos: int
    loop: int | None  # identity of the innermost loop (the same for rings sharing it)


@dataclass
class Actor:
    """A warp group's part in one ring: `count` identical warpgroups running `steps` per use."""

    name: str
    role: str
    count: int
    steps: list[Step]
    trip: tuple  # structural trip-count expression of the loop nest
    drain: bool = False  # lagged releases are drained after the loop
    group: int = -1  # which warp-group op (program-order index in the module)
    prologue: list[Step] = field(default_factory=list)  # the peeled first use, before the loop
    loop_depth: int = 1  # loops around the steps (one less than the inner loop: once per tile)
    drain_pos: int = -1  # program-order index of the drained release (after the loop)
    segments: list[Segment] = field(default_factory=list)  # the loops of its sequence

    @property
    def lag(self) -> int:
        return max((s.lag for s in self.steps), default=0)


@dataclass
class RingProtocolModel:
    """What the verifier checks for one ring."""

    name: str
    depth: int
    full_count: int
    empty_count: int
    producer: Actor
    consumers: list[Actor]
    certificate: dict[str, int] = field(default_factory=dict)  # what lower-aref meant
    trip_delta: dict[str, int] = field(default_factory=dict)  # consumer trip - producer trip
    loc: str = "<unknown>"


def fail(op: Operation | SSAValue, message: str) -> ExtractionError:
    """An `ExtractionError` naming the place of `op` (or of the op defining a value)."""
    if isinstance(op, SSAValue):
        owner = op.owner
        op = owner if isinstance(owner, Operation) else owner.parent_op()
    return ExtractionError(f"{op_location(op)}: {message}")  # type: ignore[arg-type]


# ----------------------------------------------------------------------- trip expressions

_PER_THREAD = (nvgpu.WarpgroupIndexOp, aref.WarpgroupIndexOp, nvgpu.ThreadIndexOp)


def _expr(value: SSAValue) -> tuple:
    """A structural key of an i32 value: its defining ops (name, properties, operands) down to
    kernel arguments and constants, so clones of one computation in two groups compare equal.
    A value computed from the warpgroup or thread index differs between groups: refused."""
    const = protocol.constant_of(value)
    if const is not None:
        return ("c", const)
    op = value.owner
    if isinstance(op, Operation):
        if isinstance(op, _PER_THREAD) or isinstance(op, nvgpu.ElectSyncOp):
            raise fail(op, f"a loop bound or guard depends on '{op.name}' (differs per group)")
        if op.regions:
            return ("region-op", op.name, id(op))
        props = tuple(sorted((k, str(v)) for k, v in op.properties.items()))
        index = list(op.results).index(value)
        return (op.name, props, index, *(_expr(v) for v in op.operands))
    block = op
    parent = block.parent_op()
    if isinstance(parent, func.FuncOp):
        return ("kernel-arg", getattr(value, "index", 0))
    if isinstance(parent, scf.ForOp) and value == parent.body.block.args[0]:
        # Two loops with structurally equal bounds walk the same induction variable values.
        return ("iv", _expr(parent.lb), _expr(parent.ub), _expr(parent.step))
    return ("arg", id(block), getattr(value, "index", 0))


def _trip_key(loops: list[scf.ForOp]) -> tuple:
    return tuple((_expr(f.lb), _expr(modelled_ub(f)), _expr(f.step)) for f in loops)


peeled_last = aref.peeled_last_after


def modelled_ub(loop: scf.ForOp) -> SSAValue:
    """The loop's upper bound in the model: `ub` for a loop to `ub - step` followed by its
    peeled last stage (the model's last iteration), else the loop's own."""
    short = loop.ub.owner
    if (
        isinstance(short, arith.SubiOp)
        and _same(short.rhs, loop.step)
        and peeled_last(loop) is not None
    ):
        return short.lhs
    return loop.ub


def trip_difference(a: tuple, b: tuple) -> int | None:
    """b - a when the loop nests are the same up to a constant on the innermost upper bound."""
    if a == b:
        return 0
    if "sequence" in (a[:1] + b[:1]):
        return None  # loops in sequence: compared whole, loop by loop
    if len(a) != len(b) or a[:-1] != b[:-1] or a[-1][0] != b[-1][0] or a[-1][2] != b[-1][2]:
        return None

    def split(e: tuple) -> tuple[tuple, int]:
        if e[0] in ("arith.addi", "arith.subi") and e[4][0] == "c":
            base, off = split(e[3])
            return base, off + (e[4][1] if e[0] == "arith.addi" else -e[4][1])
        return e, 0

    (ba, oa), (bb, ob) = split(a[-1][1]), split(b[-1][1])
    step = a[-1][2][1] if a[-1][2][0] == "c" else None
    if ba != bb or not step or (ob - oa) % step:
        return None  # a bound moved by a part of a step: another trip count, not a constant
    return (ob - oa) // step


# ---------------------------------------------------------------------------- the groups


@dataclass
class Group:
    """One warp group: its body, role, warpgroup count and how many threads of a warpgroup
    run the body (1 at the mbarrier level, 128 at the nvgpu level)."""

    op: Operation
    body: Block
    role: str
    count: int
    threads: int
    index: int


def _warpgroup_split(op: Operation, wg: SSAValue | None) -> int | None:
    """c when `op` is `scf.if (wg < c)` on the kernel's warpgroup index, else None."""
    if not isinstance(op, scf.IfOp) or wg is None:
        return None
    cond = op.cond.owner
    if isinstance(cond, arith.CmpiOp) and cond.predicate.value.data == 6 and cond.lhs == wg:
        return protocol.constant_of(cond.rhs)
    return None


def _branches(op: scf.IfOp, lo: int, total: int, wg: SSAValue) -> list[tuple[Block, int, int]]:
    """The groups of an `scf.if` chain on the warpgroup index: (body, first, end)."""
    split = _warpgroup_split(op, wg)
    assert split is not None
    if not lo < split < total:
        raise fail(op, f"warpgroup split at {split} outside the groups {lo}..{total}")
    out = [(op.true_region.blocks[0], lo, split)]
    if not op.false_region.blocks:
        raise fail(op, "warpgroups past the split run no group (no else-branch)")
    rest = op.false_region.blocks[0]
    nested = [o for o in rest.ops if _warpgroup_split(o, wg) is not None]
    others = [o for o in rest.ops if not isinstance(o, arith.ConstantOp | arith.CmpiOp)]
    if nested and others == [nested[0], rest.last_op] and isinstance(rest.last_op, scf.YieldOp):
        return out + _branches(nested[0], split, total, wg)  # type: ignore[arg-type]
    return [*out, (rest, split, total)]


def kernel_groups(module: ModuleOp, full_bars: list[SSAValue]) -> list[Group]:
    """The warp groups of the module's kernel, at either level (module docstring)."""
    specializes = [op for op in module.walk() if isinstance(op, aref.WarpSpecializeOp)]
    if len(specializes) > 1:
        raise fail(specializes[1], "a second aref.warp_specialize (one per kernel is modelled)")
    if specializes:
        return [
            Group(g, g.body.block, str(g.role.data), g.num_warpgroups, 1, n)
            for n, g in enumerate(specializes[0].groups())
        ]
    kernels = [op for op in module.walk() if isinstance(op, func.FuncOp)]
    if len(kernels) != 1:
        raise ExtractionError(f"{len(kernels)} kernels in the module (one is modelled)")
    kernel = kernels[0]
    wgs = [op.result for op in kernel.walk() if isinstance(op, nvgpu.WarpgroupIndexOp)]
    if len(wgs) != 1:
        raise fail(kernel, "neither aref groups nor one nvgpu.warpgroup_index to split on")
    wg = wgs[0]
    splits = [op for op in kernel.body.block.ops if _warpgroup_split(op, wg) is not None]
    if len(splits) != 1:
        raise fail(kernel, "the warp groups are not one scf.if chain on the warpgroup index")
    threads = kernel.attributes.get(THREADS_ATTR)
    if not isinstance(threads, IntegerAttr) or threads.value.data % WARPGROUP_THREADS:
        raise fail(kernel, f"no {THREADS_ATTR} attribute of whole warpgroups")
    total = threads.value.data // WARPGROUP_THREADS
    groups = []
    for n, (body, lo, end) in enumerate(_branches(splits[0], 0, total, wg)):  # type: ignore[arg-type]
        holder = body.parent_op()
        assert holder is not None
        produces = any(
            isinstance(
                op, nvgpu.MBarrierArriveExpectTxOp | nvgpu.MBarrierArriveOp | nvgpu.TmaLoadOp
            )
            and op.bars in full_bars
            for op in body.walk()
        )
        role = "producer" if produces else "consumer"
        groups.append(Group(holder, body, role, end - lo, WARPGROUP_THREADS, n))
    return groups


def is_thread_guard(cond: SSAValue) -> bool:
    """`thread_index == c`: one thread of each warpgroup."""
    op = cond.owner
    return (
        isinstance(op, arith.CmpiOp)
        and op.predicate.value.data == 0
        and isinstance(op.lhs.owner, nvgpu.ThreadIndexOp)
        and protocol.constant_of(op.rhs) is not None
    )


# ------------------------------------------------------------------------- ring discovery


@dataclass
class Ring:
    """The ops that make up one ring: its barrier arrays, buffers and certificate."""

    alloc: nvgpu.MBarrierAllocOp
    name: str
    full: SSAValue
    empty: SSAValue
    buffers: list[SSAValue]
    certificate: dict[str, int]

    @property
    def depth(self) -> int:
        return self.alloc.bars.type.num_barriers  # type: ignore[union-attr]


def _text(op: Operation) -> str:
    out = StringIO()
    Printer(stream=out).print_op(op)
    return out.getvalue().split("\n")[0].strip()


def _barrier_ops(module: ModuleOp) -> list[Operation]:
    kinds = nvgpu.MBarrierWaitOp | nvgpu.MBarrierArriveOp | nvgpu.MBarrierArriveExpectTxOp
    return [op for op in module.walk() if isinstance(op, kinds)]


def _empty_partner(module: ModuleOp, full: SSAValue, fulls: list[SSAValue]) -> SSAValue:
    """The barrier array the producer waits on last before it arrives on `full`."""
    partners = []
    for op in module.walk():
        if isinstance(op, nvgpu.MBarrierArriveOp | nvgpu.MBarrierArriveExpectTxOp) and (
            op.bars == full
        ):
            prev = op.prev_op
            while prev is not None:
                if isinstance(prev, nvgpu.MBarrierWaitOp) and prev.bars not in fulls:
                    partners.append(prev.bars)
                    break
                prev = prev.prev_op
    if not partners:
        raise fail(full, "no producer waits on an empty barrier before arriving on it")
    if any(p != partners[0] for p in partners):
        raise fail(full, "the producer waits on different barriers before arriving on it")
    return partners[0]


def _buffer_reads(op: Operation) -> list[tuple[SSAValue, SSAValue]]:
    """(buffer, slot) of every smem slot `op` reads."""
    if isinstance(op, nvgpu.SmemLoadOp):
        return [(op.buf, op.slot)]
    if isinstance(op, nvgpu.WgmmaMmaAsyncOp):
        return [(op.a_buf, op.a_slot), (op.b_buf, op.b_slot)]
    if isinstance(op, nvgpu.WgmmaMmaAsyncRsOp):
        return [(op.b_buf, op.b_slot)]
    return []


def find_rings(module: ModuleOp) -> list[Ring]:
    """Every ring of the module, with its barrier arrays and buffers checked (docstring)."""
    allocs = [op for op in module.walk() if isinstance(op, nvgpu.MBarrierAllocOp)]
    ring_allocs = [a for a in allocs if aref.RING_ATTR in a.attributes]
    fulls = [a.bars for a in ring_allocs]
    rings = []
    for alloc in ring_allocs:
        attr = alloc.attributes[aref.RING_ATTR]
        name = attr.data.get("name") if isinstance(attr, DictionaryAttr) else None
        if not isinstance(name, StringAttr):
            raise fail(alloc, f"{aref.RING_ATTR} is not a dictionary with a name")
        cert = {k: v.value.data for k, v in attr.data.items() if isinstance(v, IntegerAttr)}
        empty = _empty_partner(module, alloc.bars, fulls)
        if empty.type != alloc.bars.type:
            raise fail(empty, f"ring {name.data}: empty and full arrays differ in size")
        rings.append(Ring(alloc, name.data, alloc.bars, empty, [], cert))
    owner = {id(r.full): r for r in rings}
    for op in module.walk():
        if isinstance(op, nvgpu.TmaLoadOp):
            ring = owner.get(id(op.bars))
            if ring is None:
                raise fail(op, "a TMA copy completes on a barrier of no ring's full array")
            for other in rings:
                if other is not ring and op.buf in other.buffers:
                    raise fail(op, f"buffer of ring {other.name} filled by ring {ring.name}")
            if op.buf not in ring.buffers:
                ring.buffers.append(op.buf)
    for ring in rings:
        for op in module.walk():
            if isinstance(op, nvgpu.SmemStoreOp) and _stores_for(op, ring):
                if op.buf not in ring.buffers:
                    ring.buffers.append(op.buf)
    paired = {id(r.full) for r in rings} | {id(r.empty) for r in rings}
    for op in _barrier_ops(module):
        if id(op.bars) not in paired:  # type: ignore[attr-defined]
            raise fail(op, f"'{op.name}' on a barrier array that is no ring's ({aref.RING_ATTR})")
    filled = {id(b) for r in rings for b in r.buffers}
    for op in module.walk():
        for buf, _ in _buffer_reads(op):
            if id(buf) not in filled and not _is_staging(module, buf):
                raise fail(op, f"'{op.name}' reads a buffer no ring copy or store fills")
    for ring in rings:
        for buf in ring.buffers:
            if buf.type.slot_count != ring.depth:  # type: ignore[attr-defined]
                raise fail(
                    buf,
                    f"buffer of ring {ring.name} has {buf.type.slot_count} slots, the ring "  # type: ignore[attr-defined]
                    f"{ring.depth}",
                )
    return rings


def _stores_for(op: nvgpu.SmemStoreOp, ring: Ring) -> bool:
    """A store in a block that arrives on the ring's full barrier (a register payload)."""
    block = op.parent_block()
    return block is not None and any(
        isinstance(o, nvgpu.MBarrierArriveOp) and o.bars == ring.full for o in block.ops
    )


def _is_staging(module: ModuleOp, buf: SSAValue) -> bool:
    """A buffer written by the threads themselves (epilogue staging), not a ring's."""
    return any(
        isinstance(op, nvgpu.SmemStoreOp | nvgpu.FragmentStoreOp) and op.buf == buf
        for op in module.walk()
    )


# ------------------------------------------------------------------------ inits and fence


def check_inits(module: ModuleOp, rings: list[Ring], groups: list[Group]) -> dict[int, int]:
    """Each array initialized once, before the groups, behind the init fence and a CTA
    barrier; returns the init count of each array (by id)."""
    order = {id(op): n for n, op in enumerate(module.walk())}
    group_start = min(order[id(g.body.first_op)] for g in groups if g.body.first_op)
    inside = {id(op) for g in groups for op in g.body.walk()}
    counts: dict[int, int] = {}
    last_init = -1
    for op in module.walk():
        if isinstance(op, nvgpu.MBarrierInitOp):
            if id(op) in inside or order[id(op)] > group_start:
                raise fail(op, "an mbarrier init after the warp groups started")
            if id(op.bars) in counts:
                raise fail(op, "a second init of the same barrier array")
            counts[id(op.bars)] = op.count.value.data
            last_init = max(last_init, order[id(op)])
    for ring in rings:
        for bars in (ring.full, ring.empty):
            if id(bars) not in counts:
                raise fail(bars, f"a barrier array of ring {ring.name} is never initialized")
    fences = [
        order[id(op)]
        for op in module.walk()
        if isinstance(op, nvgpu.FenceMBarrierInitOp) and last_init < order[id(op)] < group_start
    ]
    if not fences:
        raise fail(rings[0].alloc, "no fence_mbarrier_init between the inits and the groups")
    syncs = [
        op
        for op in module.walk()
        if isinstance(op, nvgpu.CtaBarrierOp) and min(fences) < order[id(op)] < group_start
    ]
    if not syncs:
        raise fail(rings[0].alloc, "no CTA barrier between the init fence and the groups")
    return counts


def check_outside(module: ModuleOp, rings: list[Ring], groups: list[Group]) -> None:
    """Every barrier and slot op of a ring is inside a warp group."""
    inside = {id(op) for g in groups for op in g.body.walk()}
    bufs = {id(b) for r in rings for b in r.buffers}
    barrier_ops = {id(op) for op in _barrier_ops(module)}
    for op in module.walk():
        touches = isinstance(op, nvgpu.TmaLoadOp | nvgpu.SmemStoreOp) and id(op.buf) in bufs
        touches |= any(id(b) in bufs for b, _ in _buffer_reads(op))
        if (touches or id(op) in barrier_ops) and id(op) not in inside:
            raise fail(op, f"'{op.name}' of a ring outside every warp group")


# --------------------------------------------------------------------------- the counters


def _yield_of(block: Block, index: int) -> SSAValue:
    last = block.last_op
    if not isinstance(last, scf.YieldOp) or index >= len(last.operands):
        raise ExtractionError("a loop or branch without a yield of its values")
    return last.operands[index]


def _plus_one(value: SSAValue, of: SSAValue) -> bool:
    base, off = protocol.split_offset(value)
    return base == of and off == 1


@dataclass(frozen=True)
class Counter:
    """A use counter of a loop: `value` = start + k + `ahead` in iteration k."""

    value: SSAValue
    start: SSAValue  # the tile's start (counter value before the loop)
    init: SSAValue  # the loop's init operand (start, or the peeled copy's result)
    ahead: int
    loop: scf.ForOp | None
    index: int  # which loop-carried value


Starts = list[tuple[SSAValue, Operation]]


def _counter(
    base: SSAValue, loops: list[scf.ForOp], op: Operation, starts: Starts | None = None
) -> Counter:
    """The counter `base` is, checked: a loop-carried value of the innermost loop incremented
    by one (the lookahead's conditionally), starting at the tile's start (+1 after a peeled
    first use); or `start + iv` in a loop from 0 by 1; or the tile's start outside any loop."""
    if not loops:
        start = _tile_start(base, [], op, starts=starts)
        return Counter(base, start, start, 0, None, -1)
    loop = loops[-1]
    block = loop.body.block
    affine = _affine_start(base, loop)
    if affine is not None:
        _tile_start(affine, loops[:-1], op, loop, starts)
        return Counter(base, affine, affine, 0, loop, -1)
    if not (isinstance(base, BlockArgument) and base.block is block and base.index >= 1):
        raise fail(op, f"'{op.name}': slot or parity is not built on its loop's use counter")
    index = base.index - 1
    step = _yield_of(block, index)
    if not _plus_one(step, base) and not _lookahead_step(step, base):
        raise fail(op, f"'{op.name}': its use counter is not incremented by one per iteration")
    init = loop.iter_args[index]
    ahead, start = 0, init
    peeled = init.owner
    if isinstance(peeled, scf.IfOp) and aref.is_peeled(peeled):
        at = list(peeled.results).index(init)
        then = _yield_of(peeled.true_region.blocks[0], at)
        other = _yield_of(peeled.false_region.blocks[0], at)
        if not _plus_one(then, other):
            raise fail(peeled, "the peeled first use does not advance the counter by one")
        ahead, start = 1, other
    _tile_start(start, loops[:-1], op, loop, starts)
    return Counter(base, start, init, ahead, loop, index)


def _counts_from_zero(loop: scf.ForOp) -> bool:
    """The loop's induction variable is its iteration index (0 to ub by 1)."""
    return protocol.constant_of(loop.lb) == 0 and protocol.constant_of(loop.step) == 1


def _affine_start(value: SSAValue, loop: scf.ForOp) -> SSAValue | None:
    """start when `value` is `start + iv` of a loop counting from 0 by 1."""
    op = value.owner
    iv = loop.body.block.args[0]
    if not (isinstance(op, arith.AddiOp) and _counts_from_zero(loop)):
        return None
    for mine, other in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
        if mine == iv and not _inside(other, loop):
            return other
    return None


def _inside(value: SSAValue, loop: Operation) -> bool:
    owner = value.owner
    op = owner if isinstance(owner, Operation) else owner.parent_op()
    while op is not None:
        if op is loop:
            return True
        op = op.parent_op()
    return False


def _folded(value: SSAValue) -> int | None:
    """The value of an i32 expression of constants (addi, subi, muli), else None."""
    const = protocol.constant_of(value)
    if const is not None:
        return const
    op = value.owner
    kinds = {arith.AddiOp: int.__add__, arith.SubiOp: int.__sub__, arith.MuliOp: int.__mul__}
    for kind, apply in kinds.items():
        if isinstance(op, kind):
            lhs, rhs = _folded(op.lhs), _folded(op.rhs)  # type: ignore[attr-defined]
            return None if lhs is None or rhs is None else apply(lhs, rhs)
    return None


def _lookahead_step(step: SSAValue, base: SSAValue) -> bool:
    """`step` is yielded by the lookahead `scf.if` as base + 1 (then) or base (else)."""
    cond = step.owner
    if not (isinstance(cond, scf.IfOp) and aref.stage_of(cond) == 0 and cond.false_region.blocks):
        return False
    at = list(cond.results).index(step)
    then = _yield_of(cond.true_region.blocks[0], at)
    other = _yield_of(cond.false_region.blocks[0], at)
    return _plus_one(then, base) and other == base


def _tile_start(
    value: SSAValue,
    outer: list[scf.ForOp],
    op: Operation,
    inner: scf.ForOp | None = None,
    starts: Starts | None = None,
) -> SSAValue:
    """A tile's start: 0 outside every loop, else the counter of the enclosing loop, which
    continues from tile to tile (its next value is what this tile's loop left), or the
    tile's index times the trip count of `inner` (a loop from 0 by 1). With `starts`, the
    start is recorded there, and the result of a loop or conditional (where an earlier loop
    of a sequence ended) is accepted: `check_threading` proves it the previous loop's end."""
    if starts is not None:
        starts.append((value, op))
        if isinstance(value.owner, scf.ForOp | scf.IfOp):
            return value
    if not outer:
        if _folded(value) != 0:
            raise fail(op, f"'{op.name}': its use counter does not start at 0")
        return value
    loop = outer[-1]
    block = loop.body.block
    if inner is not None and len(outer) == 1 and _tile_times_trip(value, loop, inner):
        if any(isinstance(o, scf.IfOp) for o in _ancestors(inner) if loop.is_ancestor(o)):
            # A condition may skip a tile's loop, and its uses, which this counter counts.
            raise fail(
                op, f"'{op.name}': its use counter counts every tile's trips (the tile index "
                "times the trip count) but its loop runs under a condition",
            )  # fmt: skip
        return value
    if not (isinstance(value, BlockArgument) and value.block is block and value.index >= 1):
        raise fail(op, f"'{op.name}': its use counter restarts in every iteration of a loop")
    nxt = _yield_of(block, value.index - 1)
    chained = starts is not None and _ends_chain(nxt, value, block)  # `check_threading` checks
    if not (_plus_one(nxt, value) or _continues(nxt, value) or chained):
        raise fail(op, f"'{op.name}': the next tile does not continue this tile's use counter")
    _tile_start(loop.iter_args[value.index - 1], outer[:-1], op)
    return value


def _tile_times_trip(value: SSAValue, tiles: scf.ForOp, inner: scf.ForOp) -> bool:
    """`((t - lb) / step) * ub`: the uses of the tiles before this one, every tile running
    `inner` (from 0 by 1 to the loop-invariant ub) once."""
    mul = value.owner
    if not (isinstance(mul, arith.MuliOp) and _counts_from_zero(inner)):
        return False
    for index, trip in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
        div, sub = index.owner, None
        if isinstance(div, arith.DivSIOp | arith.DivUIOp) and _same(div.rhs, tiles.step):
            sub = div.lhs.owner
        if (
            isinstance(sub, arith.SubiOp)
            and sub.lhs == tiles.body.block.args[0]
            and _same(sub.rhs, tiles.lb)
            and _same(trip, inner.ub)
            and not _inside(inner.ub, tiles)
        ):
            return True
    return False


def _ends_chain(nxt: SSAValue, start: SSAValue, block: Block) -> bool:
    """`nxt` ends a chain of loops of `block`, each starting its counter where the one before
    ended and the first at `start` (a tile's sequence of loops), maybe through conditionals
    of the block (read through their taken branch). Only the shape: which loops and
    conditionals these are is `check_threading`'s (the ring's loops and the uniform
    conditionals around them, the tile ending where its last loop ends)."""
    tiles = block.parent_op()
    assert tiles is not None
    while not _continues(nxt, start):
        last = _through_last(nxt)
        if last is not None:  # a loop's peeled last stage: on to where that loop started
            loop = last.owner
            nxt = loop.iter_args[list(loop.results).index(last)]  # type: ignore[union-attr]
            continue
        loop = nxt.owner
        if (
            isinstance(loop, scf.IfOp)
            and _inside(nxt, tiles)
            and loop.false_region.blocks
            and not aref.is_peeled_last(loop)
        ):
            nxt = _yield_of(loop.true_region.blocks[0], list(loop.results).index(nxt))
            continue  # a conditional around loops: `check_next_tile` checks both branches
        if not (isinstance(loop, scf.ForOp) and _inside(nxt, tiles)):
            return False
        nxt = loop.iter_args[list(loop.results).index(nxt)]
        peeled = nxt.owner
        if isinstance(peeled, scf.IfOp) and aref.is_peeled(peeled):
            nxt = _yield_of(peeled.false_region.blocks[0], list(peeled.results).index(nxt))
        elif modelled_ub(loop) is not loop.ub:
            return False  # one use short of the loop's end: its peeled last stage ends it
    return True


def _continues(nxt: SSAValue, start: SSAValue) -> bool:
    """`nxt` is the result of a loop whose counter started at `start` (directly or through
    the peeled first use), or the peeled last stage's result that takes a loop's counter one
    use on (a loop to `ub - step` leaves its unpeeled counters one use short: only the stage
    after it ends them)."""
    last = _through_last(nxt)
    if last is not None:
        loop = last.owner
        return loop.iter_args[list(loop.results).index(last)] == start  # type: ignore[union-attr]
    loop = nxt.owner
    if not isinstance(loop, scf.ForOp):
        return False
    init = loop.iter_args[list(loop.results).index(nxt)]
    if init == start:
        return modelled_ub(loop) is loop.ub
    peeled = init.owner
    if isinstance(peeled, scf.IfOp) and aref.is_peeled(peeled):
        at = list(peeled.results).index(init)
        return _yield_of(peeled.false_region.blocks[0], at) == start
    return False


def _through_last(value: SSAValue) -> SSAValue | None:
    """The loop result r when `value` is the result of a peeled last stage that yields r + 1
    when taken and r when not (r a result of the loop in front of it), else None."""
    guard = value.owner
    if not (isinstance(guard, scf.IfOp) and aref.is_peeled_last(guard)):
        return None
    at = list(guard.results).index(value)
    then = _yield_of(guard.true_region.blocks[0], at)
    other = _yield_of(guard.false_region.blocks[0], at)
    loop = other.owner
    if not (isinstance(loop, scf.ForOp) and peeled_last(loop) is guard and _plus_one(then, other)):
        return None
    return other


# --------------------------------------------------------------------------- the walker


def _is_slt(
    cond: SSAValue,
    lhs: SSAValue | None,
    rhs: SSAValue,
    iv_plus_step: tuple[SSAValue, SSAValue] | None = None,
) -> bool:
    """`cond` is `arith.cmpi slt, lhs, rhs` (or `slt, iv + step, rhs`)."""
    op = cond.owner
    if not (isinstance(op, arith.CmpiOp) and op.predicate.value.data in (2, 6)):  # slt, ult
        return False
    if not _same(op.rhs, rhs):
        return False
    if iv_plus_step is None:
        return lhs is not None and _same(op.lhs, lhs)
    add = op.lhs.owner
    iv, step = iv_plus_step
    return isinstance(add, arith.AddiOp) and (
        (add.lhs == iv and _same(add.rhs, step)) or (add.rhs == iv and _same(add.lhs, step))
    )


def _same(a: SSAValue, b: SSAValue) -> bool:
    return a == b or _expr(a) == _expr(b)


def _lag_of(op: Operation) -> int:
    """The lag lower-aref wrote on an arrive (`tawa.lag`), 0 when unlagged."""
    attr = op.attributes.get(aref.LAG_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


def _drain_lag(loop: scf.ForOp) -> int:
    attr = loop.attributes[aref.DRAIN_ATTR]
    if not isinstance(attr, IntegerAttr) or attr.value.data < 1:
        raise fail(loop, f"{aref.DRAIN_ATTR} must be a lag >= 1")
    return attr.value.data


@dataclass(frozen=True)
class _At:
    """Where a ring op is: its loops, the drain loop around it, its lag, in the lookahead."""

    op: Operation
    loops: list[scf.ForOp]
    drain: scf.ForOp | None
    lag: int
    ahead: bool


@dataclass
class _Guard:
    """An `scf.if` around ring ops the model knows: a lag guard, a lookahead, a thread."""

    op: scf.IfOp
    kind: str  # "lag" | "ahead" | "peeled" | "last" | "thread" | "reads" | "uniform"


ROLE_STEPS = {
    "producer": {("wait", "empty"), ("arrive", "full"), ("tma", ""), ("store", "")},
    "consumer": {("wait", "full"), ("read", ""), ("arrive", "empty")},
}


@dataclass
class _Segment:
    """One loop of a group's sequence of loops over a ring: the ring ops of its body, the
    peeled first use before it, the drain after it, the uniform conditions around it and the
    counter values it starts from that are another loop's end (checked by `check_threading`)."""

    steps: list[Step] = field(default_factory=list)
    ops: list[tuple[Operation, Step, list[scf.ForOp]]] = field(default_factory=list)
    loops: list[scf.ForOp] | None = None
    drains: list[tuple[Operation, Step]] = field(default_factory=list)
    prologue: list[Step] = field(default_factory=list)
    prologue_loop: scf.ForOp | None = None
    lookahead: scf.ForOp | None = None
    ifs: tuple[scf.IfOp, ...] = ()  # the uniform `scf.if`s around the loop, outermost first
    starts: list[tuple[SSAValue, Operation]] = field(default_factory=list)
    ends: list[SSAValue] = field(default_factory=list)  # its counters' values after the loop
    last: list[Step] = field(default_factory=list)  # its peeled last stage (a loop to ub - step)
    # the ring ops of its peeled first and last stages (their wgmma retirement is checked)
    peeled_ops: list[tuple[Operation, Step, list[scf.ForOp]]] = field(default_factory=list)


class _GroupWalker:
    """Collect one group's steps for one ring, one `_Segment` per loop of its sequence."""

    def __init__(self, ring: Ring, group: Group, order: dict[int, int]):
        self.ring, self.group, self.order = ring, group, order
        self.seg = _Segment()
        self.segments = [self.seg]
        self.peeled: dict[int, _Segment] = {}  # by loop: its peeled first use
        self.continued: list[tuple[SSAValue, Operation]] = []  # starts another loop ended
        self.ends: list[SSAValue] = []  # the visited op's counter after its loop
        self.guards: list[_Guard] = []
        self.last_loop: scf.ForOp | None = None  # the loop of the peeled last stage walked

    def uniform_ifs(self) -> tuple[scf.IfOp, ...]:
        return tuple(g.op for g in self.guards if g.kind == "uniform")

    def enter(self, loops: list[scf.ForOp], op: Operation) -> None:
        """Start the segment of `loops` (its innermost loop follows the current one's)."""
        seg = self.seg
        if seg.loops is None:
            seg.loops, seg.ifs = loops, self.uniform_ifs()
        elif loops != seg.loops:
            seen = [s.loops[-1] for s in self.segments if s.loops]
            if not loops or len(loops) != len(seg.loops) or loops[:-1] != seg.loops[:-1]:
                raise fail(op, "the ring's ops of one group must share one loop body")
            if loops[-1] in seen:
                raise fail(op, "a loop of the ring's sequence of loops entered twice")
            self.seg = _Segment(loops=loops, ifs=self.uniform_ifs())
            self.segments.append(self.seg)
        if self.seg.ifs != self.uniform_ifs():
            raise fail(op, "ring ops of one loop under different conditions")
        ifs = self.seg.ifs
        if ifs and not (loops and ifs[-1] in _ancestors(loops[-1])):
            raise fail(op, "ring ops under a uniform condition outside its loops (not modelled)")
        if not self.seg.prologue and loops and id(loops[-1]) in self.peeled:
            peeled = self.peeled.pop(id(loops[-1]))
            self.seg.prologue, self.seg.prologue_loop = peeled.steps, loops[-1]
            self.seg.starts += peeled.starts
            self.seg.peeled_ops += peeled.ops

    # -- walking

    def walk(self, block: Block, loops: list[scf.ForOp], drain: scf.ForOp | None) -> None:
        ops = list(block.ops)
        for n, op in enumerate(ops):
            if isinstance(op, scf.ForOp) and aref.DRAIN_ATTR in op.attributes:
                self.walk(op.body.block, loops, op)
            elif isinstance(op, scf.ForOp):
                self.walk(op.body.block, [*loops, op], drain)
            elif isinstance(op, scf.IfOp):
                self.walk_if(op, ops[n + 1 :], loops, drain)
            elif op.regions:
                if any(self.touches(inner) for inner in op.walk()):
                    raise fail(op, f"ring ops inside '{op.name}' (not modelled)")
            elif self.touches(op):
                self.visit(op, loops, drain)

    def walk_if(self, op: scf.IfOp, after: list[Operation], loops: list[scf.ForOp], drain) -> None:
        """Guards, read from the schedule data (module docstring); any other guard around
        ring ops is refused, and so is a guard that disagrees with its data."""
        then_block = op.true_region.blocks[0]
        self.no_ring_ops(op)
        touched = [inner for inner in then_block.walk() if self.touches(inner)]
        if not touched:
            return
        if all(_buffer_reads(inner) for inner in touched):
            # Reads alone may be conditional: a read that does not happen reads nothing.
            self.guards.append(_Guard(op, "reads"))
            self.walk(then_block, loops, drain)
            self.guards.pop()
            return
        if aref.is_peeled_last(op):
            self.walk_last(op, loops, drain)
            return
        if aref.is_peeled(op):
            loop = next((o for o in after if isinstance(o, scf.ForOp)), None)
            if loop is None or drain is not None:
                raise fail(op, "a peeled stage is not guarded by `lb < ub` of the loop after it")
            if not _is_slt(op.cond, loop.lb, modelled_ub(loop)):
                short = loop.ub.owner
                if isinstance(short, arith.SubiOp) and _is_slt(op.cond, loop.lb, short.lhs):
                    raise fail(loop, "a loop to `ub - step` with no peeled last stage right "
                               "after it (only arith ops and wgmma waits between)")  # fmt: skip
                raise fail(op, "a peeled stage is not guarded by `lb < ub` of the loop after it")
            saved, self.seg = self.seg, _Segment(loops=[])
            self.guards.append(_Guard(op, "peeled"))
            self.walk(then_block, loops, drain)
            self.guards.pop()
            peeled, self.seg = self.seg, saved
            if id(loop) in self.peeled or any(s.prologue_loop is loop for s in self.segments):
                raise fail(op, "a second peeled stage of the same ring")
            self.peeled[id(loop)] = peeled
            return
        if aref.stage_of(op) == 0:
            if not loops or not _is_slt(
                op.cond,
                None,
                loops[-1].ub,
                iv_plus_step=(loops[-1].body.block.args[0], loops[-1].step),
            ):
                raise fail(op, "a stage-0 lookahead is not guarded by `iv + step < ub`")
            self.enter(loops, op)
            self.seg.lookahead = loops[-1]
            self.guards.append(_Guard(op, "ahead"))
            self.walk(then_block, loops, drain)
            self.guards.pop()
            return
        if self.group.threads > 1 and is_thread_guard(op.cond):
            self.guards.append(_Guard(op, "thread"))
            self.walk(then_block, loops, drain)
            self.guards.pop()
            return
        if any(_inside_loop_of(inner, then_block) for inner in touched):
            # A uniform conditional around whole loops of the sequence: the same value in
            # every group (`_expr` refuses one computed from the warpgroup or thread index).
            _expr(op.cond)
            self.guards.append(_Guard(op, "uniform"))
            self.walk(then_block, loops, drain)
            self.guards.pop()
            return
        if loops:
            self.enter(loops, op)
        self.guards.append(_Guard(op, "lag"))
        before = len(self.seg.steps)
        self.walk(then_block, loops, drain)
        self.guards.pop()
        guarded = self.seg.steps[before:]
        if not guarded or any(not st.lag or st.kind != "arrive" for st in guarded):
            raise fail(op, "ring ops under a guard the verifier does not model")

    def walk_last(self, op: scf.IfOp, loops: list[scf.ForOp], drain) -> None:
        """The last iteration's stage 1 after a loop to `ub - step` (`rotate_peeled`): under
        `lb < ub`, with nothing but index arithmetic and wgmma waits between the loop and it
        (`aref.BETWEEN_LOOP_AND_LAST`); its steps are
        the loop's last use of the ring (`finish_segment` compares them with the body's)."""
        loop = op.prev_op
        while isinstance(loop, aref.BETWEEN_LOOP_AND_LAST):
            loop = loop.prev_op
        if not isinstance(loop, scf.ForOp) or peeled_last(loop) is not op:
            what = f"'{loop.name}'" if loop is not None else "nothing"
            raise fail(op, f"a peeled last stage after {what}, not right after its loop")
        ub = modelled_ub(loop)
        if ub is loop.ub or drain is not None or not _is_slt(op.cond, loop.lb, ub):
            raise fail(op, "a peeled last stage is not guarded by `lb < ub` of the loop before "
                       "it, which runs to `ub - step`")  # fmt: skip
        seg = next((s for s in self.segments if s.loops and s.loops[-1] is loop), None)
        saved, self.seg = self.seg, _Segment(loops=[])
        self.guards.append(_Guard(op, "last"))
        self.last_loop = loop
        self.walk(op.true_region.blocks[0], loops, drain)
        self.guards.pop()
        last, self.seg = self.seg, saved
        if not last.steps:
            return
        if seg is None:
            raise fail(op, "ring ops in the peeled last stage of a loop without them")
        seg.last, seg.starts = last.steps, seg.starts + last.starts
        seg.peeled_ops += last.ops
        ends = [r for r in seg.ends if r.owner is loop]
        seg.ends += [res for res in op.results if _through_last(res) in ends]

    def no_ring_ops(self, op: scf.IfOp) -> None:
        for b in op.false_region.blocks:
            for inner in b.walk():
                if self.touches(inner):
                    raise fail(op, "ring ops in an else-branch")

    def touches(self, op: Operation) -> bool:
        ring = self.ring
        if isinstance(
            op, nvgpu.MBarrierWaitOp | nvgpu.MBarrierArriveOp | nvgpu.MBarrierArriveExpectTxOp
        ):
            return op.bars in (ring.full, ring.empty)
        if isinstance(op, nvgpu.TmaLoadOp | nvgpu.SmemStoreOp):
            return op.buf in ring.buffers
        return any(buf in ring.buffers for buf, _ in _buffer_reads(op))

    # -- one op

    def visit(self, op: Operation, loops: list[scf.ForOp], drain: scf.ForOp | None) -> None:
        self.continued, self.ends = [], []
        ahead = self.in_kind("ahead") is not None or self.runs_ahead(op, loops)
        at = _At(op, loops, drain, _lag_of(op), ahead)
        for step, level in self.steps_of(at):
            if (step.kind, step.barrier) not in ROLE_STEPS[self.group.role]:
                what = f"{step.kind} on {step.barrier}" if step.barrier else step.kind
                raise fail(op, f"a {self.group.role} does {what} of ring {self.ring.name}")
            if drain is not None:
                if step.slot_off:
                    raise fail(op, "a drained release of another slot than its use's")
                if self.seg.ifs != self.uniform_ifs():
                    raise fail(op, "a drain under other conditions than its loop")
                self.seg.drains.append((op, step))
                continue
            peeled = self.in_kind("peeled") is not None
            last = self.in_kind("last") is not None
            if not peeled and not last:
                self.enter(loops[:level], op)  # first: a repeat is one of the same loop's
                if ahead and self.in_kind("ahead") is None:
                    self.seg.lookahead = loops[-1]  # a loop to `ub - step`: its k + 1 steps
            if _repeats(step, self.seg.steps):
                continue  # the phase waited for cannot move before this group moves on
            self.seg.starts += self.continued
            if peeled or last:
                self.seg.steps.append(step)
                self.seg.ops.append((op, step, loops))
                continue
            inner = self.seg.loops[-1] if self.seg.loops else None
            self.seg.ends += [e for e in self.ends if e.owner is inner]
            self.seg.steps.append(step)
            self.seg.ops.append((op, step, loops))

    def runs_ahead(self, op: Operation, loops: list[scf.ForOp]) -> bool:
        """In a loop to `ub - step` with a peeled last stage, an op whose slot is built on a
        counter the peeled first stage started one use ahead acts on use k + 1 (the loop's
        last iteration in the model, which it skips, is the peeled last stage)."""
        if not loops or modelled_ub(loops[-1]) is loops[-1].ub:
            return False
        loop = loops[-1]
        reads = [slot for buf, slot in _buffer_reads(op) if buf in self.ring.buffers]
        for slot in reads or [getattr(op, "slot", None)]:  # the slot of this ring
            expr = protocol.match_slot(slot) if slot is not None else None
            base = protocol.split_offset(expr.base)[0] if expr is not None else None
            if isinstance(base, BlockArgument) and base.block is loop.body.block and base.index:
                init = loop.iter_args[base.index - 1].owner
                return isinstance(init, scf.IfOp) and aref.is_peeled(init)
        return False

    def thread_guarded(self) -> bool:
        return self.in_kind("thread") is not None

    def in_kind(self, kind: str) -> _Guard | None:
        return next((g for g in reversed(self.guards) if g.kind == kind), None)

    def one_thread(self, op: Operation) -> None:
        """At the thread level an arrive or a copy runs in one thread of each warpgroup."""
        if self.group.threads > 1 and not self.thread_guarded():
            raise fail(
                op,
                f"'{op.name}' by all {self.group.threads} threads of each warpgroup: the init "
                "counts expect one arrival or copy per warpgroup (guard it by one thread)",
            )

    def steps_of(self, at: _At) -> list[tuple[Step, int]]:
        """The steps of one op, each with the number of loops it belongs to."""
        op = at.op
        if at.lag and not isinstance(op, nvgpu.MBarrierArriveOp):
            raise fail(op, f"'{op.name}' carries {aref.LAG_ATTR} (only releases lag)")
        if at.lag and (self.in_kind("lag") is None or at.drain is not None):
            raise fail(op, f"a release lagged by {at.lag} outside its lag guard")
        guard = self.in_kind("lag")
        if not at.lag and guard is not None:
            raise fail(guard.op, "ring ops under a guard the verifier does not model")
        common = {
            "loc": op_location(op), "text": _text(op), "pos": self.order.get(id(op), -1),
            "ahead": at.ahead, "lag": at.lag,
        }  # fmt: skip
        depth = self.ring.depth
        if isinstance(
            op, nvgpu.MBarrierWaitOp | nvgpu.MBarrierArriveOp | nvgpu.MBarrierArriveExpectTxOp
        ):
            bar = "full" if op.bars == self.ring.full else "empty"
            off, base, level = self.slot(op.slot, at)
            if at.lag and off != 0:
                raise fail(
                    op, f"'{op.name}' with {aref.LAG_ATTR} = {at.lag} does not release slot "
                    f"`(use - {at.lag}) mod D`",
                )  # fmt: skip
            if at.lag:
                self.check_lag_guard(base, at)
            if isinstance(op, nvgpu.MBarrierWaitOp):
                par = protocol.match_parity(op.parity)
                if par is None or par.base != base:
                    raise fail(
                        op, "parity is not `((i + c) div D) & 1 [^ 1]` of the slot's counter"
                    )
                if par.divisor != depth:
                    raise fail(op, f"parity divides by {par.divisor}; the ring is {depth} deep")
                poff = self.normalize(par.offset, base, at, 2)[0]
                wait = Step("wait", bar, off, depth, poff, depth, par.flip, **common)
                return [(wait, level)]
            self.one_thread(op)
            tx = op.tx_bytes.value.data if isinstance(op, nvgpu.MBarrierArriveExpectTxOp) else 0
            return [(Step("arrive", bar, off, depth, tx=tx, **common), level)]
        if isinstance(op, nvgpu.TmaLoadOp):
            self.one_thread(op)
            off, _, level = self.slot(op.slot, at)
            boff, _, _ = self.slot(op.bar_slot, at)
            tx = op.buf.type.slot_bytes()  # type: ignore[attr-defined]
            buffer = self.ring.buffers.index(op.buf)
            tma = Step("tma", "", off, depth, tx=tx, buffer=buffer, bar_slot_off=boff, **common)
            return [(tma, level)]
        if isinstance(op, nvgpu.SmemStoreOp):
            off, _, level = self.slot(op.slot, at)
            buffer = self.ring.buffers.index(op.buf)
            return [(Step("store", "", off, depth, buffer=buffer, **common), level)]
        if self.thread_guarded() and self.group.role == "consumer":
            raise fail(op, f"'{op.name}' reads a slot in one thread only")
        out = []
        for buf, slot in _buffer_reads(op):
            if buf in self.ring.buffers:
                off, _, level = self.slot(slot, at, read=True)
                buffer = self.ring.buffers.index(buf)
                out.append((Step("read", "", off, depth, buffer=buffer, **common), level))
        return out

    def slot(self, value: SSAValue, at: _At, read: bool = False) -> tuple[int, SSAValue, int]:
        """The slot offset relative to the step's use, the counter it is built on and the
        number of loops the step belongs to."""
        op = at.op
        expr = protocol.match_slot(value)
        if expr is None:
            raise fail(op, f"slot of '{op.name}' is not `(i + c) mod D`")
        if expr.modulus != self.ring.depth:
            raise fail(
                op, f"slot of '{op.name}' is taken mod {expr.modulus}; the ring is "
                f"{self.ring.depth} deep",
            )  # fmt: skip
        off, level = self.normalize(expr.offset, expr.base, at, 1, read)
        return off, expr.base, level

    def normalize(
        self, offset: int, base: SSAValue, at: _At, turns: int, read: bool = False
    ) -> tuple[int, int]:
        """`offset` relative to the use the step acts on, reduced to `turns` ring turns
        (exact: the expression's argument is checked non-negative), and the step's level."""
        op = at.op
        level = len(at.loops)
        if at.drain is not None:
            if base != at.drain.body.block.args[0]:
                raise fail(op, "a drained release is not built on the drain loop's index")
            shift = low = 0
        else:
            counter, level = self.counter_for(base, at, read)
            if counter.loop is not None and counter.index >= 0:
                self.ends.append(counter.loop.results[counter.index])
            if counter.ahead and not at.ahead:
                raise fail(op, f"'{op.name}' uses the lookahead's counter outside the lookahead")
            if at.ahead and not counter.ahead:
                raise fail(op, f"'{op.name}' in the lookahead does not count one use ahead")
            shift = at.lag  # the step acts on use k - lag (the lookahead's: k + 1)
            low = counter.ahead + at.lag  # the counter's least value where the op runs
        if offset + low < 0:
            raise fail(op, f"the slot or parity argument of '{op.name}' can be negative")
        return (offset + shift) % (turns * self.ring.depth), level

    def counter_for(self, base: SSAValue, at: _At, read: bool) -> tuple[Counter, int]:
        """The counter a step's expression is built on, and the step's level: a read
        repeated in a deeper loop (a wgmma reading a tile's slot in every iteration) reads
        the use of the loop level its counter counts."""
        if self.in_kind("peeled") is not None:
            start = _tile_start(base, at.loops, at.op, starts=self.continued)
            return Counter(base, start, start, 0, None, -1), len(at.loops)
        if self.in_kind("last") is not None:
            return self.last_counter(base, at), len(at.loops) + 1
        if not read:
            return _counter(base, at.loops, at.op, self.continued), len(at.loops)
        for depth in range(len(at.loops) - 1, -1, -1):
            starts: Starts = []
            try:
                counter = _counter(base, at.loops[:depth], at.op, starts)
            except ExtractionError:
                continue
            self.continued += starts
            return counter, depth
        return _counter(base, at.loops, at.op, self.continued), len(at.loops)

    def last_counter(self, base: SSAValue, at: _At) -> Counter:
        """In the peeled last stage, a step acts on the loop's last use: its expression is
        built on the loop's result of a counter (checked as the body's) that the loop does
        not run ahead."""
        loop = self.last_loop
        assert loop is not None
        if base not in loop.results:
            raise fail(at.op, f"'{at.op.name}' in the peeled last stage is not built on a "
                       "counter its loop leaves")  # fmt: skip
        index = list(loop.results).index(base)
        counter = _counter(loop.body.block.args[index + 1], [*at.loops, loop], at.op,
                           self.continued)  # fmt: skip
        if counter.ahead:
            raise fail(at.op, f"'{at.op.name}' in the peeled last stage uses the counter of a "
                       "ring its loop runs one use ahead")  # fmt: skip
        return replace(counter, value=base)

    def check_lag_guard(self, base: SSAValue, at: _At) -> None:
        """A lagged release runs once `lag` uses are held: `scf.if (counter - init >= lag)`."""
        guard = self.in_kind("lag")
        assert guard is not None
        lag = at.lag
        counter = _counter(protocol.split_offset(base)[0], at.loops, at.op, [])
        cond = guard.op.cond.owner
        if not (
            isinstance(cond, arith.CmpiOp)
            and cond.predicate.value.data in (5, 9)  # sge, uge
            and protocol.constant_of(cond.rhs) == lag
        ):
            raise fail(guard.op, f"a release lagged by {lag} is not guarded by `x >= {lag}`")
        held = cond.lhs
        sub = held.owner
        ok = isinstance(sub, arith.SubiOp) and sub.lhs == counter.value and sub.rhs == counter.init
        ok |= held == counter.value and _folded(counter.init) == 0
        loop = at.loops[-1] if at.loops else None
        ok |= loop is not None and held == loop.body.block.args[0] and _counts_from_zero(loop)
        if not ok:
            raise fail(guard.op, "the lag guard does not count the uses of the release's counter")

    # -- after the walk

    def finish(self) -> None:
        """Each loop's lookahead shape and drains, and the counter threading through them."""
        for peeled in self.peeled.values():
            raise fail(peeled.ops[0][0] if peeled.ops else self.group.op,
                       "a peeled stage of a loop without the ring's ops")  # fmt: skip
        for seg in self.segments:
            if not seg.steps and (seg.drains or seg.prologue):
                raise fail(
                    self.group.op, f"ring {self.ring.name}: ring ops outside the group's loop"
                )
            self.seg = seg
            self.finish_segment()
        self.check_threading()

    def check_threading(self) -> None:
        """Loop j + 1 of the sequence starts its counter where loop j ended (through the
        uniform conditionals around loop j: their else-branch yields loop j's start)."""
        starts = []
        for seg in self.segments:
            values = {v for v, _ in seg.starts}
            if len(values) != 1:
                raise fail(seg.ops[0][0], "the ring's ops of one loop count on different counters")
            starts.append(next(iter(values)))
        first = self.segments[0]
        for value, op in first.starts:
            if isinstance(value.owner, scf.ForOp | scf.IfOp):
                raise fail(op, f"'{op.name}': its use counter does not start at the tile's start")
        for n in range(1, len(self.segments)):
            prev, seg = self.segments[n - 1], self.segments[n]
            end = self.end_of(n - 1, starts, seg.ifs)
            for value, op in seg.starts:
                if value != end:
                    raise fail(
                        op, f"'{op.name}': its use counter does not continue from where the "
                        f"ring's previous loop ({op_location(prev.loops[-1])}) ended",
                    )  # fmt: skip
        self.check_next_tile(starts)

    def check_next_tile(self, starts: list[SSAValue]) -> None:
        """A tile loop around a sequence of loops hands the next tile the counter where the
        sequence's last loop ended (the chain `_tile_start` accepted is these loops)."""
        start, last = starts[0], self.segments[-1]
        tiles = start.block.parent_op() if isinstance(start, BlockArgument) else None
        if not (isinstance(tiles, scf.ForOp) and start.index >= 1):
            return
        nxt = _yield_of(start.block, start.index - 1)
        if len(self.segments) == 1 and (_plus_one(nxt, start) or _continues(nxt, start)):
            return  # one loop per tile (or one use), unconditional: `_tile_start` checked it
        ends = [r for r in last.ends if _continues(r, starts[-1])]
        around = tuple(guard for guard in last.ifs if guard.is_ancestor(tiles))
        for end in ends:
            try:
                if self.lift(end, len(starts) - 1, starts, around) == nxt:
                    return
            except ExtractionError:
                continue
        raise fail(tiles, "the next tile does not continue from where the ring's last loop of "
                   "this tile ended")  # fmt: skip

    def end_of(self, n: int, starts: list[SSAValue], into: tuple[scf.IfOp, ...]) -> SSAValue:
        """The counter value loop n of the sequence leaves, as seen under the conditionals
        `into`: a result of its loop for a counter its ring ops use (each one started at the
        loop's start and is incremented by one, `_counter`), then the result of each
        enclosing uniform if not in `into`."""
        seg = self.segments[n]
        ends = [r for r in seg.ends if _continues(r, starts[n])]
        if not ends:
            raise fail(seg.loops[-1], "the loop does not carry the ring's use counter to its end")  # type: ignore[index]
        nxt = {v for v, _ in self.segments[n + 1].starts}
        for end in ends:
            try:
                lifted = self.lift(end, n, starts, into)
            except ExtractionError:
                continue
            if lifted in nxt:
                return lifted
        return self.lift(ends[0], n, starts, into)

    def lift(
        self, end: SSAValue, n: int, starts: list[SSAValue], into: tuple[scf.IfOp, ...]
    ) -> SSAValue:
        """`end` through the uniform ifs around loop n that are not in `into`: each must yield
        it when taken and the start of its first loop when not."""
        for guard in reversed(self.segments[n].ifs):
            if guard in into:
                break
            first = next(k for k, s in enumerate(self.segments) if guard in s.ifs)
            then_yield = guard.true_region.blocks[0].last_op
            assert isinstance(then_yield, scf.YieldOp)
            at = next((k for k, v in enumerate(then_yield.operands) if v == end), None)
            if at is None or _yield_of(guard.false_region.blocks[0], at) != starts[first]:
                raise fail(guard, "the conditional does not yield the ring's use counter (its "
                           "loops' end when taken, their start when not)")  # fmt: skip
            end = guard.results[at]
        return end

    def finish_segment(self) -> None:
        """The lookahead shape, the peeled last stage and the drains."""
        loops = self.seg.loops or []
        if loops and modelled_ub(loops[-1]) is not loops[-1].ub:
            self.check_last(loops[-1])
        if self.seg.prologue or self.seg.lookahead is not None:
            if not self.seg.prologue or self.seg.lookahead is None:
                where = self.seg.steps[0].loc if self.seg.steps else "<unknown>"
                raise ExtractionError(
                    f"{where}: a peeled prologue and a lookahead guard come in pairs (N uses)"
                )
            if (
                not loops
                or self.seg.prologue_loop is not self.seg.lookahead
                or loops[-1] is not self.seg.lookahead
            ):
                raise ExtractionError(
                    f"{self.seg.prologue[0].loc}: the peeled prologue belongs to another loop than "
                    "the lookahead"
                )
            if [_shape(x) for x in self.seg.prologue] != [_shape(x) for x in self.seg.steps]:
                raise ExtractionError(
                    f"{self.seg.prologue[0].loc}: the peeled prologue's ring ops differ from the "
                    "loop body's"
                )
        self.check_drains(loops)

    def check_last(self, loop: scf.ForOp) -> None:
        """A loop to `ub - step`: the model's loop to `ub` whose last iteration is the peeled
        last stage. Its steps run ahead (on k + 1, skipped in that iteration: the stage holds
        none of them) or not (the stage takes the last use: the same steps as the body's)."""
        seg = self.seg
        ahead = {st.ahead for st in seg.steps}
        where = seg.ops[0][0] if seg.ops else loop
        if len(ahead) != 1:
            raise fail(where, "a loop to `ub - step` with ring ops both one use ahead and not")
        if any(st.lag for st in seg.steps) or seg.drains:
            raise fail(where, "lagged releases in a loop to `ub - step` (not modelled)")
        body = [] if ahead == {True} else [_shape(st) for st in seg.steps]
        if [_shape(st) for st in seg.last] != body:
            stage = peeled_last(loop)
            assert stage is not None
            raise fail(stage, f"the peeled last stage's ops of ring {self.ring.name} differ "
                       "from its loop's (the last use)")  # fmt: skip

    def check_drains(self, loops: list[scf.ForOp]) -> None:
        lag = max((st.lag for st in self.seg.steps), default=0)
        if not self.seg.drains:
            if lag:
                raise fail(self.seg.ops[-1][0], f"releases lagged by {lag} are never drained")
            return
        if not lag or not loops:
            raise fail(self.seg.drains[0][0], "a drain of a ring whose releases do not lag")
        drain_loops = []
        for op, step in self.seg.drains:
            if step.kind != "arrive" or step.barrier != "empty":
                raise fail(op, "only releases may be drained after the ring's main loop")
            loop = op.parent_op()
            while not (isinstance(loop, scf.ForOp) and aref.DRAIN_ATTR in loop.attributes):
                loop = loop.parent_op()  # type: ignore[union-attr]
            if loop not in drain_loops:
                drain_loops.append(loop)
        if len(drain_loops) != 1 or len(self.seg.drains) != 1:
            raise fail(self.seg.drains[-1][0], "the lagged releases are drained more than once")
        self.check_drain_bounds(drain_loops[0], lag, loops)

    def check_drain_bounds(self, drain: scf.ForOp, lag: int, loops: list[scf.ForOp]) -> None:
        """`scf.for %j = max(end - L, start) to end step 1`, end the main loop's counter."""
        if _drain_lag(drain) != lag:
            raise fail(
                drain, f"drain of lag {_drain_lag(drain)} after a loop whose releases lag by {lag}"
            )
        release = next(op for op, st, _ in self.seg.ops if st.lag)
        base, _ = protocol.split_offset(protocol.match_slot(release.slot).base)  # type: ignore[attr-defined, union-attr]
        counter = _counter(base, loops, release, [])
        end = drain.ub
        if counter.index >= 0:
            ok = end == loops[-1].results[counter.index]
        else:  # `start + iv`: the loop ends at start + ub
            add = end.owner
            ok = isinstance(add, arith.AddiOp) and {add.lhs, add.rhs} == {
                counter.start,
                loops[-1].ub,
            }
        low = drain.lb.owner
        ok &= protocol.constant_of(drain.step) == 1
        ok &= isinstance(low, arith.MaxSIOp) and low.rhs == counter.init
        if ok:
            sub = low.lhs.owner  # type: ignore[union-attr]
            ok = isinstance(sub, arith.SubiOp) and sub.lhs == end
            ok &= protocol.constant_of(sub.rhs) == lag  # type: ignore[union-attr]
        if not ok:
            raise fail(
                drain,
                f"the drain does not release the last {lag} uses `[max(end - {lag}, start), end)`",
            )
        if self.order.get(id(drain), -1) < max(
            self.order.get(id(o), -1) for o, _, _ in self.seg.ops
        ):
            raise fail(drain, "a drain before the ring's main loop")


def _repeats(step: Step, steps: list[Step]) -> bool:
    """`step` is a wait for the same phase as the group's step right before it."""
    if step.kind != "wait" or not steps:
        return False
    last = steps[-1]
    return replace(last, loc=step.loc, text=step.text, pos=step.pos) == step


def _shape(st: Step) -> tuple:
    return (
        st.kind, st.barrier, st.slot_mod, st.parity_off, st.parity_div, st.parity_flip,
        st.tx, st.buffer, st.lag, st.slot_off - st.bar_slot_off,
    )  # fmt: skip


# -------------------------------------------------------------------- wgmma retirement


def _span(op: Operation, order: dict[int, int]) -> tuple[int, int]:
    inner = [order[id(o)] for o in op.walk() if id(o) in order]
    return min(inner), max(inner)


def _blocks_around(op: Operation) -> list[Block]:
    """The blocks that run whenever `op` does: its own and those of its ancestors."""
    blocks, block = [], op.parent_block()
    while block is not None:
        blocks.append(block)
        parent = block.parent_op()
        block = parent.parent_block() if parent is not None else None
    return blocks


def _commits_between(flat: list[Operation], lo: int, wait: Operation, order) -> int:
    """The commits that surely ran between position lo and `wait`: those in the wait's block
    or an enclosing one (a commit under a conditional or in a loop that may not run counts
    for nothing)."""
    held = {id(b) for b in _blocks_around(wait)}
    return sum(
        isinstance(o, nvgpu.WgmmaCommitGroupOp) and id(o.parent_block()) in held
        for o in flat[lo + 1 : order[id(wait)]]
    )


def _groups_left(ops: list[Operation], lo: int, flat: list[Operation], order) -> float:
    """The fewest groups committed before position lo that can still be in flight after
    `ops` (one block's ops, in order) ran: a wait_group N leaves N minus the groups surely
    committed since lo; an `scf.if` leaves the more of its two branches."""
    left = float("inf")
    for op in ops:
        if isinstance(op, nvgpu.WgmmaWaitGroupOp):
            left = min(left, op.pending.value.data - _commits_between(flat, lo, op, order))
        elif isinstance(op, scf.IfOp) and op.false_region.blocks:
            branches = (op.true_region.block, op.false_region.block)
            left = min(left, max(_groups_left(list(b.ops), lo, flat, order) for b in branches))
    return left


def _waits_before(flat: list[Operation], lo: int, at: int, order) -> list[tuple[int, int]]:
    """(position, pending) of every wgmma_wait_group strictly between lo and the release at
    `at` that runs whenever the release does (in its block or an enclosing one)."""
    around = {id(b) for b in _blocks_around(flat[at])}
    return [
        (n, op.pending.value.data)
        for n, op in enumerate(flat[lo + 1 : at], lo + 1)
        if isinstance(op, nvgpu.WgmmaWaitGroupOp) and id(op.parent_block()) in around
    ]


def _retired_by_then(flat: list[Operation], lo: int, at: int, order, after: Operation) -> bool:
    """The ops that surely run between position lo (the end of `after`, the read's loop or
    commit) and the release at `at` retire every wgmma group committed before lo. Those ops
    are the ones after `after` in its block and the enclosing ones (each runs before control
    leaves that block, whenever `after` ran), and those before the release in its block and
    the enclosing ones; a conditional that does not hold the release counts when both its
    branches retire."""
    release = flat[at]
    around = {id(b) for b in _blocks_around(release) + _blocks_around(after)}
    inside = {id(o) for o in _ancestors(release)}
    ops = [o for o in flat[lo + 1 : at] if id(o.parent_block()) in around and id(o) not in inside]
    return _groups_left(ops, lo, flat, order) <= 0


def _check_retired(walker: _GroupWalker, flat: list[Operation], order: dict[int, int]) -> None:
    """A release of a slot comes after a wait_group that retired every wgmma reading it."""
    ops = [x for seg in walker.segments for x in seg.ops + seg.peeled_ops]
    reads = [
        (op, loops)
        for op, st, loops in ops
        if st.kind == "read" and isinstance(op, nvgpu.WgmmaMmaAsyncOp | nvgpu.WgmmaMmaAsyncRsOp)
    ]
    releases = [(op, st, loops) for op, st, loops in ops if st.kind == "arrive"]
    releases += [(op, st, seg.loops or []) for seg in walker.segments for op, st in seg.drains]
    if not reads or walker.group.role != "consumer":
        return
    for release, step, loops in releases:
        at = order[id(release)]
        for read, read_loops in reads:
            _check_read_retired(read, read_loops, release, step, loops, at, flat, order)


def _check_read_retired(read, read_loops, release, step, loops, at, flat, order) -> None:
    here = order[id(read)]
    commit = next(
        (n for n in range(here + 1, len(flat)) if isinstance(flat[n], nvgpu.WgmmaCommitGroupOp)),
        None,
    )
    why = f"'{release.name}' releases a slot a wgmma may still read ({op_location(read)})"
    block = read.parent_block()
    if commit is not None and block is not None:
        retired = _retired_in_its_iteration(block, commit, flat, order)
        if retired is not None and (at > retired or block.parent_op() not in _ancestors(release)):
            return  # retired before the release, or before control leaves the read's block
    inner = read_loops[-1] if read_loops else None
    drained = any(
        isinstance(o, scf.ForOp) and aref.DRAIN_ATTR in o.attributes for o in _ancestors(release)
    )
    if inner is not None and (drained or inner not in _ancestors(release)):
        # The read's loop ended before the release: wait after the loop's end.
        _, end = _span(inner, order)
        if at < end:
            return  # the release precedes the loop: another use
        if not _retired_by_then(flat, end, at, order, inner):
            raise fail(release, why)
        return
    if commit is None:
        raise fail(read, f"'{read.name}' is never committed")
    if step.lag:
        body = inner.body.block  # type: ignore[union-attr]
        if _retired_in_its_iteration(body, commit, flat, order) is not None:
            return  # the slot's reads retired in their own (earlier) iteration
        # The lag-L release of iteration i frees the slot of iteration i - L, whose groups
        # are older than the (L - 1) iterations' commits in between and this iteration's
        # commits before the wait (the body's own commits: they run every iteration).
        start, _ = _span(inner, order)  # type: ignore[arg-type]
        per_iteration = sum(isinstance(o, nvgpu.WgmmaCommitGroupOp) for o in body.ops)
        waits = _waits_before(flat, start, at, order)
        if per_iteration < 1 or not any(
            pending <= (step.lag - 1) * per_iteration + _body_commits_before(body, n, order)
            for n, pending in waits
        ):
            raise fail(release, why)
        return
    if here > at:
        return  # read after the release in program order: the model sees the order
    if commit > at or not _retired_by_then(flat, commit, at, order, flat[commit]):
        raise fail(release, why)


def _body_commits_before(body: Block, position: int, order: dict[int, int]) -> int:
    return sum(
        isinstance(o, nvgpu.WgmmaCommitGroupOp) and order[id(o)] < position for o in body.ops
    )


def _retired_in_its_iteration(
    body: Block, commit: int, flat: list[Operation], order: dict[int, int]
) -> int | None:
    """The position of a wait_group of `body` itself (the read's loop body or block, run
    whenever the read is) after the read's commit that retires it before the block ends
    (any release after it, or after the block, is safe), else None. Only commits of `body`
    itself count as newer groups (a conditional one may not run)."""
    for op in body.ops:
        if isinstance(op, nvgpu.WgmmaWaitGroupOp) and order[id(op)] > commit:
            newer = sum(
                isinstance(o, nvgpu.WgmmaCommitGroupOp) and commit < order[id(o)] < order[id(op)]
                for o in body.ops
            )
            return order[id(op)] if op.pending.value.data <= newer else None
    return None


def _inside_loop_of(op: Operation, block: Block) -> bool:
    """`op` is in a loop (not a drain) that is itself inside `block`."""
    parent = op.parent_op()
    while parent is not None and parent is not block.parent_op():
        if isinstance(parent, scf.ForOp) and aref.DRAIN_ATTR not in parent.attributes:
            return True
        parent = parent.parent_op()
    return False


def _ancestors(op: Operation) -> list[Operation]:
    out = []
    parent = op.parent_op()
    while parent is not None:
        out.append(parent)
        parent = parent.parent_op()
    return out


# --------------------------------------------------------------------------- extraction


def extract(module: ModuleOp) -> list[RingProtocolModel]:
    """One model per ring of the module."""
    rings = find_rings(module)
    if not rings:
        return []
    groups = kernel_groups(module, [r.full for r in rings])
    check_outside(module, rings, groups)
    counts = check_inits(module, rings, groups)
    lasts: _Lasts = {}
    models = [_ring_model(ring, groups, counts, lasts) for ring in rings]
    _check_last_order(lasts)
    return models


# Per loop to `ub - step` (by id): its body's steps that do not run ahead and its peeled last
# stage's steps, of every ring, each as (program position, ring (by id), shape).
_Lasts = dict[int, tuple[scf.ForOp, list[tuple[int, int, tuple]], list[tuple[int, int, tuple]]]]


def _check_last_order(lasts: _Lasts) -> None:
    """The peeled last stage is the model's last iteration: the body's steps that do not run
    ahead, across the rings in the body's order (`compose.py` reads that order)."""
    for loop, body, last in lasts.values():
        if [(r, sh) for _, r, sh in sorted(body)] != [(r, sh) for _, r, sh in sorted(last)]:
            stage = peeled_last(loop)
            assert stage is not None
            raise fail(stage, "the peeled last stage's ring ops are not in its loop's order")


def _record_lasts(ring: Ring, walker: _GroupWalker, lasts: _Lasts) -> None:
    for seg in walker.segments:
        loop = seg.loops[-1] if seg.loops else None
        if loop is None or modelled_ub(loop) is loop.ub:
            continue
        _, body, last = lasts.setdefault(id(loop), (loop, [], []))
        body += [(st.pos, id(ring.alloc), _shape(st)) for st in seg.steps if not st.ahead]
        last += [(st.pos, id(ring.alloc), _shape(st)) for st in seg.last]


def _ring_model(
    ring: Ring, groups: list[Group], counts: dict[int, int], lasts: _Lasts
) -> RingProtocolModel:
    actors = []
    for group in groups:
        flat = list(group.body.walk())
        order = {id(op): n for n, op in enumerate(flat)}
        walker = _GroupWalker(ring, group, order)
        walker.walk(group.body, [], None)
        segments = [seg for seg in walker.segments if seg.steps]
        if not segments:
            if any(seg.prologue or seg.drains for seg in walker.segments) or walker.peeled:
                raise fail(group.op, f"ring {ring.name}: ring ops outside the group's loop")
            continue
        walker.segments = segments
        walker.finish()
        _record_lasts(ring, walker, lasts)
        if group.threads > 1:
            _check_retired(walker, flat, order)
        actors.append(_actor(f"{group.role}#{len(actors)}", group, segments))
    producers = [a for a in actors if a.role == "producer"]
    consumers = [a for a in actors if a.role == "consumer"]
    if len(producers) != 1 or not consumers:
        raise fail(ring.alloc, f"ring {ring.name} needs one producer and consumers")
    producer = producers[0]
    producer.name = "producer"
    for k, c in enumerate(consumers):
        c.name = "consumer" if len(consumers) == 1 else f"consumer{k}"
    deltas = {}
    for c in consumers:
        delta = trip_difference(producer.trip, c.trip)
        if delta is None:
            raise ExtractionError(
                f"{c.steps[0].loc}: cannot relate the trip count of {c.name}'s loop to the "
                "producer's (different expressions)"
            )
        deltas[c.name] = delta
    return RingProtocolModel(
        ring.name,
        ring.depth,
        counts[id(ring.full)],
        counts[id(ring.empty)],
        producer,
        consumers,
        ring.certificate,
        deltas,
        op_location(ring.alloc),
    )


def _actor(name: str, group: Group, segments: list[_Segment]) -> Actor:
    """The group's part in the ring: one loop's steps, the same in every loop of its sequence
    (so the sequence is one protocol whose tiles end where a loop ends)."""
    first = segments[0]
    for seg in segments[1:]:
        if (
            [_step_key(x) for x in seg.steps] != [_step_key(x) for x in first.steps]
            or [_step_key(x) for x in seg.prologue] != [_step_key(x) for x in first.prologue]
            or bool(seg.drains) != bool(first.drains)
            or len(seg.loops or []) != len(first.loops or [])
        ):
            raise fail(
                seg.ops[0][0], "the ring's ops in this loop differ from those in its first loop "
                f"({first.steps[0].loc})",
            )  # fmt: skip
    loops = first.loops or []
    trip = _trip_key(loops)
    if len(segments) > 1 or first.ifs:
        trip = ("sequence", *(_segment_trip(seg) for seg in segments))
    return Actor(
        name,
        group.role,
        group.count,
        first.steps,
        trip,
        bool(first.drains),
        group.index,
        first.prologue,
        len(loops),
        max((st.pos for _, st in first.drains), default=-1),
        [
            Segment(
                seg.steps,
                seg.prologue,
                max((st.pos for _, st in seg.drains), default=-1),
                id(seg.loops[-1]) if seg.loops else None,
            )
            for seg in segments
        ],
    )


def _step_key(st: Step) -> Step:
    return replace(st, loc="", text="", pos=-1)


def _segment_trip(seg: _Segment) -> tuple:
    """A loop of a sequence: the conditions around it and its loop nest's bounds."""
    return (tuple(_expr(guard.cond) for guard in seg.ifs), _trip_key(seg.loops or []))


def shape_key(ring: RingProtocolModel) -> tuple:
    """What the proof of `ring` depends on, without names or source locations: two rings
    with the same key have the same model, certificate and verdict."""

    def actor(a: Actor) -> tuple:
        steps = tuple(
            (s.kind, s.barrier, s.slot_off, s.slot_mod, s.parity_off, s.parity_div)
            + (s.parity_flip, s.tx, s.buffer, s.bar_slot_off, s.lag, s.ahead)
            for s in a.steps
        )
        prologue = tuple(
            (s.kind, s.barrier, s.slot_off, s.parity_off, s.buffer) for s in a.prologue
        )
        return (a.role, a.count, steps, a.drain, prologue, a.loop_depth)

    return (
        ring.depth,
        ring.full_count,
        ring.empty_count,
        actor(ring.producer),
        tuple(actor(c) for c in ring.consumers),
        tuple(sorted(ring.certificate.items())),
        tuple(ring.trip_delta.get(c.name, 0) for c in ring.consumers),  # by position, not name
    )
