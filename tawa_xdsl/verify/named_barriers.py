"""Named barriers and TMA-store staging at the nvgpu level: extraction, checked facts, proof.

The rings' proof (`certificate.py`, `compose.py`) covers the mbarriers. The consumers also
block on named barriers (`bar.sync` / `bar.arrive`: the ping-pong turns of two consumer
warpgroups, the staging barrier of a TMA-store epilogue) and on `tma_store_wait` (the bulk
store group still reading a staging buffer). `check_named(module)` extracts every such op,
per warpgroup, and proves:

* counts: every named barrier id is used by whole warpgroups of one group (no op under a
  thread guard), its thread count is 128 x the warpgroups taking part, and each of them
  arrives on it equally often for every trip count of every loop (the counts are exact
  polynomials in the trips, `[N > 0]` for the guards `lb < ub`, `iv != lb` (every
  iteration but the first: N - [N > 0]), `iv + step < ub` (every iteration but the
  last, the rotated loop's hand-off: N - [N > 0] too) and a ring's lag guard `x >= L`
  (the guard of a release lagged by L, which the ring extraction checks counts one use per
  iteration: N - min(N, L)) and a 0/1 variable `[c]` for each uniform condition c (an
  `scf.if` on pure integer arithmetic of kernel arguments, constants and program ids, which
  every thread of the CTA evaluates alike: the same variable in every warpgroup and for the
  same condition in every group), compared coefficient by coefficient; `iv + step` is
  assumed not to wrap, as the loop's own increment);
* turns: the warpgroups' named-barrier programs, run together with the hardware's counting
  semantics (a phase completes when its threads have arrived; a `bar.sync` waits for the
  phase it arrived in), never deadlock, never arrive twice in one phase and leave nothing
  arrived at exit, under every interleaving, for every trip count of every loop instance
  (each tile's inner loop has its own) and either value of each uniform condition (every
  trip count, below);
* staging: a buffer a `tma_store` reads is written only when no store group of the
  warpgroup may still read it (a `tma_store_wait 0` in the storing thread, then a named
  barrier the writers take part in, since the last commit), and every warpgroup ends with
  no store group in flight: an abstract interpretation of each warpgroup's program, to a
  fixpoint over every loop (so for every trip count); each staging slot is written and
  stored by one warpgroup only (its slot index a function of the warpgroup index), so the
  writers of what a warpgroup's TMA store reads are that warpgroup's threads;
* turns with the rings: no cycle of named-barrier turns and mbarrier waits (a consumer
  blocked on its turn while the other waits for a ring use that only the first one frees):
  every warpgroup's ring ops (read as `compose.py` reads them, on the per-ring proofs'
  premise that use u of a ring is put / released exactly when its ops ran, and that the
  j-th loop of the rings' sequence, and the tile loop around it, run as often in every
  group) and named-barrier ops run together, for every trip count of every loop instance
  and tile count (a ring may use some of the loops of the sequence, its uses count on
  through those and across tiles) and either value of each uniform condition (a ring op
  under a false one, around whole loops of ring ops, does not run). Waits and syncs are
  enabled monotonically by what the others did (the turns, proved alone, complete each
  phase with one arrival of each participant, so a sync waits for the k-th arrivals), so
  for each choice of trip counts any one maximal run decides;
* slot reads: a ring slot every thread reads into registers (`fragment_load*`) is released
  by its one thread only after a `bar.sync` of every thread of the group, between the read
  and the release in program order (before a drain's loop for its releases; a drain with no
  ring op after it needs none: no use D later exists to refill the slot).

Every trip count. The turns and the turns with the rings are searched with the trip count
of every loop instance left open: a record per instance (a loop, and the counters of the
loops around it) holds what the run has learnt of its n, exactly n or only n >= b, and a
question the record does not answer (at a loop head: k = n? under `iv + step < ub`:
k + 1 = n? `lb < ub`: n >= 1? a drain's release of use n - j: n >= j?) splits the run into
one run per answer (n = b, ..., n = v, or n > v). Every warpgroup of an instance reads
the one record, so the runs searched are exactly the runs of the programs for all trip
counts at once. The search is finite by periodicity: the guards the model admits read a
counter k only through k = 0, k >= L (a lag guard) and k against n, so once every
warpgroup that will still run an instance is inside it at k >= H (H the largest L of the
instance's guards, at least 1), lowering their counters, n and b by the same s = min k - H
changes no answer of a guard or a head, now or later (a ring's use is a base plus k, and
the base takes up s): the run from the lowered state is the run from the first. States are
kept in that form (rings' uses and barriers' arrivals counted from the least outstanding,
records nobody can reach again dropped), so a state recurs once every guard is settled,
and a run for any n is a run for a small n plus repeats. What is left is bounded by the
program points, the records of the instances the warpgroups are in and how far apart the
warpgroups are inside one, which the barriers bound in a correct protocol; warpgroups more
than H + 4 iterations apart (H + 4 + D with the rings) are refused in one line as outside
the model. An iteration of an outer loop in which no warpgroup runs an op changes no
warpgroup's run and is left out when no guard asks about that loop: the instances of an
inner loop start at the least trip count E at which an op of the outer body can run (a
tile whose K loop is empty or shorter than its lag guard), E at most 1 with the rings.

Anything outside the model (a named barrier shared by two groups, under a condition other
than the warpgroup index, a thread guard, the loop guards above or a uniform condition,
in an else-branch or inside another region op) is refused in one line.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from tawa_xdsl import protocol
from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.dialects import aref, nvgpu, tile
from tawa_xdsl.dialects.nvgpu import WARPGROUP_THREADS
from tawa_xdsl.verify.extract import (
    ExtractionError,
    Group,
    RingProtocolModel,
    Step,
    extract,
    fail,
    find_rings,
    is_thread_guard,
    kernel_groups,
    peeled_last,
)

NAMED = (nvgpu.NamedBarrierSyncOp, nvgpu.NamedBarrierArriveOp)
STORES = (nvgpu.TmaStoreOp, nvgpu.TmaStoreCommitOp, nvgpu.TmaStoreWaitOp)
WRITES = (nvgpu.FragmentStoreOp, nvgpu.SmemStoreOp)


@dataclass(frozen=True)
class Event:
    """One op of a warpgroup's program: kind sync | arrive | store | commit | wait | write |
    fence (a `fence.proxy.async` where a staging buffer exists)."""

    op: Operation
    kind: str
    ident: int = 0  # named barrier id
    threads: int = 0  # named barrier thread count; wait: groups left pending
    thread: int | None = None  # the one thread that runs it (under `thread_index == c`)


@dataclass
class Loop:
    """An `scf.for` holding events: its body runs N >= 0 times."""

    op: scf.ForOp
    items: list


@dataclass
class Guarded:
    """Events under `lb < ub` of a loop (`nonempty`), or in it under `iv != lb`
    (`notfirst`), `iv + step < ub` (`notlast`) or a ring's lag guard (`lag`: iterations
    k >= `lag`, the guard of a release lagged by `lag`)."""

    kind: str
    loop: scf.ForOp
    items: list
    lag: int = 0  # lag: L; atleast (a drain's release): runs when n >= `lag`
    op: scf.IfOp | None = None  # the `scf.if` it stands for (None: read from a ring step)


@dataclass
class Uniform:
    """Events under an `scf.if` whose condition every warpgroup evaluates alike (computed
    from kernel arguments, constants and program ids only); `key` is the condition's
    structure, so the same condition in two groups is one variable."""

    op: scf.IfOp
    key: tuple
    items: list


@dataclass
class Program:
    """One warpgroup's named-barrier and staging events."""

    name: str
    group: int
    items: list = field(default_factory=list)
    index: int = 0  # the warpgroup index


# ------------------------------------------------------------------------------ extraction


def _relevant(op: Operation) -> bool:
    return any(isinstance(o, NAMED + STORES) for o in op.walk())


def _warpgroup_value(value: SSAValue, wg: SSAValue, index: int) -> int | None:
    """The value of `value` for warpgroup `index` when it is arithmetic on the index only."""
    if value == wg:
        return index
    constant = protocol.constant_of(value)
    if constant is not None:
        return constant
    op = value.owner
    if isinstance(op, arith.SubiOp | arith.AddiOp | arith.MuliOp):
        a, b = (_warpgroup_value(v, wg, index) for v in op.operands)
        if a is None or b is None:
            return None
        return {arith.SubiOp: a - b, arith.AddiOp: a + b, arith.MuliOp: a * b}[type(op)]
    return None


