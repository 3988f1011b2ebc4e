"""The meaning of each kernel-language operation, as tile IR.

Every function takes an `IRBuilder` and frontend values (`Scalar`, `Tile`, `Descriptor`, or
Python numbers standing for constants), checks the language's rules, and emits ops:

* operands are promoted to a common element type (`values.promote`) and converted with
  `tile.convert` (tiles) or `arith` casts (scalars);
* shapes broadcast as in numpy: lower-rank tiles gain leading dims with `tile.expand_dims`,
  dims of size 1 stretch with `tile.broadcast`, and scalars become tiles with `tile.splat`;
* comparisons use `tile.cmp` on tiles and `arith.cmpi`/`arith.cmpf` on scalars.

A broken rule raises `SemanticError`; the code generator adds the source line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith
from xdsl.dialects import math as mathd
from xdsl.ir import Operation, SSAValue

import tawa_xdsl.language as tl
from tawa_xdsl.dialects import tile
from tawa_xdsl.frontend.builder import IRBuilder
from tawa_xdsl.frontend.errors import SemanticError
from tawa_xdsl.frontend.values import (
    Descriptor,
    PythonNumber,
    Scalar,
    Tile,
    broadcast_shapes,
    ir_type,
    is_number,
    literal_dtype,
    promote,
    promote_with_literal,
    tile_type,
)

Runtime = Scalar | Tile
Operand = Scalar | Tile | PythonNumber


def _result(op: Operation, like: Runtime, dtype: tl.dtype | None = None) -> Runtime:
    """Wrap the single result of `op` with the shape of `like`."""
    dtype = dtype or like.dtype
    if isinstance(like, Tile):
        return Tile(op.results[0], dtype, like.shape)
    return Scalar(op.results[0], dtype)


def _shape(value: Runtime) -> tuple[int, ...]:
    return value.shape if isinstance(value, Tile) else ()


def _require_runtime(value: object, what: str) -> Runtime:
    if not isinstance(value, Scalar | Tile):
        raise SemanticError(f"{what} must be a scalar or a tile, got {_describe(value)}")
    return value


def _describe(value: object) -> str:
    if isinstance(value, Scalar | Tile | Descriptor):
        return value.describe()
    return f"{type(value).__name__} {value!r}"


# ------------------------------------------------------------------------ types and shapes


def materialize(b: IRBuilder, value: Operand, dtype: tl.dtype | None = None) -> Runtime:
    """A run-time value: Python numbers become constants of `dtype` (or their own type)."""
    if is_number(value):
        return b.constant(value, dtype or literal_dtype(value))  # type: ignore[arg-type]
    return _require_runtime(value, "operand")


def cast(b: IRBuilder, value: Operand, dtype: tl.dtype) -> Runtime:
    """Convert to `dtype` (floats round to nearest even; float to int truncates)."""
    if is_number(value):
        return b.constant(value, dtype)  # type: ignore[arg-type]
    value = _require_runtime(value, "the converted value")
    if value.dtype == dtype:
        return value
    if isinstance(value, Tile):
        op = b.emit(tile.ConvertOp(value.ssa, ir_type(dtype)))
        return Tile(op.result, dtype, value.shape)
    return _cast_scalar(b, value, dtype)


def _cast_scalar(b: IRBuilder, value: Scalar, dtype: tl.dtype) -> Runtime:
    source, target = value.dtype, ir_type(dtype)
    if dtype.is_bool:
        return compare(b, "!=", value, 0)
    if source.is_bool:
        one, zero = b.constant(1, dtype), b.constant(0, dtype)
        return Scalar(b.emit(arith.SelectOp(value.ssa, one.ssa, zero.ssa)).result, dtype)
    if source.is_int and dtype.is_floating:
        return Scalar(b.emit(arith.SIToFPOp(value.ssa, target)).result, dtype)  # type: ignore[arg-type]
    if source.is_floating and dtype.is_int:
        return Scalar(b.emit(arith.FPToSIOp(value.ssa, target)).result, dtype)
    if source.primitive_bitwidth == dtype.primitive_bitwidth:  # fp16 <-> bf16 through fp32
        return _cast_scalar(b, _cast_scalar(b, value, tl.float32), dtype)  # type: ignore[arg-type]
    if source.primitive_bitwidth < dtype.primitive_bitwidth:
        return Scalar(b.emit(arith.ExtFOp(value.ssa, target)).result, dtype)
    return Scalar(b.emit(arith.TruncFOp(value.ssa, target)).result, dtype)


def splat(b: IRBuilder, value: Scalar, shape: Sequence[int]) -> Tile:
    op = b.emit(tile.SplatOp(value.ssa, tile_type(value.dtype, shape)))
    return Tile(op.result, value.dtype, tuple(shape))


def broadcast_to(b: IRBuilder, value: Operand, shape: Sequence[int]) -> Tile:
    """Broadcast a scalar or tile to `shape` with numpy rules."""
    shape = tuple(shape)
    value = materialize(b, value)
    if isinstance(value, Scalar):
        return splat(b, value, shape)
    if value.shape == shape:
        return value
    if len(value.shape) > len(shape) or broadcast_shapes(value.shape, shape) != shape:
        raise SemanticError(f"cannot broadcast {value.describe()} to shape {list(shape)}")
    while len(value.shape) < len(shape):
        value = expand_dims(b, value, 0)
    if value.shape == shape:
        return value
    return Tile(b.emit(tile.BroadcastOp(value.ssa, shape)).result, value.dtype, shape)


def common_dtype(lhs: Operand, rhs: Operand) -> tl.dtype:
    """The type `lhs op rhs` is computed in."""
    if is_number(lhs) and is_number(rhs):
        return promote(literal_dtype(lhs), literal_dtype(rhs))  # type: ignore[arg-type]
    if is_number(lhs):
        return promote_with_literal(_require_runtime(rhs, "operand").dtype, lhs)  # type: ignore[arg-type]
    if is_number(rhs):
        return promote_with_literal(_require_runtime(lhs, "operand").dtype, rhs)  # type: ignore[arg-type]
    return promote(_require_runtime(lhs, "operand").dtype, _require_runtime(rhs, "operand").dtype)


def unify(
    b: IRBuilder, lhs: Operand, rhs: Operand, dtype: tl.dtype | None = None
) -> tuple[Runtime, Runtime]:
    """Both operands in one element type (`dtype` or the promoted one) and one shape."""
    dtype = dtype or common_dtype(lhs, rhs)
    left, right = cast(b, lhs, dtype), cast(b, rhs, dtype)
    if isinstance(left, Scalar) and isinstance(right, Scalar):
        return left, right
    shape = broadcast_shapes(_shape(left), _shape(right))
    return broadcast_to(b, left, shape), broadcast_to(b, right, shape)


# ------------------------------------------------------------------------------- arithmetic

_FLOAT_BINARY: dict[str, Callable[[SSAValue, SSAValue], Operation]] = {
    "+": arith.AddfOp,
    "-": arith.SubfOp,
    "*": arith.MulfOp,
    "/": arith.DivfOp,
}
_INT_BINARY: dict[str, Callable[[SSAValue, SSAValue], Operation]] = {
    "+": arith.AddiOp,
    "-": arith.SubiOp,
    "*": arith.MuliOp,
    "//": arith.DivSIOp,
    "%": arith.RemSIOp,
    "&": arith.AndIOp,
    "|": arith.OrIOp,
    "^": arith.XOrIOp,
    "<<": arith.ShLIOp,
    ">>": arith.ShRSIOp,
}
_BOOL_BINARY = ("&", "|", "^")


def binary(b: IRBuilder, operator: str, lhs: Operand, rhs: Operand) -> Runtime:
    """`lhs operator rhs` for `+ - * / // % & | ^ << >>`; `/` of integers gives fp32, and
    `//` and `%` of integers truncate toward zero (as C, PTX and Triton do)."""
    dtype = common_dtype(lhs, rhs)
    if operator == "/" and not dtype.is_floating:
        dtype = tl.float32
    if dtype.is_bool and operator not in _BOOL_BINARY:
        dtype = tl.int32
    table = _FLOAT_BINARY if dtype.is_floating else _INT_BINARY
    if operator not in table:
        raise SemanticError(f"operator '{operator}' is not supported on {dtype} operands")
    left, right = unify(b, lhs, rhs, dtype)
    return _result(b.emit(table[operator](left.ssa, right.ssa)), left)


_TILE_PREDICATES = {
    "==": tile.ComparePredicate.EQ,
    "!=": tile.ComparePredicate.NE,
    "<": tile.ComparePredicate.LT,
    "<=": tile.ComparePredicate.LE,
    ">": tile.ComparePredicate.GT,
    ">=": tile.ComparePredicate.GE,
}
_INT_PREDICATES = {"==": "eq", "!=": "ne", "<": "slt", "<=": "sle", ">": "sgt", ">=": "sge"}
_FLOAT_PREDICATES = {"==": "oeq", "!=": "une", "<": "olt", "<=": "ole", ">": "ogt", ">=": "oge"}


def compare(b: IRBuilder, operator: str, lhs: Operand, rhs: Operand) -> Runtime:
    """`lhs operator rhs` giving int1: signed for integers, ordered for floats (but `!=` is
    true on NaN)."""
    left, right = unify(b, lhs, rhs)
    if isinstance(left, Tile):
        op = b.emit(tile.CmpOp(_TILE_PREDICATES[operator], left.ssa, right.ssa))
        return Tile(op.result, tl.int1, left.shape)
    if left.dtype.is_floating:
        op = b.emit(arith.CmpfOp(left.ssa, right.ssa, _FLOAT_PREDICATES[operator]))
    else:
        op = b.emit(arith.CmpiOp(left.ssa, right.ssa, _INT_PREDICATES[operator]))
    return Scalar(op.result, tl.int1)


def negate(b: IRBuilder, value: Operand) -> Runtime:
    value = materialize(b, value)
    if value.dtype.is_floating:
        return _result(b.emit(arith.NegfOp(value.ssa)), value)
    return binary(b, "-", 0, value)


def invert(b: IRBuilder, value: Operand) -> Runtime:
    """Bitwise not (`~x`); on int1 this is logical not."""
    value = materialize(b, value)
    if value.dtype.is_floating:
        raise SemanticError(f"operator '~' is not supported on {value.dtype} operands")
    return binary(b, "^", value, True if value.dtype.is_bool else -1)


def logical_not(b: IRBuilder, value: Operand) -> Runtime:
    value = materialize(b, value)
    return invert(b, value) if value.dtype.is_bool else compare(b, "==", value, 0)


def where(b: IRBuilder, condition: Operand, x: Operand, y: Operand) -> Runtime:
    """Elementwise `condition ? x : y` (`arith.select` on scalars, `tile.where` on tiles)."""
    condition = materialize(b, condition)
    if not condition.dtype.is_bool:
        condition = compare(b, "!=", condition, 0)
    left, right = unify(b, x, y)
    if isinstance(condition, Scalar) and isinstance(left, Scalar):
        return _result(b.emit(arith.SelectOp(condition.ssa, left.ssa, right.ssa)), left)
    shape = broadcast_shapes(_shape(condition), _shape(left))
    condition, left, right = (broadcast_to(b, v, shape) for v in (condition, left, right))
    return _result(b.emit(tile.WhereOp(condition.ssa, left.ssa, right.ssa)), left)


def minimum_or_maximum(b: IRBuilder, kind: str, x: Operand, y: Operand) -> Runtime:
    """Elementwise `max`/`min`: NaN-propagating on floats, signed on integers."""
    left, right = unify(b, x, y)
    if left.dtype.is_bool:
        left, right = cast(b, left, tl.int32), cast(b, right, tl.int32)
    if left.dtype.is_floating:
        op_class = arith.MaximumfOp if kind == "max" else arith.MinimumfOp
    else:
        op_class = arith.MaxSIOp if kind == "max" else arith.MinSIOp
    return _result(b.emit(op_class(left.ssa, right.ssa)), left)


_MATH: dict[str, Callable[[SSAValue], Operation]] = {
    "exp": mathd.ExpOp,
    "exp2": mathd.Exp2Op,
    "log": mathd.LogOp,
    "log2": mathd.Log2Op,
    "sqrt": mathd.SqrtOp,
    "rsqrt": mathd.RsqrtOp,
    "abs": mathd.AbsFOp,
    "tanh": mathd.TanhOp,
    "erf": mathd.ErfOp,
}


def math_unary(b: IRBuilder, name: str, value: Operand) -> Runtime:
    """`tl.exp(x)` and friends, elementwise; integer operands are computed in fp32 (except
    `abs`, which keeps integers)."""
    value = materialize(b, value)
    if value.dtype.is_fp8:
        raise SemanticError(f"tl.{name} is not supported on fp8; convert with .to(tl.float32)")
    if name == "abs" and not value.dtype.is_floating:
        return minimum_or_maximum(b, "max", value, negate(b, value))
    if not value.dtype.is_floating:
        value = cast(b, value, tl.float32)
    return _result(b.emit(_MATH[name](value.ssa)), value)


def sigmoid(b: IRBuilder, value: Operand) -> Runtime:
    """`1 / (1 + exp(-x))`, in the type of `x` (fp32 for integers)."""
    e = math_unary(b, "exp", negate(b, materialize(b, value)))
    return binary(b, "/", 1.0, binary(b, "+", 1.0, e))


def fma(b: IRBuilder, x: Operand, y: Operand, z: Operand) -> Runtime:
    """`x * y + z` rounded once, the three operands broadcast to one type and shape."""
    product = common_dtype(x, y)
    if is_number(z):
        dtype = promote_with_literal(product, z)  # type: ignore[arg-type]
    else:
        dtype = promote(product, _require_runtime(z, "tl.fma addend").dtype)
    if not dtype.is_floating:
        dtype = tl.float32
    a, c = unify(b, x, z, dtype)
    a, m = unify(b, a, y, dtype)
    a, c = unify(b, a, c, dtype)
    return _result(b.emit(mathd.FmaOp(a.ssa, m.ssa, c.ssa)), a)


def clamp(b: IRBuilder, x: Operand, low: Operand, high: Operand) -> Runtime:
    """`minimum(maximum(x, low), high)`."""
    return minimum_or_maximum(b, "min", minimum_or_maximum(b, "max", x, low), high)


def cdiv(b: IRBuilder, x: Operand, div: Operand) -> Operand:
    if is_number(x) and is_number(div):
        return (x + div - 1) // div  # type: ignore[operator]
    if is_number(div):
        return binary(b, "//", binary(b, "+", x, div - 1), div)  # type: ignore[operator]
    return binary(b, "//", binary(b, "-", binary(b, "+", x, div), 1), div)


# ---------------------------------------------------------------------------------- shapes


def _require_tile(value: object, what: str) -> Tile:
    if not isinstance(value, Tile):
        raise SemanticError(f"{what} must be a tile, got {_describe(value)}")
    return value


def constant_shape(shape: object, what: str) -> tuple[int, ...]:
    """A tile shape, which must be a compile-time tuple of positive ints."""
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, tuple | list) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in shape
    ):
        raise SemanticError(f"{what} must be a compile-time constant tuple of ints, {_why(shape)}")
    if any(d <= 0 for d in shape):
        raise SemanticError(f"{what} dims must be positive, got {list(shape)}")
    return tuple(shape)


def _why(shape: object) -> str:
    """What is not constant in a shape, by the names the user wrote (`BM` for a parameter)."""
    if not isinstance(shape, tuple | list):
        return f"got {_describe(shape)}"
    runtime = [(i, d) for i, d in enumerate(shape) if isinstance(d, Scalar)]
    if not runtime:
        return f"got {_describe(shape)}"
    dims = ", ".join(d.ssa.name_hint or "?" if isinstance(d, Scalar) else repr(d) for d in shape)
    index, first = runtime[0]
    name = first.ssa.name_hint
    what = f"'{name}'" if name else f"dim {index}"
    return (
        f"got ({dims}): {what} is a run-time {first.dtype} value (a shape takes literals and "
        "tl.constexpr parameters)"
    )


def expand_dims(b: IRBuilder, value: Tile, axis: int) -> Tile:
    rank = len(value.shape)
    if not -rank - 1 <= axis <= rank:
        raise SemanticError(f"expand_dims axis {axis} is out of range for {value.describe()}")
    axis = axis % (rank + 1)
    op = b.emit(tile.ExpandDimsOp(value.ssa, axis))
    shape = list(value.shape)
    shape.insert(axis, 1)
    return Tile(op.result, value.dtype, tuple(shape))


def index(b: IRBuilder, value: object, items: Sequence[object]) -> Tile:
    """`x[:, None]`: each `:` keeps a dim, each `None` inserts a dim of size 1."""
    tile_value = _require_tile(value, "the indexed value")
    kept = sum(1 for item in items if item is not None)
    if kept != len(tile_value.shape):
        raise SemanticError(f"index of {tile_value.describe()} needs one ':' per dim, got {kept}")
    for position, item in enumerate(items):
        if item is None:
            tile_value = expand_dims(b, tile_value, position)
    return tile_value


def reshape(b: IRBuilder, value: object, shape: object) -> Tile:
    tile_value = _require_tile(value, "tl.reshape input")
    new_shape = constant_shape(shape, "tl.reshape shape")
    source_size = 1
    for d in tile_value.shape:
        source_size *= d
    target_size = 1
    for d in new_shape:
        target_size *= d
    if source_size != target_size:
        raise SemanticError(
            f"tl.reshape cannot reshape {tile_value.describe()} to {list(new_shape)}: "
            "the number of elements differs"
        )
    op = b.emit(tile.ReshapeOp(tile_value.ssa, new_shape))
    return Tile(op.result, tile_value.dtype, new_shape)


def permute(b: IRBuilder, value: object, dims: object) -> Tile:
    tile_value = _require_tile(value, "tl.permute input")
    order = tuple(dims) if isinstance(dims, tuple | list) else ()
    rank = len(tile_value.shape)
    if sorted(order) != list(range(rank)) or not all(type(d) is int for d in order):
        raise SemanticError(
            f"tl.permute dims {list(order)} must be a permutation of 0..{rank - 1} for "
            f"{tile_value.describe()}"
        )
    op = b.emit(tile.PermuteOp(tile_value.ssa, order))
    return Tile(op.result, tile_value.dtype, tuple(tile_value.shape[d] for d in order))


def join(b: IRBuilder, lhs: object, rhs: object) -> Tile:
    left, right = _require_tile(lhs, "tl.join a"), _require_tile(rhs, "tl.join b")
    if left.shape != right.shape or left.dtype != right.dtype:
        raise SemanticError(
            f"tl.join needs two tiles of one shape and type, got {left.describe()} and "
            f"{right.describe()}"
        )
    op = b.emit(tile.JoinOp(left.ssa, right.ssa))
    return Tile(op.result, left.dtype, (*left.shape, 2))


def split(b: IRBuilder, value: object) -> tuple[Tile, Tile]:
    tile_value = _require_tile(value, "tl.split input")
    if len(tile_value.shape) < 2 or tile_value.shape[-1] != 2:
        raise SemanticError(
            f"tl.split needs a tile whose last dim is 2, got {tile_value.describe()}"
        )
    op = b.emit(tile.SplitOp(tile_value.ssa))
    half = tile_value.shape[:-1]
    return Tile(op.lhs, tile_value.dtype, half), Tile(op.rhs, tile_value.dtype, half)


def trans(b: IRBuilder, value: object) -> Tile:
    tile_value = _require_tile(value, "tl.trans input")
    if len(tile_value.shape) != 2:
        raise SemanticError(f"tl.trans needs a 2-D tile, got {tile_value.describe()}")
    op = b.emit(tile.TransOp(tile_value.ssa))
    return Tile(op.result, tile_value.dtype, tile_value.shape[::-1])


def arange(b: IRBuilder, start: object, end: object) -> Tile:
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
        raise SemanticError(
            "tl.arange bounds must be compile-time constant ints (use tl.constexpr "
            f"parameters), got {_describe(start)} and {_describe(end)}"
        )
    if end <= start:  # type: ignore[operator]
        raise SemanticError(f"tl.arange needs start < end, got {start} and {end}")
    op = b.emit(tile.ArangeOp(start, end))  # type: ignore[arg-type]
    return Tile(op.result, tl.int32, (end - start,))  # type: ignore[operator]


def full(b: IRBuilder, shape: object, value: Operand, dtype: object) -> Tile:
    tile_shape = constant_shape(shape, "tile shape")
    if not isinstance(dtype, tl.dtype):
        raise SemanticError(f"dtype must be a tl element type such as tl.float32, got {dtype!r}")
    return splat(b, cast(b, value, dtype), tile_shape)  # type: ignore[arg-type]


# ----------------------------------------------------------------------- reductions and dot


def reduce(b: IRBuilder, kind: str, value: object, axis: object, keep_dims: object) -> Tile:
    """`tl.max`/`tl.min`/`tl.sum` along one axis; `min` is `-max(-x)`."""
    tile_value = _require_tile(value, f"tl.{kind} input")
    rank = len(tile_value.shape)
    if axis is None:
        raise SemanticError(f"tl.{kind} needs an axis (reducing to a scalar is not supported)")
    if not isinstance(axis, int) or not -rank <= axis < rank:
        raise SemanticError(f"tl.{kind} axis {axis!r} is out of range for {tile_value.describe()}")
    axis %= rank
    if rank == 1 and not keep_dims:
        raise SemanticError(
            f"tl.{kind} of a 1-D tile to a scalar is not supported; pass keep_dims=True"
        )
    if rank == 1:
        tile_value, axis = expand_dims(b, tile_value, 0), 1
    if tile_value.dtype.is_bool:
        tile_value = cast(b, tile_value, tl.int32)  # type: ignore[assignment]
    if kind == "min":
        return negate(b, reduce(b, "max", negate(b, tile_value), axis, keep_dims))  # type: ignore[return-value]
    reduce_kind = tile.ReduceKind.MAX if kind == "max" else tile.ReduceKind.SUM
    op = b.emit(tile.ReduceOp(reduce_kind, tile_value.ssa, axis))
    shape = tile_value.shape[:axis] + tile_value.shape[axis + 1 :]
    result = Tile(op.result, tile_value.dtype, shape)
    if keep_dims and rank > 1:
        result = expand_dims(b, result, axis)
    return result


def dot(b: IRBuilder, lhs: object, rhs: object, acc: object, out_dtype: object) -> Tile:
    """`lhs @ rhs + acc` with Triton's checks and messages."""
    a = _require_tile(lhs, "tl.dot first input")
    c = _require_tile(rhs, "tl.dot second input")
    if len(a.shape) != 2 or len(c.shape) != 2:
        raise SemanticError(f"tl.dot inputs must be 2-D tiles, got shapes {a.shape} and {c.shape}")
    if a.shape[1] != c.shape[0]:
        raise SemanticError(
            f"First input shape ({a.shape}) and second input shape {c.shape} are not "
            f"compatible for matmul (second index of first shape ({a.shape[1]}) must be "
            f"equal to first index of second shape ({c.shape[0]})"
        )
    if a.dtype != c.dtype:
        raise SemanticError(
            f"Both operands of tl.dot must have the same dtype, got {a.dtype} and {c.dtype}"
        )
    if not (a.dtype in (tl.float16, tl.bfloat16) or a.dtype.is_fp8):
        raise SemanticError(
            f"tl.dot inputs must be float16, bfloat16 or fp8, got {a.dtype} (convert with .to())"
        )
    out_shape = (a.shape[0], c.shape[1])
    if acc is None:
        if not isinstance(out_dtype, tl.dtype):
            raise SemanticError(f"tl.dot out_dtype must be a tl element type, got {out_dtype!r}")
        accumulator = full(b, out_shape, 0, out_dtype)
    else:
        accumulator = broadcast_to(b, acc, out_shape) if not isinstance(acc, Tile) else acc  # type: ignore[arg-type]
    if accumulator.shape != out_shape:
        raise SemanticError(
            f"tl.dot accumulator shape {accumulator.shape} must be {out_shape} for inputs "
            f"{a.shape} @ {c.shape}"
        )
    if accumulator.dtype != tl.float32 and not (
        accumulator.dtype == tl.float16 and a.dtype == tl.float16
    ):
        raise SemanticError(
            f"tl.dot accumulator must be float32 (or float16 for float16 inputs), got "
            f"{accumulator.dtype}"
        )
    op = b.emit(tile.DotOp(a.ssa, c.ssa, accumulator.ssa))
    return Tile(op.result, accumulator.dtype, out_shape)


