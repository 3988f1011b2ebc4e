"""Host-side tensor descriptors, as Triton's `triton.tools.tensor_descriptor.TensorDescriptor`.

A descriptor is a global tensor (`base`, a numpy array) with the block shape a kernel reads
and writes it in. It becomes a `!tile.desc<block x dtype>` kernel parameter; on the GPU it is
a TMA tensor map, in the interpreter the loads read zeros and the stores are clipped outside
`shape`, as TMA does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_DTYPES = ("float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2")


@dataclass(frozen=True)
class TensorDescriptor:
    """A global tensor accessed in blocks of `block_shape` (strides in elements)."""

    base: np.ndarray
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: tuple[int, ...]

    @staticmethod
    def from_tensor(tensor: np.ndarray, block_shape: Sequence[int]) -> TensorDescriptor:
        """Describe all of `tensor` (a numpy array, written in place by stores)."""
        if not isinstance(tensor, np.ndarray):
            raise TypeError(
                f"TensorDescriptor.from_tensor needs a numpy array, got {type(tensor).__name__}"
            )
        if tensor.dtype.name not in _DTYPES:
            raise TypeError(
                f"TensorDescriptor element type must be one of {', '.join(_DTYPES)}, "
                f"got {tensor.dtype.name}"
            )
        block = tuple(int(d) for d in block_shape)
        if len(block) != tensor.ndim:
            raise ValueError(
                f"block_shape {list(block)} must have one dim per tensor dim "
                f"(the tensor is {tensor.ndim}-D, shape {tensor.shape})"
            )
        if not 1 <= len(block) <= 5 or any(d <= 0 for d in block):
            raise ValueError(
                f"block_shape dims must be positive and 1 to 5 of them, got {list(block)}"
            )
        strides = tuple(s // tensor.itemsize for s in tensor.strides)
        if tensor.size == 0:  # numpy gives it zero strides; describe it as row-major
            strides = tuple(math.prod(tensor.shape[i + 1 :]) for i in range(tensor.ndim))
        if strides[-1] != 1:
            raise ValueError("the last dim of a described tensor must be contiguous (stride 1)")
        return TensorDescriptor(tensor, tuple(tensor.shape), strides, block)

    @property
    def dtype(self) -> np.dtype:
        return self.base.dtype
