"""Register fragments of one warpgroup, as the nvgpu interpreter holds them, and the
fragment ops that only touch registers.

A fragment value is a numpy array `[128 threads, values]`: row t holds the registers of thread
t of the warpgroup, in value order. Which tile element each value is comes only from the
fragment layout objects (`FRAGMENT_LAYOUTS`, the one place this module imports them from), so
a layout formula the lowering gets wrong shows as a wrong result. `to_tile` / `from_tile`
convert through a layout's `coords`; every fragment op below works on the per-thread arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from xdsl.ir import Attribute, Operation

from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import FragmentLayout, FragmentType
from tawa_xdsl.dialects.nvgpu import layout as fragment_layouts
from tawa_xdsl.dialects.tile import ComparePredicate, ReduceKind
from tawa_xdsl.interp.dtypes import convert, numpy_dtype
from tawa_xdsl.interp.engine import Evaluator, Handler
from tawa_xdsl.interp.mbarrier import MBarrierError

WARPGROUP_THREADS = fragment_layouts.WARPGROUP_THREADS

FRAGMENT_LAYOUTS: dict[FragmentLayout, Any] = {
    FragmentLayout.WGMMA_ACC: fragment_layouts.WGMMA_ACC,
    FragmentLayout.WGMMA_ROW: fragment_layouts.WGMMA_ROW,
    FragmentLayout.WGMMA_OPERAND_A: fragment_layouts.WGMMA_OPERAND_A,
    FragmentLayout.WGMMA_OPERAND_A8: fragment_layouts.WGMMA_OPERAND_A8,
    FragmentLayout.WGMMA_COL: fragment_layouts.WGMMA_COL,
}


def fragment_type(type_: Attribute) -> FragmentType:
    assert isinstance(type_, FragmentType)
    return type_


@cache
def coordinates(kind: FragmentLayout, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """One index array `[128, values]` per tile dim: where value v of thread t sits."""
    layout = FRAGMENT_LAYOUTS[kind]
    count = layout.values_per_thread(shape)
    coords = np.empty((len(shape), WARPGROUP_THREADS, count), np.int64)
    for thread in range(WARPGROUP_THREADS):
        for value in range(count):
            coords[:, thread, value] = layout.coords(shape, thread, value)
    for dim, extent in enumerate(shape):
        if coords[dim].min(initial=0) < 0 or coords[dim].max(initial=0) >= extent:
            raise ValueError(f"the {kind} layout maps a value outside the {shape} tile")
    return tuple(coords)


def coords_of(type_: Attribute) -> tuple[np.ndarray, ...]:
    frag = fragment_type(type_)
    return coordinates(frag.kind, frag.get_shape())


def dtype_of(type_: Attribute) -> np.dtype:
    return numpy_dtype(fragment_type(type_).element_type)


def from_tile(type_: Attribute, tile: np.ndarray) -> np.ndarray:
    """Each thread's registers of `tile` in the layout of `type_`."""
    return np.asarray(tile)[coords_of(type_)].astype(dtype_of(type_))


def to_tile(type_: Attribute, values: np.ndarray) -> np.ndarray:
    """The tile a fragment holds; elements no thread holds stay NaN, and elements held by
    several threads (a row vector's quad) must agree."""
    frag = fragment_type(type_)
    tile = np.full(frag.get_shape(), np.nan, values.dtype)
    coords = coords_of(type_)
    tile[coords] = values
    if not np.array_equal(tile[coords], values, equal_nan=True):
        raise ValueError(f"the threads holding copies of one element of {frag} disagree")
    return tile


@dataclass(eq=False)
class PendingResult:
    """The result of a `wgmma_mma_async` not yet retired by `wgmma_wait_group`; `value` is
    set when its group retires (reading it before is an error)."""

    issued_by: Any  # the op, for messages
    value: np.ndarray | None = None


def rows_of(kind: FragmentLayout, shape: tuple[int, ...]) -> np.ndarray:
    """The row coordinate of each value `[128, values]`."""
    return coordinates(kind, shape)[0]


def row_match(source: Attribute, target: Attribute) -> np.ndarray:
    """`[128, target values, source values]`: which of its own source values a thread
    combines into each target value -- those in the same tile row (row vector <-> acc)."""
    src, dst = fragment_type(source), fragment_type(target)
    src_rows = rows_of(src.kind, src.get_shape())
    dst_rows = rows_of(dst.kind, dst.get_shape())
    return dst_rows[:, :, None] == src_rows[:, None, :]


class NvgpuError(MBarrierError):
    """A hardware-protocol violation observed while running the nvgpu level."""


def error(op: Operation, message: str) -> NvgpuError:
    return NvgpuError(f"{op_location(op)}: '{op.name}': {message}")


