"""Cross-ring deadlock freedom: the rings of a kernel together, for every trip count.

`certificate.py` proves each ring alone. Rings can still deadlock each other (the producer
waits for a slot of ring r that a consumer frees only after a use of ring r' the producer
puts later). This module proves that cannot happen, by a decomposition argument whose
premises are checked on the IR (`check_composition`):

Premises (P1-P4 checked here or by the per-ring proofs; P5 assumed):

* P1 (roles) one producer group puts every ring (its only waits are on empty barriers, its
  arrives on full ones, it issues the copies and stores); consumer groups wait only on full
  barriers and arrive only on empty ones. Every ring op of a group is in its tile body
  (once per tile) or in the loops of the group's sequence of inner loops (a ring may use
  some of them: the others' uses do not count for it), with the peeled prologue,
  the lookahead guard `iv + step < ub`, lag guards `held >= L` and drains after the loop
  that `extract.py` recognizes.
* P2 (per ring) every ring is proved by `certificate.prove` (or the explicit search): no
  parity aliasing and exact counts, so the phase of use u of full[s] completes exactly when
  the producer's put of u has landed, that of empty[s] exactly when every consumer
  warpgroup released use u, and a wait for a completed phase passes until it is taken
  (waits are persistent).
* P3 (same nest) every group runs the same loop nest (the trip counts are structurally
  equal, `RingProtocolModel.trip_delta == 0`) and each ring uses the same loops of the
  sequence in every group, so a use index belongs to the same tile and inner-loop
  iteration in every group.
* P4 control flow of the groups does not depend on barrier state (it depends on loop
  bounds only: the IR has no other branches around ring ops, `extract.py` refuses them).
* P5 (assumed) the only blocking operations between groups are these mbarrier waits (the
  level verified is the one after `lower-aref`; blocking added by later lowerings, such as
  named barriers between consumer warpgroups, is not covered here).

Argument. In a deadlocked state every unfinished group is blocked at a wait (copies in
flight always land). If the producer had finished, a blocked consumer waits for a use that
was put (P2, P3: it needs no more uses than were put), so its wait passes: contradiction.
So the producer is blocked at the empty wait for use w + D of some ring r (w >= 0), and
some consumer warpgroup c has not released use w of r (P2). c is blocked at a full wait
for a use v of a ring r' that the producer has not put, so, in program order,

    c waits for (r', v) before it releases (r, w), and
    the producer waits for (r, w + D) before it puts (r', v).          (pattern)

All four op instances lie in one tile (the use v is put after and waited before the tile
of w and w + D, P3), so only one tile's program matters, with its own trip count N >= 0.
`check_composition` asks Z3 whether the pattern has an instance for any N (one linear
integer query per consumer group, N symbolic): unsat proves the kernel free of cross-ring
deadlock for every trip count and every number of tiles. (The pattern with r = r' is the
per-ring deadlock the certificate already excludes; it is included anyway.) A sat answer
is reported with the N and the four ops: a possible deadlock that the per-ring proofs miss.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import z3

from tawa_xdsl.verify.extract import Actor, RingProtocolModel, Segment, Step

Expr = z3.ExprRef


@dataclass
class CompositionVerdict:
    """Whether the rings of a kernel together are free of deadlock."""

    proved: bool
    seconds: float
    message: str = ""
    rings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Event:
    """One ring op of a group's tile program: which use it acts on, when it exists."""

    ring: int
    kind: str  # "fullwait" | "release" | "emptywait" | "put"
    where: str  # "tile" | "prologue" | "loop" | "drain"
    step: Step
    lag: int  # loop: use t - lag (skipped while t < lag); drain: the last `lag` uses
    phase: int  # 2j: before loop j of the sequence (after loop j - 1), 2j + 1: in loop j
    seg: int = 0  # which loop of the group's sequence (prologue, loop and drain events)
    loops: tuple[int, ...] = (0,)  # the loops of the sequence its ring uses


class PremiseError(Exception):
    """The kernel is not of the shape the decomposition argument covers (module docstring)."""


def _kind(step: Step, role: str) -> str | None:
    if role == "producer":
        if step.kind == "wait" and step.barrier == "empty":
            return "emptywait"
        if step.kind in ("tma", "store") or (step.kind == "arrive" and step.barrier == "full"):
            return "put"
    else:
        if step.kind == "wait" and step.barrier == "full":
            return "fullwait"
        if step.kind == "arrive" and step.barrier == "empty":
            return "release"
        if step.kind == "read":
            return None
    if step.kind == "read":
        return None
    raise PremiseError(f"{step.loc}: {role} does {step.kind} on {step.barrier or 'a buffer'} (P1)")


def _segments(actor: Actor) -> list[Segment]:
    """The loops of the actor's sequence; one loop is the actor's own steps."""
    if len(actor.segments) > 1:
        return actor.segments
    loop = actor.segments[0].loop if actor.segments else None
    return [Segment(actor.steps, actor.prologue, actor.drain_pos, loop)]


