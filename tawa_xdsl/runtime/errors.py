"""The runtime's exceptions: each says in one line what is wrong and what to do about it."""

from __future__ import annotations


class NoGPUError(RuntimeError):
    """No usable GPU: cuda-python is missing, the driver cannot be loaded, or no device exists."""


class UnsupportedGPUError(RuntimeError):
    """A GPU exists but is not the sm_90 (Hopper) part the generated kernels are built for."""


class CudaError(RuntimeError):
    """A CUDA driver call failed; `result` is the CUresult name (`CUDA_ERROR_INVALID_VALUE`)."""

    def __init__(self, call: str, result: str, detail: str = ""):
        self.call = call
        self.result = result
        suffix = f": {detail}" if detail else ""
        super().__init__(f"{call} failed with {result}{suffix}")


class PTXLoadError(CudaError):
    """The driver JIT rejected a PTX module; the message carries the first lines of its log."""


class TensorMapError(ValueError):
    """A tensor a TMA cannot describe (strides, alignment, box, swizzle, element type)."""


class DTypeMismatchError(TypeError):
    """An array argument whose element type is not the one the kernel expects."""


class LaunchError(ValueError):
    """Launch arguments that do not fit the kernel or the device (grid, block, smem, params)."""
