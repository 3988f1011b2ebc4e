"""The tile dialect: the input level of tawa-xdsl.

A kernel is a `func.func` whose values are builtin `tensor<...>` tiles and builtin scalars
(`i32` offsets, `f32` scale factors). Global memory is reached only through tensor descriptors
(`!tile.desc`), which later become TMA tensor maps. Elementwise arithmetic and comparisons use
`arith` on tensors, transcendental functions use `math` (`math.exp2`), loops use `scf.for`.
This file holds what `arith`/`math`/`scf` do not: descriptors, tile construction, layout
changes, dot products and reductions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import auto
from typing import ClassVar

from xdsl.dialects.builtin import (
    I32,
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    IntAttr,
    IntegerAttr,
    IntegerType,
    TensorType,
    i1,
    i32,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Dialect,
    ParametrizedAttribute,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

# Element types a tile may hold in memory; the tensor cores read the first four.
MMA_INPUT_TYPES = (Float16Type, BFloat16Type, Float8E4M3FNType, Float8E5M2Type)
FLOAT_TYPES = (*MMA_INPUT_TYPES, Float32Type)


def shape_of(value: SSAValue) -> tuple[int, ...]:
    """The static shape of a tensor value."""
    assert isinstance(value.type, TensorType)
    return tuple(value.type.get_shape())


def element_type_of(value: SSAValue) -> Attribute:
    assert isinstance(value.type, TensorType)
    return value.type.element_type


def format_shape(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


# --------------------------------------------------------------------------------------- types


@irdl_attr_definition
class DescType(ParametrizedAttribute, TypeAttribute):
    """A TMA tensor descriptor: a global tensor read and written in blocks of one fixed shape.

    `!tile.desc<128x64xf16>` describes a rank-2 f16 tensor accessed in 128x64 blocks. The
    global shape and strides are launch arguments; reads outside it return zeros and writes
    outside it are dropped, as the TMA engine does.
    """

    name = "tile.desc"

    block_shape: ArrayAttr[IntAttr]
    element_type: Attribute

    def __init__(self, block_shape: Sequence[int], element_type: Attribute):
        super().__init__(ArrayAttr(IntAttr(d) for d in block_shape), element_type)

    def get_block_shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.block_shape)

    @property
    def rank(self) -> int:
        return len(self.block_shape)

    def block_type(self) -> TensorType:
        return TensorType(self.element_type, self.get_block_shape())

    def verify(self) -> None:
        shape = self.get_block_shape()
        if not 1 <= len(shape) <= 5:
            raise VerifyException(f"!tile.desc block rank must be 1..5, got {len(shape)}")
        if any(d <= 0 for d in shape):
            raise VerifyException(f"!tile.desc block dims must be positive, got {shape}")
        if not isinstance(self.element_type, FLOAT_TYPES):
            raise VerifyException(
                f"!tile.desc element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, "
                f"got {self.element_type}"
            )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            shape, element_type = parser.parse_ranked_shape()
        return [ArrayAttr(IntAttr(d) for d in shape), element_type]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_dimension_list(self.get_block_shape())
            printer.print_string("x")
            printer.print_attribute(self.element_type)


class ReduceKind(StrEnum):
    MAX = auto()
    SUM = auto()


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    """The combining function of `tile.reduce`: `max` or `sum`."""

    name = "tile.reduce_kind"


class ComparePredicate(StrEnum):
    EQ = auto()
    NE = auto()
    LT = auto()
    LE = auto()
    GT = auto()
    GE = auto()


@irdl_attr_definition
class ComparePredicateAttr(EnumAttribute[ComparePredicate], SpacedOpaqueSyntaxAttribute):
    """The relation `tile.cmp` tests: `eq`, `ne`, `lt`, `le`, `gt` or `ge`."""

    name = "tile.predicate"


# ------------------------------------------------------------------------------ program grid


class _GridQueryOp(IRDLOperation):
    axis = prop_def(IntegerAttr[I32])
    result = result_def(i32)

    assembly_format = "$axis attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self, axis: int):
        super().__init__(properties={"axis": IntegerAttr(axis, i32)}, result_types=[i32])

    def verify_(self) -> None:
        if self.axis.value.data not in (0, 1, 2):
            raise VerifyException(
                f"'{self.name}' axis must be 0, 1 or 2, got {self.axis.value.data}"
            )


@irdl_op_definition
class ProgramIdOp(_GridQueryOp):
    """The index of this program instance along a grid axis."""

    name = "tile.program_id"


@irdl_op_definition
class NumProgramsOp(_GridQueryOp):
    """The number of program instances along a grid axis."""

    name = "tile.num_programs"


# --------------------------------------------------------------------------- tile creation


@irdl_op_definition
class ArangeOp(IRDLOperation):
    """The 1-D i32 tile `[start, start + 1, ..., end - 1]`."""

    name = "tile.arange"

    start = prop_def(IntegerAttr[I32])
    end = prop_def(IntegerAttr[I32])
    result = result_def(TensorType)

    assembly_format = "$start `,` $end attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self, start: int, end: int):
        super().__init__(
            properties={"start": IntegerAttr(start, i32), "end": IntegerAttr(end, i32)},
            result_types=[TensorType(i32, [end - start])],
        )

    def verify_(self) -> None:
        start, end = self.start.value.data, self.end.value.data
        if shape_of(self.result) != (end - start,) or element_type_of(self.result) != i32:
            raise VerifyException(
                f"'tile.arange' {start}, {end} must produce tensor<{end - start}xi32>, "
                f"got {self.result.type}"
            )


@irdl_op_definition
class SplatOp(IRDLOperation):
    """A tile with every element equal to a scalar."""

    name = "tile.splat"

    value = operand_def()
    result = result_def(TensorType)

    assembly_format = "$value attr-dict `:` type($value) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue, result_type: TensorType):
        super().__init__(operands=[value], result_types=[result_type])

    def verify_(self) -> None:
        if element_type_of(self.result) != self.value.type:
            raise VerifyException(
                f"'tile.splat' element type of {self.result.type} must equal the scalar type "
                f"{self.value.type}"
            )


# --------------------------------------------------------------------------- layout changes


@irdl_op_definition
class ExpandDimsOp(IRDLOperation):
    """Insert a dimension of size 1 at `axis` (Python's `x[:, None]` is axis 1)."""

    name = "tile.expand_dims"

    source = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    result = result_def(TensorType)

    assembly_format = "$source `,` $axis attr-dict `:` type($source) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, axis: int):
        shape = list(shape_of(source))
        shape.insert(axis, 1)
        super().__init__(
            operands=[source],
            properties={"axis": IntegerAttr(axis, i32)},
            result_types=[TensorType(element_type_of(source), shape)],
        )

    def verify_(self) -> None:
        shape, axis = list(shape_of(self.source)), self.axis.value.data
        if not 0 <= axis <= len(shape):
            raise VerifyException(
                f"'tile.expand_dims' axis {axis} out of range for {self.source.type}"
            )
        shape.insert(axis, 1)
        expected = TensorType(element_type_of(self.source), shape)
        if self.result.type != expected:
            raise VerifyException(
                f"'tile.expand_dims' of {self.source.type} at axis {axis} must give {expected}, "
                f"got {self.result.type}"
            )


class _ShapeChangeOp(IRDLOperation):
    """A tile to a tile of the same element type in another shape; `verify_shape` states which
    shapes the op allows."""

    source = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, shape: Sequence[int]):
        super().__init__(
            operands=[source], result_types=[TensorType(element_type_of(source), shape)]
        )

    def verify_shape(self, source: tuple[int, ...], result: tuple[int, ...]) -> None:
        raise NotImplementedError

    def verify_(self) -> None:
        if element_type_of(self.source) != element_type_of(self.result):
            raise VerifyException(f"'{self.name}' must keep the element type")
        self.verify_shape(shape_of(self.source), shape_of(self.result))


