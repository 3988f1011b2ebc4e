"""The aref dialect: warp-specialized programs talking through asynchronous references.

An aref ring (`!aref.ring<[T0, T1], D>`) is D shared-memory slots, each holding one tuple of
payload values. The producer `put`s use i (waits until slot i mod D is empty, writes it,
publishes it); a consumer `get`s use i (waits until it is full, borrows the payload) and later
marks it `consumed` (gives the slot back). The index is a logical use counter that grows by one
per use; no op at this level sees a slot number or a parity bit (lower-aref derives them).

The schedule is data on the ops, written by the pass that decided it and read by every later
pass, the interpreters and the verifier's extractor (nobody recognises it by the IR's shape):

* `aref.consumed %ring[%use] lag(L)`: a release that runs L uses after the get of `%use` (the
  MMA lag of `mma-lag`: the consumer holds L + 1 uses while their MMAs are in flight);
* `aref.drain %ring[%start, %end] lag(L)`: after a loop whose releases lag by L, release the
  uses it still holds, max(end - L, start) .. end - 1;
* `tawa.stage = 0` (STAGE_ATTR) on an `scf.if` of a software-pipelined loop: its ops are the
  first stage of the next iteration, issued one iteration ahead under `iv + step < ub`;
  with `tawa.peeled` (PEELED_ATTR) it is the copy of that stage for the first iteration,
  peeled in front of the loop under `lb < ub`; `tawa.stage = 1` with `tawa.peeled`, after a
  loop running to `ub - step`, is the last iteration's second stage under `lb < ub`.

A kernel body at this level is one `aref.warp_specialize` holding one `aref.group` per warp
group; each group states its role, how many warpgroups run it and their register budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import auto

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import (
    I32,
    ArrayAttr,
    IntAttr,
    IntegerAttr,
    TensorType,
    UnitAttr,
    i32,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import HasParent, NoTerminator
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from tawa_xdsl.dialects.nvgpu.hardware import WARPGROUP_THREADS, cta_registers, ctas_per_sm
from tawa_xdsl.dialects.nvgpu.wgmma import WgmmaWaitGroupOp

# The discardable attribute the partition pass puts on every op of a tile kernel.
ROLE_ATTR = "aref.role"
# The discardable attribute lower-aref puts on each ring's barrier allocation (its name and
# shape), which the verifier's extractor reads back.
RING_ATTR = "tawa.ring"
# The software-pipeline stage of an `scf.if` in a consumer group (`software-pipeline`): 0 is
# the stage issued one iteration ahead; PEELED_ATTR marks its copy for the first iteration
# (stage 0, before the loop) or the last iteration's stage 1 after the loop (stage 1).
STAGE_ATTR = "tawa.stage"
PEELED_ATTR = "tawa.peeled"
# What lower-aref writes below this level: the lag of a lagged release on the
# `nvgpu.mbarrier_arrive` it becomes, and the lag of an `aref.drain` on the loop it becomes.
LAG_ATTR = "tawa.lag"
DRAIN_ATTR = "tawa.drain"
# The wgmma retirement a schedule pass decided (software-pipeline, rotated): IN_FLIGHT_ATTR
# (unit) on a `tile.dot` whose wgmma is not waited for after its commit; MMA_WAIT_ATTR = N
# (i32) on an op: `wgmma_wait_group N` right before it (all but the N newest groups done).
IN_FLIGHT_ATTR = "tawa.in_flight"
MMA_WAIT_ATTR = "tawa.mma_wait"
# The share of a `math.exp2`'s values computed on the FMA units (emulate-exp2; i32, of every
# `nvgpu.EXP2_EMULATION_PERIOD`), which lower-to-nvgpu carries onto `nvgpu.fragment_unary`.
EXP2_EMULATED_ATTR = "tawa.exp2_emulated"

# Register budgets per thread, as the Tawa paper sets them: the producer only computes
# addresses, the consumers hold the accumulators. One producer and two consumer warpgroups of
# 128 threads fit the SM's 64K registers: (40 + 2 * 232) * 128 = 64512.
PRODUCER_REGISTERS = 40
CONSUMER_REGISTERS = 232


# --------------------------------------------------------------------------------------- types


@irdl_attr_definition
class RingType(ParametrizedAttribute, TypeAttribute):
    """A ring of D slots, each holding one value of every payload type.

    `!aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 3>` is a 3-deep ring of (A, B) tiles.
    """

    name = "aref.ring"

    payload: ArrayAttr[Attribute]
    depth: IntAttr

    def __init__(self, payload: Sequence[Attribute], depth: int):
        super().__init__(ArrayAttr(payload), IntAttr(depth))

    def payload_types(self) -> tuple[Attribute, ...]:
        return tuple(self.payload.data)

    def verify(self) -> None:
        if self.depth.data < 1:
            raise VerifyException(f"!aref.ring depth must be at least 1, got {self.depth.data}")
        if not self.payload.data:
            raise VerifyException("!aref.ring needs at least one payload type")
        for t in self.payload.data:
            if not isinstance(t, TensorType):
                raise VerifyException(f"!aref.ring payloads must be tensor tiles, got {t}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            payload = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_type)
            parser.parse_punctuation(",")
            depth = parser.parse_integer(allow_boolean=False, allow_negative=False)
        return [ArrayAttr(payload), IntAttr(depth)]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string("[")
            printer.print_list(self.payload.data, printer.print_attribute)
            printer.print_string(f"], {self.depth.data}")


class Role(StrEnum):
    PRODUCER = auto()
    CONSUMER = auto()


@irdl_attr_definition
class RoleAttr(EnumAttribute[Role], SpacedOpaqueSyntaxAttribute):
    """What a warp group does: `producer` (issues the loads) or `consumer` (computes)."""

    name = "aref.role"


# ------------------------------------------------------------------------------------- ops


@irdl_op_definition
class CreateOp(IRDLOperation):
    """Allocate a ring with every slot empty."""

    name = "aref.create"

    ring = result_def(RingType)

    assembly_format = "attr-dict `:` type($ring)"

    def __init__(self, ring_type: RingType):
        super().__init__(result_types=[ring_type])


def _ring_type(ring: SSAValue) -> RingType:
    assert isinstance(ring.type, RingType)
    return ring.type


def _verify_payload(what: str, ring: SSAValue, values: Sequence[SSAValue]) -> None:
    """A put's operands and a get's results carry exactly the ring's payload types."""
    expected = _ring_type(ring).payload_types()
    got = tuple(v.type for v in values)
    if got != expected:
        raise VerifyException(
            f"{what} ({', '.join(map(str, got))}) must match the ring's "
            f"({', '.join(map(str, expected))})"
        )