def _warpgroup_branch(cond: SSAValue, wg: SSAValue, index: int) -> bool | None:
    """Whether warpgroup `index` takes the true branch of `cond`, None when `cond` is not a
    comparison of values computed from the warpgroup index alone."""
    op = cond.owner
    if not isinstance(op, arith.CmpiOp) or wg not in _roots(op):
        return None
    a, b = (_warpgroup_value(v, wg, index) for v in op.operands)
    if a is None or b is None:
        return None
    predicate = op.predicate.value.data
    compare = {0: a == b, 1: a != b, 2: a < b, 3: a <= b, 4: a > b, 5: a >= b}
    return compare.get(predicate, {6: a < b, 7: a <= b, 8: a > b, 9: a >= b}.get(predicate))


UNIFORM_OPS = (
    arith.CmpiOp, arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.DivSIOp, arith.DivUIOp,
    arith.CeilDivSIOp, arith.CeilDivUIOp, arith.FloorDivSIOp, arith.RemSIOp, arith.RemUIOp,
    arith.AndIOp, arith.OrIOp, arith.XOrIOp, arith.MaxSIOp, arith.MinSIOp, arith.MaxUIOp,
    arith.MinUIOp, arith.ExtUIOp, arith.ExtSIOp, arith.TruncIOp, arith.SelectOp,
)  # fmt: skip


def uniform_key(value: SSAValue) -> tuple | None:
    """The structure of `value` when every thread of the CTA computes the same value (pure
    integer arithmetic on kernel arguments, constants and program ids), else None."""
    constant = protocol.constant_of(value)
    if constant is not None:
        return ("c", constant)
    op = value.owner
    if isinstance(op, Block):
        parent = op.parent_op()
        return ("arg", value.index) if isinstance(parent, func.FuncOp) else None  # type: ignore[attr-defined]
    if isinstance(op, tile.ProgramIdOp | tile.NumProgramsOp):
        return (op.name, op.axis.value.data)
    if not isinstance(op, UNIFORM_OPS):
        return None
    keys = [uniform_key(v) for v in op.operands]
    if any(k is None for k in keys):
        return None
    props = tuple(sorted((k, str(v)) for k, v in op.properties.items()))
    return (op.name, props, *keys)


def _roots(op: Operation) -> set[SSAValue]:
    out: set[SSAValue] = set()
    for v in op.operands:
        out.add(v)
        if isinstance(v.owner, Operation):
            out |= _roots(v.owner)
    return out


def _loop_guard(op: scf.IfOp, loops: list[scf.ForOp]) -> Guarded | None:
    """`lb < ub` of a loop in the same block, or `iv != lb` or `iv + step < ub` of an
    enclosing loop."""
    cond = op.cond.owner
    if not isinstance(cond, arith.CmpiOp):
        return None
    block = op.parent_block()
    if cond.predicate.value.data == 2 and block is not None:  # slt
        for other in block.ops:
            if isinstance(other, scf.ForOp) and (other.lb, other.ub) == (cond.lhs, cond.rhs):
                return Guarded("nonempty", other, [])
        for loop in loops:
            if _is_next(cond.lhs, loop) and cond.rhs == loop.ub:
                return Guarded("notlast", loop, [])
    if cond.predicate.value.data == 1:  # ne
        for loop in loops:
            if (cond.lhs, cond.rhs) == (loop.body.block.args[0], loop.lb):
                return Guarded("notfirst", loop, [])
    lag = _lag_guard(op, cond)
    if lag and loops and block is loops[-1].body.block:
        return Guarded("lag", loops[-1], [], lag)
    return None


def _lag_guard(op: scf.IfOp, cond: arith.CmpiOp) -> int:
    """L when `op` is the lag guard `x >= L` of a release lagged by L in its then-block
    (0 otherwise). The ring extraction checks that such a guard counts the uses of its
    loop (`counter - start >= L`, one use per iteration), so it holds from iteration L on."""
    if cond.predicate.value.data not in (5, 9):  # sge, uge
        return 0
    lag = protocol.constant_of(cond.rhs)
    released = [
        o.attributes[aref.LAG_ATTR]
        for o in op.true_region.walk()
        if isinstance(o, nvgpu.MBarrierArriveOp) and aref.LAG_ATTR in o.attributes
    ]
    lags = {a.value.data for a in released if isinstance(a, IntegerAttr)}
    return lag if lag is not None and lag > 0 and lags == {lag} else 0


def _is_next(value: SSAValue, loop: scf.ForOp) -> bool:
    """Whether `value` is `iv + step` of `loop` (the next iteration's induction value)."""
    add = value.owner
    iv = loop.body.block.args[0]
    return isinstance(add, arith.AddiOp) and set(add.operands) == {iv, loop.step}


class _Walker:
    """Builds the program of warpgroup `index` of a group (module docstring)."""

    def __init__(self, wg: SSAValue, index: int, staging: set[int]):
        self.wg, self.index, self.staging = wg, index, staging

    def block(self, block: Block, loops: list[scf.ForOp], thread: int | None) -> list:
        items: list = []
        for op in block.ops:
            items += self.visit(op, loops, thread)
        return items

    def visit(self, op: Operation, loops: list[scf.ForOp], thread: int | None) -> list:
        if isinstance(op, NAMED):
            if thread is not None:
                raise fail(op, f"'{op.name}' by one thread (whole warpgroups are modelled)")
            kind = "sync" if isinstance(op, nvgpu.NamedBarrierSyncOp) else "arrive"
            return [Event(op, kind, op.barrier_id.value.data, op.threads.value.data)]
        if isinstance(op, nvgpu.TmaStoreOp):
            return [Event(op, "store", thread=thread)]
        if isinstance(op, nvgpu.TmaStoreCommitOp):
            return [Event(op, "commit", thread=thread)]
        if isinstance(op, nvgpu.TmaStoreWaitOp):
            return [Event(op, "wait", threads=op.pending.value.data, thread=thread)]
        if isinstance(op, WRITES) and id(op.buf) in self.staging:
            return [Event(op, "write", thread=thread)]
        if isinstance(op, nvgpu.FenceProxyAsyncOp) and self.staging:
            return [Event(op, "fence", thread=thread)]
        if not _relevant(op):
            return []
        if isinstance(op, scf.ForOp):
            return [Loop(op, self.block(op.body.block, [*loops, op], thread))]
        if isinstance(op, scf.IfOp):
            return self.visit_if(op, loops, thread)
        raise fail(op, f"named barrier or TMA store inside '{op.name}' (not modelled)")

    def visit_if(self, op: scf.IfOp, loops: list[scf.ForOp], thread: int | None) -> list:
        branches = [op.true_region.blocks[0]]
        if op.false_region.blocks:
            branches.append(op.false_region.blocks[0])
        taken = _warpgroup_branch(op.cond, self.wg, self.index)
        if taken is not None:
            chosen = branches[0] if taken else (branches[1] if len(branches) > 1 else None)
            return self.block(chosen, loops, thread) if chosen else []
        if any(_relevant_block(b) for b in branches[1:]):
            raise fail(op, "named barrier or TMA store in an else-branch (not modelled)")
        if is_thread_guard(op.cond):
            cmp = op.cond.owner
            assert isinstance(cmp, arith.CmpiOp)
            return self.block(branches[0], loops, protocol.constant_of(cmp.rhs))
        guard = _loop_guard(op, loops)
        if guard is not None:
            guard.items, guard.op = self.block(branches[0], loops, thread), op
            return [guard]
        key = uniform_key(op.cond)
        if key is None:
            raise fail(op, "named barrier or TMA store under a condition the model does not cover")
        return [Uniform(op, key, self.block(branches[0], loops, thread))]


def _relevant_block(block: Block) -> bool:
    return any(_relevant(op) for op in block.ops)


def programs(module: ModuleOp) -> list[Program]:
    """The named-barrier and staging program of every warpgroup of the kernel."""
    ops = [op for op in module.walk() if isinstance(op, NAMED + STORES)]
    if not ops:
        return []
    groups: list[Group] = kernel_groups(module, [r.full for r in find_rings(module)])
    inside = {id(op) for g in groups for op in g.body.walk()}
    for op in ops:
        if id(op) not in inside:
            raise fail(op, f"'{op.name}' outside the warp groups (not modelled)")
    wg = next(op.result for op in module.walk() if isinstance(op, nvgpu.WarpgroupIndexOp))
    staging = {id(op.buf) for op in ops if isinstance(op, nvgpu.TmaStoreOp)}
    out, first = [], 0
    for group in groups:
        for k in range(group.count):
            walker = _Walker(wg, first + k, staging)
            items = walker.block(group.body, [], None)
            out.append(Program(f"{group.role}.wg{first + k}", group.index, items, first + k))
        first += group.count
    return out


def _events(items: list) -> list[Event]:
    out = []
    for item in items:
        if isinstance(item, Event):
            out.append(item)
        else:
            out += _events(item.items)
    return out


# ------------------------------------------------------------------------------- counts

Poly = Counter  # monomial (frozenset of ("N", loop) / ("P", loop)) -> coefficient


