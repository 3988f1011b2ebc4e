"""Host-side tensor descriptors, as Triton's `triton.tools.tensor_descriptor.TensorDescriptor`.

A descriptor is a global tensor (`base`) with the block shape a kernel reads and writes it in.
It becomes a `!tile.desc<block x dtype>` kernel parameter. `base` may be a numpy array, a torch
tensor, or any `__cuda_array_interface__` / DLPack object:

* on the GPU a device tensor is used in place (a TMA tensor map over its memory; stores write
  it, no copy); a numpy array is copied in and back out around the launch;
* in the interpreter a host tensor (numpy, torch CPU) is read and written in place; loads read
  zeros and stores are clipped outside `shape`, as TMA does.

`block_shape` may be reassigned before a launch (a Triton autotune pre-hook sets it to the
config's block sizes); the kernel is specialized on its value at launch time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tawa_xdsl.runtime.dtypes import numpy_dtype
from tawa_xdsl.runtime.memory import layout

ELEMENT_TYPES = ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2")


@dataclass(eq=False)
class TensorDescriptor:
    """A global tensor accessed in blocks of `block_shape` (strides in elements)."""

    base: Any
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: Sequence[int]
    element_type: str = ""

    def __post_init__(self) -> None:
        if not self.element_type:
            self.element_type = layout(self.base, "TensorDescriptor base")[0]

    @staticmethod
    def from_tensor(tensor: Any, block_shape: Sequence[int]) -> TensorDescriptor:
        """Describe all of `tensor` (numpy, torch, `__cuda_array_interface__` or DLPack; stores
        write it in place)."""
        try:
            element_type, shape, strides = layout(tensor, "TensorDescriptor.from_tensor")
        except TypeError as error:
            raise TypeError(str(error)) from None
        if element_type not in ELEMENT_TYPES:
            raise TypeError(
                f"TensorDescriptor element type must be one of {', '.join(ELEMENT_TYPES)}, "
                f"got {element_type}"
            )
        block = tuple(int(d) for d in block_shape)
        if len(block) != len(shape):
            raise ValueError(
                f"block_shape {list(block)} must have one dim per tensor dim "
                f"(the tensor is {len(shape)}-D, shape {tuple(shape)})"
            )
        if not 1 <= len(block) <= 5 or any(d <= 0 for d in block):
            raise ValueError(
                f"block_shape dims must be positive and 1 to 5 of them, got {list(block)}"
            )
        if math.prod(shape) == 0:  # numpy gives it zero strides; describe it as row-major
            strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
        if strides[-1] != 1:
            raise ValueError("the last dim of a described tensor must be contiguous (stride 1)")
        return TensorDescriptor(tensor, shape, strides, block, element_type)

    @property
    def dtype(self) -> np.dtype:
        """The element type as a numpy dtype (bfloat16 and float8 from ml_dtypes)."""
        return numpy_dtype(self.element_type)
