"""The Z3 proof of one ring: a symbolic transition system built from the extracted protocol, the
compiler's inductive certificate, and its 1-induction check (README, `tawa-verify`).

The model (`RingSystem`) is the lag-relative semantics of `explicit.py`, written symbolically:

* the producer: `more` (another use will be put: "for every trip count N"), its step `ppc`, its
  use counter modulo M (`posP`), and a ghost `pmin = min(uses put, H)`;
* each consumer warpgroup: step `pc`, use counter modulo M (`pos`), `lag = uses put - its use`,
  position in the persistent tile capped at its release lag L (`tpos`, "for every number of
  tiles": a tile may end after any iteration) and the held uses it drains (`drain`);
* every barrier as the PTX ISA has it: phase bit, pending arrivals, tx-count;
* copies in flight per (copy op, barrier slot), landing in any order; the age of every buffer
  slot's data relative to the producer (capped at G: "older than anyone may want").

Every slot and parity is computed from the very `(i + c) mod m` / `((i + c) div d) & 1 ^ f`
expressions the IR holds, from the actor's own counter: the model is what the code does, not what
the compiler meant. What it meant is the certificate (`certificate_clauses`): an invariant
instantiated from the `tawa.ring` parameters (depth D, consumer warpgroups K, expect_tx bytes)
and the role structure (where each group waits, arrives, copies, reads, with which release lag).
It states the whole barrier state as a function of the groups' positions: for slot s, with
`dist(s)` the distance from the producer's use back to the last use of s,

    empty[s]: completed phases = min over consumers of their releases of s; pending = K minus
              the consumers one release ahead;
    full[s]:  bit = parity(uses of s put) ^ (a fill of s is outstanding); tx = the outstanding
              bytes (arrive.expect_tx announced, copies not landed);
    ages:     buffer slot s holds use `p - dist(s)` (or the producer's current use once copied);

plus the lag bounds `-1 <= lag <= D` (no parity aliasing), "the producer passed its empty wait
=> every consumer released the use D back", and "an outstanding fill is acquired by nobody".

`prove(ring)` checks Init => Inv, Inv and T_a => Inv' for every action a (one query each), and
Inv => not Bad for every bad-state predicate (overwrite, stale/partial read, count underflow,
parity aliasing, deadlock, unfinished exit). N and the number of tiles never appear: the proof
holds for all of them. A failed check names the action or the property (a counterexample to
induction); `check.py` then asks the explicit search for a real trace.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace

import z3

from tawa_xdsl.verify import proof_cache
from tawa_xdsl.verify.extract import Actor, RingProtocolModel, Step, shape_key

Expr = z3.ExprRef
_SLOT = re.compile(r", s=\d+|->full\[\d+\]|\[s=\d+\]")
Action = tuple[str, Expr, dict[str, Expr]]


class TemplateMismatch(Exception):
    """The protocol is not of the shape the certificate template describes."""


@dataclass
class ProofResult:
    """The certificate check of one ring."""

    proved: bool
    seconds: float
    failed: str = ""  # "init", "preserved by <action>", "excludes <property>", or a mismatch
    queries: int = 0
    detail: list[str] = field(default_factory=list)


def _b2i(b: Expr) -> Expr:
    return z3.If(b, z3.IntVal(1), z3.IntVal(0))


class RingSystem:
    """The symbolic transition system of one ring (see the module docstring)."""

    def __init__(self, ring: RingProtocolModel):
        self.ring = ring
        steps = ring.producer.steps + [s for c in ring.consumers for s in c.steps]
        if any(
            s.slot_mod != ring.depth or (s.kind == "wait" and s.parity_div != ring.depth)
            for s in steps
        ):
            raise TemplateMismatch("a slot or parity expression is not modulo the ring depth")
        self.D = ring.depth
        self.nbuf = 1 + max((s.buffer for s in steps), default=0)
        self.G = max(s.slot_mod for s in steps) + 3
        self.cons: list[Actor] = []
        self.names: list[str] = []
        self.delta: list[int] = []
        for c in ring.consumers:
            for w in range(c.count):
                self.cons.append(c)
                self.names.append(f"{c.name}.wg{w}" if c.count > 1 else c.name)
                self.delta.append(ring.trip_delta.get(c.name, 0))
        self.L = [c.lag for c in self.cons]
        self.H = self.D + max(self.L, default=0) + 3
        self.copies = [(j, s) for j, s in enumerate(ring.producer.steps) if s.kind == "tma"]
        self.wraps: dict[tuple, tuple[Expr, Expr]] = {}  # `wrap` results, built once each
        self.v = self.variables("")

    # ------------------------------------------------------------------ state

    def variables(self, suffix: str) -> dict[str, Expr]:
        v: dict[str, Expr] = {"more": z3.Bool("more" + suffix)}
        for name in ("ppc", "stP", "phP", "pmin"):
            v[name] = z3.Int(name + suffix)
        for i in range(len(self.cons)):
            for name in ("pc", "st", "ph", "lag", "tpos", "drain"):
                v[f"{name}{i}"] = z3.Int(f"{name}{i}{suffix}")
        for s in range(self.D):
            for name in ("fb", "fp", "ftx", "eb", "ep"):
                v[f"{name}{s}"] = z3.Int(f"{name}{s}{suffix}")
        for j, _ in self.copies:
            for s in range(self.D):
                v[f"infl{j}_{s}"] = z3.Int(f"infl{j}_{s}{suffix}")
        for b in range(self.nbuf):
            for s in range(self.D):
                v[f"age{b}_{s}"] = z3.Int(f"age{b}_{s}{suffix}")
        return v

    def init(self) -> Expr:
        v, r = self.v, self.ring
        eqs = [v["ppc"] == 0, v["stP"] == 0, v["phP"] == 0, v["pmin"] == 0]
        for i in range(len(self.cons)):
            eqs += [v[f"{n}{i}"] == 0 for n in ("pc", "st", "ph", "lag", "tpos", "drain")]
        for s in range(self.D):
            eqs += [v[f"fb{s}"] == 0, v[f"fp{s}"] == r.full_count, v[f"ftx{s}"] == 0]
            eqs += [v[f"eb{s}"] == 0, v[f"ep{s}"] == r.empty_count]
        eqs += [v[f"infl{j}_{s}"] == 0 for j, _ in self.copies for s in range(self.D)]
        eqs += [v[f"age{b}_{s}"] == self.G for b in range(self.nbuf) for s in range(self.D)]
        return z3.And(eqs)

    # ------------------------------------------------------------------ expressions

    def wrap(
        self,
        pos: tuple[Expr, Expr],
        off: int,
        var: Expr | None = None,
        span: tuple[int, int] = (0, 0),
    ) -> tuple[Expr, Expr]:
        """(stage, round parity) of use `k + off (+ var)` given k's (stage, round parity)
        registers, exact for every integer `off` (any number of ring turns, negative).

        With `st = k mod D`, `k + off` is in round `k div D + (st + off) div D`: the
        quotient `off div D` is a constant and `st + off mod D (+ var)` spans the few rounds
        that the stage range [0, D) and `var`'s range `span` (clauses of the certificate,
        so checked by the induction) allow; one case per round."""
        key = (pos[0].get_id(), pos[1].get_id(), off, None if var is None else var.get_id(), span)
        if key not in self.wraps:
            self.wraps[key] = self._wrap(pos, off, var, span)
        return self.wraps[key]

    def _wrap(
        self, pos: tuple[Expr, Expr], off: int, var: Expr | None, span: tuple[int, int]
    ) -> tuple[Expr, Expr]:
        st, ph = pos
        D = self.D
        turns, rest = divmod(off, D)
        x = st + rest if var is None else st + rest + var
        low, high = (rest + span[0]) // D, (rest + D - 1 + span[1]) // D
        slot: Expr = x - high * D
        flip: Expr = z3.BoolVal((turns + high) % 2 == 1)
        for q in range(high - 1, low - 1, -1):
            inside = x < (q + 1) * D
            slot = z3.If(inside, x - q * D, slot)
            flip = z3.If(inside, z3.BoolVal((turns + q) % 2 == 1), flip)
        return slot, z3.If(flip, 1 - ph, ph)

    def slot(self, step: Step, pos: tuple[Expr, Expr], bar: bool = False) -> Expr:
        off = step.bar_slot_off if bar else step.slot_off
        return self.wrap(pos, off - step.lag)[0]

    def parity(self, step: Step, pos: tuple[Expr, Expr]) -> Expr:
        raw = self.wrap(pos, step.parity_off - step.lag)[1]
        return raw if not step.parity_flip else 1 - raw

    def pos(self, v: dict[str, Expr], i: int | None = None) -> tuple[Expr, Expr]:
        return (v["stP"], v["phP"]) if i is None else (v[f"st{i}"], v[f"ph{i}"])

    def advance(self, pos: tuple[Expr, Expr]) -> tuple[Expr, Expr]:
        st, ph = pos
        wraps = st + 1 == self.D
        return z3.If(wraps, 0, st + 1), z3.If(wraps, 1 - ph, ph)

    def writing(self, v: dict[str, Expr], b: int, d: int) -> Expr:
        terms = []
        for j, st in self.copies:
            if st.buffer != b:
                continue
            for bs in range(self.D):
                if (bs + st.slot_off - st.bar_slot_off) % st.slot_mod == d:
                    terms.append(v[f"infl{j}_{bs}"])
        return z3.Sum(terms) if terms else z3.IntVal(0)

    def held(self, v: dict[str, Expr], i: int) -> list[Expr]:
        """held[j]: consumer i holds use k - j (waited for, not released), j = 0..L."""
        actor, L = self.cons[i], self.L[i]
        pc, tpos, drain = v[f"pc{i}"], v[f"tpos{i}"], v[f"drain{i}"]
        waits = [n for n, s in enumerate(actor.steps) if s.kind == "wait"]
        rels = [
            n
            for n, s in enumerate(actor.steps)
            if s.kind == "arrive" and s.barrier == "empty" and s.lag == L
        ]
        waited = z3.Or([pc > n for n in waits]) if waits else z3.BoolVal(False)
        released_now = (
            z3.And(z3.Or([pc > n for n in rels]), tpos >= L) if rels else z3.BoolVal(False)
        )
        cur = z3.And(waited, z3.Not(released_now)) if L == 0 else waited
        out = [z3.And(drain == 0, cur)]
        for j in range(1, L + 1):
            in_loop = z3.And(j <= tpos, z3.Not(z3.And(released_now, j == L)))
            out.append(z3.If(drain > 0, j <= drain, in_loop))
        return out

    def read_slot(self, i: int, b: int, back: int) -> Expr | None:
        """Slot consumer i reads buffer b from for its use k - back."""
        for st in self.cons[i].steps:
            if st.kind == "read" and st.buffer == b:
                return self.wrap(self.pos(self.v, i), st.slot_off - back)[0]
        return None

    def start_ok(self, v: dict[str, Expr], i: int) -> Expr:
        lag, d = v[f"lag{i}"], self.delta[i]
        return z3.If(v["more"], lag + d + 1 > 0, lag + d > 0)

    # ------------------------------------------------------------------ transitions

    def _arrive(
        self, v: dict[str, Expr], bar: str, s: int, tx: int
    ) -> tuple[Expr, dict[str, Expr]]:
        """(guard: a pending arrival is left, updates) of one arrive on bar[s]."""
        r = self.ring
        if bar == "full":
            pend, cur = v[f"fp{s}"] - 1, v[f"ftx{s}"] + tx
            done = z3.And(pend == 0, cur == 0)
            return v[f"fp{s}"] > 0, {
                f"fb{s}": z3.If(done, 1 - v[f"fb{s}"], v[f"fb{s}"]),
                f"fp{s}": z3.If(done, r.full_count, pend),
                f"ftx{s}": cur,
            }
        pend = v[f"ep{s}"] - 1
        done = pend == 0
        return v[f"ep{s}"] > 0, {
            f"eb{s}": z3.If(done, 1 - v[f"eb{s}"], v[f"eb{s}"]),
            f"ep{s}": z3.If(done, r.empty_count, pend),
        }

    def actions(self) -> list[Action]:
        v, out = self.v, []
        prod = self.ring.producer.steps
        at = lambda n: z3.And(v["more"], v["ppc"] == n)  # noqa: E731
        for n, st in enumerate(prod):
            nxt = {"ppc": v["ppc"] + 1}
            for s in range(self.D):
                here = z3.And(at(n), self.slot(st, self.pos(v)) == s)
                name = f"P:{st.kind}{'-' + st.barrier if st.barrier else ''}[{n}, s={s}]"
                if st.kind == "wait":
                    bit = v[f"{'eb' if st.barrier == 'empty' else 'fb'}{s}"]
                    out.append((name, z3.And(here, bit != self.parity(st, self.pos(v))), nxt))
                elif st.kind == "arrive":
                    g, upd = self._arrive(v, st.barrier, s, st.tx)
                    out.append((name, z3.And(here, g), {**nxt, **upd}))
                elif st.kind == "tma":
                    # Both slots come from one use: the barrier slot is a fixed distance from
                    # the buffer slot (exact for every offset), one copy action per slot.
                    bs = (s + st.bar_slot_off - st.slot_off) % self.D
                    upd = {
                        **nxt,
                        f"infl{n}_{bs}": v[f"infl{n}_{bs}"] + 1,
                        f"age{st.buffer}_{s}": z3.IntVal(0),
                    }
                    out.append((f"{name}->full[{bs}]", here, upd))
                elif st.kind == "store":
                    out.append((name, here, {**nxt, f"age{st.buffer}_{s}": z3.IntVal(0)}))
            if st.kind not in ("wait", "arrive", "tma", "store"):
                out.append((f"P:{st.kind}[{n}]", at(n), nxt))
        end: dict[str, Expr] = {
            "ppc": z3.IntVal(0),
            "stP": self.advance(self.pos(v))[0],
            "phP": self.advance(self.pos(v))[1],
            "pmin": z3.If(v["pmin"] + 1 > self.H, self.H, v["pmin"] + 1),
        }
        for i in range(len(self.cons)):
            end[f"lag{i}"] = v[f"lag{i}"] + 1
        for b in range(self.nbuf):
            for s in range(self.D):
                a = v[f"age{b}_{s}"]
                end[f"age{b}_{s}"] = z3.If(a + 1 > self.G, self.G, a + 1)
        # Whether another use follows is free: one action (one query) covers both the next
        # use and the last one.
        out.append(("P:end", at(len(prod)), {**end, "more": z3.Bool("more!next")}))
        for i in range(len(self.cons)):
            out += self.consumer_actions(i)
        for j, st in self.copies:
            for bs in range(self.D):
                tx = v[f"ftx{bs}"] - st.tx
                done = z3.And(v[f"fp{bs}"] == 0, tx == 0)
                out.append(
                    (
                        f"TMA:land[{j}]->full[{bs}]",
                        v[f"infl{j}_{bs}"] > 0,
                        {
                            f"infl{j}_{bs}": v[f"infl{j}_{bs}"] - 1,
                            f"ftx{bs}": tx,
                            f"fb{bs}": z3.If(done, 1 - v[f"fb{bs}"], v[f"fb{bs}"]),
                            f"fp{bs}": z3.If(done, self.ring.full_count, v[f"fp{bs}"]),
                        },
                    )
                )
        return out

    def consumer_actions(self, i: int) -> list[Action]:
        v, actor, L, out = self.v, self.cons[i], self.L[i], []
        name = self.names[i]
        pc, lag, tpos, drain = (v[f"{n}{i}"] for n in ("pc", "lag", "tpos", "drain"))
        pos = self.pos(v, i)
        rels = [s for s in actor.steps if s.kind == "arrive" and s.barrier == "empty"]
        if L and rels:
            rel = rels[0]
            for s in range(self.D):
                drained = self.wrap(pos, rel.slot_off, -drain, (-L, 0))[0]
                g = z3.And(drain > 0, drained == s)
                ga, upd = self._arrive(v, "empty", s, 0)
                out.append((f"{name}:drain[s={s}]", z3.And(g, ga), {**upd, f"drain{i}": drain - 1}))
        if L and actor.drain:
            g = z3.And(drain == 0, pc == 0, z3.Not(v["more"]), lag + self.delta[i] <= 0, tpos > 0)
            out.append((f"{name}:loop-end", g, {f"drain{i}": tpos, f"tpos{i}": z3.IntVal(0)}))
        for n, st in enumerate(actor.steps):
            base = z3.And(drain == 0, pc == n, self.start_ok(v, i) if n == 0 else True)
            nxt = {f"pc{i}": pc + 1}
            if st.lag:
                out.append((f"{name}:skip[{n}]", z3.And(base, tpos < st.lag), nxt))
                base = z3.And(base, tpos >= st.lag)
            for s in range(self.D):
                here = z3.And(base, self.slot(st, pos) == s)
                label = f"{name}:{st.kind}{'-' + st.barrier if st.barrier else ''}[{n}, s={s}]"
                if st.kind == "wait":
                    bit = v[f"{'fb' if st.barrier == 'full' else 'eb'}{s}"]
                    out.append((label, z3.And(here, bit != self.parity(st, pos)), nxt))
                elif st.kind == "arrive":
                    g, upd = self._arrive(v, st.barrier, s, st.tx)
                    out.append((label, z3.And(here, g), {**nxt, **upd}))
                else:
                    out.append((label, here, nxt))
        st2, ph2 = self.advance(pos)
        step_end = {f"pc{i}": z3.IntVal(0), f"st{i}": st2, f"ph{i}": ph2, f"lag{i}": lag - 1}
        at_end = z3.And(drain == 0, pc == len(actor.steps))
        capped = z3.If(tpos + 1 > L, L, tpos + 1)
        out.append((f"{name}:end", at_end, {**step_end, f"tpos{i}": capped}))
        if L and actor.drain:
            out.append(
                (
                    f"{name}:tile-end",
                    at_end,
                    {**step_end, f"tpos{i}": z3.IntVal(0), f"drain{i}": capped},
                )
            )
        return out

    # ------------------------------------------------------------------ bad states

    def bad(self, actions: list[Action]) -> dict[str, Expr]:
        v, out = self.v, {}
        prod = self.ring.producer.steps
        for n, st in enumerate(prod):
            at = z3.And(v["more"], v["ppc"] == n)
            if st.kind in ("tma", "store"):
                b = st.buffer
                for s in range(self.D):
                    here = z3.And(at, self.slot(st, self.pos(v)) == s)
                    conflicts = [self.writing(v, b, s) > 0]
                    for i in range(len(self.cons)):
                        for j, h in enumerate(self.held(v, i)):
                            rs = self.read_slot(i, b, j)
                            if rs is not None:
                                conflicts.append(z3.And(h, rs == s))
                    out[f"WAR at P step {n} slot {s}"] = z3.And(here, z3.Or(conflicts))
            if st.kind == "arrive":
                for s in range(self.D):
                    pend = v[f"{'fp' if st.barrier == 'full' else 'ep'}{s}"]
                    here = z3.And(at, self.slot(st, self.pos(v)) == s)
                    out[f"COUNT at P step {n} slot {s}"] = z3.And(here, pend == 0)
        for i, actor in enumerate(self.cons):
            pc, lag, tpos, drain = (v[f"{n}{i}"] for n in ("pc", "lag", "tpos", "drain"))
            pos = self.pos(v, i)
            name = self.names[i]
            for n, st in enumerate(actor.steps):
                base = z3.And(drain == 0, pc == n, self.start_ok(v, i) if n == 0 else True)
                if st.lag:
                    base = z3.And(base, tpos >= st.lag)
                for s in range(self.D):
                    here = z3.And(base, self.slot(st, pos) == s)
                    if st.kind == "read":
                        stale = z3.Or(
                            self.writing(v, st.buffer, s) > 0, v[f"age{st.buffer}_{s}"] != lag
                        )
                        out[f"RAW at {name} step {n} slot {s}"] = z3.And(here, stale)
                    elif st.kind == "arrive":
                        pend = v[f"{'fp' if st.barrier == 'full' else 'ep'}{s}"]
                        out[f"COUNT at {name} step {n} slot {s}"] = z3.And(here, pend == 0)
                    elif st.kind == "wait":
                        bit = v[f"{'fb' if st.barrier == 'full' else 'eb'}{s}"]
                        passing = z3.And(here, bit != self.parity(st, pos))
                        out[f"ALIAS at {name} step {n} slot {s}"] = z3.And(
                            passing, z3.Or(lag < -1, lag > self.G - 2)
                        )
            rels = [s for s in actor.steps if s.kind == "arrive" and s.barrier == "empty"]
            if self.L[i] and rels:
                for s in range(self.D):
                    drained = self.wrap(pos, rels[0].slot_off, -drain, (-self.L[i], 0))[0]
                    here = z3.And(drain > 0, drained == s)
                    out[f"COUNT at {name} drain slot {s}"] = z3.And(here, v[f"ep{s}"] == 0)
        enabled = z3.Or([g for _, g, _ in actions])
        finished = z3.And(
            z3.Not(v["more"]),
            *[
                z3.And(v[f"drain{i}"] == 0, v[f"pc{i}"] == 0, v[f"lag{i}"] + self.delta[i] <= 0)
                for i in range(len(self.cons))
            ],
        )
        out["DEADLOCK"] = z3.And(z3.Not(enabled), z3.Not(finished))
        leftover = [v[f"ftx{s}"] != 0 for s in range(self.D)]
        leftover += [v[f"lag{i}"] > 0 for i in range(len(self.cons))]
        out["EXIT"] = z3.And(z3.Not(enabled), finished, z3.Or(leftover))
        return out


# ---------------------------------------------------------------------- the certificate


def _positions(actor: Actor, kind: str, barrier: str = "") -> list[int]:
    return [
        n
        for n, s in enumerate(actor.steps)
        if s.kind == kind and (not barrier or s.barrier == barrier)
    ]


def _names(e: Expr, memo: dict[int, frozenset[str]]) -> frozenset[str]:
    """Names of the state variables `e` mentions."""
    key = e.get_id()
    if key not in memo:
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            memo[key] = frozenset([e.decl().name()])
        else:
            out: frozenset[str] = frozenset()
            for child in e.children():
                out |= _names(child, memo)
            memo[key] = out
    return memo[key]


def certificate_clauses(sys: RingSystem) -> list[Expr]:
    """The invariant the lowering means (module docstring), over `sys`'s state variables.

    Raises TemplateMismatch when the protocol's role structure is not the one the template
    describes (then there is no certificate to check; the explicit search decides)."""
    ring, v, D = sys.ring, sys.v, sys.D
    cert = ring.certificate
    if cert.get("depth", D) != D:
        raise TemplateMismatch(f"tawa.ring depth {cert.get('depth')} != {D} barriers")
    K = cert.get("consumers", len(sys.cons))
    prod = ring.producer
    empty_waits = _positions(prod, "wait", "empty")
    arrives = _positions(prod, "arrive", "full")
    if (
        len(empty_waits) != 1
        or len(arrives) != 1
        or len(prod.steps)
        != len(_positions(prod, "wait"))
        + len(arrives)
        + len(_positions(prod, "tma"))
        + len(_positions(prod, "store"))
    ):
        raise TemplateMismatch("producer: not `wait empty; [stores]; arrive full; [copies]`")
    iw, ia = empty_waits[0], arrives[0]
    copies = sys.copies
    filled = max([ia] + [n for n, _ in copies])
    if any(n < ia for n, _ in copies) or iw > ia:
        raise TemplateMismatch("producer: copies before the arrive, or the arrive before the wait")
    buf_writer: dict[int, int] = {}
    for n, st in enumerate(prod.steps):
        if st.kind in ("tma", "store"):
            if st.buffer in buf_writer:
                raise TemplateMismatch("producer: two writes of one buffer per use")
            buf_writer[st.buffer] = n
    E = sum(st.tx for _, st in copies)
    if copies and cert.get("expect_tx", E) != E:
        raise TemplateMismatch(f"tawa.ring expect_tx {cert.get('expect_tx')} != {E} bytes copied")
    cons_pos = []
    for i, actor in enumerate(sys.cons):
        waits = _positions(actor, "wait", "full")
        rels = _positions(actor, "arrive", "empty")
        if len(waits) != 1 or len(rels) != 1 or len(_positions(actor, "wait")) != 1:
            raise TemplateMismatch(f"{sys.names[i]}: not one full wait and one release per use")
        if any(s.kind not in ("wait", "read", "arrive") for s in actor.steps):
            raise TemplateMismatch(f"{sys.names[i]}: unexpected step kinds")
        if len(_positions(actor, "arrive")) != 1:
            raise TemplateMismatch(f"{sys.names[i]}: arrives on the full barrier")
        if sys.delta[i] != 0:
            raise TemplateMismatch(f"{sys.names[i]}: trip count differs from the producer's")
        cons_pos.append((waits[0], rels[0]))
    if K != len(sys.cons):
        raise TemplateMismatch(f"tawa.ring consumers {K} != {len(sys.cons)} warpgroups")

    c = []
    more, ppc, pmin = v["more"], v["ppc"], v["pmin"]
    nP = len(prod.steps)
    sP, phase = v["stP"], v["phP"]
    c += [ppc >= 0, ppc <= nP, sP >= 0, sP < D, z3.Or(phase == 0, phase == 1)]
    c += [pmin >= 0, pmin <= sys.H]
    # while fewer than H uses were put, pmin is the use counter itself
    # (`pmin mod D` spelled as its rounds: pmin is in [0, H], so Z3 stays in linear arithmetic
    # without div/mod axioms)
    rounds = [pmin == q * D + sP for q in range(sys.H // D + 1)]
    c.append(z3.Implies(pmin < sys.H, z3.Or(rounds)))
    c.append(z3.Implies(z3.Not(more), ppc == 0))
    phP = phase == 1
    passedW = ppc > iw
    arrived = ppc > ia

    def dist(s: int) -> Expr:  # producer use p minus the last use u < p of slot s (1..D)
        return z3.If(sP > s, sP - s, sP - s + D)

    def cnt(s: int, j: Expr) -> Expr:  # uses of slot s in [p - j, p), j in [-1, D]
        return z3.If(j >= 0, _b2i(dist(s) <= j), -_b2i(sP == s))

    def ns_par(s: int) -> Expr:  # parity of the uses of slot s before p
        return z3.Xor(phP, sP > s)

    # consumers
    rel_of, acq_of = [], []
    for i, _actor in enumerate(sys.cons):
        pc, lag, tpos, drain = (v[f"{n}{i}"] for n in ("pc", "lag", "tpos", "drain"))
        iwc, irel = cons_pos[i]
        L = sys.L[i]
        nC = len(sys.cons[i].steps)
        c += [pc >= 0, pc <= nC, tpos >= 0, tpos <= L, drain >= 0, drain <= L]
        st_c, ph_c = sys.wrap((sP, phase), 0, -lag, (-(D + 1), 1))  # the lag bounds below
        c += [z3.Implies(drain > 0, z3.And(pc == 0, tpos == 0))]
        c += [v[f"st{i}"] == st_c, v[f"ph{i}"] == ph_c]
        c += [lag >= -1, lag <= D + 1, lag <= pmin, z3.Implies(z3.Not(more), lag >= 0)]
        held = sys.held(v, i)
        h1 = z3.Sum([_b2i(h) for h in held[1:]]) if L else z3.IntVal(0)
        acquired = z3.And(drain == 0, pc > iwc)
        rel = lag + h1 - (_b2i(z3.And(drain == 0, pc > irel)) if L == 0 else 0)
        rel_of.append(rel)
        acq = lag - _b2i(acquired)  # p - (uses acquired)
        acq_of.append(acq)
        c.append(z3.Or(acq >= 0, z3.And(acq == -1, ppc > filled, more)))
        c += [rel <= D, rel <= pmin, z3.Implies(passedW, rel <= D - 1)]
        c.append(z3.Implies(z3.Not(more), z3.Implies(pc > 0, lag >= 1)))
        # an iteration once started has its use coming (a release may precede the wait)
        c.append(z3.Implies(pc > 0, lag >= 0))
        c.append(tpos + lag <= pmin)
        c.append(z3.Implies(acquired, z3.Or(lag >= 1, z3.And(lag == 0, ppc > filled))))
    for s in range(D):
        # empty[s]
        es = [cnt(s, r) for r in rel_of]
        mx = es[0]
        for e in es[1:]:
            mx = z3.If(e > mx, e, mx)
        c.append(v[f"eb{s}"] == _b2i(z3.Xor(ns_par(s), mx != 0)))
        c.append(v[f"ep{s}"] == K - z3.Sum([_b2i(e < mx) for e in es]))
        for e in es:
            c.append(mx - e <= 1)
        # full[s]
        cur = sP == s
        arrived_cur = z3.And(cur, arrived)
        pending = []
        for j, st in copies:
            infl = v[f"infl{j}_{s}"]
            c += [infl >= 0, infl <= 1]
            c.append(
                z3.Implies(
                    infl > 0,
                    z3.If(
                        arrived_cur, ppc > j, z3.And(pmin >= dist(s), z3.Not(z3.And(cur, passedW)))
                    ),
                )
            )
            pending.append(st.tx * (infl + _b2i(z3.And(arrived_cur, ppc <= j))))
        pend_bytes = z3.Sum(pending) if pending else z3.IntVal(0)
        outst = pend_bytes > 0
        c.append(v[f"fb{s}"] == _b2i(z3.Xor(z3.Xor(ns_par(s), arrived_cur), outst)))
        c.append(v[f"fp{s}"] == z3.If(outst, 0, 1))
        c.append(v[f"ftx{s}"] == pend_bytes)
        jout = z3.If(arrived_cur, 0, dist(s))
        for acq in acq_of:
            c.append(z3.Implies(outst, acq >= jout))
        # ages
        for b in range(sys.nbuf):
            w = buf_writer.get(b)
            if w is None:
                c.append(v[f"age{b}_{s}"] == sys.G)
                continue
            jw = z3.If(z3.And(cur, ppc > w), 0, dist(s))
            c.append(v[f"age{b}_{s}"] == z3.If(pmin >= jw, jw, sys.G))
    return c


# ---------------------------------------------------------------------- canonical form


def _resources(step: Step) -> list[tuple[tuple, str]]:
    """(resource, which offset field addresses it) of each slot `step` touches: a barrier
    array or a payload buffer."""
    if step.kind in ("wait", "arrive"):
        return [(("bar", step.barrier), "slot_off")]
    if step.kind == "tma":
        return [(("buf", step.buffer), "slot_off"), (("bar", "full"), "bar_slot_off")]
    if step.kind in ("read", "store"):
        return [(("buf", step.buffer), "slot_off")]
    return []


def canonical(ring: RingProtocolModel) -> RingProtocolModel:
    """The same protocol up to renaming slots, in the form the certificate template states.

    A slot is `(use + off) mod D`, so an offset matters only modulo D; a round parity
    `((use + off) div D) & 1` only modulo 2D, and an offset of D flips it. Where every op on
    one barrier array or buffer uses one offset c modulo D, renaming that resource's slot s
    to s - c (every slot starts alike) is an isomorphism of the transition system, so the
    offsets become 0. Offsets that differ on one resource are only reduced; the template
    then fails, and the explicit search decides."""
    steps = [s for a in (ring.producer, *ring.consumers) for s in a.steps]  # what is modeled
    if any(s.slot_mod != ring.depth for s in steps):
        return ring
    D = ring.depth
    classes: dict[tuple, set[int]] = {}
    for st in steps:
        for resource, attr in _resources(st):
            classes.setdefault(resource, set()).add(getattr(st, attr) % D)
    shift = {r: next(iter(c)) for r, c in classes.items() if len(c) == 1}

    def norm(st: Step) -> Step:
        changes: dict[str, int] = {}
        for resource, attr in _resources(st):
            changes[attr] = (getattr(st, attr) - shift.get(resource, 0)) % D
        if st.kind == "wait" and st.parity_div == D:
            turn, off = divmod(st.parity_off % (2 * D), D)
            changes |= {"parity_off": off, "parity_flip": st.parity_flip ^ turn}
        return replace(st, **changes)

    def actor(a: Actor) -> Actor:
        return replace(a, steps=[norm(s) for s in a.steps], prologue=[norm(s) for s in a.prologue])

    return replace(
        ring, producer=actor(ring.producer), consumers=[actor(c) for c in ring.consumers]
    )


# ---------------------------------------------------------------------- 1-induction


# Z3's resource units a query may spend before the solver gives up (`rlimit`): about 200
# times the costliest query of bench/proof_times.py's --quick combinations (1.0e6 units, ~0.2 s).
# A resource limit instead of a wall-clock timeout: the verdict (and with it what the proof
# cache stores) does not depend on the machine's speed or load, and Z3 starts no timer
# thread per query.
RESOURCE_LIMIT = 200_000_000


def _solver(rlimit: int) -> z3.Solver:
    """A fresh, non-incremental solver: Z3 preprocesses a one-shot query (equality solving,
    value propagation) far better than a query under push/pop, which falls back to its
    incremental core (4-5x slower on these queries). The SMT core runs the simplex-based
    arithmetic solver (`arith.solver=2`) without relevancy filtering: on these bounded
    linear queries it needs about half the time of the default LP-based solver, and the
    context simplification (`ctx-simplify`) costs more than it saves (bench/proof_times.py)."""
    core = z3.With("smt", **{"arith.solver": 2, "relevancy": 0})
    solver = z3.Then("simplify", "propagate-values", "solve-eqs", core).solver()
    solver.set("rlimit", rlimit)
    return solver


def _valid(hypotheses: list[Expr], claim: Expr, rlimit: int) -> bool | None:
    """Whether `hypotheses => claim` is valid (None: the solver gave up)."""
    solver = _solver(rlimit)
    solver.add(*hypotheses, z3.Not(claim))
    result = solver.check()
    if result == z3.unknown:
        return None
    return result == z3.unsat


GAVE_UP = " (solver gave up)"  # ends the `failed` of a check Z3 could not decide in time
_PROOFS: dict[tuple, ProofResult] = {}  # by `shape_key`: protocols already checked


def forget_proofs() -> None:
    """Empty this process's proof cache (benchmarks time the proofs themselves)."""
    _PROOFS.clear()