def _times(a: Poly, b: Poly) -> Poly:
    out: Poly = Counter()
    for ma, ca in a.items():
        for mb, cb in b.items():
            out[_normal(ma | mb)] += ca * cb
    return Counter({m: c for m, c in out.items() if c})


def _normal(mono: frozenset) -> frozenset:
    """[N > 0] * N = N: drop the indicator of a loop whose trip count is a factor."""
    return frozenset(x for x in mono if not (x[0] == "P" and ("N", x[1]) in mono))


def _count(items: list, ident: int) -> Poly:
    """Arrivals on `ident` (sync or arrive) as a polynomial in the loops' trip counts."""
    total: Poly = Counter()
    for item in items:
        if isinstance(item, Event):
            if item.kind in ("sync", "arrive") and item.ident == ident:
                total[frozenset()] += 1
        elif isinstance(item, Loop):
            trips = _var("N", item.op)
            rest = [x for x in item.items if not _all_but_one(x, item.op)]
            later = [x for x in item.items if _all_but_one(x, item.op)]
            total.update(_times(_count(rest, ident), trips))
            for guard in later:  # every iteration but the first `lag` (one): N - min(N, lag)
                once = _count(guard.items, ident)
                total.update(_times(once, trips))
                total.subtract(_times(once, _first(guard)))
        elif isinstance(item, Uniform):  # [cond]: one 0/1 variable per condition
            total.update(_times(_count(item.items, ident), Counter({frozenset({item.key}): 1})))
        elif item.kind == "nonempty":
            total.update(_times(_count(item.items, ident), _var("P", item.loop)))
        elif _count(item.items, ident):
            guard = PER_ITERATION[item.kind]
            raise fail(item.loop, f"an `{guard}` guard nested under another guard (not modelled)")
    return Counter({m: c for m, c in total.items() if c})


def _var(kind: str, loop: Operation) -> Poly:
    return Counter({frozenset({(kind, id(loop))}): 1})


def _first(guard: Guarded) -> Poly:
    """The iterations `guard` skips: min(N, lag) for a lag guard ([N > 0] for lag 1)."""
    if guard.kind == "lag" and guard.lag > 1:
        return Counter({frozenset({(f"min{guard.lag}", id(guard.loop))}): 1})
    return _var("P", guard.loop)


def _all_but_one(item, loop: Operation) -> bool:
    """Whether `item` runs in every iteration of `loop` but the first (`lag`) or the last."""
    return isinstance(item, Guarded) and item.kind in PER_ITERATION and item.loop is loop


PER_ITERATION = {"notfirst": "iv != lb", "notlast": "iv + step < ub", "lag": "x >= lag"}


def check_counts(progs: list[Program]) -> None:
    """Thread counts and equal arrivals for every trip count (module docstring)."""
    by_id: dict[int, list[tuple[Program, Event]]] = {}
    for prog in progs:
        for ev in _events(prog.items):
            if ev.kind in ("sync", "arrive"):
                by_id.setdefault(ev.ident, []).append((prog, ev))
    for ident, uses in sorted(by_id.items()):
        parts = list(dict.fromkeys(p.name for p, _ in uses))
        if len({p.group for p, _ in uses}) > 1:
            raise fail(uses[0][1].op, f"named barrier {ident} shared by two groups (not modelled)")
        for _, ev in uses:
            if ev.threads != WARPGROUP_THREADS * len(parts):
                raise fail(
                    ev.op,
                    f"named barrier {ident} counts {ev.threads} threads, but "
                    f"{len(parts)} warpgroups of {WARPGROUP_THREADS} ({', '.join(parts)}) "
                    "arrive on it",
                )
        counts = {p.name: _count(p.items, ident) for p in progs if p.name in parts}
        if len({frozenset(c.items()) for c in counts.values()}) > 1:
            shown = "; ".join(f"{n}: {_show(c)}" for n, c in counts.items())
            raise NamedBarrierViolation(
                f"{_loc(uses[0][1].op)}: named barrier {ident}: the warpgroups arrive on it "
                f"unequally often for some trip count ({shown}): a bar.sync without its "
                "arrivals, or arrivals left over"
            )


def _show(poly: Poly) -> str:
    terms = []
    for mono, c in sorted(poly.items(), key=lambda x: len(x[0])):
        factors = "".join(_factor(x) for x in sorted(mono, key=str))
        terms.append(f"{c}{factors}" if factors else str(c))
    return " + ".join(terms) or "0"


def _factor(var: tuple) -> str:
    """A variable of a count: N, [N > 0], min(N, L) of a loop, [c] of a uniform condition."""
    kind = str(var[0])
    if kind in ("N", "P"):
        return "N" if kind == "N" else "[N>0]"
    return f"min(N,{kind[3:]})" if kind.startswith("min") else "[if]"


def _loc(op: Operation) -> str:
    return op_location(op)


class NamedBarrierViolation(Exception):
    """A named-barrier or staging protocol that can go wrong (the message says how)."""


# -------------------------------------------------------------- runs for every trip count
#
# The search of the module docstring's "Every trip count": warpgroups compiled to flat
# code, trip-count records, the normal form.

SLACK = 4  # iterations warpgroups may drift apart beyond H (the docstring)


@dataclass(frozen=True)
class Instr:
    """One instruction of a warpgroup's code: `event` (its `event`), `enter` (push counter
    0), `head` (leave the loop to `target` when k = n), `back` (k += 1, to `target`: the
    head) or `guard` (to `target` unless `test` holds: nonempty | atleast (n >= `bound`)
    of the sibling loop, notfirst | notlast | lag (k >= `bound`) of an enclosing loop,
    uniform (`key`))."""

    kind: str
    loop: int = 0
    target: int = 0
    test: str = ""
    bound: int = 0
    key: tuple = ()
    event: Any = None


class Code:
    """A warpgroup's program, compiled: its instructions, the loops around each pc, and each
    loop's span (the pcs that refer to it) and the loops around it. A loop is named by its
    class: loops of two groups with one trip count (the j-th loop of the rings' sequence in
    each) share one, so that their instances share a record; by default its identity."""

    def __init__(
        self, name: str, items: list, anchors: dict | None = None, classes: dict | None = None
    ):
        self.name = name
        self.classes: dict[int, int] = classes or {}
        self.anchors = {self.loop(k): v for k, v in (anchors or {}).items()}  # base += n
        self.instrs: list[Instr] = []
        self.frames: list[tuple[int, ...]] = []
        self.spans: dict[int, list[int]] = {}
        self.parents: dict[int, tuple[int, ...]] = {}
        self.enters: dict[int, int] = {}  # loop -> the pc of its `enter`
        self.ops: dict[int, Operation] = {}
        self.floors: dict[int, int] = {}  # loop -> the least trip count run (`_floors`)
        self._idle: dict[tuple, bool] = {}
        self._emit(items, ())
        self.frames.append(())

    def loop(self, op_id: int) -> int:
        """The class of the loop whose identity is `op_id`."""
        return self.classes.get(op_id, op_id)

    def _add(self, instr: Instr, frames: tuple[int, ...]) -> int:
        self.instrs.append(instr)
        self.frames.append(frames)
        if instr.loop:
            span = self.spans.setdefault(instr.loop, [len(self.instrs) - 1] * 2)
            span[1] = len(self.instrs) - 1
        return len(self.instrs) - 1

    def _emit(self, items: list, frames: tuple[int, ...]) -> None:
        for item in items:
            if isinstance(item, Loop):
                loop = self.loop(id(item.op))
                self.ops[loop], self.parents[loop] = item.op, frames
                self.enters[loop] = self._add(Instr("enter", loop), frames)
                head = self._add(Instr("head", loop), (*frames, loop))
                self._emit(item.items, (*frames, loop))
                self._add(Instr("back", loop, head), (*frames, loop))
                self.instrs[head] = replace(self.instrs[head], target=len(self.instrs))
            elif isinstance(item, Uniform | Guarded):
                at = len(self.instrs)
                if isinstance(item, Uniform):
                    self._add(Instr("guard", test="uniform", key=item.key), frames)
                else:
                    loop = self.loop(id(item.loop))
                    self.ops.setdefault(loop, item.loop)
                    self.parents.setdefault(loop, frames)
                    self._add(Instr("guard", loop, test=item.kind, bound=item.lag), frames)
                self._emit(item.items, frames)
                self.instrs[at] = replace(self.instrs[at], target=len(self.instrs))
            elif isinstance(item, RingEvent):
                ring_event = replace(item, anchor=self.loop(item.anchor) if item.anchor else 0)
                self._add(Instr("event", event=ring_event), frames)
            else:
                self._add(Instr("event", event=item), frames)

    def idle(self, pc: int, uniform: dict) -> bool:
        """Whether no event is reachable from `pc` under these uniform values: the warpgroup
        can affect nobody any more (a producer whose every tile is empty when `K > 0` is
        false), so it is finished; left running, it would drift through the empty tiles
        without bound."""
        key = (pc, tuple(sorted(uniform.items())))
        if key not in self._idle:
            seen, todo = set(), [pc]
            while todo:
                at = todo.pop()
                if at >= len(self.instrs) or at in seen:
                    continue
                seen.add(at)
                instr = self.instrs[at]
                if instr.kind == "event":
                    break
                if instr.kind == "back":
                    todo.append(instr.target)
                elif instr.kind == "guard" and instr.test == "uniform":
                    todo.append(at + 1 if uniform[instr.key] else instr.target)
                elif instr.kind in ("head", "guard"):
                    todo += [at + 1, instr.target]
                else:
                    todo.append(at + 1)
            else:
                self._idle[key] = True
                return True
            self._idle[key] = False
        return self._idle[key]

    def relation(self, pc: int, counters: tuple, loop: int, key: tuple) -> str | int:
        """Where a warpgroup at (`pc`, `counters`) stands to the instance (`loop`, `key`):
        its counter k in it, `before` (it will enter it), `near` (only guards of it are
        ahead) or `past`."""
        outer = self.parents[loop]
        for depth, around in enumerate(outer):
            if self.frames[pc][depth : depth + 1] != (around,):
                return "before" if pc < self.spans[around][0] else "past"
            if counters[depth] != key[depth]:
                return "before" if counters[depth] < key[depth] else "past"
        if self.frames[pc][len(outer) : len(outer) + 1] == (loop,):
            return counters[len(outer)]
        if pc > self.spans[loop][1]:
            return "past"
        return "before" if pc <= self.enters.get(loop, -1) else "near"


