"""`arith` and `math` on scalars and tiles, as numpy tables.

Every result is computed in its own IR type: f16 and bf16 operations round each result, i32
arithmetic wraps, `divsi`/`remsi` truncate toward zero as C and PTX do.
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Operation

from tawa_xdsl.interp.dtypes import InterpreterError, convert, numpy_dtype
from tawa_xdsl.interp.engine import Evaluator, Handler, location


def _element_type(type_: Any) -> Any:
    return getattr(type_, "element_type", type_)


def _in_result_type(op: Operation, value: Any) -> Any:
    """Cast a numpy result to the op's result type (scalar or tile)."""
    dtype = numpy_dtype(_element_type(op.results[0].type))
    array = np.asarray(value).astype(dtype, copy=False)
    return array if array.ndim else dtype.type(array)


def _divsi(a: Any, b: Any) -> Any:
    if np.any(np.asarray(b) == 0):
        raise ZeroDivisionError("integer division by zero")
    quotient = np.abs(np.asarray(a, np.int64)) // np.abs(np.asarray(b, np.int64))
    return np.where((np.asarray(a) < 0) != (np.asarray(b) < 0), -quotient, quotient)


def _remsi(a: Any, b: Any) -> Any:
    return np.asarray(a, np.int64) - _divsi(a, b) * np.asarray(b, np.int64)


def _ceildivsi(a: Any, b: Any) -> Any:
    """ceil(a / b): the floor division of -a, negated (truncating -a would round 7/2 to 3)."""
    if np.any(np.asarray(b) == 0):
        raise ZeroDivisionError("integer division by zero")
    return -np.floor_divide(-np.asarray(a, np.int64), np.asarray(b, np.int64))


def _at_least_f32(x: Any) -> Any:
    """Compute narrow floats in f32 so that a two-step formula rounds only once at the end."""
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype.itemsize < 4 else x