# ------------------------------------------------------------------------------ grid, memory


def program_query(b: IRBuilder, name: str, axis: object) -> Scalar:
    if axis not in (0, 1, 2) or isinstance(axis, bool):
        raise SemanticError(f"tl.{name} axis must be a constant 0, 1 or 2, got {axis!r}")
    op_class = tile.ProgramIdOp if name == "program_id" else tile.NumProgramsOp
    return Scalar(b.emit(op_class(axis)).result, tl.int32)  # type: ignore[arg-type]


def int32_scalar(b: IRBuilder, value: object, what: str) -> Scalar:
    """An i32 scalar from a Python int or an integer scalar."""
    if isinstance(value, int) and not isinstance(value, bool):
        return b.constant(value, tl.int32)
    if isinstance(value, Scalar) and value.dtype.is_int:
        return cast(b, value, tl.int32)  # type: ignore[return-value]
    raise SemanticError(f"{what} must be an integer scalar, got {_describe(value)}")


def _offsets(b: IRBuilder, desc: Descriptor, offsets: object, method: str) -> list[SSAValue]:
    if not isinstance(offsets, tuple | list):
        raise SemanticError(
            f"{method} offsets must be a list such as [o0, o1], got {_describe(offsets)}"
        )
    if len(offsets) != len(desc.block_shape):
        raise SemanticError(
            f"{method} needs {len(desc.block_shape)} offsets for a rank-"
            f"{len(desc.block_shape)} descriptor, got {len(offsets)}"
        )
    return [int32_scalar(b, o, f"{method} offset").ssa for o in offsets]


def load(b: IRBuilder, desc: Descriptor, offsets: object) -> Tile:
    op = b.emit(tile.LoadOp(desc.ssa, _offsets(b, desc, offsets, "desc.load")))
    return Tile(op.result, desc.dtype, desc.block_shape)


def store(b: IRBuilder, desc: Descriptor, offsets: object, value: object) -> None:
    tile_value = _require_tile(value, "the stored value")
    if tile_value.dtype != desc.dtype or tile_value.shape != desc.block_shape:
        hint = f"; convert with .to({desc.dtype})" if tile_value.dtype != desc.dtype else ""
        raise SemanticError(
            f"desc.store of {tile_value.describe()} into a descriptor of {desc.dtype}"
            f"{list(desc.block_shape)} blocks{hint}"
        )
    b.emit(tile.StoreOp(desc.ssa, _offsets(b, desc, offsets, "desc.store"), tile_value.ssa))