def _floors(codes: list[Code]) -> dict[int, int]:
    """The least trip count worth running for a loop l nested in a loop T: an iteration of
    T in which no warpgroup runs an op can be left out of a run without changing what any
    warpgroup does, when no guard asks about T (its first or last iteration, whether it
    runs). When every op of T's body in every code runs only if n >= E for l (inside l:
    n >= 1; under l's lag guard L: n >= L + 1; `iv != lb` or `iv + step < ub`: n >= 2; a
    drain's `n >= j`: j), the instances of l with n < E are such iterations, so runs with
    n >= E cover every run. (A ring's uses count l's trips: there E is at most 1.)"""
    out: dict[int, int] = {}
    guarded = {i.loop for c in codes for i in c.instrs if i.kind == "guard"}
    outer = {p for c in codes for parents in c.parents.values() for p in parents} - guarded
    for around in outer:
        inner = {loop for c in codes for loop, p in c.parents.items() if p[-1:] == (around,)}
        for loop in inner:
            needs = [
                _needs(code, pc, loop)
                for code in codes
                for pc, instr in enumerate(code.instrs)
                if instr.kind == "event" and around in code.frames[pc]
            ]
            floor = min(needs, default=0)
            if any(code.anchors for code in codes):
                floor = min(floor, 1)
            if floor > 0:
                out[loop] = floor
    return out


def _needs(code: Code, pc: int, loop: int) -> int:
    """The least trip count of `loop` for which the event at `pc` of `code` can run."""
    need = 1 if loop in code.frames[pc] else 0
    for at, instr in enumerate(code.instrs):
        if instr.kind != "guard" or instr.loop != loop or not at < pc < instr.target:
            continue
        bounds = {"lag": instr.bound + 1, "notfirst": 2, "notlast": 2, "atleast": instr.bound}
        need = max(need, bounds.get(instr.test, 1))
    return need


def _prune(items: list, keep: Callable[[Any], bool]) -> list:
    """`items` with only the events `keep` selects, and no block left empty."""
    out = []
    for item in items:
        if isinstance(item, Loop | Guarded | Uniform):
            inner = _prune(item.items, keep)
            if inner:
                out.append(replace(item, items=inner))
        elif keep(item):
            out.append(item)
    return out


Trips = dict  # (loop, counters of the loops around it) -> (n, n) known, or (None, b): n >= b


def trip_cases(
    trips: Trips, instance: tuple, test: str, value: int, floor: int = 0
) -> list[tuple[bool, Trips]]:
    """Every answer to `n == value` (test eq) or `n >= value` (ge) for the trip count n of
    `instance` (n >= `floor`: `_floors`), with what each answer teaches the record."""
    known, bound = trips.get(instance, (None, floor))
    if known is not None:
        return [(known == value if test == "eq" else known >= value, trips)]
    top = value + 1 if test == "eq" else value
    if top <= bound:
        return [(test == "ge", trips)]
    out = [
        (n == value if test == "eq" else n >= value, {**trips, instance: (n, n)})
        for n in range(bound, top)
    ]
    return [*out, (test == "ge", {**trips, instance: (None, top)})]


def _settle(code: Code, at: tuple, trips: Trips, uniform: dict) -> list[tuple[tuple, Trips]]:
    """Every way warpgroup `code` at `at` = (pc, counters, ring bases) runs its loop and
    guard instructions up to its next event, back edge or its end, with what each way learnt
    of the trips. Leaving a loop adds its trip count to the use base of each ring anchored
    on it. (A back edge is a move of its own, so that a run through iterations without
    events is a sequence of states, kept finite by the normal form.)"""
    out, todo = [], [(at, trips)]
    while todo:
        (pc, counters, bases), trips = todo.pop()
        if pc < len(code.instrs) and code.idle(pc, uniform):
            # Nothing it does can be seen: finished. What it would learn of the trips
            # only prunes runs of the others; not learning it keeps them all.
            pc, counters = len(code.instrs), ()
        instr = code.instrs[pc] if pc < len(code.instrs) else None
        if instr is None or instr.kind in ("event", "back"):
            out.append(((pc, counters, bases), trips))
        elif instr.kind == "enter":
            todo.append(((pc + 1, (*counters, 0), bases), trips))
        elif instr.kind == "head":
            instance, k = (instr.loop, counters[:-1]), counters[-1]
            floor = code.floors.get(instr.loop, 0)
            for done, learnt in trip_cases(trips, instance, "eq", k, floor):
                if done:
                    rings = code.anchors.get(instr.loop, ())
                    after = tuple(b + k if r in rings else b for r, b in enumerate(bases))
                    todo.append(((instr.target, counters[:-1], after), learnt))
                else:
                    todo.append(((pc + 1, counters, bases), learnt))
        else:
            for holds, learnt in _guard(code, instr, counters, trips, uniform):
                todo.append(((pc + 1 if holds else instr.target, counters, bases), learnt))
    return out


def _advance(code: Code, at: tuple, trips: Trips, uniform: dict) -> list[tuple[tuple, Trips]]:
    """`_settle` from the instruction after `at`: past its event, or round its back edge."""
    pc, counters, bases = at
    instr = code.instrs[pc]
    if instr.kind == "back":
        return _settle(
            code, (instr.target, (*counters[:-1], counters[-1] + 1), bases), trips, uniform
        )
    return _settle(code, (pc + 1, counters, bases), trips, uniform)


def _guard(code: Code, instr: Instr, counters: tuple, trips: Trips, uniform: dict) -> list:
    if instr.test == "uniform":
        return [(bool(uniform[instr.key]), trips)]
    depth = len(code.parents[instr.loop])
    instance = (instr.loop, counters[:depth])
    floor = code.floors.get(instr.loop, 0)
    if instr.test == "nonempty":
        return trip_cases(trips, instance, "ge", 1, floor)
    if instr.test == "atleast":
        return trip_cases(trips, instance, "ge", instr.bound, floor)
    k = counters[depth]
    if instr.test == "notfirst":
        return [(k != 0, trips)]
    if instr.test == "lag":
        return [(k >= instr.bound, trips)]
    cases = trip_cases(trips, instance, "eq", k + 1, floor)
    return [(not last, learnt) for last, learnt in cases]


def _normal_form(
    codes: list[Code], at: list[tuple], trips: Trips, slack: int = SLACK
) -> tuple[list[tuple], Trips]:
    """The normal form of a state (the comment above): records nobody can reach again are
    dropped, and each instance that every warpgroup still to run it is inside at k >= H is
    shifted down to H, outer loops first (a shift renames the instances inside)."""
    at = list(at)
    depth = 0
    while any(len(key) >= depth for _, key in trips):
        for instance in sorted(i for i in trips if len(i[1]) == depth):
            trips = _normal_instance(codes, at, trips, instance, slack)
        depth += 1
    return at, trips


