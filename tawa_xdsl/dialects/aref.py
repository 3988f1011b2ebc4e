"""The aref dialect: warp-specialized programs talking through asynchronous references.

An aref ring (`!aref.ring<[T0, T1], D>`) is D shared-memory slots, each holding one tuple of
payload values. The producer `put`s use i (waits until slot i mod D is empty, writes it,
publishes it); a consumer `get`s use i (waits until it is full, borrows the payload) and later
marks it `consumed` (gives the slot back). The index is a logical use counter that grows by one
per use; no op at this level sees a slot number or a parity bit (lower-aref derives them).

A kernel body at this level is one `aref.warp_specialize` holding one `aref.group` per warp
group; each group states its role, how many warpgroups run it and their register budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import auto

from xdsl.dialects.builtin import (
    I32,
    ArrayAttr,
    IntAttr,
    IntegerAttr,
    TensorType,
    i32,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
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

# The discardable attribute the partition pass puts on every op of a tile kernel.
ROLE_ATTR = "aref.role"

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


@irdl_op_definition
class ConsumedOp(IRDLOperation):
    """Consumer: release the slot of use `index` back to the producer."""

    name = "aref.consumed"

    ring = operand_def(RingType)
    index = operand_def(i32)

    assembly_format = "$ring `[` $index `]` attr-dict `:` type($ring)"

    def __init__(self, ring: SSAValue, index: SSAValue):
        super().__init__(operands=[ring, index])


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
    [CreateOp, PutOp, GetOp, ConsumedOp, WarpSpecializeOp, GroupOp, WarpgroupIndexOp],
    [RingType, RoleAttr],
)
