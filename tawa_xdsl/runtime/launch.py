"""Launching a kernel: cuLaunchKernelEx with grid, block, dynamic smem and cluster dims.

Arguments are packed from the kernel's PTX signature: a `TensorMap` fills a `.b8 [128]`
parameter (by value), a device array (ours, torch, `__cuda_array_interface__`) or an int fills
a 64-bit pointer, ints and floats fill scalars. `cuLaunchKernelEx` receives an array of host
pointers, one per parameter, each pointing at that parameter's bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tawa_xdsl.runtime.driver import call, cuda_driver
from tawa_xdsl.runtime.errors import LaunchError
from tawa_xdsl.runtime.memory import describe
from tawa_xdsl.runtime.module import Kernel, Param
from tawa_xdsl.runtime.tensormap import TENSOR_MAP_BYTES, TensorMap

Dim3 = tuple[int, int, int]
MAX_CLUSTER_SIZE = 8  # portable limit; 16 needs CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED


def dim3(value: int | Sequence[int], what: str) -> Dim3:
    """(x, y, z) from an int or a sequence of 1-3 positive ints."""
    dims = [value] if isinstance(value, int) else list(value)
    if not 1 <= len(dims) <= 3 or any(int(d) < 1 for d in dims):
        raise LaunchError(f"{what}: expected 1-3 positive ints, got {value!r}")
    x, y, z = ([int(d) for d in dims] + [1, 1])[:3]
    return x, y, z


@dataclass(frozen=True)
class LaunchConfig:
    """Grid (in CTAs), block (threads), dynamic shared memory, cluster shape and stream."""

    grid: Dim3
    block: Dim3
    shared_bytes: int = 0
    cluster: Dim3 = (1, 1, 1)
    stream: int = 0

    @staticmethod
    def make(
        grid: int | Sequence[int],
        block: int | Sequence[int],
        shared_bytes: int = 0,
        cluster: int | Sequence[int] = 1,
        stream: Any = 0,
    ) -> LaunchConfig:
        """Normalize dims and the stream (an int handle or an object with `.cuda_stream`)."""
        handle = int(getattr(stream, "cuda_stream", stream) or 0)
        return LaunchConfig(
            dim3(grid, "grid"),
            dim3(block, "block"),
            int(shared_bytes),
            dim3(cluster, "cluster"),
            handle,
        )

    def check(self, kernel: Kernel) -> None:
        """Reject a block, cluster or grid shape the kernel or the hardware cannot run."""
        threads = int(np.prod(self.block))
        if threads > kernel.max_threads:
            raise LaunchError(
                f"kernel {kernel.name}: block {self.block} has {threads} threads; the kernel "
                f"allows at most {kernel.max_threads}"
            )
        if int(np.prod(self.cluster)) > MAX_CLUSTER_SIZE:
            raise LaunchError(f"cluster {self.cluster} exceeds {MAX_CLUSTER_SIZE} CTAs")
        for axis, (g, c) in enumerate(zip(self.grid, self.cluster, strict=True)):
            if g % c:
                raise LaunchError(
                    f"grid {self.grid} is not a multiple of cluster {self.cluster} "
                    f"in dim {'xyz'[axis]}"
                )


def pack_argument(param: Param, value: Any, kernel: str) -> np.ndarray:
    """The bytes of one parameter, in a host buffer that lives until the launch returns."""
    where = f"kernel {kernel}: parameter {param.name} ({param})"
    if param.is_array:
        if isinstance(value, TensorMap):
            if param.nbytes != TENSOR_MAP_BYTES:
                raise LaunchError(f"{where}: a tensor map is {TENSOR_MAP_BYTES} bytes")
            return value.buffer
        data = np.frombuffer(bytes(value), dtype=np.uint8) if isinstance(value, bytes) else None
        if data is None or data.nbytes != param.nbytes:
            raise LaunchError(f"{where}: expected {param.nbytes} bytes, got {type(value).__name__}")
        return data
    if isinstance(value, TensorMap):
        raise LaunchError(f"{where}: a tensor map needs a `.b8 [128]` parameter")
    if param.kind == "f":
        if not isinstance(value, int | float | np.floating | np.integer):
            raise LaunchError(f"{where}: expected a float, got {type(value).__name__}")
        return np.array([value], dtype=f"float{param.bits}")
    if isinstance(value, bool | int | np.integer):
        return scalar_bytes(param, int(value), where)
    if param.bits == 64:
        return np.array([describe(value, where).pointer], dtype=np.uint64)
    raise LaunchError(f"{where}: expected an int, got {type(value).__name__}")


def scalar_bytes(param: Param, value: int, where: str) -> np.ndarray:
    """An integer parameter, range-checked for its width and signedness."""
    half = 1 << (param.bits - 1)
    low = 0 if param.kind == "u" else -half
    high = half - 1 if param.kind == "s" else (1 << param.bits) - 1
    if not low <= value <= high:
        raise LaunchError(f"{where}: {value} does not fit in {param.bits} bits")
    return np.array([value & ((1 << param.bits) - 1)], dtype=f"uint{param.bits}")


def pack_arguments(kernel: Kernel, args: Sequence[Any]) -> list[np.ndarray]:
    """One host buffer per parameter; LaunchError naming the signature on a count mismatch."""
    if kernel.params is None:
        raise LaunchError(
            f"kernel {kernel.name}: parameter list unknown (load it from PTX, or "
            "pass signatures to load_cubin)"
        )
    if len(args) != len(kernel.params):
        names = ", ".join(p.name for p in kernel.params)
        raise LaunchError(
            f"kernel {kernel.name} takes {len(kernel.params)} arguments ({names}); got {len(args)}"
        )
    return [pack_argument(p, a, kernel.name) for p, a in zip(kernel.params, args, strict=True)]


def launch_config(config: LaunchConfig) -> Any:
    """The CUlaunchConfig struct, with a cluster attribute when the cluster is not 1x1x1."""
    cu = cuda_driver()
    native = cu.CUlaunchConfig()
    native.gridDimX, native.gridDimY, native.gridDimZ = config.grid
    native.blockDimX, native.blockDimY, native.blockDimZ = config.block
    native.sharedMemBytes = config.shared_bytes
    native.hStream = cu.CUstream(config.stream) if config.stream else 0
    attrs = []
    if config.cluster != (1, 1, 1):
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        dims = attr.value.clusterDim
        dims.x, dims.y, dims.z = config.cluster
        attrs.append(attr)
    native.attrs = attrs
    native.numAttrs = len(attrs)
    return native


def launch(
    kernel: Kernel,
    grid: int | Sequence[int],
    block: int | Sequence[int],
    *args: Any,
    shared_bytes: int = 0,
    cluster: int | Sequence[int] = 1,
    stream: Any = 0,
) -> None:
    """Launch `kernel` asynchronously on `stream`; raise the smem limit first when needed."""
    config = LaunchConfig.make(grid, block, shared_bytes, cluster, stream)
    launch_with(kernel, config, *args)


def launch_with(kernel: Kernel, config: LaunchConfig, *args: Any) -> None:
    """`launch` with a prepared LaunchConfig (reuse it to launch many times cheaply)."""
    kernel.module.device.make_current()
    config.check(kernel)
    kernel.reserve_shared_memory(config.shared_bytes)
    buffers = pack_arguments(kernel, args)
    pointers = np.array([b.ctypes.data for b in buffers], dtype=np.uint64)
    call("cuLaunchKernelEx", launch_config(config), kernel.handle, pointers.ctypes.data, 0)