@irdl_op_definition
class PutOp(IRDLOperation):
    """Producer: wait until the slot of use `index` is empty, write the payload, publish it."""

    name = "aref.put"

    ring = operand_def(RingType)
    index = operand_def(i32)
    values = var_operand_def()

    assembly_format = "$ring `[` $index `]` `,` $values attr-dict `:` type($ring) `,` type($values)"

    def __init__(self, ring: SSAValue, index: SSAValue, values: Sequence[SSAValue]):
        super().__init__(operands=[ring, index, values])

    def verify_(self) -> None:
        _verify_payload("'aref.put' payload types", self.ring, self.values)


@irdl_op_definition
class GetOp(IRDLOperation):
    """Consumer: wait until the slot of use `index` is full and borrow its payload.

    The payload stays valid until the matching `aref.consumed`."""

    name = "aref.get"

    ring = operand_def(RingType)
    index = operand_def(i32)
    values = var_result_def()

    assembly_format = "$ring `[` $index `]` attr-dict `:` type($ring) `->` type($values)"

    def __init__(self, ring: SSAValue, index: SSAValue):
        super().__init__(operands=[ring, index], result_types=[_ring_type(ring).payload_types()])

    def verify_(self) -> None:
        _verify_payload("'aref.get' result types", self.ring, self.values)


def _verify_lag(op: Operation, lag: int) -> None:
    """A lagged release holds lag + 1 uses: at most the ring's depth, or the producer waits
    for a slot the consumer never gives back."""
    depth = _ring_type(op.operands[0]).depth.data
    if not 0 <= lag < depth:
        raise VerifyException(
            f"'{op.name}' lag must be in 0..{depth - 1} (below the ring depth {depth}), got {lag}"
        )


def _inside_loop(op: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, GroupOp):
        if isinstance(parent, scf.ForOp):
            return True
        parent = parent.parent_op()
    return False


