"""A stand-in CUDA driver, to measure and test the launch path on a machine without a GPU.

`install(setattr)` replaces the driver as the runtime reaches it (cuda-python's module and
libcuda through ctypes) with `FakeDriver`: an sm_90 device of 132 SMs whose calls succeed at
once. Modules load (parameters parsed from their PTX as on the GPU), tensor maps are
"encoded" (the driver's arguments recorded, the 128 bytes left zero) and launches are
counted; everything above the driver is the runtime's own code: launch keys, tensor-map
reuse, parameter packing, the prepared launch's one foreign call. Pass pytest's
`monkeypatch.setattr` to undo it all after a test; the benchmark passes `setattr`.

The launch stand-in is a C function (`strnlen`) called with the same four arguments
cuLaunchKernelEx gets, so the ctypes call is what it costs; the fake function handle is 0, so
`strnlen(config, 0)` reads nothing and returns 0 (success). What none of this measures is the
driver's own work in cuLaunchKernelEx and cuTensorMapEncodeTiled.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SUCCESS = 0


class Attributes:
    """A cuda-python enum class stand-in: each member is its own name."""

    def __getattr__(self, name: str) -> str:
        return name


@dataclass
class Encoding:
    """One cuTensorMapEncodeTiled call: the global address, dims and box (innermost first)."""

    address: int
    dims: tuple[int, ...]
    box: tuple[int, ...]


@dataclass
class FakeDriver:
    """The cuda-python calls the runtime makes, and libcuda's two ctypes calls."""

    encodings: list[Encoding] = field(default_factory=list)
    modules: int = 0

    # ------------------------------------------------------------------ cuda-python
    CUdevice_attribute = Attributes()
    CUfunction_attribute = Attributes()
    CUjit_option = Attributes()

    @staticmethod
    def CUresult(code: int) -> int:  # noqa: N802 -- cuda-python's name
        return code

    def cuInit(self, flags: int) -> tuple[int]:  # noqa: N802
        return (SUCCESS,)

    def cuDeviceGetCount(self) -> tuple[int, int]:  # noqa: N802
        return SUCCESS, 1

    def cuDeviceGet(self, ordinal: int) -> tuple[int, int]:  # noqa: N802
        return SUCCESS, ordinal

    def cuDeviceGetName(self, size: int, device: int) -> tuple[int, bytes]:  # noqa: N802
        return SUCCESS, b"fake sm_90 (no GPU)\0"

    def cuDeviceGetAttribute(self, name: str, device: int) -> tuple[int, int]:  # noqa: N802
        values = {"COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0,
                  "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448}  # fmt: skip
        return SUCCESS, values.get(name.removeprefix("CU_DEVICE_ATTRIBUTE_"), 132)

    def cuDevicePrimaryCtxRetain(self, device: int) -> tuple[int, str]:  # noqa: N802
        return SUCCESS, "context"

    def cuCtxSetCurrent(self, context: Any) -> tuple[int]:  # noqa: N802
        return (SUCCESS,)

    def cuModuleLoadDataEx(self, data: bytes, *options: Any) -> tuple[int, str]:  # noqa: N802
        self.modules += 1
        return SUCCESS, f"module {self.modules}"

    def cuModuleGetFunction(self, module: Any, name: bytes) -> tuple[int, int]:  # noqa: N802
        return SUCCESS, 0  # the handle `strnlen` reads as a length: see the module docstring

    def cuFuncGetAttribute(self, name: str, function: Any) -> tuple[int, int]:  # noqa: N802
        return SUCCESS, 1024 if name.endswith("MAX_THREADS_PER_BLOCK") else 0

    def cuFuncSetAttribute(self, function: Any, name: str, value: int) -> tuple[int]:  # noqa: N802
        return (SUCCESS,)

    def cuGetErrorString(self, err: Any) -> tuple[int, bytes]:  # noqa: N802
        return SUCCESS, b"fake driver error"

    # ------------------------------------------------------------- libcuda (ctypes)
    def cuTensorMapEncodeTiled(self, buffer, dtype, rank, address, dims, strides, box,  # noqa: N802
                               *rest: Any) -> int:  # fmt: skip
        rank = rank.value
        self.encodings.append(Encoding(address.value, tuple(dims[:rank]), tuple(box[:rank])))
        return SUCCESS

    @functools.cached_property
    def cuLaunchKernelEx(self) -> Any:  # noqa: N802
        return ctypes.CDLL(None).strnlen


def install(set_attribute: Callable[[Any, str, Any], None] = setattr) -> FakeDriver:
    """Put a `FakeDriver` where the runtime finds the driver, and fresh caches of what the
    runtime remembers about the device and loaded modules; returns the fake."""
    fake = FakeDriver()
    driver = importlib.import_module("tawa_xdsl.runtime.driver")
    module = importlib.import_module("tawa_xdsl.runtime.module")
    launch = importlib.import_module("tawa_xdsl.runtime.launch")
    # partials, not bound methods: the runtime sets `restype` on the ctypes entry points
    calls = {name: functools.partial(getattr(fake, name)) for name in dir(fake)
             if name.startswith("cu") and name != "cuLaunchKernelEx"}  # fmt: skip
    enums = {name: getattr(fake, name) for name in dir(fake) if name.startswith("CU")}
    cuda = types.SimpleNamespace(**calls, **enums, cuLaunchKernelEx=fake.cuLaunchKernelEx)
    set_attribute(driver, "cuda_driver", lambda: cuda)
    set_attribute(module, "cuda_driver", lambda: cuda)
    set_attribute(driver, "libcuda", lambda: cuda)
    set_attribute(launch, "libcuda", lambda: cuda)
    set_attribute(driver, "open_device", functools.cache(driver.open_device.__wrapped__))
    set_attribute(launch, "launch_entry", functools.cache(launch.launch_entry.__wrapped__))
    set_attribute(module, "LOADED", {})
    set_attribute(module, "KERNELS", {})
    set_attribute(launch, "TENSOR_MAPS", launch.TensorMapCache())
    return fake
