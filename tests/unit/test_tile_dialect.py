"""The tile dialect built from Python: every op's `__init__` gives IR that verifies, and every
verifier rule (ops and `!tile.desc`) rejects what it should with its message."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest
from xdsl.dialects.builtin import (
    I32,
    IndexType,
    IntegerAttr,
    TensorType,
    bf16,
    f16,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from tawa_xdsl.dialects import tile
from tawa_xdsl.dialects.tile import (
    ArangeOp,
    BroadcastOp,
    CmpOp,
    ComparePredicate,
    ComparePredicateAttr,
    ConvertOp,
    DescType,
    DotOp,
    ExpandDimsOp,
    LoadOp,
    NumProgramsOp,
    ProgramIdOp,
    ReduceKind,
    ReduceKindAttr,
    ReduceOp,
    ReshapeOp,
    SplatOp,
    StoreOp,
    TransOp,
    WhereOp,
)


def tensor(shape: Sequence[int], element_type: Attribute = f32) -> SSAValue:
    return create_ssa_value(TensorType(element_type, shape))


def scalar(type_: Attribute = i32) -> SSAValue:
    return create_ssa_value(type_)


def desc(shape: Sequence[int], element_type: Attribute = f16) -> SSAValue:
    return create_ssa_value(DescType(shape, element_type))


def offsets(n: int) -> list[SSAValue]:
    return [scalar() for _ in range(n)]


def attr(value: int) -> IntegerAttr[I32]:
    return IntegerAttr(value, i32)


def make(
    op_type: type[IRDLOperation],
    operands: Sequence[SSAValue | Sequence[SSAValue]] = (),
    result: Attribute | None = None,
    **properties: Attribute,
) -> Operation:
    """An op with exactly these operands, result type and properties (no inference)."""
    return op_type.build(
        operands=list(operands),
        result_types=[] if result is None else [result],
        properties=properties,
    )


# -------------------------------------------------------------------------------- types


def test_desc_type_accessors() -> None:
    d = DescType([1, 128, 64], bf16)
    assert d.get_block_shape() == (1, 128, 64)
    assert d.rank == 3
    assert d.block_type() == TensorType(bf16, [1, 128, 64])


@pytest.mark.parametrize(
    ("shape", "element_type", "message"),
    [
        ([], f16, "!tile.desc block rank must be 1..5, got 0"),
        ([1] * 6, f16, "!tile.desc block rank must be 1..5, got 6"),
        ([0, 64], f16, "!tile.desc block dims must be positive, got (0, 64)"),
        ([64, -1], f16, "!tile.desc block dims must be positive, got (64, -1)"),
        (
            [64],
            i32,
            "!tile.desc element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, got i32",
        ),
        (
            [64],
            f64,
            "!tile.desc element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, got f64",
        ),
    ],
)
def test_desc_type_rules(shape: list[int], element_type: Attribute, message: str) -> None:
    with pytest.raises(VerifyException, match=re.escape(message)):
        DescType(shape, element_type)


# ------------------------------------------------------------------- valid ops via __init__

VALID: dict[str, Callable[[], Operation]] = {
    "program_id": lambda: ProgramIdOp(2),
    "num_programs": lambda: NumProgramsOp(0),
    "arange": lambda: ArangeOp(16, 48),
    "splat": lambda: SplatOp(scalar(f32), TensorType(f32, [128, 64])),
    "expand_dims": lambda: ExpandDimsOp(tensor([64]), 1),
    "broadcast": lambda: BroadcastOp(tensor([1, 64]), [128, 64]),
    "reshape": lambda: ReshapeOp(tensor([1, 128, 64], f16), [128, 64]),
    "trans": lambda: TransOp(tensor([128, 64], f16)),
    "convert": lambda: ConvertOp(tensor([8, 8]), bf16),
    "convert_to_int": lambda: ConvertOp(tensor([8, 8]), i32),
    "cmp": lambda: CmpOp(ComparePredicate.LT, tensor([1, 64], i32), tensor([1, 64], i32)),
    "where": lambda: WhereOp(tensor([4, 8], i1), tensor([4, 8]), tensor([4, 8])),
    "dot": lambda: DotOp(tensor([128, 64], f16), tensor([64, 128], f16), tensor([128, 128])),
    "dot_f16_acc": lambda: DotOp(
        tensor([64, 32], f16), tensor([32, 16], f16), tensor([64, 16], f16)
    ),
    "reduce_max": lambda: ReduceOp(ReduceKind.MAX, tensor([128, 64]), 1),
    "reduce_sum": lambda: ReduceOp(ReduceKind.SUM, tensor([128, 64]), 0),
    "load": lambda: LoadOp(desc([1, 64, 64]), offsets(3)),
    "store": lambda: StoreOp(desc([128, 64]), offsets(2), tensor([128, 64], f16)),
}


@pytest.mark.parametrize("name", VALID)
def test_init_builds_valid_op(name: str) -> None:
    VALID[name]().verify()


def test_init_infers_result_types() -> None:
    assert ArangeOp(16, 48).result.type == TensorType(i32, [32])
    assert ExpandDimsOp(tensor([64]), 0).result.type == TensorType(f32, [1, 64])
    assert TransOp(tensor([128, 64], f16)).result.type == TensorType(f16, [64, 128])
    assert ReduceOp(ReduceKind.MAX, tensor([8, 4, 2]), 1).result.type == TensorType(f32, [8, 2])
    assert CmpOp(ComparePredicate.EQ, tensor([4]), tensor([4])).result.type == TensorType(i1, [4])
    assert LoadOp(desc([128, 64]), offsets(2)).result.type == TensorType(f16, [128, 64])
    assert ConvertOp(tensor([8]), f16).result.type == TensorType(f16, [8])


def test_enum_attributes() -> None:
    assert ReduceOp(ReduceKind.SUM, tensor([2, 2]), 0).kind == ReduceKindAttr(ReduceKind.SUM)
    cmp = CmpOp(ComparePredicate.GE, tensor([4]), tensor([4]))
    assert cmp.predicate == ComparePredicateAttr(ComparePredicate.GE)
    assert {str(p) for p in ComparePredicate} == {"eq", "ne", "lt", "le", "gt", "ge"}


def test_dialect_lists_the_foundation_ops() -> None:
    # Later issues may add ops; these are the ones every kernel relies on.
    names = {op.name for op in tile.Tile.operations}
    assert names >= {
        "tile.program_id", "tile.num_programs", "tile.arange", "tile.splat",
        "tile.expand_dims", "tile.broadcast", "tile.reshape", "tile.trans", "tile.convert",
        "tile.cmp", "tile.where", "tile.dot", "tile.reduce", "tile.load", "tile.store",
    }  # fmt: skip


# --------------------------------------------------------------------------- verifier rules

INVALID: dict[str, tuple[Callable[[], Operation], str]] = {
    "program_id_axis": (
        lambda: ProgramIdOp(3),
        "'tile.program_id' axis must be 0, 1 or 2, got 3",
    ),
    "num_programs_axis": (
        lambda: NumProgramsOp(-1),
        "'tile.num_programs' axis must be 0, 1 or 2, got -1",
    ),
    "arange_shape": (
        lambda: make(ArangeOp, result=TensorType(i32, [32]), start=attr(0), end=attr(64)),
        "'tile.arange' 0, 64 must produce tensor<64xi32>, got tensor<32xi32>",
    ),
    "arange_element_type": (
        lambda: make(ArangeOp, result=TensorType(i64, [8]), start=attr(8), end=attr(16)),
        "'tile.arange' 8, 16 must produce tensor<8xi32>, got tensor<8xi64>",
    ),
    "splat_element_type": (
        lambda: SplatOp(scalar(f32), TensorType(f16, [4, 4])),
        "'tile.splat' element type of tensor<4x4xf16> must equal the scalar type f32",
    ),
    "expand_dims_axis": (
        lambda: make(ExpandDimsOp, [tensor([64])], TensorType(f32, [64, 1]), axis=attr(2)),
        "'tile.expand_dims' axis 2 out of range for tensor<64xf32>",
    ),
    "expand_dims_result": (
        lambda: make(ExpandDimsOp, [tensor([64])], TensorType(f32, [64, 1]), axis=attr(0)),
        "'tile.expand_dims' of tensor<64xf32> at axis 0 must give tensor<1x64xf32>, "
        "got tensor<64x1xf32>",
    ),
    "broadcast_element_type": (
        lambda: make(BroadcastOp, [tensor([1, 64])], TensorType(f16, [8, 64])),
        "'tile.broadcast' must keep the element type",
    ),
    "broadcast_shape": (
        lambda: BroadcastOp(tensor([2, 64]), [8, 64]),
        "'tile.broadcast' cannot broadcast 2x64 to 8x64: ranks must match and each source dim "
        "must be 1 or equal the result dim",
    ),
    "broadcast_rank": (
        lambda: BroadcastOp(tensor([64]), [8, 64]),
        "'tile.broadcast' cannot broadcast 64 to 8x64",
    ),
    "reshape_element_type": (
        lambda: make(ReshapeOp, [tensor([1, 64])], TensorType(i32, [64])),
        "'tile.reshape' must keep the element type",
    ),
    "reshape_count": (
        lambda: ReshapeOp(tensor([1, 64]), [2, 64]),
        "'tile.reshape' cannot reshape 1x64 (64 elements) to 2x64 (128 elements)",
    ),
    "trans_shape": (
        lambda: make(TransOp, [tensor([16, 64], f16)], TensorType(f16, [16, 64])),
        "'tile.trans' expects a 2-D tile and its transpose, got tensor<16x64xf16> -> "
        "tensor<16x64xf16>",
    ),
    "trans_rank": (
        lambda: make(TransOp, [tensor([2, 16, 64])], TensorType(f32, [64, 16, 2])),
        "'tile.trans' expects a 2-D tile and its transpose",
    ),
    "trans_element_type": (
        lambda: make(TransOp, [tensor([16, 64], f16)], TensorType(f32, [64, 16])),
        "'tile.trans' expects a 2-D tile and its transpose, got tensor<16x64xf16> -> "
        "tensor<64x16xf32>",
    ),
    "convert_shape": (
        lambda: make(ConvertOp, [tensor([16, 64])], TensorType(f16, [64, 16])),
        "'tile.convert' must keep the shape, got tensor<16x64xf32> -> tensor<64x16xf16>",
    ),
    "convert_element_type": (
        lambda: ConvertOp(tensor([16]), IndexType()),
        "'tile.convert' cannot convert element type index",
    ),
    "cmp_result": (
        lambda: make(
            CmpOp,
            [tensor([4, 8]), tensor([4, 8])],
            TensorType(i32, [4, 8]),
            predicate=ComparePredicateAttr(ComparePredicate.LT),
        ),
        "'tile.cmp' must produce tensor<4x8xi1>, got tensor<4x8xi32>",
    ),
    "cmp_operand_types": (
        lambda: CmpOp(ComparePredicate.EQ, tensor([4]), tensor([4], f16)),
        "attribute tensor<4xf32> expected from variable 'T', but got tensor<4xf16>",
    ),
    "where_condition_type": (
        lambda: WhereOp(tensor([4], i32), tensor([4]), tensor([4])),
        "'tile.where' condition must be a tile of i1, got tensor<4xi32>",
    ),
    "where_condition_shape": (
        lambda: WhereOp(tensor([1, 4], i1), tensor([8, 4]), tensor([8, 4])),
        "'tile.where' condition shape 1x4 must equal the value shape 8x4",
    ),
    "where_value_types": (
        lambda: WhereOp(tensor([4], i1), tensor([4]), tensor([4], f16)),
        "attribute tensor<4xf32> expected from variable 'T', but got tensor<4xf16>",
    ),
    "dot_rank": (
        lambda: DotOp(tensor([64], f16), tensor([64, 16], f16), tensor([16])),
        "'tile.dot' operands must be 2-D tiles",
    ),
    "dot_k": (
        lambda: DotOp(tensor([64, 32], f16), tensor([16, 16], f16), tensor([64, 16])),
        "'tile.dot' shape mismatch: 64x32 @ 16x16 + 64x16 (needs MxK @ KxN + MxN)",
    ),
    "dot_acc_shape": (
        lambda: DotOp(tensor([64, 32], f16), tensor([32, 16], f16), tensor([64, 32])),
        "'tile.dot' shape mismatch: 64x32 @ 32x16 + 64x32 (needs MxK @ KxN + MxN)",
    ),
    "dot_mixed_inputs": (
        lambda: DotOp(tensor([64, 32], f16), tensor([32, 16], bf16), tensor([64, 16])),
        "'tile.dot' inputs must have one element type, got f16 and bf16",
    ),
    "dot_f32_inputs": (
        lambda: DotOp(tensor([64, 32]), tensor([32, 16]), tensor([64, 16])),
        "'tile.dot' inputs must be f16, bf16 or fp8, got f32",
    ),
    "dot_f16_acc_for_bf16": (
        lambda: DotOp(tensor([64, 32], bf16), tensor([32, 16], bf16), tensor([64, 16], f16)),
        "'tile.dot' accumulator must be f32 (or f16 for f16 inputs), got f16",
    ),
    "dot_result_type": (
        lambda: make(
            DotOp,
            [tensor([64, 32], f16), tensor([32, 16], f16), tensor([64, 16])],
            TensorType(f16, [64, 16]),
        ),
        "attribute tensor<64x16xf32> expected from variable 'ACC', but got tensor<64x16xf16>",
    ),
    "reduce_axis": (
        lambda: make(
            ReduceOp,
            [tensor([8, 64])],
            TensorType(f32, [8]),
            kind=ReduceKindAttr(ReduceKind.MAX),
            axis=attr(2),
        ),
        "'tile.reduce' axis 2 out of range for tensor<8x64xf32>",
    ),
    "reduce_1d": (
        lambda: ReduceOp(ReduceKind.SUM, tensor([64]), 0),
        "'tile.reduce' of a 1-D tile is not supported; keep a dim of 1",
    ),
    "reduce_result": (
        lambda: make(
            ReduceOp,
            [tensor([8, 64])],
            TensorType(f32, [8]),
            kind=ReduceKindAttr(ReduceKind.SUM),
            axis=attr(0),
        ),
        "'tile.reduce' along axis 0 of tensor<8x64xf32> must give tensor<64xf32>, "
        "got tensor<8xf32>",
    ),
    "load_offsets": (
        lambda: LoadOp(desc([1, 64, 64]), offsets(2)),
        "'tile.load' needs one offset per descriptor dim: !tile.desc<1x64x64xf16> has rank 3, "
        "got 2 offsets",
    ),
    "load_result": (
        lambda: make(LoadOp, [desc([64, 64]), offsets(2)], TensorType(f16, [64, 32])),
        "'tile.load' from !tile.desc<64x64xf16> must produce tensor<64x64xf16>, "
        "got tensor<64x32xf16>",
    ),
    "load_offset_type": (
        lambda: LoadOp(desc([64]), [scalar(i64)]),
        "Expected attribute i32 but got i64",
    ),
    "store_offsets": (
        lambda: StoreOp(desc([64], f32), offsets(2), tensor([64])),
        "'tile.store' needs one offset per descriptor dim: !tile.desc<64xf32> has rank 1, "
        "got 2 offsets",
    ),
    "store_value": (
        lambda: StoreOp(desc([64, 64]), offsets(2), tensor([64, 64])),
        "'tile.store' to !tile.desc<64x64xf16> needs a tensor<64x64xf16> value, "
        "got tensor<64x64xf32>",
    ),
}


@pytest.mark.parametrize("name", INVALID)
def test_verifier_rule(name: str) -> None:
    build, message = INVALID[name]
    op = build()
    with pytest.raises(VerifyException, match=re.escape(message)):
        op.verify()