@irdl_op_definition
class ConsumedOp(IRDLOperation):
    """Consumer: release the slot of use `index` back to the producer.

    With `lag(L)` the release runs L uses late: inside a loop whose current use is
    `index + L` (the MMAs of the L younger uses may still read their slots)."""

    name = "aref.consumed"

    ring = operand_def(RingType)
    index = operand_def(i32)
    lag = opt_prop_def(IntegerAttr[I32])

    assembly_format = "$ring `[` $index `]` (`lag` `(` $lag^ `)`)? attr-dict `:` type($ring)"

    def __init__(self, ring: SSAValue, index: SSAValue, lag: int | None = None):
        properties = {} if lag is None else {"lag": IntegerAttr(lag, i32)}
        super().__init__(operands=[ring, index], properties=properties)

    @property
    def lag_value(self) -> int:
        """How many uses late this release runs (0: right after its use)."""
        return 0 if self.lag is None else self.lag.value.data

    def verify_(self) -> None:
        _verify_lag(self, self.lag_value)
        if self.lag_value and not _inside_loop(self):
            raise VerifyException("'aref.consumed' with a lag must be inside a loop")


@irdl_op_definition
class DrainOp(IRDLOperation):
    """Consumer: after a loop whose releases lag by `lag` uses, release the uses it still
    holds: max(end - lag, start) .. end - 1, in order (`start`, `end`: the loop's first use
    and the use after its last)."""

    name = "aref.drain"

    ring = operand_def(RingType)
    start = operand_def(i32)
    end = operand_def(i32)
    lag = prop_def(IntegerAttr[I32])

    assembly_format = "$ring `[` $start `,` $end `]` `lag` `(` $lag `)` attr-dict `:` type($ring)"

    def __init__(self, ring: SSAValue, start: SSAValue, end: SSAValue, lag: int):
        super().__init__(operands=[ring, start, end], properties={"lag": IntegerAttr(lag, i32)})

    @property
    def lag_value(self) -> int:
        return self.lag.value.data

    def verify_(self) -> None:
        if self.lag_value < 1:
            raise VerifyException(f"'aref.drain' lag must be at least 1, got {self.lag_value}")
        _verify_lag(self, self.lag_value)


@irdl_op_definition
class WarpSpecializeOp(IRDLOperation):
    """The body of a warp-specialized kernel: its `aref.group`s run concurrently."""

    name = "aref.warp_specialize"

    body = region_def("single_block")

    assembly_format = "attr-dict-with-keyword $body"
    traits = traits_def(NoTerminator())

    def __init__(self, groups: Sequence[GroupOp]):
        super().__init__(regions=[Region(Block(groups))])

    def groups(self) -> list[GroupOp]:
        return [op for op in self.body.block.ops if isinstance(op, GroupOp)]

    def verify_(self) -> None:
        for op in self.body.block.ops:
            if not isinstance(op, GroupOp):
                raise VerifyException(
                    f"'aref.warp_specialize' may only hold 'aref.group' ops, found '{op.name}'"
                )
        roles = [g.role.data for g in self.groups()]
        if roles.count(Role.PRODUCER) != 1 or Role.CONSUMER not in roles:
            raise VerifyException(
                "'aref.warp_specialize' needs exactly one producer group and at least one "
                f"consumer group, got {[str(r) for r in roles]}"
            )
        # setmaxnreg.inc waits until the CTA's pool can hand out the registers: over budget
        # it waits forever
        budgets = [(g.registers.value.data, g.num_warpgroups) for g in self.groups()]
        total = sum(registers * count for registers, count in budgets) * WARPGROUP_THREADS
        ctas = kernel_ctas_per_sm(self)
        if total > cta_registers(ctas):
            pool = "an SM has" if ctas == 1 else f"each of {ctas} CTAs sharing an SM has"
            raise VerifyException(
                f"'aref.warp_specialize' groups' registers {budgets} (per thread, warpgroups) "
                f"need {total} registers; {pool} {cta_registers(ctas)}"
            )


def kernel_ctas_per_sm(op: Operation) -> int:
    """`ctas_per_sm` of the kernel around `op` (1 outside any kernel)."""
    parent = op.parent_op()
    while parent is not None and parent.name != "func.func":
        parent = parent.parent_op()
    return 1 if parent is None else ctas_per_sm(parent)


@irdl_op_definition
class GroupOp(IRDLOperation):
    """One warp group's program: `warpgroups` warpgroups of 128 threads run it, each with
    `registers` registers per thread (setmaxnreg)."""

    name = "aref.group"

    role = prop_def(RoleAttr)
    warpgroups = prop_def(IntegerAttr[I32])
    registers = prop_def(IntegerAttr[I32])
    body = region_def("single_block")

    assembly_format = (
        "$role `warpgroups` `(` $warpgroups `)` `registers` `(` $registers `)` "
        "attr-dict-with-keyword $body"
    )
    traits = traits_def(NoTerminator(), HasParent(WarpSpecializeOp))

    def __init__(self, role: Role, warpgroups: int, registers: int, body: Region):
        super().__init__(
            properties={
                "role": RoleAttr(role),
                "warpgroups": IntegerAttr(warpgroups, i32),
                "registers": IntegerAttr(registers, i32),
            },
            regions=[body],
        )

    @property
    def num_warpgroups(self) -> int:
        return self.warpgroups.value.data

    def verify_(self) -> None:
        if not 1 <= self.num_warpgroups <= 3:
            raise VerifyException(
                f"'aref.group' warpgroups must be 1..3, got {self.num_warpgroups}"
            )
        registers = self.registers.value.data
        if not (24 <= registers <= 256 and registers % 8 == 0):
            raise VerifyException(
                f"'aref.group' registers must be a multiple of 8 in 24..256 (setmaxnreg), "
                f"got {registers}"
            )
        for op in self.body.walk():
            _verify_stage(op)


