"""Where a tensor argument lives and how it is laid out, whatever library made it.

A kernel argument may be a numpy array, a torch tensor (CPU or CUDA), a `DeviceArray`, any
object with `__cuda_array_interface__`, or any DLPack producer (`__dlpack__`). This module is
the bottom of the runtime (it imports none of it but dtypes and errors) and recognises them
without importing torch:

* `is_torch_tensor(x)`, `read_dlpack(x)`: what an argument is, and a DLPack view of it.
* `host_array(x)`: a numpy array sharing `x`'s memory when `x` is in host memory (numpy, a
  torch CPU tensor, a CPU DLPack tensor), else None. The interpreter reads and writes it, so
  stores land in the caller's tensor.

`memory.layout(x)` and `memory.is_device_tensor(x)` build on these with the runtime's own
`DeviceArray`.

DLPack capsules are read with ctypes (the `DLManagedTensor` layout of DLPack 0.x/1.x, which
`__dlpack__()` returns without a `max_version`); the capsule is kept alive as the owner of
the view, and its deleter runs when the view is collected.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tawa_xdsl.runtime.dtypes import dtype_name, numpy_dtype
from tawa_xdsl.runtime.errors import LaunchError

# DLPack device types (dlpack.h): host memory and CUDA memory.
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
HOST_DEVICES = (DL_CPU, DL_CUDA_HOST)

# DLPack (type code, bits) -> canonical element type (codes of DLPack 1.1 for the float8s).
DL_DTYPES: dict[tuple[int, int], str] = {
    (0, 8): "int8",
    (0, 16): "int16",
    (0, 32): "int32",
    (0, 64): "int64",
    (1, 8): "uint8",
    (1, 16): "uint16",
    (1, 32): "uint32",
    (1, 64): "uint64",
    (2, 16): "float16",
    (2, 32): "float32",
    (2, 64): "float64",
    (4, 16): "bfloat16",
    (6, 8): "bool",
    (10, 8): "float8_e4m3fn",
    (12, 8): "float8_e5m2",
}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


@dataclass(frozen=True)
class DLPackView:
    """What a DLPack capsule describes; `capsule` keeps the producer's memory alive."""

    pointer: int
    device_type: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    capsule: Any

    @property
    def on_host(self) -> bool:
        return self.device_type in HOST_DEVICES


def read_dlpack(obj: Any, what: str = "argument") -> DLPackView:
    """The view of `obj.__dlpack__()` (LaunchError for a type or layout we cannot use)."""
    capsule = obj.__dlpack__()
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    address = get_pointer(capsule, b"dltensor")
    tensor = DLTensor.from_address(address)  # DLManagedTensor begins with its DLTensor
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    if lanes != 1 or (code, bits) not in DL_DTYPES:
        raise LaunchError(f"{what}: unsupported DLPack element type (code {code}, {bits} bits)")
    shape = tuple(int(tensor.shape[i]) for i in range(tensor.ndim))
    if tensor.strides:
        strides = tuple(int(tensor.strides[i]) for i in range(tensor.ndim))
    else:
        strides = contiguous_strides(shape)
    pointer = int(tensor.data or 0) + int(tensor.byte_offset)
    return DLPackView(
        pointer, int(tensor.device.device_type), DL_DTYPES[code, bits], shape, strides, capsule
    )


def is_torch_tensor(obj: Any) -> bool:
    """A torch.Tensor (a subclass, or an object of torch's that acts as one), recognised
    without importing torch."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return True
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def torch_host_array(tensor: Any) -> np.ndarray:
    """A numpy array sharing a torch CPU tensor's memory (bfloat16 and float8 through a
    same-width integer view, which torch's `.numpy()` does not offer for those types)."""
    import torch

    t = tensor.detach()
    name = dtype_name(t.dtype)
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        carrier = torch.int16 if name == "bfloat16" else torch.uint8
        return t.view(carrier).numpy().view(numpy_dtype(name))
    return t.numpy()


def host_array(obj: Any) -> np.ndarray | None:
    """A numpy array over `obj`'s memory when it is host memory, else None."""
    if isinstance(obj, np.ndarray):
        return obj
    if is_torch_tensor(obj):
        return None if obj.is_cuda or obj.device.type != "cpu" else torch_host_array(obj)
    if hasattr(obj, "__cuda_array_interface__") or not hasattr(obj, "__dlpack__"):
        return None
    view = read_dlpack(obj)
    if not view.on_host:
        return None
    return strided_host_array(view)


def strided_host_array(view: DLPackView) -> np.ndarray:
    """A numpy array over host memory described by a DLPack view (shares the memory; the
    ctypes buffer under it holds the capsule, so the producer's memory outlives the array)."""
    dtype = numpy_dtype(view.dtype)
    extent = 1 + sum((n - 1) * s for n, s in zip(view.shape, view.strides, strict=True))
    count = extent if all(view.shape) else 0
    buffer = (ctypes.c_char * (count * dtype.itemsize)).from_address(view.pointer)
    buffer.capsule = view.capsule  # type: ignore[attr-defined]
    flat = np.frombuffer(buffer, dtype=dtype, count=count)
    return np.lib.stride_tricks.as_strided(
        flat,
        shape=view.shape,
        strides=tuple(s * dtype.itemsize for s in view.strides),
        writeable=True,
    )


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides in elements."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(strides))