@irdl_op_definition
class BroadcastOp(_ShapeChangeOp):
    """Repeat dimensions of size 1 to the result shape (same rank, same element type)."""

    name = "tile.broadcast"

    def verify_shape(self, source: tuple[int, ...], result: tuple[int, ...]) -> None:
        if len(source) != len(result) or any(
            s not in (1, r) for s, r in zip(source, result, strict=True)
        ):
            raise VerifyException(
                f"'tile.broadcast' cannot broadcast {format_shape(source)} to "
                f"{format_shape(result)}: ranks must match and each source dim must be 1 or "
                "equal the result dim"
            )


@irdl_op_definition
class ReshapeOp(_ShapeChangeOp):
    """The same elements, row-major, in another shape (for example 1x128x64 -> 128x64)."""

    name = "tile.reshape"

    def verify_shape(self, source: tuple[int, ...], result: tuple[int, ...]) -> None:
        if math.prod(source) != math.prod(result):
            raise VerifyException(
                f"'tile.reshape' cannot reshape {format_shape(source)} ({math.prod(source)} "
                f"elements) to {format_shape(result)} ({math.prod(result)} elements)"
            )


@irdl_op_definition
class TransOp(IRDLOperation):
    """The transpose of a 2-D tile."""

    name = "tile.trans"

    source = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue):
        rows, cols = shape_of(source)
        super().__init__(
            operands=[source], result_types=[TensorType(element_type_of(source), [cols, rows])]
        )

    def verify_(self) -> None:
        src, dst = shape_of(self.source), shape_of(self.result)
        if (
            len(src) != 2
            or dst != src[::-1]
            or self.source.type.element_type != element_type_of(self.result)
        ):
            raise VerifyException(
                f"'tile.trans' expects a 2-D tile and its transpose, got {self.source.type} -> "
                f"{self.result.type}"
            )