def stage_of(op: Operation) -> int | None:
    """The software-pipeline stage `software-pipeline` gave `op`, or None."""
    attr = op.attributes.get(STAGE_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else None


def is_peeled(op: Operation) -> bool:
    """Whether `op` is the copy of stage 0 peeled in front of its loop."""
    return PEELED_ATTR in op.attributes and stage_of(op) == 0


def is_peeled_last(op: Operation) -> bool:
    """Whether `op` is the last iteration's stage 1 peeled after its loop (`rotate_peeled`)."""
    return PEELED_ATTR in op.attributes and stage_of(op) == 1


# What may sit between a loop and its peeled last stage, at any level: index arithmetic and
# the wgmma waits after the loop; no ring op, no control flow.
BETWEEN_LOOP_AND_LAST = (
    arith.ConstantOp,
    arith.AddiOp,
    arith.SubiOp,
    arith.CmpiOp,
    WgmmaWaitGroupOp,
)


def peeled_last_after(loop: scf.ForOp) -> scf.IfOp | None:
    """The `scf.if` after `loop` marked as its last iteration's stage 1 (`is_peeled_last`),
    with nothing but `BETWEEN_LOOP_AND_LAST` ops in between, or None."""
    op = loop.next_op
    while isinstance(op, BETWEEN_LOOP_AND_LAST):
        op = op.next_op
    return op if isinstance(op, scf.IfOp) and is_peeled_last(op) else None


def _verify_stage(op: Operation) -> None:
    """Stage 0 marks an `scf.if` of a consumer loop body (issued for the next iteration) or,
    peeled, an `scf.if` right in front of the loop it belongs to; stage 1 peeled marks the
    `scf.if` after a loop that runs its last iteration's stage 1."""
    stage = op.attributes.get(STAGE_ATTR)
    peeled = op.attributes.get(PEELED_ATTR)
    if stage is None and peeled is None:
        return
    where = f"'{op.name}' with {STAGE_ATTR}"
    if not (isinstance(stage, IntegerAttr) and stage.value.data in (0, 1)):
        raise VerifyException(
            f"'{op.name}': {STAGE_ATTR} must be 0 : i32 (the stage ahead) or 1 : i32 (the "
            "last iteration's, peeled)"
        )
    if not isinstance(op, scf.IfOp):
        raise VerifyException(f"{where} must be an 'scf.if' (the stage's guard)")
    if peeled is not None and not isinstance(peeled, UnitAttr):
        raise VerifyException(f"'{op.name}': {PEELED_ATTR} must be a unit attribute")
    if stage.value.data == 1:
        if peeled is None:
            raise VerifyException(f"{where} = 1 must be {PEELED_ATTR} (after its loop)")
        earlier = op.prev_op
        while earlier is not None and not isinstance(earlier, scf.ForOp):
            earlier = earlier.prev_op
        if earlier is None:
            raise VerifyException(f"{where} = 1 must follow the loop it was peeled from")
    elif peeled is not None:
        later = op.next_op
        while later is not None and not isinstance(later, scf.ForOp):
            later = later.next_op
        if later is None:
            raise VerifyException(f"{where} peeled must precede the loop it was peeled from")
    elif not isinstance(op.parent_op(), scf.ForOp):
        raise VerifyException(f"{where} must be in a loop body (or peeled, before the loop)")


@irdl_op_definition
class WarpgroupIndexOp(IRDLOperation):
    """Which warpgroup of its `aref.group` runs this code: 0 .. warpgroups - 1."""

    name = "aref.warpgroup_index"

    result = result_def(i32)

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self):
        super().__init__(result_types=[i32])


Aref = Dialect(
    "aref",
    [CreateOp, PutOp, GetOp, ConsumedOp, DrainOp, WarpSpecializeOp, GroupOp, WarpgroupIndexOp],
    [RingType, RoleAttr],
)