def fragment_value(op: Operation, value: Any) -> np.ndarray:
    """The registers of a fragment operand; an unretired wgmma result is an error."""
    if isinstance(value, PendingResult):
        if value.value is None:
            raise error(
                op,
                f"reads the result of the wgmma at {op_location(value.issued_by)} before a "
                "wgmma_wait_group retired it",
            )
        return value.value
    return value


# ------------------------------------------------------------------------------ handlers


def _values(op: Operation, operands: list[Any]) -> list[np.ndarray]:
    return [fragment_value(op, v) for v in operands]


def _splat(ev: Evaluator, op: nvgpu.FragmentSplatOp, operands: list[Any]) -> tuple[np.ndarray]:
    count = coords_of(op.result.type)[0].shape[1]
    return (np.full((WARPGROUP_THREADS, count), operands[0], dtype_of(op.result.type)),)


def _undef(ev: Evaluator, op: nvgpu.FragmentUndefOp, operands: list[Any]) -> tuple[np.ndarray]:
    count = coords_of(op.result.type)[0].shape[1]
    return (np.full((WARPGROUP_THREADS, count), np.nan, dtype_of(op.result.type)),)


# PTX max.f32 / min.f32 return the other operand when one is NaN.
BINARY: dict[nvgpu.BinaryKind, Callable[[Any, Any], Any]] = {
    nvgpu.BinaryKind.ADD: np.add,
    nvgpu.BinaryKind.SUB: np.subtract,
    nvgpu.BinaryKind.MUL: np.multiply,
    nvgpu.BinaryKind.DIV: np.divide,
    nvgpu.BinaryKind.MAX: np.fmax,
    nvgpu.BinaryKind.MIN: np.fmin,
}


def _binary(ev: Evaluator, op: nvgpu.FragmentBinaryOp, operands: list[Any]) -> tuple:
    """In f32, rounded to the fragment's type (the printer widens 16-bit values)."""
    lhs, rhs = (v.astype(np.float32) for v in _values(op, operands))
    with np.errstate(all="ignore"):
        return (BINARY[op.kind.data](lhs, rhs).astype(dtype_of(op.result.type)),)