def _normal_instance(
    codes: list[Code], at: list[tuple], trips: Trips, instance: tuple, slack: int
) -> Trips:
    """`trips` with `instance` dropped or shifted (`_normal_form`; `at` is shifted in place).
    Warpgroups more than H + `slack` iterations apart in it are refused."""
    loop, key = instance
    where = [
        (w, code.relation(pc, counters, loop, key))
        for w, (code, (pc, counters, _)) in enumerate(zip(codes, at, strict=True))
        if loop in code.parents
    ]
    if all(r == "past" for _, r in where):
        return {i: v for i, v in trips.items() if i != instance}
    inside = [r for _, r in where if isinstance(r, int)]
    if not inside:
        return trips
    horizon = max(1, *(_bound(code, loop) for code in codes))
    entering = any(r == "before" and loop in codes[w].enters for w, r in where)
    low = 0 if entering else min(inside)
    if max(inside) - low > horizon + slack:
        code = next(c for c in codes if loop in c.ops)
        raise fail(code.ops[loop], f"warpgroups drift more than {horizon + slack} "
                   "iterations apart in this loop (not periodic: not modelled)")  # fmt: skip
    shift = low - horizon
    if shift <= 0:
        return trips
    for w, r in where:
        if isinstance(r, int):  # uses = base + k: the base takes what k gives up
            pc, counters, bases = at[w]
            rings = codes[w].anchors.get(loop, ())
            bases = tuple(b + shift if n in rings else b for n, b in enumerate(bases))
            at[w] = (pc, _replaced(counters, len(key), r - shift), bases)
    parents = {loop: p for code in codes for loop, p in code.parents.items()}
    return _shifted(trips, instance, shift, parents)


def _bound(code: Code, loop: int) -> int:
    """The largest L of the guards `k >= L` / `n >= L` on `loop` in `code`."""
    return max((i.bound for i in code.instrs if i.loop == loop and i.kind == "guard"), default=0)


def _shifted(trips: Trips, instance: tuple, shift: int, parents: dict) -> Trips:
    """`trips` with `instance`'s n (or b) and the keys of the instances inside it shifted."""
    loop, key = instance
    depth = len(key)
    out: Trips = {}
    for (other, okey), (known, bound) in trips.items():
        if (other, okey) == instance:
            out[instance] = (None if known is None else known - shift, max(0, bound - shift))
        elif okey[:depth] == key and parents[other][depth : depth + 1] == (loop,):
            out[(other, _replaced(okey, depth, okey[depth] - shift))] = (known, bound)
        else:
            out[(other, okey)] = (known, bound)
    return out


# -------------------------------------------------------------------------------- turns


def check_turns(progs: list[Program]) -> None:
    """The turns (module docstring): the named-barrier codes of each group's warpgroups,
    every interleaving, every trip count of every loop instance, either value of each
    uniform condition."""
    for group in dict.fromkeys(p.group for p in progs):
        mine = [p for p in progs if p.group == group]
        shared = _shared_ids(mine)
        codes = [Code(p.name, _prune(p.items, lambda e, s=shared: _turn_event(e, s))) for p in mine]
        codes = [c for c in codes if c.instrs]
        if len(codes) < 2:
            continue
        floors = _floors(codes)
        for code in codes:
            code.floors = floors
        keys = list(dict.fromkeys(i.key for c in codes for i in c.instrs if i.test == "uniform"))
        for values in itertools.product((False, True), repeat=len(keys)):
            problem = _explore(codes, dict(zip(keys, values, strict=True)))
            if problem:
                conds = "".join(f", condition {'true' if v else 'false'}" for v in values)
                raise NamedBarrierViolation(
                    f"{_first_named(mine)}: named barriers{conds}: {problem}"
                )


def _shared_ids(progs: list[Program]) -> set[int]:
    """The named barriers more than one warpgroup takes part in (one warpgroup's own
    barrier completes at each arrival: it never blocks nor takes an arrival twice)."""
    users: dict[int, set[str]] = {}
    for prog in progs:
        for ev in _events(prog.items):
            if ev.kind in ("sync", "arrive"):
                users.setdefault(ev.ident, set()).add(prog.name)
    return {ident for ident, names in users.items() if len(names) > 1}


def _turn_event(item: Any, shared: set[int]) -> bool:
    return isinstance(item, Event) and item.kind in ("sync", "arrive") and item.ident in shared


def _first_named(progs: list[Program]) -> str:
    """The place of the first named-barrier op (where a turn problem is reported)."""
    ops = [e.op for p in progs for e in _events(p.items) if e.kind in ("sync", "arrive")]
    return _loc(ops[0])


TurnState = tuple  # (pc and counters per warpgroup, trips, open phases, waiting barrier)


def _explore(codes: list[Code], uniform: dict) -> str:
    """Search every interleaving of the warpgroups' named-barrier events, for every trip
    count, for a deadlock, an arrival twice in one phase or arrivals left at exit ("" when
    there is none)."""
    starts: list[tuple[list[tuple], Trips]] = [([], {})]
    for code in codes:
        starts = [
            ([*at, mine], learnt)
            for at, trips in starts
            for mine, learnt in _settle(code, (0, (), ()), trips, uniform)
        ]
    todo = [_turn_state(codes, at, trips, (), (0,) * len(codes)) for at, trips in starts]
    return _search(todo, lambda state: _turn_moves(codes, state, uniform))


def _search(todo: list, moves: Callable[[tuple], tuple[list, str]]) -> str:
    """Depth-first over the states reachable from `todo` by `moves` (a state's successors
    and the problem it shows): the first problem, or "" when none shows."""
    seen = set(todo)
    while todo:
        successors, problem = moves(todo.pop())
        if problem:
            return problem
        for new in successors:
            if new not in seen:
                seen.add(new)
                todo.append(new)
    return ""


def _turn_state(codes, at, trips, phases, waiting) -> TurnState:
    at, trips = _normal_form(codes, at, dict(trips))
    return (tuple(at), tuple(sorted(trips.items())), phases, waiting)


def _turn_moves(codes: list[Code], state: TurnState, uniform: dict) -> tuple[list, str]:
    """The states one event of one warpgroup leads to, or the problem it shows."""
    at, trips, phases, waiting = state
    bars = dict(phases)  # id -> the warpgroups arrived in its open phase
    moves = []
    for w, code in enumerate(codes):
        pc, counters, _ = at[w]
        if waiting[w] or pc == len(code.instrs):
            continue
        if code.instrs[pc].kind == "back":
            for mine, learnt in _advance(code, at[w], dict(trips), uniform):
                after = [*at[:w], mine, *at[w + 1 :]]
                moves.append(_turn_state(codes, after, learnt, phases, waiting))
            continue
        ev = code.instrs[pc].event
        arrived = bars.get(ev.ident, ())
        if w in arrived:
            return [], (
                f"{code.name} arrives twice in one phase of barrier {ev.ident} at "
                f"{_loc(ev.op)} (a turn is taken before it was given)"
            )
        arrived = (*arrived, w)
        new_bars, new_wait = dict(bars), list(waiting)
        if len(arrived) * WARPGROUP_THREADS == ev.threads:
            new_bars.pop(ev.ident, None)
            for other in arrived:  # the phase completes: its syncs go on
                if new_wait[other] == ev.ident:
                    new_wait[other] = 0
        else:
            new_bars[ev.ident] = arrived
            new_wait[w] = ev.ident if ev.kind == "sync" else 0
        phases_after = tuple(sorted(new_bars.items()))
        for mine, learnt in _advance(code, at[w], dict(trips), uniform):
            after = [*at[:w], mine, *at[w + 1 :]]
            moves.append(_turn_state(codes, after, learnt, phases_after, tuple(new_wait)))
    if moves or not phases:
        return moves, ""
    ident, arrived = phases[0]
    who = ", ".join(codes[w].name for w in arrived)
    blocked = [codes[w].name for w in range(len(codes)) if waiting[w]]
    if blocked:
        return [], (
            f"deadlock: {', '.join(blocked)} wait at named barriers that the others never "
            f"complete (barrier {ident}: only {who} arrived)"
        )
    return [], f"barrier {ident} left with arrivals of {who} at exit"


# ------------------------------------------------------------------ turns and the rings


@dataclass(frozen=True)
class RingEvent:
    """A ring op of a warpgroup's code: emptywait | put | fullwait | release on ring `ring`,
    for use base + k + `offset` (k the counter of `anchor`, 0 for none; a release only
    counts)."""

    kind: str
    ring: int
    anchor: int
    offset: int
    text: str


def _ring_kind(step: Step, role: str) -> str | None:
    if role == "producer":
        if step.kind == "wait":
            return "emptywait"
        return "put" if step.kind in ("tma", "store", "arrive") else None
    if step.kind == "wait":
        return "fullwait"
    return "release" if step.kind == "arrive" else None


Leaf = tuple  # (program position, chain of (identity, container template), event)