@irdl_op_definition
class PermuteOp(IRDLOperation):
    """The tile with its dims reordered: result dim k is source dim `dims[k]`."""

    name = "tile.permute"

    source = operand_def(TensorType)
    dims = prop_def(DenseArrayBase)
    result = result_def(TensorType)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, dims: Sequence[int]):
        shape = shape_of(source)
        super().__init__(
            operands=[source],
            properties={"dims": DenseArrayBase.from_list(i32, list(dims))},
            result_types=[TensorType(element_type_of(source), [shape[d] for d in dims])],
        )

    def permutation(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.dims.get_values())

    def verify_(self) -> None:
        src, dims = shape_of(self.source), self.permutation()
        if sorted(dims) != list(range(len(src))):
            raise VerifyException(
                f"'tile.permute' dims {list(dims)} must be a permutation of the {len(src)} dims "
                f"of {self.source.type}"
            )
        expected = TensorType(element_type_of(self.source), [src[d] for d in dims])
        if self.result.type != expected:
            raise VerifyException(
                f"'tile.permute' of {self.source.type} by {list(dims)} must give {expected}, "
                f"got {self.result.type}"
            )


@irdl_op_definition
class JoinOp(IRDLOperation):
    """Two tiles of one type stacked along a new minor dim of 2 (`lhs` at 0, `rhs` at 1)."""

    name = "tile.join"

    T: ClassVar = VarConstraint("T", base(TensorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(TensorType)

    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        shape = [*shape_of(lhs), 2]
        super().__init__(
            operands=[lhs, rhs], result_types=[TensorType(element_type_of(lhs), shape)]
        )

    def verify_(self) -> None:
        expected = TensorType(element_type_of(self.lhs), [*shape_of(self.lhs), 2])
        if self.result.type != expected:
            raise VerifyException(
                f"'tile.join' of two {self.lhs.type} must give {expected}, got {self.result.type}"
            )


@irdl_op_definition
class SplitOp(IRDLOperation):
    """The two halves of a tile whose minor dim is 2 (index 0 and index 1 of that dim)."""

    name = "tile.split"

    T: ClassVar = VarConstraint("T", base(TensorType))
    source = operand_def(TensorType)
    lhs = result_def(T)
    rhs = result_def(T)

    assembly_format = "$source attr-dict `:` type($source) `->` type($lhs)"
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue):
        half = TensorType(element_type_of(source), shape_of(source)[:-1])
        super().__init__(operands=[source], result_types=[half, half])

    def verify_(self) -> None:
        src = shape_of(self.source)
        expected = TensorType(element_type_of(self.source), src[:-1])
        if len(src) < 2 or src[-1] != 2 or self.lhs.type != expected:
            raise VerifyException(
                f"'tile.split' needs a tile whose minor dim is 2 and gives two {expected}, got "
                f"{self.source.type} -> {self.lhs.type}"
            )


@irdl_op_definition
class ConvertOp(IRDLOperation):
    """Elementwise conversion to another element type (round to nearest even; float to int
    truncates toward zero)."""

    name = "tile.convert"

    source = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, element_type: Attribute):
        super().__init__(
            operands=[source], result_types=[TensorType(element_type, shape_of(source))]
        )

    def verify_(self) -> None:
        if shape_of(self.source) != shape_of(self.result):
            raise VerifyException(
                f"'tile.convert' must keep the shape, got {self.source.type} -> {self.result.type}"
            )
        for t in (element_type_of(self.source), element_type_of(self.result)):
            if not isinstance(t, FLOAT_TYPES + (IntegerType,)):
                raise VerifyException(f"'tile.convert' cannot convert element type {t}")