def _wrapping(function: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(a: Any, b: Any) -> Any:
        return function(np.asarray(a, np.int64), np.asarray(b, np.int64))

    return apply


BINARY: dict[type[Operation], Callable[[Any, Any], Any]] = {
    arith.AddfOp: np.add,
    arith.SubfOp: np.subtract,
    arith.MulfOp: np.multiply,
    arith.DivfOp: np.divide,
    arith.MaximumfOp: np.maximum,
    arith.MinimumfOp: np.minimum,
    arith.MaxnumfOp: np.fmax,
    arith.MinnumfOp: np.fmin,
    arith.AddiOp: _wrapping(np.add),
    arith.SubiOp: _wrapping(np.subtract),
    arith.MuliOp: _wrapping(np.multiply),
    arith.DivSIOp: _divsi,
    arith.RemSIOp: _remsi,
    arith.CeilDivSIOp: _ceildivsi,
    arith.MaxSIOp: np.maximum,
    arith.MinSIOp: np.minimum,
    arith.AndIOp: np.bitwise_and,
    arith.OrIOp: np.bitwise_or,
    arith.XOrIOp: np.bitwise_xor,
    arith.ShLIOp: _wrapping(np.left_shift),
    arith.ShRSIOp: np.right_shift,
}

UNARY: dict[type[Operation], Callable[[Any], Any]] = {
    arith.NegfOp: np.negative,
    math.Exp2Op: np.exp2,
    math.ExpOp: np.exp,
    math.Log2Op: np.log2,
    math.LogOp: np.log,
    math.SqrtOp: np.sqrt,
    math.RsqrtOp: lambda x: 1 / np.sqrt(_at_least_f32(x)),
    math.AbsFOp: np.abs,
    math.TanhOp: np.tanh,
    math.ErfOp: lambda x: _ERF(_at_least_f32(x)),
}
_ERF = np.vectorize(pymath.erf, otypes=[np.float64])


def _fma(ev: Evaluator, op: math.FmaOp, operands: list[Any]) -> tuple[Any]:
    """a * b + c, rounded once to the result type."""
    a, b, c = (np.asarray(v, np.float64) for v in operands)
    with np.errstate(all="ignore"):
        return (_in_result_type(op, a * b + c),)


CASTS = (
    arith.ExtFOp,
    arith.TruncFOp,
    arith.SIToFPOp,
    arith.FPToSIOp,
    arith.ExtSIOp,
    arith.TruncIOp,
    arith.IndexCastOp,
)

_INT_PREDICATES: dict[int, Callable[[Any, Any], Any]] = {
    0: np.equal,
    1: np.not_equal,
    2: np.less,
    3: np.less_equal,
    4: np.greater,
    5: np.greater_equal,
}

# arith.cmpf predicates by number: ordered ones are false on NaN, unordered ones true.
_FLOAT_PREDICATES: dict[int, Callable[[Any, Any], Any]] = {
    0: lambda a, b: np.zeros_like(a, dtype=bool),
    1: np.equal,
    2: np.greater,
    3: np.greater_equal,
    4: np.less,
    5: np.less_equal,
    6: lambda a, b: (a != b) & ~np.isnan(a) & ~np.isnan(b),
    7: lambda a, b: ~np.isnan(a) & ~np.isnan(b),
    8: lambda a, b: (a == b) | np.isnan(a) | np.isnan(b),
    9: lambda a, b: ~(a <= b),
    10: lambda a, b: ~(a < b),
    11: lambda a, b: ~(a >= b),
    12: lambda a, b: ~(a > b),
    13: np.not_equal,
    14: lambda a, b: np.isnan(a) | np.isnan(b),
    15: lambda a, b: np.ones_like(a, dtype=bool),
}


def _constant(ev: Evaluator, op: arith.ConstantOp, operands: list[Any]) -> tuple[Any]:
    value = op.value
    if not isinstance(value, IntegerAttr | FloatAttr):
        raise InterpreterError(f"{location(op)}: only scalar constants are supported, got {value}")
    return (_in_result_type(op, value.value.data),)


def _binary(function: Callable[[Any, Any], Any]) -> Handler:
    def run(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[Any]:
        with np.errstate(all="ignore"):
            return (_in_result_type(op, function(*operands)),)

    return run


def _unary(function: Callable[[Any], Any]) -> Handler:
    def run(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[Any]:
        with np.errstate(all="ignore"):
            return (_in_result_type(op, function(operands[0])),)

    return run


def _cast(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[Any]:
    dtype = numpy_dtype(_element_type(op.results[0].type))
    with np.errstate(all="ignore"):
        return (_in_result_type(op, convert(np.asarray(operands[0]), dtype)),)


def _cmpi(ev: Evaluator, op: arith.CmpiOp, operands: list[Any]) -> tuple[Any]:
    predicate = op.predicate.value.data
    if predicate not in _INT_PREDICATES:
        raise InterpreterError(f"{location(op)}: unsigned comparisons are not supported")
    return (np.bool_(_INT_PREDICATES[predicate](*operands)),)


def _cmpf(ev: Evaluator, op: arith.CmpfOp, operands: list[Any]) -> tuple[Any]:
    with np.errstate(all="ignore"):
        return (np.bool_(_FLOAT_PREDICATES[op.predicate.value.data](*operands)),)


def _select(ev: Evaluator, op: arith.SelectOp, operands: list[Any]) -> tuple[Any]:
    condition, true_value, false_value = operands
    return (true_value if bool(condition) else false_value,)


ARITH_HANDLERS: dict[type[Operation], Handler] = {
    arith.ConstantOp: _constant,
    arith.CmpiOp: _cmpi,
    arith.CmpfOp: _cmpf,
    arith.SelectOp: _select,
    math.FmaOp: _fma,
    **{op: _binary(function) for op, function in BINARY.items()},
    **{op: _unary(function) for op, function in UNARY.items()},
    **{op: _cast for op in CASTS},
}
