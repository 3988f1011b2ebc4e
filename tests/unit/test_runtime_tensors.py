"""Tensor arguments from any library (`runtime.tensors`), on the CPU: numpy, DLPack producers
and `__cuda_array_interface__` objects, read without copies; torch is not needed here."""

from __future__ import annotations

import numpy as np
import pytest

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.runtime.memory import is_device_tensor, layout
from tawa_xdsl.runtime.tensors import host_array, read_dlpack


class DLPackOnly:
    """A producer that offers nothing but DLPack (as JAX or another framework would)."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_capsules_are_read_in_place() -> None:
    array = np.arange(24, dtype=np.float16).reshape(4, 6)[:, :4]  # strided rows
    view = read_dlpack(DLPackOnly(array))
    assert view.on_host and view.dtype == "float16"
    assert view.shape == (4, 4) and view.strides == (6, 1)
    assert view.pointer == array.ctypes.data


def test_a_host_dlpack_tensor_is_shared_not_copied() -> None:
    array = np.zeros((3, 8), np.float32)
    shared = host_array(DLPackOnly(array))
    shared[1, 2] = 5.0
    assert array[1, 2] == 5.0
    assert not is_device_tensor(DLPackOnly(array))


def test_layouts_of_every_kind() -> None:
    array = np.zeros((4, 8), np.float32)
    assert layout(array) == ("float32", (4, 8), (8, 1))
    assert layout(DLPackOnly(array)) == ("float32", (4, 8), (8, 1))
    device = type("Device", (), {})()
    device.__cuda_array_interface__ = {
        "shape": (2, 16), "typestr": "<f2", "data": (4096, False), "version": 3,
        "strides": (64, 2),
    }  # fmt: skip
    assert layout(device) == ("float16", (2, 16), (32, 1))
    assert is_device_tensor(device) and host_array(device) is None
    with pytest.raises(TypeError, match="expected a numpy array, a torch tensor"):
        layout([1, 2, 3])


def test_descriptors_over_dlpack_run_in_the_interpreter() -> None:
    @tawa_xdsl.jit(interpret=True)
    def negate(x_desc, y_desc, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        y_desc.store([pid * BLOCK], -x_desc.load([pid * BLOCK]))

    x = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    x_desc = tawa_xdsl.TensorDescriptor.from_tensor(DLPackOnly(x), [16])
    y_desc = tawa_xdsl.TensorDescriptor.from_tensor(DLPackOnly(y), [16])
    negate[(2,)](x_desc, y_desc, BLOCK=16)
    np.testing.assert_array_equal(y, -x)


def test_descriptor_element_types_are_checked() -> None:
    with pytest.raises(TypeError, match="element type must be one of"):
        tawa_xdsl.TensorDescriptor.from_tensor(np.zeros(16, np.int32), [16])
    desc = tawa_xdsl.TensorDescriptor.from_tensor(np.zeros((4, 16), np.float16), [4, 16])
    assert desc.element_type == "float16" and desc.dtype == np.float16