def _flush(x: np.ndarray) -> np.ndarray:
    """.ftz: subnormal f32 results and inputs are zero."""
    return np.where(np.abs(x) < np.finfo(np.float32).tiny, np.float32(0), x)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf as the printer computes it (Abramowitz and Stegun 7.1.26, |error| < 1.5e-7)."""
    ax = np.abs(x)
    t = np.float32(1) / (np.float32(1) + np.float32(0.3275911) * ax)
    poly = np.float32(0)
    for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly = poly * t + np.float32(a)
    return np.copysign(np.float32(1) - poly * t * _flush(np.exp(-ax * ax)), x)


def _f32(function: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """`function` computed in f32 (16-bit fragments are widened, as the printer does)."""
    return lambda x: function(x.astype(np.float32))


UNARY: dict[nvgpu.UnaryKind, Callable[[np.ndarray], np.ndarray]] = {
    nvgpu.UnaryKind.EXP2: _f32(lambda x: _flush(np.exp2(x))),
    nvgpu.UnaryKind.LOG2: _f32(lambda x: np.log2(_flush(x))),
    nvgpu.UnaryKind.EXP: _f32(lambda x: _flush(np.exp(x))),
    nvgpu.UnaryKind.LOG: _f32(lambda x: np.log(_flush(x))),
    nvgpu.UnaryKind.SQRT: _f32(np.sqrt),
    nvgpu.UnaryKind.RSQRT: _f32(lambda x: 1 / np.sqrt(_flush(x))),
    nvgpu.UnaryKind.TANH: _f32(np.tanh),
    nvgpu.UnaryKind.ERF: _f32(_erf),
    nvgpu.UnaryKind.NEG: np.negative,
    nvgpu.UnaryKind.ABS: np.abs,
    nvgpu.UnaryKind.RCP: _f32(lambda x: np.float32(1) / x),
}


def exp2_polynomial(x: np.ndarray) -> np.ndarray:
    """2^x as the printer computes it on the FMA units (`nvgpu.EXP2_POLY`): the clamp keeps
    NaN, 2^floor(t) is built from its exponent bits, each fma rounds once."""
    low, high = (np.float32(bound) for bound in nvgpu.EXP2_CLAMP)
    t = np.minimum(np.maximum(x.astype(np.float32), low), high)
    whole = np.floor(t)
    frac = (t - whole).astype(np.float64)
    c0, c1, c2, c3 = (np.float64(np.float32(c)) for c in nvgpu.EXP2_POLY)
    q = np.float32(frac * c3 + c2)  # f32 operands: the f64 product is exact, one rounding
    q = np.float32(q.astype(np.float64) * frac + c1)
    q = np.float32(q.astype(np.float64) * frac + c0)
    exponent = np.where(np.isnan(whole), 0, whole).astype(np.int32) + 127
    scale = (exponent.astype(np.uint32) << 23).view(np.float32)
    return _flush(q * scale)


def _unary(ev: Evaluator, op: nvgpu.FragmentUnaryOp, operands: list[Any]) -> tuple:
    (source,) = _values(op, operands)
    with np.errstate(all="ignore"):
        result = UNARY[op.kind.data](source)
        share = op.emulated_share()
        if share:
            values = np.arange(source.shape[-1]) % nvgpu.EXP2_EMULATION_PERIOD < share
            result = np.where(values, exp2_polynomial(source), result)
        return (result.astype(dtype_of(op.result.type)),)


def _convert(ev: Evaluator, op: nvgpu.FragmentConvertOp, operands: list[Any]) -> tuple:
    """Register by register: an acc -> operand_a conversion keeps every value in place, so
    the A layout must agree with the accumulator's for the result to be right. Into
    operand_a8 the values move: each goes where the fp8 layout's `coords` put its element
    (from the source column `columns` names, where given)."""
    (source,) = _values(op, operands)
    if fragment_type(op.result.type).kind == FragmentLayout.WGMMA_OPERAND_A8:
        tile = to_tile(op.source.type, source)
        columns = op.column_map()
        if columns is not None:
            tile = tile[:, columns]
        source = tile[coords_of(op.result.type)]  # still f32
    with np.errstate(all="ignore"):
        return (convert(source, dtype_of(op.result.type)),)


def _row_reduce(ev: Evaluator, op: nvgpu.FragmentRowReduceOp, operands: list[Any]) -> tuple:
    (source,) = _values(op, operands)
    match = row_match(op.source.type, op.result.type)  # [128, rows held, values held]
    wide = source.astype(np.float32)[:, None, :]
    if op.kind.data == ReduceKind.MAX:
        result = np.where(match, wide, -np.inf).max(axis=-1)
    else:
        result = np.where(match, wide, 0).sum(axis=-1, dtype=np.float32)
    return (result.astype(dtype_of(op.result.type)),)


def _shuffle_xor(ev: Evaluator, op: nvgpu.ShuffleXorOp, operands: list[Any]) -> tuple:
    (source,) = _values(op, operands)
    partner = np.arange(WARPGROUP_THREADS) ^ op.mask.value.data
    return (source[partner],)


def _broadcast_rows(ev: Evaluator, op: nvgpu.FragmentBroadcastRowsOp, operands: list[Any]):
    (source,) = _values(op, operands)
    match = row_match(op.source.type, op.result.type)  # [128, acc values, row values]
    if not match.any(axis=-1).all():
        raise error(op, "a thread holds an accumulator value of a row it has no row value for")
    return (np.take_along_axis(source, match.argmax(axis=-1), axis=1),)


def _mask(ev: Evaluator, op: nvgpu.FragmentMaskOp, operands: list[Any]) -> tuple:
    source = fragment_value(op, operands[0])
    fill, bounds = operands[1], operands[2:]
    rows, cols = coords_of(op.source.type)
    keep = np.ones(source.shape, bool)
    for (row_k, col_k, _), bound in zip(op.conditions(), bounds, strict=True):
        limit = np.asarray(bound, np.int64).reshape(-1, 1) if np.ndim(bound) else int(bound)
        keep &= row_k * rows + col_k * cols < limit
    return (np.where(keep, source, fill).astype(source.dtype),)


COMPARE: dict[ComparePredicate, Callable[[Any, Any], Any]] = {
    ComparePredicate.EQ: np.equal,
    ComparePredicate.NE: np.not_equal,
    ComparePredicate.LT: np.less,
    ComparePredicate.LE: np.less_equal,
    ComparePredicate.GT: np.greater,
    ComparePredicate.GE: np.greater_equal,
}


def _select(ev: Evaluator, op: nvgpu.FragmentSelectOp, operands: list[Any]) -> tuple:
    lhs, rhs, on_true, on_false = _values(op, operands)
    with np.errstate(invalid="ignore"):
        return (np.where(COMPARE[op.predicate.data](lhs, rhs), on_true, on_false),)


FRAGMENT_HANDLERS: dict[type[Operation], Handler] = {
    nvgpu.FragmentSplatOp: _splat,
    nvgpu.FragmentUndefOp: _undef,
    nvgpu.FragmentBinaryOp: _binary,
    nvgpu.FragmentUnaryOp: _unary,
    nvgpu.FragmentConvertOp: _convert,
    nvgpu.FragmentRowReduceOp: _row_reduce,
    nvgpu.ShuffleXorOp: _shuffle_xor,
    nvgpu.FragmentBroadcastRowsOp: _broadcast_rows,
    nvgpu.FragmentMaskOp: _mask,
    nvgpu.FragmentSelectOp: _select,
}
"""Handlers of the fragment ops that read and write registers only."""
