"""The GPU runtime: load PTX, encode TMA tensor maps, move memory, launch, cache kernels.

The runtime is the bottom of the stack: it imports nothing of the compiler. A compiled kernel
reaches it as data (`launch.CompiledProgram`: PTX, entry name, the source of every `.param`,
tensor-map boxes, shared memory, threads, its grid rule).

Importing this package needs neither cuda-python nor a GPU; the driver is imported on first
use, and every way of lacking one ends in a one-line `NoGPUError` (a RuntimeError).

    from tawa_xdsl import runtime as rt

    rt.require_gpu()                # Device; NoGPUError / UnsupportedGPUError unless sm_90
    kernel = rt.load_kernel(ptx_text, "ws_gemm_bf16")      # driver JIT, loaded once per process
    a = rt.to_device(a_host)                  # numpy -> device copy (torch tensors: no copy)
    tm_a = rt.tensor_map(a, box=(128, 64), swizzle="128B", name="A")   # validated, 128-aligned
    rt.launch(kernel, grid, 384, tm_a, tm_b, c, K, N, shared_bytes=132160)
    rt.synchronize()
    c_host = rt.to_host(c)

Modules:

* `driver` -- `require_gpu`, `gpu_available`, `Device`, `check`/`call` for driver calls.
* `module` -- `load_ptx` (driver JIT, logs kept), `load_cubin`, `link_ptx` (nvJitLink),
  `load_kernel`; `Kernel` knows its PTX parameter list.
* `tensormap` -- `TensorMapSpec` (validation, numpy order), `encode_tiled`, `tensor_map`.
* `memory` -- `DeviceArray`, `empty`, `to_device`, `to_host`, `copy_into`, `describe`.
* `launch` -- `launch`, `LaunchConfig`, `launch_with` (cuLaunchKernelEx, clusters, >48 KiB
  smem); `prepare_launch` checks and packs once for timing loops (one driver call per launch);
  `launch_compiled` / `prepare_compiled` launch what `tawa_xdsl.compiler` made from the
  kernel's own arguments (parameters and tensor maps built here, the one place); a
  `LaunchPlan` prepares a compiled kernel's launches with what does not depend on the tensors
  worked out once.
* `cache` -- `KernelCache`, `cache_key`: compiled kernels on disk, atomic writes, one warning
  for an unusable directory (`tawa_xdsl.compiler.compile_cached` compiles through it).
* `tensors` -- where any tensor argument lives (numpy, torch, `__cuda_array_interface__`,
  DLPack) and its layout, read without copies or a torch import.
* `dispatch` -- `gpu_launch`, `@jit`'s GPU launcher: device tensors in place, a `LaunchCache`
  of prepared launches (through a `LaunchPlan`), the stream (torch's current one unless given);
  host tensors through `launch_compiled`.
* `errors` -- `NoGPUError`, `UnsupportedGPUError`, `CudaError`, `PTXLoadError`,
  `TensorMapError`, `DTypeMismatchError`, `LaunchError`.
"""

from tawa_xdsl.runtime.cache import CacheEntry, KernelCache, cache_key
from tawa_xdsl.runtime.dispatch import gpu_launch
from tawa_xdsl.runtime.driver import Device, gpu_available, require_gpu
from tawa_xdsl.runtime.dtypes import dtype_name, expect_dtype
from tawa_xdsl.runtime.errors import (
    CudaError,
    DTypeMismatchError,
    LaunchError,
    NoGPUError,
    PTXLoadError,
    TensorMapError,
    UnsupportedGPUError,
)
from tawa_xdsl.runtime.launch import (
    CompiledProgram,
    LaunchConfig,
    LaunchPlan,
    PreparedLaunch,
    TensorMapInfo,
    kernel_arguments,
    launch,
    launch_compiled,
    launch_with,
    prepare_compiled,
    prepare_launch,
)
from tawa_xdsl.runtime.memory import DeviceArray, copy_into, describe, empty, to_device, to_host
from tawa_xdsl.runtime.module import Kernel, Module, load_cubin, load_kernel, load_ptx
from tawa_xdsl.runtime.tensormap import (
    Swizzle,
    TensorMap,
    TensorMapSpec,
    encode_tiled,
    tensor_map,
)


def synchronize() -> None:
    """Wait for all work on the current GPU; raises CudaError if a kernel faulted."""
    require_gpu().synchronize()


__all__ = [
    "CacheEntry",
    "CompiledProgram",
    "CudaError",
    "DTypeMismatchError",
    "Device",
    "DeviceArray",
    "Kernel",
    "KernelCache",
    "LaunchConfig",
    "LaunchError",
    "Module",
    "NoGPUError",
    "LaunchPlan",
    "PreparedLaunch",
    "PTXLoadError",
    "Swizzle",
    "TensorMap",
    "TensorMapError",
    "TensorMapInfo",
    "TensorMapSpec",
    "UnsupportedGPUError",
    "cache_key",
    "copy_into",
    "describe",
    "dtype_name",
    "empty",
    "encode_tiled",
    "expect_dtype",
    "gpu_available",
    "gpu_launch",
    "kernel_arguments",
    "launch",
    "launch_compiled",
    "launch_with",
    "load_cubin",
    "load_kernel",
    "load_ptx",
    "prepare_compiled",
    "prepare_launch",
    "require_gpu",
    "synchronize",
    "tensor_map",
    "to_device",
    "to_host",
]