def _firsts(actors: list[tuple[int, Actor]], looped: list[bool]) -> dict:
    """The loops of one group's rings (by identity) and the position of each one's first
    ring op, in program order: the group's sequence of loops."""
    firsts: dict = {}
    for r, actor in actors:
        for seg in _segments(actor) if looped[r] else []:
            first = min(s.pos for s in seg.steps)
            firsts[seg.loop] = min(firsts.get(seg.loop, first), first)
    return dict(sorted(firsts.items(), key=lambda item: item[1]))


def _loop_indices(actors: list[tuple[int, Actor]], looped: list[bool]) -> dict[int, tuple]:
    """Ring -> the indices, in the group's sequence of loops, of the loops it uses."""
    order = list(_firsts(actors, looped))
    return {
        r: tuple(order.index(seg.loop) for seg in _segments(actor))
        for r, actor in actors
        if looped[r]
    }


def _events(actors: list[tuple[int, Actor]], role: str, looped: list[bool]) -> list[_Event]:
    """The ring ops of one group's tile program, loop j of its sequence of loops in phase
    2j + 1 (its peeled use before it, in phase 2j; its drain after it, in phase 2j + 2); a
    ring may use some of the loops only (its uses count on through those)."""
    firsts = _firsts(actors, looped)
    indices = _loop_indices(actors, looped)
    out = []
    for r, actor in actors:
        if not looped[r]:
            for step in actor.steps:
                kind = _kind(step, role)
                if kind:
                    phase = 2 * sum(lo < step.pos for lo in firsts.values())
                    out.append(_Event(r, kind, "tile", step, 0, phase))
            continue
        mine = indices[r]
        for j, seg in zip(mine, _segments(actor), strict=True):
            for step in seg.prologue:
                kind = _kind(step, role)
                if kind:
                    out.append(_Event(r, kind, "prologue", step, 0, 2 * j, j, mine))
            for step in seg.steps:
                kind = _kind(step, role)
                if kind:
                    out.append(_Event(r, kind, "loop", step, step.lag, 2 * j + 1, j, mine))
            if actor.drain:
                rel = next(s for s in seg.steps if s.kind == "arrive" and s.barrier == "empty")
                drained = Step(**{**rel.__dict__, "pos": seg.drain_pos})
                out.append(_Event(r, "release", "drain", drained, actor.lag, 2 * j + 2, j, mine))
    return out


class _Instance:
    """Symbolic instance of an event: its use index, order key and existence condition."""

    def __init__(self, ev: _Event, ns: list[Expr], name: str, looped: list[bool]):
        self.ev = ev
        t = z3.Int(f"t_{name}")
        pos = ev.step.pos
        n = ns[ev.seg]
        # the ring's uses in its loops before this one
        before = z3.Sum([z3.IntVal(0), *(ns[j] for j in ev.loops if j < ev.seg)])
        if ev.where == "tile":
            self.use, self.exists = z3.IntVal(0), z3.And(t == 0)
            self.key = (ev.phase, z3.IntVal(pos), z3.IntVal(0))
        elif ev.where == "prologue":
            self.use, self.exists = before, z3.And(t == 0, n >= 1)
            self.key = (ev.phase, z3.IntVal(pos), z3.IntVal(0))
        elif ev.where == "loop":
            base = z3.And(t >= 0, t < n)
            if ev.step.ahead:
                self.use, self.exists = before + t + 1, z3.And(base, t + 1 < n)
            else:
                self.use, self.exists = before + t - ev.lag, z3.And(base, t >= ev.lag)
            self.key = (ev.phase, t, z3.IntVal(pos))
        else:  # drain: use t, one of the last `lag` uses of its loop
            self.use = before + t
            self.exists = z3.And(t >= 0, t < n, t >= n - ev.lag)
            self.key = (ev.phase, z3.IntVal(pos), t)
        uses = z3.Sum([ns[j] for j in ev.loops])
        self.uses = uses if looped[ev.ring] else z3.IntVal(1)  # uses per tile


def _before(a: tuple, b: tuple) -> Expr:
    """Lexicographic a < b of (phase, x, y) keys."""
    if a[0] != b[0]:
        return z3.BoolVal(a[0] < b[0])
    return z3.Or(a[1] < b[1], z3.And(a[1] == b[1], a[2] < b[2]))