def prove(ring: RingProtocolModel, rlimit: int = RESOURCE_LIMIT) -> ProofResult:
    """Check the certificate by 1-induction (module docstring).

    Results are cached by the protocol's shape (`extract.shape_key`: steps, counts, depth,
    certificate parameters; no names or locations), in this process and on disk
    (`proof_cache`), so the same ring in another kernel, the same pipeline compiled again or
    in another process costs nothing. The key is the shape of the canonical form, the system
    the proof checks, so rings equal up to renaming their slots share one proof. A check the
    solver gave up on is never cached."""
    key = shape_key(canonical(ring))
    cached = _PROOFS.get(key)
    if cached is None:
        stored = proof_cache.load(key)
        if stored is not None:
            cached = ProofResult(stored["proved"], 0.0, str(stored.get("failed", "")))
            _PROOFS[key] = cached
    if cached is not None:
        return ProofResult(cached.proved, 0.0, cached.failed, 0, ["cached"])
    result = _prove(ring, rlimit)
    definite = result.failed.startswith(("not preserved", "init", "does not"))
    if result.proved or (definite and not result.failed.endswith(GAVE_UP)):
        _PROOFS[key] = result
        proof_cache.save(key, result.proved, result.failed, result.queries)
    return result


def _prove(ring: RingProtocolModel, rlimit: int) -> ProofResult:
    start = time.perf_counter()
    try:
        system = RingSystem(canonical(ring))
        clauses = certificate_clauses(system)
    except TemplateMismatch as mismatch:
        return ProofResult(False, time.perf_counter() - start, f"template: {mismatch}")
    actions = system.actions()
    names = list(system.v)
    queries = 0

    def fail(what: str) -> ProofResult:
        return ProofResult(False, time.perf_counter() - start, what, queries)

    def check(hypotheses: list[Expr], claim: Expr, what: str) -> ProofResult | None:
        """None when the claim is valid, else the failure `what` (noting a solver that gave up)."""
        valid = _valid(hypotheses, claim, rlimit)
        return None if valid else fail(what + (GAVE_UP if valid is None else ""))

    inv = z3.And(clauses)
    queries += 1
    failure = check([system.init()], inv, "init does not satisfy the certificate")
    if failure:
        return failure
    memo: dict[int, frozenset[str]] = {}
    mentions = [_names(c, memo) for c in clauses]
    # Warpgroups of one group are interchangeable: the model and the certificate are symmetric
    # under permuting them, so preservation by wg0's actions implies it for the others'.
    mirrored = tuple(f"{n}:" for n in system.names if ".wg" in n and not n.endswith(".wg0"))
    # The slot variants of one step (`[n, s=0]`, `[n, s=1]`, ...) share one query (their
    # guards exclude each other); only when it fails, one per variant to name it.
    batches: dict[str, list[tuple[str, Expr, Expr]]] = {}
    for name, guard, updates in actions:
        if name.startswith(mirrored):
            continue
        pairs = [(system.v[k], e) for k, e in updates.items() if k in names]
        changed = {str(system.v[k]) for k in updates}
        # Clauses over untouched variables hold after the step as they held before it.
        touched = [c for c, m in zip(clauses, mentions, strict=True) if m & changed]
        inv2 = z3.substitute(z3.And(touched), *pairs) if touched else z3.BoolVal(True)
        batches.setdefault(_SLOT.sub("", name), []).append((name, guard, inv2))
    for batch in batches.values():
        queries += 1
        claim = z3.And([z3.Implies(guard, inv2) for _, guard, inv2 in batch])
        if _valid([inv], claim, rlimit):
            continue
        for name, guard, inv2 in batch:
            queries += 1
            failure = check([inv, guard], inv2, f"not preserved by {name}")
            if failure:
                return failure
    bads = system.bad(actions)
    # One query for all bad states; only when it fails, one per property to name it.
    queries += 1
    if not _valid([inv], z3.Not(z3.Or(list(bads.values()))), rlimit):
        for name, bad in bads.items():
            queries += 1
            failure = check([inv], z3.Not(bad), f"does not exclude {name}")
            if failure:
                return failure
        return fail("does not exclude the bad states together" + GAVE_UP)
    return ProofResult(True, time.perf_counter() - start, "", queries)