def _named_leaves(items: list, order: dict[int, int], chain: tuple = ()) -> list[Leaf]:
    """The events of a named-barrier program with the containers around each."""
    out: list[Leaf] = []
    for item in items:
        if isinstance(item, Event):
            out.append((order[id(item.op)], chain, item))
            continue
        op = item.op if isinstance(item, Loop | Uniform) else item.op or item
        out += _named_leaves(item.items, order, (*chain, (id(op), replace(item, items=[]))))
    return out


def _templates(items: list) -> dict[int, Any]:
    """The containers of a named-barrier program, by the op each stands for."""
    out: dict[int, Any] = {}
    for item in items:
        if isinstance(item, Event):
            continue
        op = item.op if isinstance(item, Loop | Uniform) else item.op
        if op is not None:
            out[id(op)] = replace(item, items=[])
        out.update(_templates(item.items))
    return out


def _chain(op: Operation, body: Block, templates: dict[int, Any]) -> tuple:
    """The containers around ring op `op` of a group: its loops (not the drains, which
    `_ring_leaves` reads as guards), the named program's guards and the uniform conditions
    around whole loops (the thread guard, the lookahead, the peeled stage and the lag guard
    hold no loop: the ring step says what they do)."""
    chain = []
    for parent in reversed(_ancestors(op)):
        if parent.parent_block() is None or not body.is_ancestor(parent):
            continue
        if id(parent) in templates:
            chain.append((id(parent), templates[id(parent)]))
        elif isinstance(parent, scf.ForOp) and aref.DRAIN_ATTR not in parent.attributes:
            chain.append((id(parent), Loop(parent, [])))
        elif isinstance(parent, scf.IfOp) and not is_thread_guard(parent.cond):
            if not any(isinstance(o, scf.ForOp) for o in parent.walk()):
                continue
            key = uniform_key(parent.cond)
            if key is None:
                raise fail(parent, "ring ops under a condition the named-barrier model does "
                           "not cover")  # fmt: skip
            chain.append((id(parent), Uniform(parent, key, [])))
    return tuple(chain)


def _ring_leaves(
    rings: list[RingProtocolModel], looped: list[bool], group: Group, templates: dict
) -> tuple[list[Leaf], dict[int, tuple[int, ...]]]:
    """The ring ops of a warpgroup of `group` (`compose.py`'s reading of a step: the peeled
    prologue acts on its loop's first use, a lagged step on k - lag, a lookahead step on
    k + 1, the drain releases the last min(n, lag) uses of its loop; uses count on through
    the loops of the ring's sequence and across tiles), and the loops each ring's use base
    grows by at their exit."""
    flat = list(group.body.walk())
    by_id = {id(op): op for op in flat}
    out: list[Leaf] = []
    anchors: dict[int, tuple[int, ...]] = {}

    def leaf(st: Step, r: int, role: str, extra: tuple, anchor: int | None, offset: int) -> None:
        kind = _ring_kind(st, role)
        if kind is None:
            return
        chain = _chain(flat[st.pos], group.body, templates)
        if anchor is None:  # a ring used once per tile: its use is the tile's counter
            loops = [c for _, c in chain if isinstance(c, Loop)]
            anchor = id(loops[-1].op) if loops else 0
        if anchor and r not in anchors.get(anchor, ()):
            anchors[anchor] = (*anchors.get(anchor, ()), r)
        chain += tuple((id(g), g) for g in extra)
        out.append((st.pos, chain, RingEvent(kind, r, anchor, offset, f"{st.text} @ {st.loc}")))

    for r, ring in enumerate(rings):
        for actor in (ring.producer, *ring.consumers):
            if actor.group != group.index:
                continue
            if not looped[r]:
                for st in actor.steps:
                    leaf(st, r, actor.role, (), None, 0)
                continue
            for seg in actor.segments:
                loop = by_id[seg.loop]
                assert isinstance(loop, scf.ForOp)
                first = (Guarded("nonempty", loop, []),)
                for st in seg.prologue:
                    leaf(st, r, actor.role, first, 0, 0)
                for st in seg.steps:
                    guard = Guarded("lag", loop, [], st.lag) if st.lag else None
                    guard = Guarded("notlast", loop, []) if st.ahead else guard
                    offset = 1 if st.ahead else -st.lag
                    leaf(st, r, actor.role, (guard,) if guard else (), seg.loop, offset)
                if actor.drain:
                    release = next(st for st in seg.steps if st.kind == "arrive")
                    at = replace(release, pos=seg.drain_pos)
                    for n in range(1, actor.lag + 1):
                        leaf(at, r, actor.role, (Guarded("atleast", loop, [], n),), 0, 0)
    return out, anchors


def _tree(leaves: list[Leaf]) -> list:
    """Program items from leaves in program order: consecutive leaves in one container
    share it."""
    out: list = []
    index = 0
    while index < len(leaves):
        pos, chain, event = leaves[index]
        if not chain:
            out.append(event)
            index += 1
            continue
        end = index
        while end < len(leaves) and leaves[end][1][:1] and leaves[end][1][0][0] == chain[0][0]:
            end += 1
        inner = [(p, c[1:], e) for p, c, e in leaves[index:end]]
        out.append(replace(chain[0][1], items=_tree(inner)))
        index = end
    return out


def _loop_classes(rings, looped: list[bool], group: Group) -> dict[int, int]:
    """The j-th loop of the rings' sequence in `group`, and the d-th loop around the
    sequence (the tile loop), as the same class in every group: the rings' per-ring proofs
    run them with one trip count (the premise `compose.py` reads them on)."""
    by_id = {id(op): op for op in group.body.walk()}
    order = {id(op): n for n, op in enumerate(group.body.walk())}
    loops = {
        seg.loop
        for r, ring in enumerate(rings)
        for actor in (ring.producer, *ring.consumers)
        if actor.group == group.index and looped[r]
        for seg in actor.segments
        if seg.loop in by_id
    }
    out = {loop: -1 - j for j, loop in enumerate(sorted(loops, key=lambda x: order[x]))}
    for loop in loops:
        around = [p for p in _ancestors(by_id[loop]) if isinstance(p, scf.ForOp)]
        for depth, outer in enumerate(reversed([p for p in around if id(p) in order])):
            out[id(outer)] = -1000 - depth
    return out


def _puts_per_use(rings: list[RingProtocolModel], looped: list[bool]) -> list[int]:
    """How many put ops complete each use of each ring (the same in each loop of its
    sequence and in a peeled prologue, or refused)."""
    out = []
    for r, ring in enumerate(rings):
        actor = ring.producer
        blocks = [seg.steps for seg in actor.segments] if looped[r] else [actor.steps]
        blocks += [seg.prologue for seg in actor.segments if seg.prologue and looped[r]]
        counts = {sum(_ring_kind(st, "producer") == "put" for st in b) for b in blocks}
        if len(counts) != 1:
            raise ExtractionError(
                f"{ring.loc}: ring {ring.name}: its producer puts a use with a different "
                "number of ops in different loops (not modelled)"
            )
        out.append(counts.pop())
    return out


def check_ring_turns(module: ModuleOp, progs: list[Program]) -> None:
    """No deadlock of the turns together with the rings (module docstring): every
    warpgroup's ring and named-barrier ops, for every trip count of every loop instance
    and either value of each uniform condition. Ring waits and named-barrier syncs are
    enabled monotonically by what the others did (a use put, a use released by every
    consumer warpgroup, the k-th arrivals of every participant), so for each choice of the
    trip counts one maximal run decides: someone left unfinished is a deadlock."""
    named = [p for p in progs if any(e.kind in ("sync", "arrive") for e in _events(p.items))]
    if len(named) < 2:
        return
    rings = extract(module)
    if not rings:
        return
    inner_depth = max(a.loop_depth for r in rings for a in (r.producer, *r.consumers))
    looped = [
        inner_depth > 0 and max(a.loop_depth for a in (r.producer, *r.consumers)) == inner_depth
        for r in rings
    ]
    if any(d != 0 for r in rings for d in r.trip_delta.values()):
        raise ExtractionError(
            f"{rings[0].loc}: a consumer's trip count differs from the producer's (the "
            "named-barrier model runs the groups' loops with one trip count)"
        )
    groups = kernel_groups(module, [r.full for r in find_rings(module)])
    classes = [_loop_classes(rings, looped, group) for group in groups]
    shared = _shared_ids(progs)
    codes = []
    for prog in progs:
        group = groups[prog.group]
        order = {id(op): n for n, op in enumerate(group.body.walk())}
        keep = _prune(prog.items, lambda e, s=shared: _turn_event(e, s))
        leaves, anchors = _ring_leaves(rings, looped, group, _templates(keep))
        leaves += _named_leaves(keep, order)
        items = _tree(sorted(leaves, key=lambda leaf: leaf[0]))
        codes.append(Code(prog.name, items, anchors, classes[prog.group]))
    floors = _floors(codes)
    for code in codes:
        code.floors = floors
    model = RingModel(rings, _puts_per_use(rings, looped), codes, [p.group for p in progs])
    keys = list(dict.fromkeys(i.key for c in codes for i in c.instrs if i.test == "uniform"))
    for values in itertools.product((False, True), repeat=len(keys)):
        problem = model.run(dict(zip(keys, values, strict=True)))
        if problem:
            conds = "".join(f", condition {'true' if v else 'false'}" for v in values)
            raise NamedBarrierViolation(
                f"{_first_named(named)}: named barriers with the rings{conds}: {problem}"
            )