@irdl_op_definition
class CmpOp(IRDLOperation):
    """Elementwise comparison giving a tile of i1 (arith.cmpi/cmpf only give scalars here).

    Integers compare as signed; floats compare ordered (false on NaN), except `ne`, which is
    true on NaN as in Python."""

    name = "tile.cmp"

    T: ClassVar = VarConstraint("T", base(TensorType))
    predicate = prop_def(ComparePredicateAttr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(TensorType)

    assembly_format = "$predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, predicate: ComparePredicate, lhs: SSAValue, rhs: SSAValue):
        super().__init__(
            operands=[lhs, rhs],
            properties={"predicate": ComparePredicateAttr(predicate)},
            result_types=[TensorType(i1, shape_of(lhs))],
        )

    def verify_(self) -> None:
        expected = TensorType(i1, shape_of(self.lhs))
        if self.result.type != expected:
            raise VerifyException(f"'tile.cmp' must produce {expected}, got {self.result.type}")


@irdl_op_definition
class WhereOp(IRDLOperation):
    """Elementwise select: `condition ? true_value : false_value`."""

    name = "tile.where"

    T: ClassVar = VarConstraint("T", base(TensorType))
    condition = operand_def(TensorType)
    true_value = operand_def(T)
    false_value = operand_def(T)
    result = result_def(T)

    assembly_format = (
        "$condition `,` $true_value `,` $false_value attr-dict "
        "`:` type($condition) `,` type($result)"
    )
    traits = traits_def(Pure())

    def __init__(self, condition: SSAValue, true_value: SSAValue, false_value: SSAValue):
        super().__init__(
            operands=[condition, true_value, false_value], result_types=[true_value.type]
        )

    def verify_(self) -> None:
        if element_type_of(self.condition) != i1:
            raise VerifyException(
                f"'tile.where' condition must be a tile of i1, got {self.condition.type}"
            )
        if shape_of(self.condition) != shape_of(self.result):
            raise VerifyException(
                f"'tile.where' condition shape {format_shape(shape_of(self.condition))} must "
                f"equal the value shape {format_shape(shape_of(self.result))}"
            )


# ------------------------------------------------------------------------- compute


@irdl_op_definition
class DotOp(IRDLOperation):
    """`result = lhs @ rhs + acc` on the tensor cores: lhs MxK, rhs KxN, acc and result MxN.

    Inputs are f16, bf16 or fp8 (both the same type); the accumulator is f32 (or f16 for f16
    inputs). Products are accumulated exactly in f32 before the single rounding to acc's type.
    """

    name = "tile.dot"

    ACC: ClassVar = VarConstraint("ACC", base(TensorType))
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    acc = operand_def(ACC)
    result = result_def(ACC)

    assembly_format = (
        "$lhs `,` $rhs `,` $acc attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"
    )
    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue, rhs: SSAValue, acc: SSAValue):
        super().__init__(operands=[lhs, rhs, acc], result_types=[acc.type])

    def verify_(self) -> None:
        lhs, rhs, acc = shape_of(self.lhs), shape_of(self.rhs), shape_of(self.acc)
        if len(lhs) != 2 or len(rhs) != 2 or len(acc) != 2:
            raise VerifyException("'tile.dot' operands must be 2-D tiles")
        if lhs[1] != rhs[0] or acc != (lhs[0], rhs[1]):
            raise VerifyException(
                f"'tile.dot' shape mismatch: {format_shape(lhs)} @ {format_shape(rhs)} + "
                f"{format_shape(acc)} (needs MxK @ KxN + MxN)"
            )
        in_type = element_type_of(self.lhs)
        if in_type != element_type_of(self.rhs):
            raise VerifyException(
                f"'tile.dot' inputs must have one element type, got {in_type} and "
                f"{element_type_of(self.rhs)}"
            )
        if not isinstance(in_type, MMA_INPUT_TYPES):
            raise VerifyException(f"'tile.dot' inputs must be f16, bf16 or fp8, got {in_type}")
        acc_type = element_type_of(self.acc)
        if not isinstance(acc_type, Float32Type) and not (
            isinstance(acc_type, Float16Type) and isinstance(in_type, Float16Type)
        ):
            raise VerifyException(
                f"'tile.dot' accumulator must be f32 (or f16 for f16 inputs), got {acc_type}"
            )


