"""Extract each ring's barrier protocol from mbarrier-level IR (what lower-aref produced).

Per ring (a `full` mbarrier array carrying the `tawa.ring` certificate parameters, its `empty`
partner and the smem buffers its copies fill), per warp group, the ring's ops of the group's
innermost loop body, in program order, each with its slot and parity expression read back by
`protocol.match_slot` / `match_parity` relative to the body's use counter:

    producer:  wait empty[(k+o) mod m], parity   arrive(_expect_tx) full[...]   tma / store
    consumer:  wait full[...], parity            smem_load buf[...]             arrive empty[...]

The schedule is read from the data the passes wrote, and the IR is checked against it:

* an arrive carrying `tawa.lag = L` (a release `mma-lag` lagged by L uses, MMA depth L + 1)
  must release slot `(k - L) mod D` under `scf.if (x >= L)`; the loop marked `tawa.drain = L`
  after the main loop holds the drained releases (its L must be the body's);
* an `scf.if` marked `tawa.stage = 0` in the loop body (the lookahead of `software-pipeline`)
  must be guarded by `iv + step < ub` and acts on use k + 1; the one marked `tawa.peeled`
  in front of the loop must be guarded by `lb < ub`: together the loop's N uses.

Any other guard around ring ops, ring ops in an else-branch, and IR that disagrees with its
data are refused (`ExtractionError`, naming the op). The trip count of every group's
loop nest is kept as an expression (the loops' bounds), compared structurally across groups: the
same expression means the same N for every N; `expr + c` is a known difference c.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from tawa_xdsl import protocol
from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.dialects import aref, nvgpu
from tawa_xdsl.transforms.lower_aref import RING_ATTR


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


# ----------------------------------------------------------------------- trip expressions


def _expr(value: SSAValue) -> tuple:
    """A structural key of an i32 value: its defining ops (name, properties, operands) down to
    kernel arguments and constants, so clones of one computation in two groups compare equal."""
    const = protocol.constant_of(value)
    if const is not None:
        return ("c", const)
    op = value.owner
    if isinstance(op, Operation):
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
    return tuple((_expr(f.lb), _expr(f.ub), _expr(f.step)) for f in loops)


def trip_difference(a: tuple, b: tuple) -> int | None:
    """b - a when the loop nests are the same up to a constant on the innermost upper bound."""
    if a == b:
        return 0
    if len(a) != len(b) or a[:-1] != b[:-1] or a[-1][0] != b[-1][0] or a[-1][2] != b[-1][2]:
        return None

    def split(e: tuple) -> tuple[tuple, int]:
        if e[0] in ("arith.addi", "arith.subi") and e[4][0] == "c":
            base, off = split(e[3])
            return base, off + (e[4][1] if e[0] == "arith.addi" else -e[4][1])
        return e, 0

    (ba, oa), (bb, ob) = split(a[-1][1]), split(b[-1][1])
    return ob - oa if ba == bb else None


# --------------------------------------------------------------------------- extraction


def _text(op: Operation) -> str:
    from io import StringIO

    from xdsl.printer import Printer

    out = StringIO()
    Printer(stream=out).print_op(op)
    return out.getvalue().split("\n")[0].strip()


def _slot_of(op: Operation, value: SSAValue, counter: SSAValue | None) -> tuple[int, int, SSAValue]:
    expr = protocol.match_slot(value)
    if expr is None:
        raise ExtractionError(f"{op_location(op)}: slot of '{op.name}' is not `(i + c) mod D`")
    return expr.offset, expr.modulus, expr.base


def _same(a: SSAValue, b: SSAValue) -> bool:
    return a == b or _expr(a) == _expr(b)


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


def _lag_of(op: Operation) -> int:
    """The lag lower-aref wrote on an arrive (`tawa.lag`), 0 when unlagged."""
    attr = op.attributes.get(aref.LAG_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


def _check_lag_guard(op: scf.IfOp, lag: int) -> None:
    """A lagged release runs once L uses are held: `scf.if (x >= L)`."""
    cond = op.cond.owner
    if not (
        isinstance(cond, arith.CmpiOp)
        and cond.predicate.value.data in (5, 9)  # sge, uge
        and protocol.constant_of(cond.rhs) == lag
    ):
        raise ExtractionError(
            f"{op_location(op)}: a release lagged by {lag} is not guarded by `x >= {lag}`"
        )


class _GroupWalker:
    """Collect one group's steps for one ring."""

    def __init__(
        self,
        full: SSAValue,
        empty: SSAValue,
        buffers: list[SSAValue],
        order: dict[int, int] | None = None,
    ):
        self.full, self.empty, self.buffers = full, empty, buffers
        self.order = order or {}
        self.ahead = False
        self.drain_pos = -1
        self.steps: list[Step] = []
        self.loops: list[scf.ForOp] = []
        self.drain = False
        self.base: SSAValue | None = None
        self.prologue: tuple[list[Step], scf.ForOp, list[scf.ForOp]] | None = None
        self.lookahead: scf.ForOp | None = None
        self.drain_lags: list[tuple[scf.ForOp, int]] = []  # each drain loop and its lag
        self.drained = 0  # releases seen in drain loops

    def bar_name(self, bars: SSAValue) -> str | None:
        return "full" if bars == self.full else "empty" if bars == self.empty else None

    def walk(self, block: Block, loops: list[scf.ForOp], in_drain: bool) -> None:
        ops = list(block.ops)
        for n, op in enumerate(ops):
            if isinstance(op, scf.ForOp) and aref.DRAIN_ATTR in op.attributes:
                before = self.drained
                self.walk(op.body.block, [*loops, op], True)
                if self.drained > before:
                    self.drain_lags.append((op, _drain_lag(op)))
            elif isinstance(op, scf.ForOp):
                self.walk(op.body.block, [*loops, op], in_drain)
            elif isinstance(op, scf.IfOp):
                self.walk_if(op, ops[n + 1 :], loops, in_drain)
            else:
                self.visit(op, loops, in_drain, block)

    def walk_if(
        self, op: scf.IfOp, after: list[Operation], loops: list[scf.ForOp], in_drain: bool
    ) -> None:
        """Guards, read from the schedule data: the lag guard of lagged releases (then-block
        only), the peeled stage 0 (`tawa.peeled`, under `lb < ub` of the loop after it) and
        the in-loop stage 0 (`tawa.stage = 0`, under `iv + step < ub`): together
        `1 + (N - 1)` = N uses for N >= 1, none for N = 0. Any other guard around ring ops is
        refused (its trip count is unknown), and so is a guard that disagrees with its data."""
        then_block = op.true_region.blocks[0]
        loop = next((o for o in after if isinstance(o, scf.ForOp)), None)
        if aref.is_peeled(op):
            if loop is None or not _is_slt(op.cond, loop.lb, loop.ub):
                raise ExtractionError(
                    f"{op_location(op)}: a peeled stage is not guarded by `lb < ub` of the "
                    "loop after it"
                )
            saved, self.steps = self.steps, []
            saved_loops = self.loops
            self.walk(then_block, loops, in_drain)
            peeled, self.steps, self.loops = self.steps, saved, saved_loops
            if peeled:
                if in_drain:
                    raise ExtractionError(f"{op_location(op)}: ring ops after the ring's main loop")
                self.prologue = (peeled, loop, loops)
            self._no_ring_ops(op.false_region.blocks, op)
            return
        if aref.stage_of(op) == 0:
            if not loops or not _is_slt(
                op.cond,
                None,
                loops[-1].ub,
                iv_plus_step=(loops[-1].body.block.args[0], loops[-1].step),
            ):
                raise ExtractionError(
                    f"{op_location(op)}: a stage-0 lookahead is not guarded by `iv + step < ub`"
                )
            before = len(self.steps)
            self.ahead = True
            self.walk(then_block, loops, in_drain)
            self.ahead = False
            if len(self.steps) > before:
                self.lookahead = loops[-1]
            self._no_ring_ops(op.false_region.blocks, op)
            return
        before, drained = len(self.steps), self.drain
        self.walk(then_block, loops, in_drain)
        guarded = self.steps[before:]
        lags = {st.lag for st in guarded}
        if self.drain != drained or (guarded and (0 in lags or len(lags) != 1)):
            raise ExtractionError(
                f"{op_location(op)}: ring ops under a guard the verifier does not model"
            )
        if guarded:
            _check_lag_guard(op, lags.pop())
        self._no_ring_ops(op.false_region.blocks, op)

    def _no_ring_ops(self, blocks, op: Operation) -> None:
        for b in blocks:
            for inner in b.walk():
                if self.step_of(inner, b) is not None:
                    raise ExtractionError(f"{op_location(op)}: ring ops in an else-branch")

    def finish(self) -> None:
        """Check the lookahead shape: the peeled prologue does exactly what the loop body does,
        before the loop whose later iterations repeat it under `iv + step < ub`."""
        if self.prologue is None and self.lookahead is None:
            return
        if self.prologue is None or self.lookahead is None:
            where = self.steps[0].loc if self.steps else "<unknown>"
            raise ExtractionError(
                f"{where}: a peeled prologue and a lookahead guard come in pairs (N uses)"
            )
        peeled, loop, outer = self.prologue
        if loop is not self.lookahead or self.loops != [*outer, loop]:
            raise ExtractionError(
                f"{peeled[0].loc}: the peeled prologue belongs to another loop than the lookahead"
            )

        def shape(st: Step) -> tuple:
            return (
                st.kind,
                st.barrier,
                st.slot_mod,
                st.parity_off,
                st.parity_div,
                st.parity_flip,
                st.tx,
                st.buffer,
                st.lag,
                st.slot_off - st.bar_slot_off,
            )

        if [shape(x) for x in peeled] != [shape(x) for x in self.steps]:
            raise ExtractionError(
                f"{peeled[0].loc}: the peeled prologue's ring ops differ from the loop body's"
            )

    def visit(self, op: Operation, loops: list[scf.ForOp], in_drain: bool, block: Block) -> None:
        step = self.step_of(op, block)
        if step is None:
            return
        if in_drain:
            if step.kind != "arrive" or step.barrier != "empty" or step.lag:
                raise ExtractionError(
                    f"{op_location(op)}: only unlagged releases may be drained after the "
                    "ring's main loop"
                )
            if not self.steps:
                raise ExtractionError(f"{op_location(op)}: a drain before the ring's main loop")
            self.drain = True
            self.drained += 1
            self.drain_pos = max(self.drain_pos, step.pos)
            return
        if self.loops and loops != self.loops:
            raise ExtractionError(
                f"{op_location(op)}: the ring's ops of one group must share one loop body"
            )
        self.loops = loops
        self.steps.append(step)

    def step_of(self, op: Operation, block: Block) -> Step | None:
        step = self._step_of(op, block)
        if step is None:
            return None
        return replace(step, pos=self.order.get(id(op), -1), ahead=self.ahead)

    def _step_of(self, op: Operation, block: Block) -> Step | None:
        loc, text = op_location(op), _text(op)
        lag = _lag_of(op)
        if isinstance(
            op, nvgpu.MBarrierWaitOp | nvgpu.MBarrierArriveOp | nvgpu.MBarrierArriveExpectTxOp
        ):
            bar = self.bar_name(op.bars)
            if bar is None:
                return None
            off, mod, base = _slot_of(op, op.slot, self.base)
            if lag and (not isinstance(op, nvgpu.MBarrierArriveOp) or off != -lag):
                raise ExtractionError(
                    f"{op_location(op)}: '{op.name}' with {aref.LAG_ATTR} = {lag} does not "
                    f"release slot `(use - {lag}) mod D`"
                )
            off += lag
            self.check_base(op, base, lag)
            if isinstance(op, nvgpu.MBarrierWaitOp):
                par = protocol.match_parity(op.parity)
                if par is None:
                    raise ExtractionError(
                        f"{op_location(op)}: parity is not `((i + c) div D) & 1 [^ 1]`"
                    )
                return Step(
                    "wait",
                    bar,
                    off,
                    mod,
                    par.offset + lag,
                    par.divisor,
                    par.flip,
                    loc=loc,
                    text=text,
                    lag=lag,
                )
            tx = op.tx_bytes.value.data if isinstance(op, nvgpu.MBarrierArriveExpectTxOp) else 0
            return Step("arrive", bar, off, mod, tx=tx, loc=loc, text=text, lag=lag)
        if isinstance(op, nvgpu.TmaLoadOp) and op.bars == self.full:
            off, mod, base = _slot_of(op, op.slot, self.base)
            boff, bmod, _ = _slot_of(op, op.bar_slot, self.base)
            assert isinstance(op.buf.type, nvgpu.SmemType)
            return Step(
                "tma",
                "",
                off,
                mod,
                tx=op.buf.type.slot_bytes(),
                buffer=self.buffers.index(op.buf),
                bar_slot_off=boff,
                loc=loc,
                text=text,
            )
        if isinstance(op, nvgpu.SmemLoadOp | nvgpu.SmemStoreOp) and op.buf in self.buffers:
            off, mod, base = _slot_of(op, op.slot, self.base)
            kind = "read" if isinstance(op, nvgpu.SmemLoadOp) else "store"
            return Step(kind, "", off, mod, buffer=self.buffers.index(op.buf), loc=loc, text=text)
        return None

    def check_base(self, op: Operation, base: SSAValue, lag: int) -> None:
        """Every step of a body counts uses with the same counter (up to the lag's offset)."""
        if lag:
            base, _ = protocol.split_offset(base)
        if self.base is None:
            self.base = base