def check_composition(rings: list[RingProtocolModel]) -> CompositionVerdict:
    """Prove the rings of one kernel free of cross-ring deadlock (module docstring)."""
    start = time.perf_counter()
    names = [r.name for r in rings]
    if len(rings) < 2:
        return CompositionVerdict(True, time.perf_counter() - start, rings=names)
    producers = {r.producer.group for r in rings}
    if len(producers) != 1:
        raise PremiseError("rings are put by different producer groups (P1)")
    if any(d != 0 for r in rings for d in r.trip_delta.values()):
        raise PremiseError("a consumer's trip count differs from the producer's (P3)")
    # The inner loop is the deepest; a ring one loop out runs once per tile (P1).
    inner = max(a.loop_depth for r in rings for a in (r.producer, *r.consumers))
    looped = []
    for r in rings:
        depths = {a.loop_depth for a in (r.producer, *r.consumers)}
        if len(depths) != 1 or next(iter(depths)) not in (inner, inner - 1):
            raise PremiseError(f"ring {r.name}: neither in the inner loop nor once per tile (P1)")
        looped.append(inner > 0 and next(iter(depths)) == inner)
    producer = [(k, r.producer) for k, r in enumerate(rings)]
    prod = _events(producer, "producer", looped)
    consumer_groups = sorted({c.group for r in rings for c in r.consumers})
    for g in consumer_groups:
        mine = [(k, c) for k, r in enumerate(rings) for c in r.consumers if c.group == g]
        _same_loops(rings, _loop_indices(producer, looped), _loop_indices(mine, looped), mine)
        cons = _events(mine, "consumer", looped)
        witness = _pattern(rings, prod, cons, looped)
        if witness:
            return CompositionVerdict(
                False, time.perf_counter() - start, f"DEADLOCK (cross-ring): {witness}", names
            )
    return CompositionVerdict(True, time.perf_counter() - start, rings=names)


def _same_loops(
    rings: list[RingProtocolModel], producer: dict, consumer: dict, actors: list[tuple[int, Actor]]
) -> None:
    """Each ring uses the same loops of the sequence in the producer as in a consumer group
    (P3): loop j of one group is loop j of the other (its trip count is compared with the
    producer's by the ring that uses it), so two sequential loops are not one interleaved
    loop, and a ring used by some of the loops counts its uses through those only."""
    for r, loops in consumer.items():
        if producer.get(r) != loops:
            where = next(a.steps[0].loc for k, a in actors if k == r)
            theirs = ", ".join(str(j) for j in producer.get(r, ()))
            raise PremiseError(
                f"{where}: ring {rings[r].name} uses loops {', '.join(map(str, loops))} of the "
                f"sequence in a consumer but {theirs or 'none'} in the producer (P3)"
            )


def _pattern(
    rings: list[RingProtocolModel], prod: list[_Event], cons: list[_Event], looped: list[bool]
) -> str:
    """A description of an instance of the pattern, or "" when there is none for any N."""
    count = 1 + max((j for e in (*prod, *cons) for j in e.loops), default=0)
    ns = [z3.Int(f"N{j}") for j in range(count)]
    combos: list[tuple[Expr, tuple[_Event, ...]]] = []
    # One instance per event and role: the combinations are disjuncts of one Or, so they may
    # share variables (a model needs one disjunct true); within one the four roles differ.
    instances: dict[tuple[str, int], _Instance] = {}

    def instance(role: str, ev: _Event) -> _Instance:
        key = (role, id(ev))
        if key not in instances:
            instances[key] = _Instance(ev, ns, f"{role}{len(instances)}", looped)
        return instances[key]

    for e in (x for x in cons if x.kind == "release"):
        for f in (x for x in cons if x.kind == "fullwait"):
            for a in (x for x in prod if x.kind == "emptywait" and x.ring == e.ring):
                for b in (x for x in prod if x.kind == "put" and x.ring == f.ring):
                    ie, if_, ia, ib = (
                        instance(role, ev) for ev, role in ((e, "e"), (f, "f"), (a, "a"), (b, "b"))
                    )
                    depth = rings[e.ring].depth
                    combos.append(
                        (
                            z3.And(
                                ie.exists,
                                if_.exists,
                                ia.exists,
                                ib.exists,
                                ie.use >= 0,
                                if_.use == ib.use,
                                ia.use == ie.use + depth,
                                ia.use < ia.uses,
                                _before(if_.key, ie.key),
                                _before(ia.key, ib.key),
                            ),
                            (e, f, a, b),
                        )
                    )
    if not combos:
        return ""
    solver = z3.Solver()
    solver.add(*(n >= 0 for n in ns), z3.Or([c for c, _ in combos]))
    if solver.check() == z3.unsat:
        return ""
    model = solver.model()
    trips = ", ".join(f"N{j} = {model.eval(n)}" for j, n in enumerate(ns))
    trips = f"N = {model.eval(ns[0])}" if len(ns) == 1 else trips
    for cond, (e, f, a, b) in combos:
        if z3.is_true(model.eval(cond, model_completion=True)):
            return (
                f"for {trips} the producer can wait at {a.step.text} @ {a.step.loc} "
                f"for ring {rings[e.ring].name}'s slot that a consumer frees at {e.step.text} @ "
                f"{e.step.loc} only after {f.step.text} @ {f.step.loc}, which needs ring "
                f"{rings[f.ring].name}'s put {b.step.text} @ {b.step.loc} that comes later"
            )
    return "the pattern has an instance (no single combination isolated)"