class RingModel:
    """The rings and named barriers of a kernel's warpgroups run together, one maximal run
    per choice of trip counts (`check_ring_turns`). A state: each warpgroup's pc, counters
    and ring use bases, the trips learnt, each named barrier's arrivals per participant,
    each ring's uses put (all below a prefix, and the counts of the uses above it) and
    releases per consumer warpgroup, and the arrival count each sync waits for."""

    def __init__(self, rings, puts: list[int], codes: list[Code], groups_of: list[int]):
        self.rings, self.puts, self.codes = rings, puts, codes
        self.consumers = [
            [w for w, g in enumerate(groups_of) if g in {a.group for a in ring.consumers}]
            for ring in rings
        ]
        self.users = [
            [w for w, c in enumerate(codes) if any(_ring_of(i) == r for i in c.instrs)]
            for r in range(len(rings))
        ]
        self.parties: dict[int, list[int]] = {}
        for w, code in enumerate(codes):
            for instr in code.instrs:
                ev = instr.event
                if isinstance(ev, Event) and w not in self.parties.get(ev.ident, []):
                    self.parties.setdefault(ev.ident, []).append(w)
        self.idents = sorted(self.parties)
        self.slack = SLACK + max(r.depth for r in rings)

    def run(self, uniform: dict) -> str:
        """The deadlock of a run that ends with a warpgroup unfinished ("" when none does)."""
        starts: list[tuple[list[tuple], Trips]] = [([], {})]
        zero = (0,) * len(self.rings)
        for code in self.codes:
            starts = [
                ([*at, mine], learnt)
                for at, trips in starts
                for mine, learnt in _settle(code, (0, (), zero), trips, uniform)
            ]
        named = tuple((0,) * len(self.parties[i]) for i in self.idents)
        rings = tuple((0, (), (0,) * len(c)) for c in self.consumers)
        waiting = (None,) * len(self.codes)  # or the arrival count a sync waits for
        todo = [self.state(at, trips, named, rings, waiting) for at, trips in starts]
        return _search(todo, lambda state: self.moves(state, uniform))

    def state(self, at, trips, named, rings, waiting) -> tuple:
        """The normal form: loops shifted (`_normal_form`), then each ring's uses and each
        named barrier's arrivals counted from the least any warpgroup still needs."""
        at, trips = _normal_form(self.codes, at, dict(trips), self.slack)
        rings = list(rings)
        for r, (prefix, partial, released) in enumerate(rings):
            bases = [at[w][2][r] for w in self.users[r]]
            shift = min([*bases, prefix, *released]) - self.rings[r].depth
            if shift <= 0:
                continue
            for w in self.users[r]:
                pc, counters, mine = at[w]
                at[w] = (pc, counters, _replaced(mine, r, mine[r] - shift))
            moved = tuple((u - shift, n) for u, n in partial)
            rings[r] = (prefix - shift, moved, tuple(n - shift for n in released))
        lows = {ident: min(counts) for ident, counts in zip(self.idents, named, strict=True)}
        pairs = zip(self.idents, named, strict=True)
        named = tuple(tuple(c - lows[ident] for c in counts) for ident, counts in pairs)
        waits = list(waiting)
        for w, code in enumerate(self.codes):
            if waits[w] is not None:
                waits[w] -= lows[code.instrs[at[w][0]].event.ident]
        return (tuple(at), tuple(sorted(trips.items())), named, tuple(rings), tuple(waits))

    def moves(self, state: tuple, uniform: dict) -> tuple[list, str]:
        """The states the least advanced warpgroup that can move leads to (its next op), or
        the deadlock when none can and someone is unfinished. Any order decides (the run is
        monotone); this one keeps the warpgroups close, so the normal form stays small."""
        at, trips, named, rings, waiting = state
        for w in sorted(range(len(self.codes)), key=lambda w: (at[w][1], w)):
            code = self.codes[w]
            pc, counters, bases = at[w]
            if pc == len(code.instrs):
                continue
            if code.instrs[pc].kind == "back":
                step = (named, rings, waiting, True)
            else:
                step = self.step(w, code.instrs[pc].event, counters, bases, named, rings, waiting)
            if step is None:
                continue
            named2, rings2, waiting2, done = step
            if not done:
                return [self.state(at, trips, named2, rings2, waiting2)], ""
            out = []
            for mine, learnt in _advance(code, at[w], dict(trips), uniform):
                after = [*at[:w], mine, *at[w + 1 :]]
                out.append(self.state(after, learnt, named2, rings2, waiting2))
            return out, ""
        blocked = [
            f"{code.name} at {self.where(code.instrs[at[w][0]].event)}"
            for w, code in enumerate(self.codes)
            if at[w][0] < len(code.instrs)
        ]
        return [], f"deadlock: {'; '.join(blocked)}" if blocked else ""

    def where(self, ev: Any) -> str:
        if isinstance(ev, Event):
            return f"{ev.op.name} {ev.ident} @ {_loc(ev.op)}"
        return f"{ev.text} (ring {self.rings[ev.ring].name})"

    def step(self, w: int, ev: Any, counters: tuple, bases: tuple, named, rings, waiting):
        """(named, rings, waiting, whether the op is done) after warpgroup `w` runs `ev`,
        None when it cannot: a sync first arrives, then waits for the phase."""
        if isinstance(ev, Event):
            n, me = self.idents.index(ev.ident), self.parties[ev.ident].index(w)
            counts, waits = list(named[n]), list(waiting)
            if waits[w] is None:
                counts[me] += 1
                waits[w] = counts[me] if ev.kind == "sync" else None
            named = _replaced(named, n, tuple(counts))
            if waits[w] is not None and min(counts) < waits[w]:
                return None if waiting[w] is not None else (named, rings, tuple(waits), False)
            return named, rings, _replaced(tuple(waits), w, None), True
        r, depth = ev.ring, self.rings[ev.ring].depth
        prefix, partial, released = rings[r]
        k = counters[len(self.codes[w].parents[ev.anchor])] if ev.anchor else 0
        use = bases[r] + k + ev.offset
        if ev.kind == "emptywait":
            if use >= depth and min(released, default=use) < use - depth + 1:
                return None
        elif ev.kind == "fullwait":
            if use >= prefix and dict(partial).get(use, 0) < self.puts[r]:
                return None
        elif ev.kind == "put":
            counts = dict(partial)
            counts[use] = counts.get(use, 0) + 1
            while counts.get(prefix, 0) >= self.puts[r]:
                del counts[prefix]
                prefix += 1
            rings = _replaced(rings, r, (prefix, tuple(sorted(counts.items())), released))
        else:  # release
            me = self.consumers[r].index(w)
            released = _replaced(released, me, released[me] + 1)
            rings = _replaced(rings, r, (prefix, partial, released))
        return named, rings, waiting, True


def _replaced(values: tuple, index: int, value: Any) -> tuple:
    return (*values[:index], value, *values[index + 1 :])


def _ring_of(instr: Instr) -> int:
    return instr.event.ring if isinstance(instr.event, RingEvent) else -1


# ------------------------------------------------------------------------------ staging

CAP = 4  # store groups counted exactly up to CAP (more are as bad as CAP for a wait < CAP)


@dataclass(frozen=True)
class Staging:
    """What a warpgroup knows about its TMA stores: committed groups that may still read
    smem (`unread`, at most), stores not committed, whether every thread is ordered after
    the point where `unread` became 0 (`fenced`), and how far the threads' staging writes
    are from a TMA store's reach (`written`: WRITTEN until each writer's
    `fence.proxy.async`, FENCED until a named barrier of all threads after it, CLEAN)."""

    unread: int = 0
    open: int = 0
    fenced: bool = True
    thread: int | None = None
    written: int = 0

    def join(self, other: Staging) -> Staging:
        thread = self.thread if self.thread is not None else other.thread
        return Staging(
            max(self.unread, other.unread),
            max(self.open, other.open),
            self.fenced and other.fenced,
            thread,
            max(self.written, other.written),
        )


CLEAN, FENCED, WRITTEN = 0, 1, 2  # `Staging.written`, ordered: a join keeps the worse


def _stage(items: list, state: Staging) -> Staging:
    for item in items:
        if isinstance(item, Event):
            state = _step(item, state)
        elif isinstance(item, Loop):
            state = _fixpoint(item.items, state)
        else:  # a guarded block may or may not run
            state = state.join(_stage(item.items, state))
    return state


