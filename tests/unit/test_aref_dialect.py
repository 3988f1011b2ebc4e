"""The aref dialect built from Python: every op's `__init__` gives IR that verifies, and every
verifier rule (ops and `!aref.ring`) rejects what it should with its message."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest
from xdsl.dialects.arith import ConstantOp
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, TensorType, f16, f32, i32
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from tawa_xdsl.dialects import aref
from tawa_xdsl.dialects.aref import (
    CONSUMER_REGISTERS,
    PRODUCER_REGISTERS,
    ConsumedOp,
    CreateOp,
    GetOp,
    GroupOp,
    PutOp,
    RingType,
    Role,
    RoleAttr,
    WarpgroupIndexOp,
    WarpSpecializeOp,
)

A = TensorType(f16, [64, 64])
B = TensorType(f32, [64])
RING = RingType([A, B], 2)


def value(type_: Attribute) -> SSAValue:
    return create_ssa_value(type_)


def group(role: Role, warpgroups: int = 1, registers: int | None = None) -> GroupOp:
    if registers is None:
        registers = PRODUCER_REGISTERS if role == Role.PRODUCER else CONSUMER_REGISTERS
    return GroupOp(role, warpgroups, registers, Region(Block([WarpgroupIndexOp()])))


def warp_specialize(*roles: Role) -> WarpSpecializeOp:
    return WarpSpecializeOp([group(role) for role in roles])


# -------------------------------------------------------------------------------- types


def test_ring_type_accessors() -> None:
    assert RING.payload_types() == (A, B)
    assert RING.depth.data == 2


def test_register_budget_fits_the_sm() -> None:
    # One producer and two consumer warpgroups of 128 threads share the 64K registers.
    assert (PRODUCER_REGISTERS + 2 * CONSUMER_REGISTERS) * 128 <= 65536


@pytest.mark.parametrize(
    ("payload", "depth", "message"),
    [
        ([A], 0, "!aref.ring depth must be at least 1, got 0"),
        ([A], -2, "!aref.ring depth must be at least 1, got -2"),
        ([], 2, "!aref.ring needs at least one payload type"),
        ([A, f32], 2, "!aref.ring payloads must be tensor tiles, got f32"),
    ],
)
def test_ring_type_rules(payload: list[Attribute], depth: int, message: str) -> None:
    with pytest.raises(VerifyException, match=re.escape(message)):
        RingType(payload, depth)


# ------------------------------------------------------------------- valid ops via __init__


def test_create_put_get_consumed() -> None:
    create = CreateOp(RING)
    ring, index = create.ring, value(i32)
    put = PutOp(ring, index, [value(A), value(B)])
    get = GetOp(ring, index)
    consumed = ConsumedOp(ring, index)
    for op in (create, put, get, consumed):
        op.verify()
    assert create.ring.type == RING
    assert [v.type for v in get.values] == [A, B]


def test_warp_specialize_with_groups() -> None:
    op = WarpSpecializeOp(
        [group(Role.PRODUCER), group(Role.CONSUMER, 2, 160), group(Role.CONSUMER, 3, 24)]
    )
    op.verify()
    assert [g.role for g in op.groups()] == [
        RoleAttr(Role.PRODUCER),
        RoleAttr(Role.CONSUMER),
        RoleAttr(Role.CONSUMER),
    ]
    assert [g.num_warpgroups for g in op.groups()] == [1, 2, 3]
    assert op.groups()[2].registers.value.data == 24


def test_warp_specialize_refuses_budgets_over_the_register_file() -> None:
    """setmaxnreg.inc waits until the SM can give the registers: over 64K, forever."""
    op = WarpSpecializeOp([group(Role.PRODUCER), group(Role.CONSUMER, 3)])  # 40 + 3 * 232
    with pytest.raises(VerifyException, match=r"need 94208 registers; an SM has 65536"):
        op.verify()


def test_warpgroup_index() -> None:
    op = WarpgroupIndexOp()
    op.verify()
    assert op.result.type == i32


def test_dialect_lists_the_foundation_ops() -> None:
    # Later issues may add ops; these are the ones every warp-specialized kernel relies on.
    assert {op.name for op in aref.Aref.operations} >= {
        "aref.create",
        "aref.put",
        "aref.get",
        "aref.consumed",
        "aref.warp_specialize",
        "aref.group",
        "aref.warpgroup_index",
    }


# --------------------------------------------------------------------------- verifier rules


def _get_with_results(types: Sequence[Attribute]) -> Operation:
    return GetOp.build(operands=[value(RING), value(i32)], result_types=[list(types)])


INVALID: dict[str, tuple[Callable[[], Operation], str]] = {
    "put_missing_value": (
        lambda: PutOp(value(RING), value(i32), [value(A)]),
        "'aref.put' payload types (tensor<64x64xf16>) must match the ring's "
        "(tensor<64x64xf16>, tensor<64xf32>)",
    ),
    "put_wrong_type": (
        lambda: PutOp(value(RING), value(i32), [value(A), value(TensorType(f16, [64]))]),
        "'aref.put' payload types (tensor<64x64xf16>, tensor<64xf16>) must match the ring's "
        "(tensor<64x64xf16>, tensor<64xf32>)",
    ),
    "get_wrong_types": (
        lambda: _get_with_results([B, A]),
        "'aref.get' result types (tensor<64xf32>, tensor<64x64xf16>) must match the ring's "
        "(tensor<64x64xf16>, tensor<64xf32>)",
    ),
    "get_extra_result": (
        lambda: _get_with_results([A, B, B]),
        "'aref.get' result types (tensor<64x64xf16>, tensor<64xf32>, tensor<64xf32>) must "
        "match the ring's (tensor<64x64xf16>, tensor<64xf32>)",
    ),
    "consumed_index_type": (
        lambda: ConsumedOp(value(RING), value(IndexType())),
        "Expected attribute i32 but got index",
    ),
    "put_not_a_ring": (
        lambda: PutOp(value(A), value(i32), [value(A)]),
        "operand 'ring' at position 0 does not verify",
    ),
    "warp_specialize_foreign_op": (
        lambda: WarpSpecializeOp(
            [ConstantOp(IntegerAttr(0, i32)), group(Role.PRODUCER), group(Role.CONSUMER)]
        ),
        "'aref.warp_specialize' may only hold 'aref.group' ops, found 'arith.constant'",
    ),
    "warp_specialize_no_producer": (
        lambda: warp_specialize(Role.CONSUMER, Role.CONSUMER),
        "'aref.warp_specialize' needs exactly one producer group and at least one consumer "
        "group, got ['consumer', 'consumer']",
    ),
    "warp_specialize_two_producers": (
        lambda: warp_specialize(Role.PRODUCER, Role.CONSUMER, Role.PRODUCER),
        "got ['producer', 'consumer', 'producer']",
    ),
    "warp_specialize_no_consumer": (
        lambda: warp_specialize(Role.PRODUCER),
        "'aref.warp_specialize' needs exactly one producer group and at least one consumer "
        "group, got ['producer']",
    ),
    "group_zero_warpgroups": (
        lambda: WarpSpecializeOp([group(Role.PRODUCER), group(Role.CONSUMER, 0)]),
        "'aref.group' warpgroups must be 1..3, got 0",
    ),
    "group_four_warpgroups": (
        lambda: WarpSpecializeOp([group(Role.PRODUCER), group(Role.CONSUMER, 4)]),
        "'aref.group' warpgroups must be 1..3, got 4",
    ),
    "group_registers_not_multiple_of_8": (
        lambda: WarpSpecializeOp([group(Role.PRODUCER, 1, 42), group(Role.CONSUMER)]),
        "'aref.group' registers must be a multiple of 8 in 24..256 (setmaxnreg), got 42",
    ),
    "group_registers_above_256": (
        lambda: WarpSpecializeOp([group(Role.PRODUCER), group(Role.CONSUMER, 1, 264)]),
        "'aref.group' registers must be a multiple of 8 in 24..256 (setmaxnreg), got 264",
    ),
    "group_registers_below_24": (
        lambda: WarpSpecializeOp([group(Role.PRODUCER, 1, 16), group(Role.CONSUMER)]),
        "'aref.group' registers must be a multiple of 8 in 24..256 (setmaxnreg), got 16",
    ),
    "group_outside_warp_specialize": (
        lambda: ModuleOp([group(Role.CONSUMER)]).body.block.first_op,
        "'aref.group' expects parent op 'aref.warp_specialize'",
    ),
}


@pytest.mark.parametrize("name", INVALID)
def test_verifier_rule(name: str) -> None:
    build, message = INVALID[name]
    op = build()
    with pytest.raises(VerifyException, match=re.escape(message)):
        op.verify()