def _drain_lag(loop: scf.ForOp) -> int:
    attr = loop.attributes[aref.DRAIN_ATTR]
    if not isinstance(attr, IntegerAttr) or attr.value.data < 1:
        raise ExtractionError(f"{op_location(loop)}: {aref.DRAIN_ATTR} must be a lag >= 1")
    return attr.value.data


def _ring_buffers(module: ModuleOp, full: SSAValue) -> list[SSAValue]:
    bufs: list[SSAValue] = []
    for op in module.walk():
        if isinstance(op, nvgpu.TmaLoadOp) and op.bars == full and op.buf not in bufs:
            bufs.append(op.buf)
    return bufs


def _store_buffers(module: ModuleOp, full: SSAValue, empty: SSAValue) -> list[SSAValue]:
    """Buffers stored by threads in a block that arrives on `full` (register payloads)."""
    bufs: list[SSAValue] = []
    for op in module.walk():
        if isinstance(op, nvgpu.MBarrierArriveOp) and op.bars == full and op.parent_block():
            for other in op.parent_block().ops:
                if isinstance(other, nvgpu.SmemStoreOp) and other.buf not in bufs:
                    bufs.append(other.buf)
    return bufs


def _init_count(module: ModuleOp, bars: SSAValue) -> int:
    for op in module.walk():
        if isinstance(op, nvgpu.MBarrierInitOp) and op.bars == bars:
            return op.count.value.data
    raise ExtractionError(f"{op_location(bars.owner)}: mbarrier array is never initialized")