@irdl_op_definition
class ReduceOp(IRDLOperation):
    """Reduce a tile along one axis with `max` or `sum`; the axis is removed from the shape.

    `across(n)` (written by cooperative-consumers): the axis is the rows that the n
    warpgroups of the consumer group split; every warpgroup gets the reduction over all their
    rows, its own `source` combined with the others' in warpgroup order."""

    name = "tile.reduce"

    kind = prop_def(ReduceKindAttr)
    source = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    warpgroups = opt_prop_def(IntegerAttr[I32])
    result = result_def(TensorType)

    assembly_format = (
        "$kind $source `,` $axis (`across` `(` $warpgroups^ `)`)? attr-dict `:` type($source) "
        "`->` type($result)"
    )
    traits = traits_def(Pure())

    def __init__(self, kind: ReduceKind, source: SSAValue, axis: int):
        shape = list(shape_of(source))
        del shape[axis]
        super().__init__(
            operands=[source],
            properties={"kind": ReduceKindAttr(kind), "axis": IntegerAttr(axis, i32)},
            result_types=[TensorType(element_type_of(source), shape)],
        )

    def verify_(self) -> None:
        shape, axis = list(shape_of(self.source)), self.axis.value.data
        if not 0 <= axis < len(shape):
            raise VerifyException(f"'tile.reduce' axis {axis} out of range for {self.source.type}")
        del shape[axis]
        expected = TensorType(element_type_of(self.source), shape)
        if not shape:
            raise VerifyException("'tile.reduce' of a 1-D tile is not supported; keep a dim of 1")
        if self.warpgroups is not None and self.warpgroups.value.data < 2:
            raise VerifyException(
                f"'tile.reduce' across {self.warpgroups.value.data} warpgroups: a reduction "
                "across warpgroups spans 2 or more"
            )
        if self.result.type != expected:
            raise VerifyException(
                f"'tile.reduce' along axis {axis} of {self.source.type} must give {expected}, "
                f"got {self.result.type}"
            )


# ------------------------------------------------------------------------ global memory


