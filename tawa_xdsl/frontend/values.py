"""Typed values of the frontend and the type rules of the language.

While a kernel compiles, every Python name is bound either to a compile-time Python object
(an `int`, a `tl.dtype`, a tuple of shapes, a `@jit` function, ...) or to one of the
run-time values below, which wrap the SSA value that holds it in the IR:

* `Scalar` -- one number per program (`i32`, `f32`, `i1`, ...), e.g. `tl.program_id(0)`;
* `Tile` -- a `tensor<shape x dtype>`, e.g. `tl.arange(0, 64)`;
* `Descriptor` -- a `!tile.desc` kernel argument.

The promotion rules follow Triton: an integer mixed with a float takes the float type; two
float types of different kinds or widths meet at fp32; a Python number mixed with a run-time
value takes the value's type (an int literal with a float tile keeps the tile's type).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    TensorType,
    i1,
    i32,
)
from xdsl.ir import Attribute, SSAValue

import tawa_xdsl.language as tl
from tawa_xdsl.dialects.tile import DescType
from tawa_xdsl.frontend.errors import SemanticError

# ------------------------------------------------------------------------------ dtypes <-> IR


def ir_type(dtype: tl.dtype) -> Attribute:
    """The builtin MLIR type of an element type."""
    match dtype.name:
        case "int1":
            return i1
        case "int32":
            return i32
        case "fp16":
            return Float16Type()
        case "bf16":
            return BFloat16Type()
        case "fp32":
            return Float32Type()
        case "fp8e4nv":
            return Float8E4M3FNType()
        case "fp8e5":
            return Float8E5M2Type()
    raise SemanticError(f"no IR type for {dtype}")


def dtype_of_ir(type_: Attribute) -> tl.dtype:
    """The element type of a builtin MLIR scalar type."""
    for dtype in tl.DTYPES.values():
        if ir_type(dtype) == type_:
            return dtype
    raise SemanticError(f"type {type_} has no kernel-language element type")


# --------------------------------------------------------------------------------- the values


@dataclass(frozen=True)
class Scalar:
    """A run-time scalar: one value per program instance."""

    ssa: SSAValue
    dtype: tl.dtype

    def describe(self) -> str:
        return f"scalar {self.dtype}"


@dataclass(frozen=True)
class Tile:
    """A run-time tile: `tensor<shape x dtype>`."""

    ssa: SSAValue
    dtype: tl.dtype
    shape: tuple[int, ...]

    def describe(self) -> str:
        return f"tile {self.dtype}{list(self.shape)}"


@dataclass(frozen=True)
class Descriptor:
    """A tensor descriptor argument: a global tensor accessed in blocks of `block_shape`."""

    ssa: SSAValue
    dtype: tl.dtype
    block_shape: tuple[int, ...]

    def describe(self) -> str:
        return f"descriptor {self.dtype}{list(self.block_shape)}"


Value = Scalar | Tile | Descriptor
RUNTIME_VALUES = (Scalar, Tile, Descriptor)
PythonNumber = bool | int | float


def wrap(ssa: SSAValue) -> Value:
    """The frontend value of an SSA value, from its IR type."""
    type_ = ssa.type
    if isinstance(type_, TensorType):
        return Tile(ssa, dtype_of_ir(type_.element_type), tuple(type_.get_shape()))
    if isinstance(type_, DescType):
        return Descriptor(ssa, dtype_of_ir(type_.element_type), type_.get_block_shape())
    return Scalar(ssa, dtype_of_ir(type_))


def tile_type(dtype: tl.dtype, shape: Sequence[int]) -> TensorType:
    return TensorType(ir_type(dtype), list(shape))


def is_number(value: object) -> bool:
    return isinstance(value, bool | int | float)


# -------------------------------------------------------------------------------- promotion


def literal_dtype(number: PythonNumber) -> tl.dtype:
    """The type a Python number gets on its own: bool -> int1, int -> int32, float -> fp32."""
    if isinstance(number, bool):
        return tl.int1
    if isinstance(number, int):
        return tl.int32
    return tl.float32


def promote(a: tl.dtype, b: tl.dtype) -> tl.dtype:
    """The type two run-time operands are computed in (Triton's `computation_type_impl`)."""
    if a == b:
        return a
    if a.is_fp8 or b.is_fp8:
        raise SemanticError(
            f"arithmetic on fp8 is not supported ({a} and {b}); convert with .to(tl.float16)"
        )
    if a.is_floating and b.is_floating:
        return tl.float32  # fp16 with bf16, or either with fp32
    if a.is_floating:
        return a
    if b.is_floating:
        return b
    return tl.int32  # int1 with int32


def promote_with_literal(value: tl.dtype, literal: PythonNumber) -> tl.dtype:
    """The type of `value op literal`: the value's type, unless a float meets an int value."""
    if isinstance(literal, float) and not value.is_floating:
        return tl.float32
    if isinstance(literal, int) and not isinstance(literal, bool) and value.is_bool:
        return tl.int32
    return value


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """numpy's broadcasting of two shapes."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    shape = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            raise SemanticError(
                f"cannot broadcast shapes {list(a)} and {list(b)}: dims {x} and {y} differ "
                "and neither is 1"
            )
        shape.append(max(x, y))
    return tuple(shape)
