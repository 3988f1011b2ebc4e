"""Kernel argument types: what a run-time parameter of a compiled kernel is.

A kernel is specialized on the types of its run-time arguments (and on the values of its
constexprs). `arg_type_of` derives the type from a launch argument (a Python or numpy
number, or a `TensorDescriptor`); `parse_arg_type` reads the text form the `tawa compile`
CLI takes: `i32`, `f32`, `f16`, `bf16`, `i1`, or `desc<128x64xf16>` (also spelled
`!tile.desc<128x64xf16>`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.ir import Attribute

import tawa_xdsl.language as tl
from tawa_xdsl.dialects.tile import DescType
from tawa_xdsl.frontend.errors import SemanticError
from tawa_xdsl.frontend.values import ir_type


@dataclass(frozen=True)
class ScalarArg:
    """A run-time scalar parameter."""

    dtype: tl.dtype

    def ir_type(self) -> Attribute:
        return ir_type(self.dtype)

    def __str__(self) -> str:
        return _SHORT_NAMES[self.dtype.name]


@dataclass(frozen=True)
class DescriptorArg:
    """A tensor descriptor parameter: element type and block shape (the rank follows)."""

    dtype: tl.dtype
    block_shape: tuple[int, ...]

    def ir_type(self) -> Attribute:
        return DescType(self.block_shape, ir_type(self.dtype))

    def __str__(self) -> str:
        dims = "x".join(str(d) for d in self.block_shape)
        return f"desc<{dims}x{_SHORT_NAMES[self.dtype.name]}>"


ArgType = ScalarArg | DescriptorArg

_SHORT_NAMES = {
    "int1": "i1",
    "int32": "i32",
    "fp16": "f16",
    "bf16": "bf16",
    "fp32": "f32",
    "fp8e4nv": "f8E4M3FN",
    "fp8e5": "f8E5M2",
}
_BY_TEXT = {
    **{short: tl.DTYPES[name] for name, short in _SHORT_NAMES.items()},
    **tl.DTYPES,  # Triton's names: fp16, fp32, int32, ...
    "float16": tl.float16,
    "bfloat16": tl.bfloat16,
    "float32": tl.float32,
    "float8e4nv": tl.float8e4nv,
    "float8e5": tl.float8e5,
}

_NUMPY_NAMES = {
    "float16": tl.float16,
    "bfloat16": tl.bfloat16,
    "float32": tl.float32,
    "float8_e4m3fn": tl.float8e4nv,
    "float8_e5m2": tl.float8e5,
}

_DESC = re.compile(r"^(?:!tile\.)?desc<((?:\d+x)+)(\w+)>$")


def parse_dtype(text: str) -> tl.dtype:
    name = text.strip().removeprefix("tl.")
    if name not in _BY_TEXT:
        raise SemanticError(f"unknown element type '{text}'")
    return _BY_TEXT[name]


def parse_arg_type(text: str) -> ArgType:
    """`i32` -> ScalarArg(int32); `desc<128x64xf16>` -> DescriptorArg(fp16, (128, 64))."""
    text = text.strip()
    match = _DESC.match(text)
    if match:
        dims = tuple(int(d) for d in match.group(1).rstrip("x").split("x"))
        return DescriptorArg(parse_dtype(match.group(2)), dims)
    return ScalarArg(parse_dtype(text))


def descriptor_dtype(array: Any) -> tl.dtype:
    """The element type of a numpy array or a descriptor (anything with a numpy `dtype`)."""
    name = np.dtype(array.dtype).name
    if name not in _NUMPY_NAMES:
        raise SemanticError(
            f"descriptors hold float16, bfloat16, float32 or fp8 arrays, got {name}"
        )
    return _NUMPY_NAMES[name]


def arg_type_of(value: object) -> ArgType:
    """The parameter type a launch argument gives the kernel (Triton's specialization)."""
    if isinstance(value, ScalarArg | DescriptorArg):
        return value
    if getattr(value, "ndim", 0) > 0 and not hasattr(value, "block_shape"):
        raise SemanticError(
            f"arrays ({type(value).__name__}) cannot be passed directly; wrap them with "
            "tawa_xdsl.TensorDescriptor.from_tensor(tensor, block_shape)"
        )
    if getattr(value, "base", None) is not None and hasattr(value, "block_shape"):
        block_shape = tuple(int(d) for d in value.block_shape)  # type: ignore[attr-defined]
        return DescriptorArg(descriptor_dtype(value), block_shape)
    if isinstance(value, bool | np.bool_):
        return ScalarArg(tl.int1)
    if isinstance(value, int | np.integer):
        if not -(2**31) <= int(value) < 2**31:
            raise SemanticError(f"integer argument {value} does not fit in int32")
        return ScalarArg(tl.int32)
    if isinstance(value, np.float16):
        return ScalarArg(tl.float16)
    if isinstance(value, float | np.floating):
        return ScalarArg(tl.float32)
    raise SemanticError(f"unsupported kernel argument of type {type(value).__name__}")