def _fixpoint(body: list, entry: Staging) -> Staging:
    head = entry
    for _ in range(4 * CAP + 4):
        after = head.join(_stage(body, head))
        if after == head:
            return head
        head = after
    raise ExtractionError("staging state does not settle (internal)")


def _step(ev: Event, s: Staging) -> Staging:
    if ev.kind in ("store", "commit", "wait"):
        if ev.thread is None:
            raise fail(ev.op, f"'{ev.op.name}' by every thread (one storing thread is modelled)")
        if s.thread is not None and ev.thread != s.thread:
            raise NamedBarrierViolation(
                f"{_loc(ev.op)}: '{ev.op.name}' in thread {ev.thread}, but the TMA stores "
                f"are issued by thread {s.thread} (bulk groups are per thread)"
            )
        s = replace(s, thread=ev.thread)
    if ev.kind == "store":
        if s.written != CLEAN:
            missing = "a fence.proxy.async" if s.written == WRITTEN else "a named barrier"
            raise NamedBarrierViolation(
                f"{_loc(ev.op)}: TMA store issued with no {missing} between the staging "
                "writes and it: it can read the buffer before every thread's write reached "
                "the async proxy"
            )
        return replace(s, open=min(s.open + 1, CAP))
    if ev.kind == "commit":
        unread = min(s.unread + (1 if s.open else 0), CAP)
        return replace(s, unread=unread, open=0, fenced=s.fenced and unread == 0)
    if ev.kind == "wait":
        if s.unread <= ev.threads:
            return s
        return replace(s, unread=ev.threads, fenced=ev.threads == 0 and ev.thread is None)
    if ev.kind == "fence":
        return replace(s, written=min(s.written, FENCED)) if ev.thread is None else s
    if ev.kind == "sync":
        written = CLEAN if s.written == FENCED else s.written
        return replace(s, fenced=s.fenced or s.unread == 0, written=written)
    if ev.kind == "write":
        if s.unread or s.open or (not s.fenced and ev.thread is None):
            why = (
                f"{s.unread} TMA store group(s) may still read it (no tma_store_wait 0 since "
                "the last commit)"
                if s.unread or s.open
                else "the other threads are not ordered after the storing thread's "
                "tma_store_wait (no named barrier between)"
            )
            raise NamedBarrierViolation(
                f"{_loc(ev.op)}: staging buffer written while {why}: a store of the previous "
                "tile can read the new values"
            )
        return replace(s, written=WRITTEN)
    return s


def check_staging_owners(module: ModuleOp, progs: list[Program]) -> None:
    """Every staging slot is one warpgroup's: the slots each warpgroup writes and TMA-stores
    (computed from the warpgroup index alone) are no other warpgroup's, so that its own
    threads' barrier orders every write its TMA store reads."""
    wg = next((op.result for op in module.walk() if isinstance(op, nvgpu.WarpgroupIndexOp)), None)
    owners: dict[tuple[int, int], tuple[str, Operation]] = {}
    for prog in progs:
        for ev in _events(prog.items):
            if ev.kind not in ("write", "store"):
                continue
            slot = None if wg is None else _warpgroup_value(ev.op.slot, wg, prog.index)
            if slot is None:
                raise fail(ev.op, "staging slot not computed from the warpgroup index alone "
                           "(whose slot it is is not modelled)")  # fmt: skip
            key = (id(ev.op.buf), slot)
            other = owners.setdefault(key, (prog.name, ev.op))
            if other[0] != prog.name:
                raise NamedBarrierViolation(
                    f"{_loc(ev.op)}: staging slot {slot} is {prog.name}'s and {other[0]}'s "
                    f"(also at {_loc(other[1])}): one warpgroup's barrier does not order the "
                    "other's writes before its TMA store reads the slot"
                )


def check_staging(progs: list[Program]) -> None:
    for prog in progs:
        end = _stage(prog.items, Staging())
        if end.unread or end.open:
            events = [e for e in _events(prog.items) if e.kind == "store"]
            where = _loc(events[-1].op) if events else "the kernel"
            raise NamedBarrierViolation(
                f"{where}: {prog.name} can exit with a TMA store group still reading shared "
                "memory (no tma_store_wait 0 after the last commit)"
            )


# ---------------------------------------------------------------- slot reads by threads

REGISTER_READS = (nvgpu.FragmentLoadOp, nvgpu.FragmentLoadRowsOp, nvgpu.FragmentLoadColumnsOp)


def check_slot_reads(module: ModuleOp) -> None:
    """A ring slot that every thread reads into registers is released by one thread only
    after a `bar.sync` of the whole group: the release is reached from the read only through
    such a sync (walking back from it through its enclosing blocks, in the rings' loop body).
    A drain needs none when nothing of the ring follows it (no use D later exists)."""
    if not any(isinstance(op, REGISTER_READS) for op in module.walk()):
        return
    rings = find_rings(module)
    groups = kernel_groups(module, [r.full for r in rings])
    for ring, group in itertools.product(rings, groups):
        if group.threads == 1:
            continue
        buffers = {id(b) for b in ring.buffers}
        flat = list(group.body.walk())
        reads = {id(op) for op in flat if isinstance(op, REGISTER_READS) and id(op.buf) in buffers}
        if not reads:
            continue
        threads = WARPGROUP_THREADS * group.count
        releases = [
            op for op in flat if isinstance(op, nvgpu.MBarrierArriveOp) and op.bars == ring.empty
        ]
        for release in releases:
            if not _synced_after_reads(release, reads, threads, group.body, flat):
                raise NamedBarrierViolation(
                    f"{_loc(release)}: '{release.name}' releases a slot of ring {ring.name} "
                    f"that every thread read into registers with no bar.sync of all {threads} "
                    "threads between (a thread may still read it when the producer refills it)"
                )


def _synced_after_reads(
    release: Operation, reads: set[int], threads: int, body: Block, flat: list[Operation]
) -> bool:
    op = release
    while True:
        prev = op.prev_op
        while prev is not None:
            if isinstance(prev, nvgpu.NamedBarrierSyncOp) and prev.threads.value.data == threads:
                return True
            if any(id(o) in reads for o in prev.walk()):
                return False
            prev = prev.prev_op
        parent = op.parent_op()
        if isinstance(parent, scf.ForOp) and aref.DRAIN_ATTR in parent.attributes:
            return _last_ring_op(parent, flat) or _synced_after_reads(
                parent, reads, threads, body, flat
            )  # a sync before the drain loop covers all its releases
        if op.parent_block() is body or parent is None or isinstance(parent, scf.ForOp):
            return False  # the group's or the loop body's start: no sync since the read
        op = parent


def _last_ring_op(drain: scf.ForOp, flat: list[Operation]) -> bool:
    """Whether no barrier op follows `drain` in its group and no loop repeats it."""
    if any(isinstance(o, scf.ForOp) for o in _ancestors(drain)):
        return False
    end = flat.index(drain) + len(list(drain.walk()))
    barrier_ops = (nvgpu.MBarrierWaitOp, nvgpu.MBarrierArriveOp, nvgpu.MBarrierArriveExpectTxOp)
    return not any(isinstance(o, barrier_ops) for o in flat[end:])


def _ancestors(op: Operation) -> list[Operation]:
    out, parent = [], op.parent_op()
    while parent is not None:
        out.append(parent)
        parent = parent.parent_op()
    return out


def check_named(module: ModuleOp) -> int:
    """Prove the named barriers and TMA-store staging of `module` (module docstring); the
    number of named barriers checked. `ExtractionError` for IR outside the model,
    `NamedBarrierViolation` for a protocol that can go wrong."""
    check_no_named_in_peeled_loops(module)
    check_slot_reads(module)
    progs = programs(module)
    check_counts(progs)
    check_turns(progs)
    check_ring_turns(module, progs)
    check_staging(progs)
    check_staging_owners(module, progs)
    return len({e.ident for p in progs for e in _events(p.items) if e.kind in ("sync", "arrive")})


def check_no_named_in_peeled_loops(module: ModuleOp) -> None:
    """A loop to `ub - step` with its peeled last stage after it is the rings' loop to `ub`
    (`extract.modelled_ub`): the runs searched here would take its trip count for the real
    one, so named-barrier ops inside it or its peeled stage are refused (not modelled).
    Named barriers around such a loop see its ring ops in the same order either way."""
    for loop in module.walk():
        stage = peeled_last(loop) if isinstance(loop, scf.ForOp) else None
        if stage is None:
            continue
        for op in [*loop.walk(), *stage.walk()]:
            if isinstance(op, NAMED):
                raise fail(
                    op,
                    f"'{op.name}' in a loop to `ub - step` or its peeled last stage (the "
                    "named-barrier model does not run it one iteration short)",
                )
