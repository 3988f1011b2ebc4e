"""Element types by one canonical name, whatever spelled them: numpy, torch, a string, a typestr.

`dtype_name(torch.bfloat16) == dtype_name(np.dtype(ml_dtypes.bfloat16)) == "bfloat16"`, so the
runtime compares element types without importing torch and reports them in words users know.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tawa_xdsl.runtime.errors import DTypeMismatchError

ITEMSIZE: dict[str, int] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int16": 2,
    "uint16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
}

ALIASES: dict[str, str] = {
    "bf16": "bfloat16",
    "f16": "float16",
    "half": "float16",
    "f32": "float32",
    "float": "float32",
    "f64": "float64",
    "double": "float64",
    "e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2",
    "i8": "int8",
    "i16": "int16",
    "i32": "int32",
    "i64": "int64",
    "int": "int64",
}


# Canonical names already worked out, by the dtype object or string asked about (a launch asks
# for every tensor argument's), at most NAMES_KEPT of them.
NAMES: dict[Any, str] = {}
NAMES_KEPT = 256


def dtype_name(dtype: Any) -> str:
    """The canonical name (`bfloat16`) of a numpy dtype, torch dtype, string or typestr."""
    try:
        return NAMES[dtype]
    except (KeyError, TypeError):  # not seen yet, or not hashable
        pass
    name = canonical_name(dtype)
    if len(NAMES) < NAMES_KEPT:
        try:
            NAMES[dtype] = name
        except TypeError:
            pass
    return name


def canonical_name(dtype: Any) -> str:
    """`dtype_name` worked out (DTypeMismatchError for a type the runtime does not know)."""
    text = str(dtype.name if isinstance(dtype, np.dtype) else dtype)
    text = text.removeprefix("torch.")
    text = ALIASES.get(text, text)
    if text in ITEMSIZE:
        return text
    try:
        name = np.dtype(text).name
    except TypeError:
        name = ""
    if name in ITEMSIZE:
        return name
    raise DTypeMismatchError(
        f"unsupported element type {dtype!r}; supported: {', '.join(sorted(ITEMSIZE))}"
    )


def itemsize(dtype: Any) -> int:
    """Bytes per element of `dtype`."""
    return ITEMSIZE[dtype_name(dtype)]


def numpy_dtype(dtype: Any) -> np.dtype:
    """The numpy dtype for `dtype`; bfloat16 and float8 come from ml_dtypes."""
    name = dtype_name(dtype)
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def expect_dtype(actual: Any, expected: Any, what: str) -> None:
    """Raise DTypeMismatchError naming `what` unless `actual` and `expected` are one type."""
    got, want = dtype_name(actual), dtype_name(expected)
    if got != want:
        raise DTypeMismatchError(f"{what}: expected element type {want}, got {got}")
