"""How IR element types map to numpy dtypes, so that every level rounds as the hardware does."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
)
from xdsl.ir import Attribute


class InterpreterError(Exception):
    """A program the interpreter cannot run, with a message naming the place."""


def numpy_dtype(element_type: Attribute) -> np.dtype:
    """The numpy dtype holding values of an IR scalar type."""
    match element_type:
        case Float16Type():
            return np.dtype(np.float16)
        case BFloat16Type():
            return np.dtype(ml_dtypes.bfloat16)
        case Float8E4M3FNType():
            return np.dtype(ml_dtypes.float8_e4m3fn)
        case Float8E5M2Type():
            return np.dtype(ml_dtypes.float8_e5m2)
        case Float32Type():
            return np.dtype(np.float32)
        case Float64Type():
            return np.dtype(np.float64)
        case IntegerType() if element_type.width.data == 1:
            return np.dtype(np.bool_)
        case IntegerType() if element_type.width.data in (8, 16, 32, 64):
            return np.dtype(f"int{element_type.width.data}")
        case IndexType():
            return np.dtype(np.int64)
    raise InterpreterError(f"no numpy dtype for element type {element_type}")


def dtype_name(dtype: np.dtype) -> str:
    """A short name users know: float16, bfloat16, float8_e4m3fn, float32, int32."""
    return np.dtype(dtype).name


def convert(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Convert elementwise as the GPU's cvt does: float rounds to nearest even, narrow float
    formats saturate to their largest finite value (cvt.rn.satfinite), float to int truncates
    toward zero and saturates to the integer range (NaN becomes 0, cvt.rzi)."""
    dtype = np.dtype(dtype)
    source = np.asarray(value)
    if dtype.kind in "iub" or source.dtype.kind in "iub":
        if dtype.kind == "b":
            return source != 0
        if dtype.kind in "iu" and source.dtype.kind not in "iub":
            return _float_to_int(source, dtype)
        return source.astype(dtype)
    if dtype in (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)):
        limit = float(ml_dtypes.finfo(dtype).max)
        wide = source.astype(np.float32)
        return np.where(np.isnan(wide), wide, np.clip(wide, -limit, limit)).astype(dtype)
    if source.dtype == dtype:
        return source
    with np.errstate(over="ignore"):  # past the largest finite f16 is inf, as cvt.rn.f16
        return source.astype(np.float32).astype(dtype)


def _float_to_int(source: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    wide = np.trunc(source.astype(np.float64))
    wide = np.where(np.isnan(wide), 0, np.clip(wide, info.min, info.max))
    return wide.astype(dtype)
