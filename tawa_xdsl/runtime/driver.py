"""The CUDA driver API, reached through cuda-python, imported only when first used.

`check` unwraps the `(CUresult, *values)` tuples cuda-python returns and raises `CudaError`
naming the call. `require_gpu` initializes the driver, makes device 0's primary context current
(the one PyTorch uses, so pointers are shared) and refuses anything but an sm_90 GPU.
`libcuda` is the same driver library through ctypes, for the calls that need exact control over
memory (tensor-map encoding, see tensormap.py).
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from tawa_xdsl.runtime.errors import CudaError, NoGPUError, UnsupportedGPUError

INSTALL_HINT = "install the GPU extra: pip install 'tawa-xdsl[gpu]'"
REQUIRED_CAPABILITY = (9, 0)


@functools.cache
def cuda_driver() -> ModuleType:
    """The `cuda.bindings.driver` module (or the older `cuda.cuda`); NoGPUError if absent."""
    try:
        from cuda.bindings import driver
    except ImportError:
        try:
            from cuda import cuda as driver  # cuda-python < 12.6 spells the module this way
        except ImportError:
            message = f"no GPU support: cuda-python is not installed ({INSTALL_HINT})"
            raise NoGPUError(message) from None
    return driver


def result_name(result: Any) -> str:
    """`CUDA_ERROR_OUT_OF_MEMORY` for a CUresult enum member or int."""
    name = getattr(result, "name", None)
    if name is not None:
        return str(name)
    return f"CUresult {int(result)}"


def check(returned: Any, call: str = "CUDA driver call") -> Any:
    """Unwrap cuda-python's `(CUresult, *values)`: None, the single value, or a tuple."""
    err, *values = returned if isinstance(returned, tuple) else (returned,)
    if int(err) != 0:
        raise CudaError(call, result_name(err), error_string(err))
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def call(name: str, *args: Any) -> Any:
    """Call driver function `name` with `args` and `check` the result, naming the call."""
    return check(getattr(cuda_driver(), name)(*args), name)


def raise_for_result(code: int, call: str) -> None:
    """Raise the CudaError of a nonzero CUresult that a ctypes call of `call` returned."""
    try:
        err: Any = cuda_driver().CUresult(code)
    except (NoGPUError, ValueError):
        err = code
    raise CudaError(call, result_name(err), error_string(err))


def error_string(err: Any) -> str:
    """The driver's description of `err`, or '' when it has none."""
    try:
        code, text = cuda_driver().cuGetErrorString(err)
    except Exception:  # noqa: BLE001 - a failed lookup must not hide the original error
        return ""
    if int(code) != 0 or text is None:
        return ""
    return text.decode() if isinstance(text, bytes) else str(text)


@functools.cache
def libcuda() -> ctypes.CDLL:
    """The driver library through ctypes; NoGPUError when it cannot be loaded."""
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise NoGPUError(f"no GPU driver: libcuda.so.1 could not be loaded ({exc})") from None


@dataclass(frozen=True)
class Device:
    """One GPU with its primary context current: what kernels are loaded into and launched on."""

    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    multiprocessors: int
    max_shared_memory_optin: int
    handle: Any
    context: Any

    @property
    def arch(self) -> str:
        """`sm_90` for compute capability 9.0."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    def attribute(self, name: str) -> int:
        """A `CU_DEVICE_ATTRIBUTE_*` value, given the part after that prefix."""
        cu = cuda_driver()
        attr = getattr(cu.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return int(call("cuDeviceGetAttribute", attr, self.handle))

    def make_current(self) -> None:
        """Make this device's primary context current on the calling thread."""
        call("cuCtxSetCurrent", self.context)

    def synchronize(self) -> None:
        """Wait for all work on this device; raises CudaError if a kernel faulted."""
        self.make_current()
        call("cuCtxSynchronize")


def initialize_driver() -> ModuleType:
    """`cuInit(0)`, turning every way it can fail for lack of a GPU into NoGPUError."""
    cu = cuda_driver()
    try:
        returned = cu.cuInit(0)
    except RuntimeError as exc:  # cuda-python raises this when libcuda.so.1 is missing
        raise NoGPUError(f"no GPU driver: {exc}") from None
    err = returned[0] if isinstance(returned, tuple) else returned
    name = result_name(err)
    if name in ("CUDA_ERROR_NO_DEVICE", "CUDA_ERROR_INSUFFICIENT_DRIVER", "CUDA_ERROR_NOT_FOUND"):
        raise NoGPUError(f"no usable GPU: cuInit returned {name} ({error_string(err)})")
    check(err, "cuInit")
    return cu


@functools.cache
def open_device(ordinal: int = 0) -> Device:
    """Initialize the driver and return device `ordinal` with its primary context current."""
    cu = initialize_driver()
    count = int(call("cuDeviceGetCount"))
    if ordinal >= count:
        raise NoGPUError(f"no GPU {ordinal}: the driver sees {count} device(s)")
    handle = call("cuDeviceGet", ordinal)
    raw_name = call("cuDeviceGetName", 256, handle)
    name = raw_name.split(b"\0", 1)[0].decode() if isinstance(raw_name, bytes) else str(raw_name)
    attr = cu.CUdevice_attribute

    def get(a: Any) -> int:
        return int(call("cuDeviceGetAttribute", a, handle))

    major = get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    minor = get(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    context = call("cuDevicePrimaryCtxRetain", handle)
    call("cuCtxSetCurrent", context)
    return Device(
        ordinal=ordinal,
        name=name,
        compute_capability=(major, minor),
        multiprocessors=get(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        max_shared_memory_optin=get(attr.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        handle=handle,
        context=context,
    )


def require_gpu(ordinal: int = 0) -> Device:
    """The sm_90 device `ordinal`, current; NoGPUError or UnsupportedGPUError in one line if not.

    The generated kernels use sm_90a instructions (wgmma, setmaxnreg), which run on compute
    capability 9.0 only: not on Ampere, and not on Blackwell either.
    """
    device = open_device(ordinal)
    if device.compute_capability != REQUIRED_CAPABILITY:
        raise UnsupportedGPUError(
            f"GPU {ordinal} ({device.name}) is {device.arch}; tawa-xdsl kernels need an sm_90 "
            "(Hopper: H100/H200) GPU"
        )
    device.make_current()
    return device


def gpu_available() -> bool:
    """Whether `require_gpu()` would succeed (asked on every launch, so it makes no driver
    call once the device is open)."""
    try:
        device = open_device(0)
    except (NoGPUError, UnsupportedGPUError, CudaError):
        return False
    return device.compute_capability == REQUIRED_CAPABILITY
