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
  arrived at exit, under every interleaving, for trip counts 0..`TRIPS` of each loop (the
  same inner trip count in every tile) and either value of each uniform condition: a
  bounded check of a program periodic in the trip;
* staging: a buffer a `tma_store` reads is written only when no store group of the
  warpgroup may still read it (a `tma_store_wait 0` in the storing thread, then a named
  barrier the writers take part in, since the last commit), and every warpgroup ends with
  no store group in flight: an abstract interpretation of each warpgroup's program, to a
  fixpoint over every loop (so for every trip count);
* turns with the rings: no cycle of named-barrier turns and mbarrier waits (a consumer
  blocked on its turn while the other waits for a ring use that only the first one frees):
  every warpgroup's ring ops (read as `compose.py` reads them, on the per-ring proofs'
  premise that use u of a ring is put / released exactly when its ops ran) and named-barrier
  ops run together to a fixpoint, for 0..D + `TRIPS` iterations of each loop of the rings'
  sequence of loops (D the deepest ring; a ring may use some of the loops, its uses count on
  through those), one or two tiles and either value of each uniform condition (a ring op
  under a false one, around whole loops of ring ops, does not run). Waits and syncs are
  enabled monotonically by what the others did, so one maximal run decides each case. This
  part is a bounded check, not a proof for every N;
* slot reads: a ring slot every thread reads into registers (`fragment_load*`) is released
  by its one thread only after a `bar.sync` of every thread of the group, between the read
  and the release in program order (before a drain's loop for its releases; a drain with no
  ring op after it needs none: no use D later exists to refill the slot).