def _verify_offsets(op: IRDLOperation, desc: SSAValue, offsets: Sequence[SSAValue]) -> DescType:
    assert isinstance(desc.type, DescType)
    if len(offsets) != desc.type.rank:
        raise VerifyException(
            f"'{op.name}' needs one offset per descriptor dim: {desc.type} has rank "
            f"{desc.type.rank}, got {len(offsets)} offsets"
        )
    return desc.type


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Read the block at element offsets `[o0, o1, ...]` of a descriptor (TMA load).

    Elements outside the global tensor read as zero."""

    name = "tile.load"

    desc = operand_def(DescType)
    offsets = var_operand_def(i32)
    result = result_def(TensorType)

    assembly_format = "$desc `[` $offsets `]` attr-dict `:` type($desc) `->` type($result)"

    def __init__(self, desc: SSAValue, offsets: Sequence[SSAValue]):
        assert isinstance(desc.type, DescType)
        super().__init__(operands=[desc, offsets], result_types=[desc.type.block_type()])

    def verify_(self) -> None:
        desc_type = _verify_offsets(self, self.desc, self.offsets)
        if self.result.type != desc_type.block_type():
            raise VerifyException(
                f"'tile.load' from {desc_type} must produce {desc_type.block_type()}, "
                f"got {self.result.type}"
            )


class _DescStoreOp(IRDLOperation):
    """Write a tile at element offsets `[o0, o1, ...]` of a descriptor; `verify_value` states
    which tiles the op takes."""

    desc = operand_def(DescType)
    offsets = var_operand_def(i32)
    value = operand_def(TensorType)

    assembly_format = "$desc `[` $offsets `]` `,` $value attr-dict `:` type($desc) `,` type($value)"

    def __init__(self, desc: SSAValue, offsets: Sequence[SSAValue], value: SSAValue):
        super().__init__(operands=[desc, offsets, value])

    def verify_value(self, desc_type: DescType) -> None:
        raise NotImplementedError

    def verify_(self) -> None:
        self.verify_value(_verify_offsets(self, self.desc, self.offsets))


@irdl_op_definition
class StoreOp(_DescStoreOp):
    """Write a block at element offsets `[o0, o1, ...]` of a descriptor (TMA store).

    Elements outside the global tensor are dropped."""

    name = "tile.store"

    def verify_value(self, desc_type: DescType) -> None:
        if self.value.type != desc_type.block_type():
            raise VerifyException(
                f"'tile.store' to {desc_type} needs a {desc_type.block_type()} value, "
                f"got {self.value.type}"
            )


# ------------------------------------------------------------- warp-specialized forms


@irdl_op_definition
class ExtractSliceOp(IRDLOperation):
    """The sub-tile of `source` at element offsets `[o0, o1, ...]`, of the result's static shape.

    The offsets are dynamic i32 values (a cooperative consumer warpgroup w takes rows
    [w*64, w*64 + 64) of a 128-row tile); the slice must lie inside the source."""

    name = "tile.extract_slice"

    source = operand_def(TensorType)
    offsets = var_operand_def(i32)
    result = result_def(TensorType)

    assembly_format = "$source `[` $offsets `]` attr-dict `:` type($source) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, offsets: Sequence[SSAValue], shape: Sequence[int]):
        super().__init__(
            operands=[source, offsets],
            result_types=[TensorType(element_type_of(source), shape)],
        )

    def verify_(self) -> None:
        src, dst = shape_of(self.source), shape_of(self.result)
        if len(self.offsets) != len(src):
            raise VerifyException(
                f"'tile.extract_slice' needs one offset per dim of {self.source.type}, got "
                f"{len(self.offsets)}"
            )
        if element_type_of(self.source) != element_type_of(self.result):
            raise VerifyException("'tile.extract_slice' must keep the element type")
        if len(dst) != len(src) or any(d > s for s, d in zip(src, dst, strict=True)):
            raise VerifyException(
                f"'tile.extract_slice' result {format_shape(dst)} must have the rank of the "
                f"source {format_shape(src)} and fit in it"
            )


@irdl_op_definition
class StoreSliceOp(_DescStoreOp):
    """Write a value smaller than the descriptor's block at element offsets `[o0, ...]` (each
    cooperative consumer warpgroup stores its rows of the output tile).

    The value's shape must fit in the block shape, dim by dim; elements outside the global
    tensor are dropped, as for `tile.store`."""

    name = "tile.store_slice"

    def verify_value(self, desc_type: DescType) -> None:
        block, shape = desc_type.get_block_shape(), shape_of(self.value)
        fits = len(block) == len(shape) and all(v <= b for b, v in zip(block, shape, strict=True))
        if element_type_of(self.value) != desc_type.element_type or not fits:
            raise VerifyException(
                f"'tile.store_slice' to {desc_type} needs a {desc_type.element_type} value "
                f"whose shape fits in {format_shape(block)}, got {self.value.type}"
            )


Tile = Dialect(
    "tile",
    [
        # Program grid
        ProgramIdOp,
        NumProgramsOp,
        # Tile creation
        ArangeOp,
        SplatOp,
        # Layout changes
        ExpandDimsOp,
        BroadcastOp,
        ReshapeOp,
        TransOp,
        PermuteOp,
        JoinOp,
        SplitOp,
        ConvertOp,
        CmpOp,
        WhereOp,
        # Compute
        DotOp,
        ReduceOp,
        # Global memory
        LoadOp,
        StoreOp,
        # Warp-specialized forms
        ExtractSliceOp,
        StoreSliceOp,
    ],
    [DescType, ReduceKindAttr, ComparePredicateAttr],
)
