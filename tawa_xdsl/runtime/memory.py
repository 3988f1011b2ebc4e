"""Device memory: numpy arrays in and out, device tensors used in place.

* `to_device(np_array)` copies into a new `DeviceArray`; `to_host(x)` copies back to numpy.
* A torch CUDA tensor, any object with `__cuda_array_interface__`, or a `DeviceArray` is used
  without a copy: `describe(x)` reads its pointer, shape, strides and element type.
  torch tensors are read through their own methods (`data_ptr`, `stride`), because torch's
  `__cuda_array_interface__` refuses bfloat16. Any other DLPack producer on the GPU is read
  through its capsule (`tensors.read_dlpack`).
* `DeviceArray` exposes `__cuda_array_interface__`, so `torch.as_tensor(d, device="cuda")`
  wraps our memory without a copy too (for the types the protocol can spell; not bfloat16).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tawa_xdsl.runtime.driver import call, require_gpu
from tawa_xdsl.runtime.dtypes import dtype_name, expect_dtype, itemsize, numpy_dtype
from tawa_xdsl.runtime.errors import LaunchError
from tawa_xdsl.runtime.tensors import contiguous_strides, is_torch_tensor, read_dlpack


class DeviceBuffer:
    """`nbytes` of device memory from cuMemAlloc, freed by `free()` or when collected."""

    def __init__(self, nbytes: int):
        require_gpu()
        self.nbytes = int(nbytes)
        self.handle: Any = call("cuMemAlloc", max(self.nbytes, 1))
        self.pointer = int(self.handle)

    def free(self) -> None:
        """Return the memory to the driver now; later calls do nothing."""
        if self.handle is not None:
            handle, self.handle = self.handle, None
            call("cuMemFree", handle)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # noqa: BLE001 - the driver may be gone at interpreter exit
            pass


@dataclass(frozen=True)
class ArrayView:
    """Where a device array lives and how it is laid out; strides in elements, numpy order."""

    pointer: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    owner: Any = field(default=None, repr=False, compare=False)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * itemsize(self.dtype)

    @property
    def is_contiguous(self) -> bool:
        return self.strides == contiguous_strides(self.shape)


@dataclass
class DeviceArray:
    """A typed, shaped view of device memory; `owner` keeps that memory alive."""

    view: ArrayView

    @property
    def pointer(self) -> int:
        return self.view.pointer

    @property
    def shape(self) -> tuple[int, ...]:
        return self.view.shape

    @property
    def dtype(self) -> str:
        return self.view.dtype

    @property
    def nbytes(self) -> int:
        return self.view.nbytes

    def numpy(self) -> np.ndarray:
        """A host copy."""
        return to_host(self)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        size = itemsize(self.dtype)
        return {
            "shape": self.shape,
            "typestr": numpy_dtype(self.dtype).str,
            "data": (self.pointer, False),
            "strides": tuple(s * size for s in self.view.strides),
            "version": 3,
        }


def describe(obj: Any, what: str = "argument") -> ArrayView:
    """The device view of a DeviceArray, torch CUDA tensor or `__cuda_array_interface__` object."""
    if isinstance(obj, DeviceArray):
        return obj.view
    if is_torch_tensor(obj):
        if not obj.is_cuda:
            raise LaunchError(f"{what}: torch tensor is on {obj.device}; move it with .cuda()")
        return ArrayView(
            int(obj.data_ptr()), dtype_name(obj.dtype), tuple(obj.shape), tuple(obj.stride()), obj
        )
    interface = getattr(obj, "__cuda_array_interface__", None)
    if interface is not None:
        return view_from_interface(interface, obj, what)
    if isinstance(obj, np.ndarray):
        raise LaunchError(f"{what}: a numpy array is host memory; copy it with to_device() first")
    if hasattr(obj, "__dlpack__"):
        dl = read_dlpack(obj, what)
        if dl.on_host:
            raise LaunchError(f"{what}: a DLPack tensor in host memory; copy it to the GPU first")
        return ArrayView(dl.pointer, dl.dtype, dl.shape, dl.strides, (obj, dl.capsule))
    raise LaunchError(f"{what}: {type(obj).__name__} is not a device array")


def layout_key(tensor: Any) -> Hashable:
    """What a tensor map or a packed parameter over `tensor` depends on (address, element
    type, shape, strides), read without building an ArrayView for torch tensors and
    DeviceArrays (the launch caches' keys)."""
    if isinstance(tensor, DeviceArray):
        view = tensor.view
    elif is_torch_tensor(tensor):
        return tensor.data_ptr(), tensor.dtype, tensor.shape, tensor.stride()
    else:
        view = describe(tensor)
    return view.pointer, view.dtype, view.shape, view.strides


def device_pointer(obj: Any, what: str = "argument") -> int:
    """Just the device address of `obj` (the launch fast path); errors as `describe`."""
    if isinstance(obj, DeviceArray):
        return obj.view.pointer
    if is_torch_tensor(obj) and obj.is_cuda:
        return int(obj.data_ptr())
    interface = getattr(obj, "__cuda_array_interface__", None)
    if interface is not None:
        return int(interface["data"][0])
    return describe(obj, what).pointer


def view_from_interface(interface: dict[str, Any], owner: Any, what: str) -> ArrayView:
    """An ArrayView from a `__cuda_array_interface__` dict (byte strides, None = row-major)."""
    dtype = dtype_name(interface["typestr"])
    shape = tuple(int(d) for d in interface["shape"])
    size = itemsize(dtype)
    byte_strides = interface.get("strides")
    if byte_strides is None:
        strides = contiguous_strides(shape)
    else:
        if any(s % size for s in byte_strides):
            raise LaunchError(f"{what}: strides {byte_strides} are not whole elements")
        strides = tuple(int(s) // size for s in byte_strides)
    return ArrayView(int(interface["data"][0]), dtype, shape, strides, owner)


def empty(shape: Sequence[int], dtype: Any) -> DeviceArray:
    """An uninitialized row-major device array."""
    shape = tuple(int(d) for d in shape)
    name = dtype_name(dtype)
    buffer = DeviceBuffer(int(np.prod(shape, dtype=np.int64)) * itemsize(name))
    return DeviceArray(ArrayView(buffer.pointer, name, shape, contiguous_strides(shape), buffer))


def to_device(obj: Any, dtype: Any = None, what: str = "argument") -> DeviceArray:
    """A DeviceArray for `obj`: numpy is copied, device tensors are wrapped without a copy.

    With `dtype`, a device tensor of another element type raises DTypeMismatchError; a numpy
    array of another type is converted on the host first (as `np.asarray(x, dtype)` would).
    """
    if isinstance(obj, np.ndarray) or np.isscalar(obj) or isinstance(obj, list | tuple):
        host = np.ascontiguousarray(obj, dtype=None if dtype is None else numpy_dtype(dtype))
        array = empty(host.shape, host.dtype)
        if host.nbytes:
            call("cuMemcpyHtoD", array.pointer, host.ctypes.data, host.nbytes)
        return array
    view = describe(obj, what)
    if dtype is not None:
        expect_dtype(view.dtype, dtype, what)
    return obj if isinstance(obj, DeviceArray) else DeviceArray(view)


def to_host(obj: Any, out: np.ndarray | None = None, what: str = "argument") -> np.ndarray:
    """Copy a contiguous device array into `out` (or a new numpy array) and return it."""
    view = describe(obj, what)
    if not view.is_contiguous:
        raise LaunchError(f"{what}: strides {view.strides} are not row-major; copy it first")
    if out is None:
        out = np.empty(view.shape, dtype=numpy_dtype(view.dtype))
    else:
        expect_dtype(out.dtype, view.dtype, f"{what} (host destination)")
        if tuple(out.shape) != view.shape or not out.flags.c_contiguous:
            raise LaunchError(f"{what}: host destination must be contiguous {view.shape}")
    if view.nbytes:
        require_gpu()
        call("cuMemcpyDtoH", out.ctypes.data, view.pointer, view.nbytes)
    return out


def copy_into(dst: Any, src: np.ndarray, what: str = "argument") -> None:
    """Copy host `src` into device array `dst` (same shape and element type), in place."""
    view = describe(dst, what)
    expect_dtype(src.dtype, view.dtype, what)
    host = np.ascontiguousarray(src)
    if tuple(host.shape) != view.shape or not view.is_contiguous:
        raise LaunchError(f"{what}: expected a contiguous {view.shape} source, got {host.shape}")
    if host.nbytes:
        require_gpu()
        call("cuMemcpyHtoD", view.pointer, host.ctypes.data, host.nbytes)


def is_device_tensor(obj: Any) -> bool:
    """GPU memory the runtime can use in place (no copy)."""
    if isinstance(obj, DeviceArray):
        return True
    if is_torch_tensor(obj):
        return bool(obj.is_cuda)
    if isinstance(obj, np.ndarray):
        return False
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    if hasattr(obj, "__dlpack__"):
        return not read_dlpack(obj).on_host
    return False


def layout(obj: Any, what: str = "argument") -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """(element type, shape, strides in elements) of any supported tensor."""
    if isinstance(obj, np.ndarray):
        itemsize = obj.dtype.itemsize
        return dtype_name(obj.dtype), tuple(obj.shape), tuple(s // itemsize for s in obj.strides)
    if is_torch_tensor(obj):
        return dtype_name(obj.dtype), tuple(obj.shape), tuple(obj.stride())
    if isinstance(obj, DeviceArray) or hasattr(obj, "__cuda_array_interface__"):
        view = describe(obj, what)
        return view.dtype, view.shape, view.strides
    if hasattr(obj, "__dlpack__"):
        dl = read_dlpack(obj, what)
        return dl.dtype, dl.shape, dl.strides
    raise TypeError(
        f"{what}: expected a numpy array, a torch tensor, or an object with "
        f"__cuda_array_interface__ or __dlpack__; got {type(obj).__name__}"
    )