def _empty_partner(module: ModuleOp, full: SSAValue) -> SSAValue:
    """The barrier array the producer waits on last before it arrives on `full`."""
    for op in module.walk():
        if isinstance(op, nvgpu.MBarrierArriveOp | nvgpu.MBarrierArriveExpectTxOp) and (
            op.bars == full
        ):
            prev = op.prev_op
            while prev is not None:
                if isinstance(prev, nvgpu.MBarrierWaitOp) and prev.bars != full:
                    return prev.bars
                prev = prev.prev_op
    raise ExtractionError(f"{op_location(full.owner)}: no producer waits before arriving on it")


def extract(module: ModuleOp) -> list[RingProtocolModel]:
    """One model per ring of the module."""
    rings = []
    for alloc in module.walk():
        if not (isinstance(alloc, nvgpu.MBarrierAllocOp) and RING_ATTR in alloc.attributes):
            continue
        attr = alloc.attributes[RING_ATTR]
        assert isinstance(attr, DictionaryAttr)
        cert = {k: v.value.data for k, v in attr.data.items() if isinstance(v, IntegerAttr)}
        name = attr.data["name"].data  # type: ignore[union-attr]
        full = alloc.bars
        empty = _empty_partner(module, full)
        buffers = _ring_buffers(module, full) + [
            b for b in _store_buffers(module, full, empty) if b not in _ring_buffers(module, full)
        ]
        actors = []
        groups = [op for op in module.walk() if isinstance(op, aref.GroupOp)]
        for g, group in enumerate(groups):
            order = {id(op): n for n, op in enumerate(group.body.walk())}
            walker = _GroupWalker(full, empty, buffers, order)
            walker.walk(group.body.block, [], False)
            walker.finish()
            lag = max((st.lag for st in walker.steps), default=0)
            for loop, drained in walker.drain_lags:
                if drained != lag:
                    raise ExtractionError(
                        f"{op_location(loop)}: drain of lag {drained} after a loop whose "
                        f"releases lag by {lag}"
                    )
            if walker.steps:
                role = str(group.role.data)
                actor = Actor(
                    f"{role}#{len(actors)}",
                    role,
                    group.num_warpgroups,
                    walker.steps,
                    _trip_key(walker.loops),
                    walker.drain,
                    g,
                    walker.prologue[0] if walker.prologue else [],
                    len(walker.loops),
                    walker.drain_pos,
                )
                actors.append(actor)
        producers = [a for a in actors if a.role == "producer"]
        consumers = [a for a in actors if a.role == "consumer"]
        if len(producers) != 1 or not consumers:
            raise ExtractionError(
                f"{op_location(alloc)}: ring {name} needs one producer and consumers"
            )
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
        rings.append(
            RingProtocolModel(
                name,
                alloc.bars.type.num_barriers,  # type: ignore[union-attr]
                _init_count(module, full),
                _init_count(module, empty),
                producer,
                consumers,
                cert,
                deltas,
                op_location(alloc),
            )
        )
    return rings


def shape_key(ring: RingProtocolModel) -> tuple:
    """What the proof of `ring` depends on, without names or source locations: two rings
    with the same key have the same model, certificate and verdict."""

    def actor(a: Actor) -> tuple:
        steps = tuple(
            (s.kind, s.barrier, s.slot_off, s.slot_mod, s.parity_off, s.parity_div)
            + (s.parity_flip, s.tx, s.buffer, s.bar_slot_off, s.lag)
            for s in a.steps
        )
        return (a.role, a.count, steps, a.drain)

    return (
        ring.depth,
        ring.full_count,
        ring.empty_count,
        actor(ring.producer),
        tuple(actor(c) for c in ring.consumers),
        tuple(sorted(ring.certificate.items())),
        tuple(sorted(ring.trip_delta.items())),
    )