Anything outside the model (a named barrier shared by two groups, under a condition other
than the warpgroup index, a thread guard, the loop guards above or a uniform condition,
in an else-branch, inside another region op, in a loop that is none of the rings' loops)
is refused in one line.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field, replace

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from tawa_xdsl import protocol
from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.dialects import aref, nvgpu, tile
from tawa_xdsl.dialects.nvgpu import WARPGROUP_THREADS
from tawa_xdsl.verify.extract import (
    Actor,
    ExtractionError,
    Group,
    RingProtocolModel,
    Step,
    extract,
    fail,
    find_rings,
    is_thread_guard,
    kernel_groups,
)

TRIPS = 3  # trip counts 0..TRIPS of every loop, for the turn simulation
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
    lag: int = 0


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
            guard.items = self.block(branches[0], loops, thread)
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
            out.append(Program(f"{group.role}.wg{first + k}", group.index, items))
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


# -------------------------------------------------------------------------------- turns


def _flatten(items: list, trip: dict[int, int], iteration: dict[int, int]) -> list[Event]:
    """The named-barrier events of `items` for one choice of trip count per loop."""
    out: list[Event] = []
    for item in items:
        if isinstance(item, Event):
            if item.kind in ("sync", "arrive"):
                out.append(item)
        elif isinstance(item, Loop):
            for k in range(trip[id(item.op)]):
                out += _flatten(item.items, trip, {**iteration, id(item.op): k})
        elif isinstance(item, Uniform):
            if trip[item.key]:
                out += _flatten(item.items, trip, iteration)
        elif item.kind == "nonempty":
            if trip[id(item.loop)] > 0:
                out += _flatten(item.items, trip, iteration)
        elif _runs(item, iteration[id(item.loop)], trip[id(item.loop)]):
            out += _flatten(item.items, trip, iteration)
    return out


def _runs(guard: Guarded, iteration: int, trips: int) -> bool:
    """Whether a `notfirst` / `notlast` / `lag` guard holds in `iteration` of `trips`."""
    if guard.kind == "lag":
        return iteration >= guard.lag
    return iteration != 0 if guard.kind == "notfirst" else iteration != trips - 1


def _choices(items: list) -> dict:
    """What the turn simulation enumerates: each loop's trip count 0..TRIPS (by the loop's
    id), each uniform condition false or true (by its key)."""
    out: dict = {}
    for item in items:
        if isinstance(item, Loop):
            out[id(item.op)] = range(TRIPS + 1)
        elif isinstance(item, Uniform):
            out[item.key] = range(2)
        if not isinstance(item, Event):
            out.update(_choices(item.items))
    return out


def check_turns(progs: list[Program]) -> None:
    """The turn simulation (module docstring) for every trip count 0..TRIPS of each loop
    and either value of each uniform condition."""
    named = [p for p in progs if any(e.kind in ("sync", "arrive") for e in _events(p.items))]
    if len(named) < 2:
        return
    choices: dict = {}
    for prog in named:
        choices.update(_choices(prog.items))
    for choice in itertools.product(*choices.values()):
        trip = dict(zip(choices, choice, strict=True))
        runs = [_flatten(p.items, trip, {}) for p in named]
        problem = _explore(runs, [p.name for p in named])
        if problem:
            shown = ", ".join(
                f"N={n}" if isinstance(k, int) else f"if={bool(n)}"
                for k, n in zip(choices, choice, strict=True)
            )
            raise NamedBarrierViolation(
                f"{_first_named(named)}: named barriers, trip counts {shown}: {problem}"
            )


def _first_named(progs: list[Program]) -> str:
    """The place of the first named-barrier op (where a turn problem is reported)."""
    ops = [e.op for p in progs for e in _events(p.items) if e.kind in ("sync", "arrive")]
    return _loc(ops[0])


def _explore(runs: list[list[Event]], names: list[str]) -> str:
    """Search every interleaving of the warpgroups' named-barrier events for a deadlock, an
    arrival twice in one phase or arrivals left at exit ("" when there is none)."""
    start = (tuple(0 for _ in runs), (), tuple(0 for _ in runs))  # waiting: the barrier id
    seen, todo = {start}, [start]
    while todo:
        pos, phases, waiting = todo.pop()
        bars = dict(phases)  # id -> tuple of the warpgroups arrived in the open phase
        moved = False
        for w, run in enumerate(runs):
            if waiting[w]:
                continue
            if pos[w] == len(run):
                continue
            ev = run[pos[w]]
            arrived = bars.get(ev.ident, ())
            if w in arrived:
                return (
                    f"{names[w]} arrives twice in one phase of barrier {ev.ident} at "
                    f"{_loc(ev.op)} (a turn is taken before it was given)"
                )
            arrived = (*arrived, w)
            new_bars, new_wait = dict(bars), list(waiting)
            new_pos = list(pos)
            new_pos[w] += 1
            if len(arrived) * WARPGROUP_THREADS == ev.threads:
                new_bars.pop(ev.ident, None)
                for other in arrived:  # the phase completes: its syncs go on
                    if new_wait[other] == ev.ident:
                        new_wait[other] = 0
            else:
                new_bars[ev.ident] = arrived
                new_wait[w] = ev.ident if ev.kind == "sync" else 0
            state = (tuple(new_pos), tuple(sorted(new_bars.items())), tuple(new_wait))
            moved = True
            if state not in seen:
                seen.add(state)
                todo.append(state)
        if not moved:
            if phases:
                ident, arrived = phases[0]
                who = ", ".join(names[w] for w in arrived)
                blocked = [names[w] for w, run in enumerate(runs) if waiting[w]]
                if blocked:
                    return (
                        f"deadlock: {', '.join(blocked)} wait at named barriers that the others "
                        f"never complete (barrier {ident}: only {who} arrived)"
                    )
                return f"barrier {ident} left with arrivals of {who} at exit"
    return ""


# ------------------------------------------------------------------ turns and the rings


@dataclass(frozen=True)
class Instance:
    """One op instance of a warpgroup's tile program, in program order by `key`."""

    key: tuple  # (tile, phase, iteration, pos): phase 0 before the inner loop, 1 in it, 2 after
    kind: str  # emptywait | put | fullwait | release | sync | arrive
    ring: int = -1
    use: int = 0  # the ring use (counted across tiles)
    ident: int = 0  # named barrier id
    op: Operation | None = None
    text: str = ""


def _ring_kind(step: Step, role: str) -> str | None:
    if role == "producer":
        if step.kind == "wait":
            return "emptywait"
        return "put" if step.kind in ("tma", "store", "arrive") else None
    if step.kind == "wait":
        return "fullwait"
    return "release" if step.kind == "arrive" else None


def _ring_instances(
    rings: list[RingProtocolModel],
    group: int,
    looped: list[bool],
    shape: tuple,
    starts: list[int],
    dropped: set[int],
) -> list[Instance]:
    """The ring op instances of one warpgroup of `group` (`compose.py`'s reading of a step:
    the peeled prologue acts on the first use of its loop, a lagged step on k - lag, a
    lookahead step on k + 1, the drain on the last `lag` uses of its loop; uses count on
    through the loops of the sequence it uses and across tiles). `shape`: (tiles, the trip
    count of each loop of the group's sequence, the loops' identities); `starts`: their
    positions; `dropped`: those of the ring ops under a false uniform condition."""
    tiles, trips, loops = shape
    actors = [
        (r, a)
        for r, ring in enumerate(rings)
        for a in (ring.producer, *ring.consumers)
        if a.group == group
    ]
    out = []
    for (r, actor), t in itertools.product(actors, range(tiles)):
        mine = [trips[loops.index(seg.loop)] for seg in actor.segments] if looped[r] else []
        base = t * (sum(mine) if looped[r] else 1)
        steps = _tile_steps(actor, mine, starts) if looped[r] else _tile_ops(actor, starts)
        for key, step, use in steps:
            kind = _ring_kind(step, actor.role)
            if kind and step.pos not in dropped:
                text = f"{step.text} @ {step.loc}"
                out.append(Instance((t, *key), kind, r, base + use, text=text))
    return out


def _tile_ops(actor: Actor, starts: list[int]) -> list[tuple]:
    """(key without the tile, step, use) of a ring used once per tile, outside the loops."""
    return [((_phase(st.pos, starts), st.pos, 0), st, 0) for st in actor.steps]


def _phase(pos: int, starts: list[int]) -> int:
    """2j: an op at `pos` outside the loops, after j loops of the sequence."""
    return 2 * sum(start < pos for start in starts)


def _tile_steps(actor: Actor, trips: list[int], starts: list[int]) -> list[tuple]:
    """(key without the tile, step, use in the tile) of one tile of `actor`, `trips` the trip
    count of each loop it uses: loop j of the group's sequence in phase 2j + 1 (keyed by
    iteration, then position), its peeled use before it and its drain after it (keyed by
    position, then use)."""
    out = []
    before = 0
    for seg, n in zip(actor.segments, trips, strict=True):
        j = _phase(seg.steps[0].pos, starts) // 2 - 1  # the loop holding its steps
        out += [((2 * j, st.pos, 0), st, before) for st in seg.prologue if n >= 1]
        for step in seg.steps:
            for k in range(n):
                use = k + 1 if step.ahead else k - step.lag
                if 0 <= use < n:
                    out.append(((2 * j + 1, k, step.pos), step, before + use))
        if actor.drain:
            release = next(st for st in seg.steps if st.kind == "arrive")
            for use in range(max(0, n - actor.lag), n):
                out.append(((2 * j + 2, seg.drain_pos, use), release, before + use))
        before += n
    return out


def _named_instances(
    prog: Program, loops: list[scf.ForOp], order: dict[int, int], shape: tuple
) -> list[Instance]:
    """The named-barrier instances of `prog`, keyed like the ring instances, for `shape`:
    (tiles, the trip count of each loop of the rings' sequence `loops`, the value of each
    uniform condition)."""
    tiles, trips, taken = shape
    index = {id(loop): j for j, loop in enumerate(loops)}
    spans = [(order[id(loop)], max(order[id(o)] for o in loop.walk())) for loop in loops]
    out: list[Instance] = []

    def visit(items: list, conds: tuple, seg: int | None) -> None:
        for item in items:
            if isinstance(item, Event):
                if item.kind in ("sync", "arrive"):
                    place(item, conds, seg)
            elif isinstance(item, Loop):
                if id(item.op) in index:
                    visit(item.items, conds, index[id(item.op)])
                elif any(item.op.is_ancestor(loop) for loop in loops):
                    visit(item.items, conds, seg)  # the tile loop
                else:
                    raise fail(
                        item.op, "named barrier in a loop other than the rings' (not modelled)"
                    )
            elif isinstance(item, Uniform):
                visit(item.items, (*conds, item), seg)
            else:
                if not any(item.loop.is_ancestor(loop) for loop in loops):
                    raise fail(
                        item.loop, "named barrier guarded by a loop other than the rings' "
                        "(not modelled)",
                    )  # fmt: skip
                visit(item.items, (*conds, item), seg)

    def holds(conds: tuple, t: int, k: int) -> bool:
        """Whether every guard holds in tile `t`, iteration `k` of its loop."""
        for guard in conds:
            if isinstance(guard, Uniform):
                ok = bool(taken[guard.key])
            elif id(guard.loop) in index:
                n = trips[index[id(guard.loop)]]
                ok = n > 0 if guard.kind == "nonempty" else _runs(guard, k, n)
            else:  # the tile loop
                ok = tiles > 0 if guard.kind == "nonempty" else _runs(guard, t, tiles)
            if not ok:
                return False
        return True

    def place(ev: Event, conds: tuple, seg: int | None) -> None:
        pos = order[id(ev.op)]
        for t in range(tiles):
            if seg is not None:
                for k in range(trips[seg]):
                    if holds(conds, t, k):
                        key = (t, 2 * seg + 1, k, pos)
                        out.append(Instance(key, ev.kind, ident=ev.ident, op=ev.op))
            elif holds(conds, t, 0):
                if any(lo < pos <= hi for lo, hi in spans):
                    raise fail(ev.op, "named barrier in the rings' loop under another op")
                key = (t, _phase(pos, [lo for lo, _ in spans]), pos, 0)
                out.append(Instance(key, ev.kind, ident=ev.ident, op=ev.op))

    visit(prog.items, (), None)
    return out


def check_ring_turns(module: ModuleOp, progs: list[Program]) -> None:
    """No deadlock of the turns together with the rings (module docstring): every
    warpgroup's ring and named-barrier instances, for `tiles` x the trip count of each loop
    of the rings' sequence, run to a fixpoint. Ring waits and named-barrier syncs are
    enabled monotonically by what the others did (a use put, a use released by every
    consumer warpgroup, the k-th arrivals of every participant), so one maximal run
    decides: someone left unfinished is a deadlock."""
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
    found = find_rings(module)
    groups = kernel_groups(module, [r.full for r in found])
    persistent = any(a.loop_depth > 1 for r in rings for a in (r.producer, *r.consumers))
    deepest = max(r.depth for r in rings)
    flats = [list(g.body.walk()) for g in groups]
    orders = [{id(op): n for n, op in enumerate(flat)} for flat in flats]
    sequences = [_sequence(rings, looped, g, flat) for g, flat in enumerate(flats)]
    count = max((len(seq) for seq in sequences), default=0)
    under = [_ring_conditions(flat, found) for flat in flats]
    choices: dict = {key: range(2) for conds in under for keys in conds.values() for key in keys}
    for prog in progs:
        choices.update({k: v for k, v in _choices(prog.items).items() if not isinstance(k, int)})
    for taken in itertools.product(*choices.values()):
        values = dict(zip(choices, taken, strict=True))
        for tiles in (1, 2) if persistent else (1,):
            for trips in itertools.product(range(deepest + TRIPS + 1), repeat=count):
                runs = []
                for prog in progs:
                    loops, order = sequences[prog.group], orders[prog.group]
                    starts = [order[id(loop)] for loop in loops]
                    dropped = {
                        pos
                        for pos, keys in under[prog.group].items()
                        if not all(values[k] for k in keys)
                    }
                    shape = (tiles, trips, [id(loop) for loop in loops])
                    mine = _ring_instances(rings, prog.group, looped, shape, starts, dropped)
                    mine += _named_instances(prog, loops, order, (tiles, trips, values))
                    runs.append(sorted(mine, key=lambda x: x.key))
                problem = _run(
                    runs,
                    [p.name for p in progs],
                    rings,
                    [g.role for g in (groups[p.group] for p in progs)],
                )
                if problem:
                    conds = "".join(f", condition {'true' if v else 'false'}" for v in taken)
                    uses = " + ".join(str(n) for n in trips) or "0"
                    raise NamedBarrierViolation(
                        f"{_first_named(named)}: named barriers with the rings, {tiles} "
                        f"tile(s) of {uses} use(s){conds}: {problem}"
                    )


def _ring_conditions(flat: list[Operation], rings) -> dict[int, tuple]:
    """The uniform conditions around each ring op of a group (by position in `flat`): the
    `scf.if`s around whole loops of ring ops (the thread guard, the lookahead, the peeled
    stage and the lag guards hold no loop). A ring op under a false one does not run."""
    bars = {id(v) for r in rings for v in (r.full, r.empty)}
    ring_ops = (nvgpu.MBarrierWaitOp, nvgpu.MBarrierArriveOp, nvgpu.MBarrierArriveExpectTxOp)
    inside = {id(op) for op in flat}
    out: dict[int, tuple] = {}
    for pos, op in enumerate(flat):
        if not isinstance(op, ring_ops) or id(op.bars) not in bars:
            continue
        keys = []
        for parent in _ancestors(op):
            if id(parent) not in inside:
                break
            if not isinstance(parent, scf.IfOp) or is_thread_guard(parent.cond):
                continue
            if not any(isinstance(o, scf.ForOp) for o in parent.walk()):
                continue
            key = uniform_key(parent.cond)
            if key is None:
                raise fail(parent, "ring ops under a condition the named-barrier model does "
                           "not cover")  # fmt: skip
            keys.append(key)
        if keys:
            out[pos] = tuple(keys)
    return out


def _sequence(rings, looped, group: int, flat: list[Operation]) -> list[scf.ForOp]:
    """The loops of the rings' sequence in `group`, in program order (a ring may use some
    of them; `compose.py` checks that it uses the same ones in every group)."""
    by_id = {id(op): op for op in flat}
    loops = {
        seg.loop: by_id[seg.loop]
        for r, ring in enumerate(rings)
        for actor in (ring.producer, *ring.consumers)
        if actor.group == group and looped[r]
        for seg in actor.segments
        if seg.loop in by_id
    }
    order = {id(op): n for n, op in enumerate(flat)}
    return sorted(loops.values(), key=lambda loop: order[id(loop)])


def _run(runs: list[list[Instance]], names: list[str], rings, roles: list[str]) -> str:
    """One maximal run of the instances (`check_ring_turns`); "" when everyone finishes."""
    consumers = [w for w, role in enumerate(roles) if role == "consumer"]
    puts_needed = Counter(
        (i.ring, i.use) for w in range(len(runs)) for i in runs[w] if i.kind == "put"
    )
    puts: Counter = Counter()
    released: Counter = Counter()  # (ring, warpgroup) -> releases
    arrived: Counter = Counter()  # (id, warpgroup) -> arrivals
    parties: dict[int, set[int]] = {}
    for w, run in enumerate(runs):
        for i in run:
            if i.kind in ("sync", "arrive"):
                parties.setdefault(i.ident, set()).add(w)
    pos = [0] * len(runs)
    waiting = [0] * len(runs)  # the arrival count a sync waits for
    progress = True
    while progress:
        progress = False
        for w, run in enumerate(runs):
            while pos[w] < len(run):
                i = run[pos[w]]
                if i.kind == "emptywait":
                    depth = rings[i.ring].depth
                    if i.use >= depth and any(
                        released[(i.ring, c)] < i.use - depth + 1 for c in consumers
                    ):
                        break
                elif i.kind == "fullwait" and puts[(i.ring, i.use)] < puts_needed[(i.ring, i.use)]:
                    break
                elif i.kind == "sync":
                    if not waiting[w]:
                        arrived[(i.ident, w)] += 1
                        waiting[w] = arrived[(i.ident, w)]
                    if any(arrived[(i.ident, o)] < waiting[w] for o in parties[i.ident]):
                        break
                    waiting[w] = 0
                elif i.kind == "arrive":
                    arrived[(i.ident, w)] += 1
                elif i.kind == "put":
                    puts[(i.ring, i.use)] += 1
                elif i.kind == "release":
                    released[(i.ring, w)] += 1
                pos[w] += 1
                progress = True
    blocked = [
        f"{names[w]} at {_where(runs[w][pos[w]], rings)}"
        for w in range(len(runs))
        if pos[w] < len(runs[w])
    ]
    return f"deadlock: {'; '.join(blocked)}" if blocked else ""


def _where(i: Instance, rings) -> str:
    if i.op is not None:
        return f"{i.op.name} {i.ident} @ {_loc(i.op)}"
    return f"{i.text} (ring {rings[i.ring].name}, use {i.use})"


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
    check_slot_reads(module)
    progs = programs(module)
    check_counts(progs)
    check_turns(progs)
    check_ring_turns(module, progs)
    check_staging(progs)
    return len({e.ident for p in progs for e in _events(p.items) if e.kind in ("sync", "arrive")})
