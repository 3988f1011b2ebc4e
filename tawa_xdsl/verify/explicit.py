"""Explicit-state search of one ring's protocol over the lag-relative finite model.

The model replaces unbounded counters by what the guards can see:

* `more`: the producer has another use to put; it may become false after any producer
  iteration -- that is "for every trip count N >= 0";
* use counters modulo M (a multiple of every slot modulus and twice every parity divisor), so
  each op's slot and parity are computed from the very expressions the IR holds;
* each consumer's lag `it_P - k_c` and each buffer slot's age `it_P - gen` (capped);
* barrier state exactly as the PTX ISA has it: phase bit, pending arrivals, tx-count;
* copies in flight, landing one at a time in any order (complete_tx of their bytes);
* consumers with a release lag L (MMA depth L + 1) may end a persistent tile after any
  iteration, draining their held uses -- "for every number of tiles".

The abstraction is exact for the checked properties; the search is breadth-first, so the first
violation found comes with a shortest trace. Violations:

* DEADLOCK: someone unfinished and nothing can move;
* RAW: a consumer reads a slot a copy is still writing, or holding another use's data;
* WAR: the producer writes a slot a consumer still holds (or a copy is writing);
* COUNT: an arrive on a barrier with no pending arrival left;
* EXIT: everyone finished but bytes are outstanding or fills were never consumed;
* ALIAS: a consumer more than D uses behind or ahead (a wait two phases off aliases).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from tawa_xdsl.verify.extract import Actor, RingProtocolModel, Step


@dataclass(frozen=True)
class Event:
    """One transition of a trace, in terms the renderer turns into a line."""

    actor: str  # "producer", "consumer.wg1", "TMA"
    step: Step | None
    what: str  # "pass", "arrive", "copy", "land", "read", "end", "tile-end", "drain", "finish"
    slot: int = -1
    detail: str = ""


@dataclass
class SearchResult:
    violation: str | None  # None: safe for all N
    message: str
    trace: list[tuple[Event, tuple]]  # (event, state after)
    states: int


class _Model:
    def __init__(self, ring: RingProtocolModel):
        self.ring = ring
        steps = ring.producer.steps + [s for c in ring.consumers for s in c.steps]
        mods = [ring.depth] + [s.slot_mod for s in steps] + [2 * s.parity_div for s in steps]
        self.M = 2 * math.lcm(*mods)
        self.nbar = ring.depth
        self.nbuf = 1 + max((s.buffer for s in steps), default=0)
        self.G = max(s.slot_mod for s in steps) + 3  # "older than anyone may want"
        self.cons: list[Actor] = []
        self.cons_names: list[str] = []
        self.delta: list[int] = []
        for c in ring.consumers:
            for w in range(c.count):
                self.cons.append(c)
                self.cons_names.append(f"{c.name}.wg{w}" if c.count > 1 else c.name)
                self.delta.append(ring.trip_delta.get(c.name, 0))

    # state = (more, (ppc, pk), cons, fulls, empties, ages, writing, inflight)
    #   cons[i] = (pc, k, lag, tpos, drain)
    #   fulls[s] = (bit, pend, tx)   empties[s] = (bit, pend)
    def initial(self) -> list[tuple]:
        cons = tuple((0, 0, 0, 0, 0) for _ in self.cons)
        fulls = tuple((0, self.ring.full_count, 0) for _ in range(self.nbar))
        empties = tuple((0, self.ring.empty_count) for _ in range(self.nbar))
        ages = tuple(tuple(self.G for _ in range(self.nbar)) for _ in range(self.nbuf))
        writing = tuple(tuple(0 for _ in range(self.nbar)) for _ in range(self.nbuf))
        return [(m, (0, 0), cons, fulls, empties, ages, writing, ()) for m in (0, 1)]

    # -- helpers ------------------------------------------------------------------------

    def has_more(self, state: tuple, i: int) -> bool | None:
        more, lag = state[0], state[2][i][2]
        if not more:
            return lag + self.delta[i] > 0
        return True if lag + self.delta[i] + 1 > 0 else None

    @staticmethod
    def arrive(bars: tuple, s: int, count: int, tx: int = 0) -> tuple[tuple, bool]:
        """Returns the new barrier array and whether the arrive underflowed."""
        entry = bars[s]
        if len(entry) == 3:
            bit, pend, cur = entry
            cur += tx
            if pend == 0:
                return bars, True
            pend -= 1
            if pend == 0 and cur == 0:
                bit, pend = 1 - bit, count
            new = (bit, pend, cur)
        else:
            bit, pend = entry
            if pend == 0:
                return bars, True
            pend -= 1
            if pend == 0:
                bit, pend = 1 - bit, count
            new = (bit, pend)
        return bars[:s] + (new,) + bars[s + 1 :], False

    def held(self, state: tuple, i: int) -> list[int]:
        """Uses (mod M) consumer i holds: waited for and not yet released."""
        pc, k, lag, tpos, drain = state[2][i]
        actor = self.cons[i]
        L = actor.lag
        if drain:
            return [(k - j) % self.M for j in range(1, drain + 1)]
        uses = []
        released_now = any(
            s.kind == "arrive" and s.barrier == "empty" and s.lag == L and idx < pc and tpos >= L
            for idx, s in enumerate(actor.steps)
        )
        for j in range(1, min(tpos, L) + 1):
            if not (released_now and j == L):
                uses.append((k - j) % self.M)
        waited = any(s.kind == "wait" and idx < pc for idx, s in enumerate(actor.steps))
        released_cur = L == 0 and any(
            s.kind == "arrive" and s.barrier == "empty" and idx < pc
            for idx, s in enumerate(actor.steps)
        )
        if waited and not released_cur:
            uses.append(k % self.M)
        return uses

    # -- transitions ---------------------------------------------------------------------

    def successors(self, state: tuple) -> tuple[list[tuple[Event, tuple]], str | None]:
        """(event, next state) pairs, or a violation message found on the way."""
        out: list[tuple[Event, tuple]] = []
        more, (ppc, pk), cons, fulls, empties, ages, writing, inflight = state
        ring = self.ring
        if more:
            steps = ring.producer.steps
            if ppc < len(steps):
                step = steps[ppc]
                nxt, ev, bad = self.producer_step(state, step)
                if bad:
                    return [(ev, state)], bad
                if nxt is not None:
                    out.append((ev, nxt))
            else:  # end of the producer's iteration: it_P += 1
                cons2 = tuple((c[0], c[1], c[2] + 1, c[3], c[4]) for c in cons)
                ages2 = tuple(tuple(min(a + 1, self.G) for a in row) for row in ages)
                for m2 in (1, 0):
                    nxt = (
                        m2,
                        (0, (pk + 1) % self.M),
                        cons2,
                        fulls,
                        empties,
                        ages2,
                        writing,
                        inflight,
                    )
                    label = "end" if m2 else "end (last use)"
                    out.append((Event(self.ring.producer.name, None, label), nxt))
        for i in range(len(cons)):
            r = self.consumer_moves(state, i)
            if isinstance(r, str):
                return [(Event(self.cons_names[i], None, "violation"), state)], r
            out.extend(r)
        for j, (b, d, bs, nbytes) in enumerate(inflight):
            fb, fp, ftx = fulls[bs]
            ftx -= nbytes
            if fp == 0 and ftx == 0:
                fb, fp = 1 - fb, ring.full_count
            fulls2 = fulls[:bs] + ((fb, fp, ftx),) + fulls[bs + 1 :]
            row = list(writing[b])
            row[d] -= 1
            writing2 = writing[:b] + (tuple(row),) + writing[b + 1 :]
            infl2 = inflight[:j] + inflight[j + 1 :]
            nxt = (more, (ppc, pk), cons, fulls2, empties, ages, writing2, infl2)
            out.append(
                (Event("TMA", None, "land", d, f"buf{b}[{d}] -> full[{bs}] {nbytes} B"), nxt)
            )
        return out, None

    def producer_step(self, state: tuple, step: Step):
        more, (ppc, pk), cons, fulls, empties, ages, writing, inflight = state
        ring, k = self.ring, pk
        s = step.slot(k)
        advance = (ppc + 1, pk)
        if s >= self.nbar:
            return (
                None,
                Event(self.ring.producer.name, step, "slot", s),
                f"slot {s} out of range of {self.nbar} barriers",
            )
        if step.kind == "wait":
            bars = empties if step.barrier == "empty" else fulls
            p = step.parity(k)
            if bars[s][0] == p:
                return None, None, None
            nxt = (more, advance, cons, fulls, empties, ages, writing, inflight)
            detail = f"parity {p}, bit {bars[s][0]}"
            return nxt, Event(self.ring.producer.name, step, "pass", s, detail), None
        if step.kind == "arrive":
            if step.barrier == "full":
                f2, under = self.arrive(fulls, s, ring.full_count, step.tx)
                e2 = empties
            else:
                e2, under = self.arrive(empties, s, ring.empty_count)
                f2 = fulls
            ev = Event(self.ring.producer.name, step, "arrive", s)
            if under:
                return (
                    None,
                    ev,
                    f"COUNT: arrive on {step.barrier}[{s}] with no pending arrival left",
                )
            return (more, advance, cons, f2, e2, ages, writing, inflight), ev, None
        if step.kind in ("tma", "store"):
            b = step.buffer
            ev = Event(self.ring.producer.name, step, "copy" if step.kind == "tma" else "store", s)
            if writing[b][s]:
                return None, ev, f"WAR: buf{b}[{s}] written while a copy still writes it"
            for i in range(len(cons)):
                for use in self.held(state, i):
                    rs = self.read_slot(i, b, use)
                    if rs == s:
                        return (
                            None,
                            ev,
                            (
                                f"WAR: buf{b}[{s}] overwritten while "
                                f"{self.cons_names[i]} still holds it"
                            ),
                        )
            ages2 = ages[:b] + (ages[b][:s] + (0,) + ages[b][s + 1 :],) + ages[b + 1 :]
            if step.kind == "store":
                return (more, advance, cons, fulls, empties, ages2, writing, inflight), ev, None
            row = list(writing[b])
            row[s] += 1
            writing2 = writing[:b] + (tuple(row),) + writing[b + 1 :]
            bs = step.bar_slot(k)
            infl2 = tuple(sorted(inflight + ((b, s, bs, step.tx),)))
            return (more, advance, cons, fulls, empties, ages2, writing2, infl2), ev, None
        return (
            (more, advance, cons, fulls, empties, ages, writing, inflight),
            Event(self.ring.producer.name, step, "op", s),
            None,
        )

    def read_slot(self, i: int, b: int, use: int) -> int | None:
        for s in self.cons[i].steps:
            if s.kind == "read" and s.buffer == b:
                return s.slot(use)
        return None

    def consumer_moves(self, state: tuple, i: int):
        more, (ppc, pk), cons, fulls, empties, ages, writing, inflight = state
        pc, k, lag, tpos, drain = cons[i]
        actor, name, ring = self.cons[i], self.cons_names[i], self.ring
        L = actor.lag

        def put(c: tuple, **changes) -> tuple:
            base = dict(
                zip(
                    ("more", "p", "cons", "fulls", "empties", "ages", "writing", "infl"),
                    state,
                    strict=True,
                )
            )
            base.update(changes)
            base["cons"] = cons[:i] + (c,) + cons[i + 1 :]
            return tuple(base.values())

        if drain:
            use = (k - drain) % self.M
            rel = next(s for s in actor.steps if s.kind == "arrive" and s.barrier == "empty")
            s = rel.slot(use)
            e2, _ = self.arrive(empties, s, ring.empty_count)
            return [(Event(name, rel, "drain", s), put((pc, k, lag, tpos, drain - 1), empties=e2))]
        if pc == 0:
            has = self.has_more(state, i)
            if has is None:
                return []
            if not has:
                if L and actor.drain and tpos:  # the loop is over: drain the held uses
                    c2 = (0, k, lag, 0, min(tpos, L))
                    return [(Event(name, None, "loop-end"), put(c2))]
                return []  # finished
        if pc == len(actor.steps):  # end of iteration
            c2 = (0, (k + 1) % self.M, lag - 1, min(tpos + 1, L), 0)
            moves = [(Event(name, None, "end"), put(c2))]
            if L and actor.drain:
                held = min(tpos + 1, L)
                moves.append(
                    (Event(name, None, "tile-end"), put((0, (k + 1) % self.M, lag - 1, 0, held)))
                )
            return moves
        step = actor.steps[pc]
        if step.lag and tpos < step.lag:  # guarded off in the tile's first L iterations
            return [(Event(name, step, "skip"), put((pc + 1, k, lag, tpos, drain)))]
        use = (k - step.lag) % self.M
        s = step.slot(use)
        if s >= self.nbar:
            return f"slot {s} out of range of {self.nbar} barriers"
        if step.kind == "wait":
            bars = fulls if step.barrier == "full" else empties
            p = step.parity(use)
            if bars[s][0] == p:
                return []
            if lag < -1 or lag > self.G - 2:
                side = "ahead of" if lag < 0 else "behind"
                return f"ALIAS: {name} is {abs(lag)} uses {side} the producer"
            return [
                (
                    Event(name, step, "pass", s, f"parity {p}, bit {bars[s][0]}"),
                    put((pc + 1, k, lag, tpos, drain)),
                )
            ]
        if step.kind == "read":
            b = step.buffer
            if writing[b][s]:
                return (
                    f"RAW: {name} reads buf{b}[{s}] while a copy is still writing it (partial read)"
                )
            if ages[b][s] != lag:
                return (
                    f"RAW: {name} reads buf{b}[{s}] but it holds other data "
                    "(stale or never written)"
                )
            return [(Event(name, step, "read", s), put((pc + 1, k, lag, tpos, drain)))]
        if step.kind == "arrive":
            if step.barrier == "empty":
                e2, under = self.arrive(empties, s, ring.empty_count)
                f2 = fulls
            else:
                f2, under = self.arrive(fulls, s, ring.full_count, step.tx)
                e2 = empties
            if under:
                return f"COUNT: arrive on {step.barrier}[{s}] with no pending arrival left"
            return [
                (
                    Event(name, step, "arrive", s),
                    put((pc + 1, k, lag, tpos, drain), fulls=f2, empties=e2),
                )
            ]
        return [(Event(name, step, "op", s), put((pc + 1, k, lag, tpos, drain)))]

    def finished(self, state: tuple) -> bool:
        if state[0]:
            return False
        for i, c in enumerate(state[2]):
            if c[4] or c[0] != 0 or self.has_more(state, i):
                return False
        return True

    def exit_violation(self, state: tuple) -> str | None:
        more, _, cons, fulls, _, _, _, inflight = state
        if inflight:
            return f"EXIT: {len(inflight)} copies still in flight when every group finished"
        txs = [s for s, f in enumerate(fulls) if f[2]]
        if txs:
            return f"EXIT: full[{txs[0]}] still expects {fulls[txs[0]][2]} bytes at exit"
        for i, c in enumerate(cons):
            if c[2] > 0:
                return f"EXIT: {self.cons_names[i]} finished with {c[2]} filled uses never consumed"
        return None


def blocked_report(model: _Model, state: tuple) -> str:
    """Where every unfinished group waits, with the barrier bit it waits on."""
    lines = []
    more, (ppc, pk), cons = state[0], state[1], state[2]
    if more and ppc < len(model.ring.producer.steps):
        step = model.ring.producer.steps[ppc]
        s = step.slot(pk)
        bars = state[4] if step.barrier == "empty" else state[3]
        lines.append(
            f"{model.ring.producer.name} blocked at {step.text} @ {step.loc}: parity "
            f"{step.parity(pk)}, {step.barrier}[{s}] bit {bars[s][0]}"
        )
    for i, c in enumerate(cons):
        actor = model.cons[i]
        if c[0] < len(actor.steps) and model.has_more(state, i) is not False:
            step = actor.steps[c[0]]
            use = (c[1] - step.lag) % model.M
            s = step.slot(use)
            bars = state[3] if step.barrier == "full" else state[4]
            lines.append(
                f"{model.cons_names[i]} blocked at {step.text} @ {step.loc}: parity "
                f"{step.parity(use)}, {step.barrier}[{s}] bit {bars[s][0]}"
            )
    return "; ".join(lines)


def search(
    ring: RingProtocolModel, max_states: int = 2_000_000, symmetry: bool = True
) -> SearchResult:
    """Breadth-first search for a shortest violating schedule (None: safe for every N).

    With `symmetry`, identical warpgroups of a group are interchangeable (states are sorted
    over them); a violation is then searched again without, so its trace names them right."""
    model = _Model(ring)
    inits = model.initial()
    parent: dict[tuple, tuple[tuple, Event] | None] = {s: None for s in inits}
    queue = deque(inits)

    def path(state: tuple) -> list[tuple[Event, tuple]]:
        steps = []
        while parent[state] is not None:
            prev, ev = parent[state]  # type: ignore[misc]
            steps.append((ev, state))
            state = prev
        return steps[::-1]

    groups: list[tuple[int, int]] = []  # index ranges of identical warpgroups (symmetry)
    start = 0
    for c in ring.consumers:
        groups.append((start, start + c.count))
        start += c.count

    def canonical(state: tuple) -> tuple:
        cons = state[2]
        if not symmetry or all(hi - lo < 2 for lo, hi in groups):
            return state
        parts: list = []
        for lo, hi in groups:
            parts.extend(sorted(cons[lo:hi]))
        return state[:2] + (tuple(parts),) + state[3:]

    while queue:
        state = queue.popleft()
        succ, bad = model.successors(state)
        if bad and symmetry:
            return search(ring, max_states, symmetry=False)
        if bad:
            ev = succ[0][0]
            return SearchResult(bad.split(":")[0], bad, path(state) + [(ev, state)], len(parent))
        if not succ:
            if model.finished(state):
                bad = model.exit_violation(state)
                if bad and symmetry:
                    return search(ring, max_states, symmetry=False)
                if bad:
                    return SearchResult("EXIT", bad, path(state), len(parent))
                continue
            if symmetry:
                return search(ring, max_states, symmetry=False)
            message = "DEADLOCK: every unfinished group is blocked and no copy is in flight: "
            return SearchResult(
                "DEADLOCK", message + blocked_report(model, state), path(state), len(parent)
            )
        for ev, nxt in succ:
            nxt = canonical(nxt)
            if nxt not in parent:
                parent[nxt] = (state, ev)
                queue.append(nxt)
        if len(parent) > max_states:
            return SearchResult("UNKNOWN", f"state limit {max_states} reached", [], len(parent))
    return SearchResult(None, "safe for every trip count", [], len(parent))
