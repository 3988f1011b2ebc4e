"""Launching a kernel: cuLaunchKernelEx with grid, block, dynamic smem and cluster dims.

Two levels. `launch(kernel, grid, block, *params)` takes a loaded `Kernel` and one value per
PTX parameter. `launch_compiled(compiled, grid, *args)` takes what `tawa_xdsl.compiler` made
(a `CompiledProgram`) and the kernel's own arguments in signature order: it loads the PTX,
asks the program for its launch grid (persistent kernels run one program per SM and take the
logical grid as trailing arguments), and builds every `.param` from the arguments
(`kernel_arguments`: a descriptor argument gives its tensor map, pointer, extents and strides).
Descriptor arguments are device tensors (torch, `__cuda_array_interface__`, DeviceArray) or
`tawa_xdsl.TensorDescriptor`s over numpy arrays (copied in, and back out after the launch).
`@jit`'s GPU launcher (`tawa_xdsl.runtime.dispatch.gpu_launch`) sits on these two.

Parameters are packed from the kernel's PTX signature: a `TensorMap` fills a `.b8 [128]`
parameter by value (the map's own aligned buffer is passed), a device array (ours, torch,
`__cuda_array_interface__`) or an int fills a 64-bit pointer, ints and floats fill scalars.
`cuLaunchKernelEx` receives an array of host pointers, one per parameter, each pointing at that
parameter's bytes; the driver copies them during the call.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tawa_xdsl.runtime.driver import call, cuda_driver, require_gpu
from tawa_xdsl.runtime.errors import LaunchError
from tawa_xdsl.runtime.memory import describe, device_pointer, to_device, to_host
from tawa_xdsl.runtime.module import Kernel, Param, load_kernel
from tawa_xdsl.runtime.tensormap import TENSOR_MAP_BYTES, TensorMap, TensorMapCache

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
        threads = self.block[0] * self.block[1] * self.block[2]
        if threads > kernel.max_threads:
            raise LaunchError(
                f"kernel {kernel.name}: block {self.block} has {threads} threads; the kernel "
                f"allows at most {kernel.max_threads}"
            )
        if self.cluster[0] * self.cluster[1] * self.cluster[2] > MAX_CLUSTER_SIZE:
            raise LaunchError(f"cluster {self.cluster} exceeds {MAX_CLUSTER_SIZE} CTAs")
        for axis, (g, c) in enumerate(zip(self.grid, self.cluster, strict=True)):
            if g % c:
                raise LaunchError(
                    f"grid {self.grid} is not a multiple of cluster {self.cluster} "
                    f"in dim {'xyz'[axis]}"
                )


ParamStorage = ctypes._SimpleCData | ctypes.Array[ctypes.c_char] | TensorMap

INTEGER_TYPES: dict[tuple[str, int], type[ctypes._SimpleCData]] = {
    ("u", 8): ctypes.c_uint8,
    ("u", 16): ctypes.c_uint16,
    ("u", 32): ctypes.c_uint32,
    ("u", 64): ctypes.c_uint64,
    ("s", 8): ctypes.c_int8,
    ("s", 16): ctypes.c_int16,
    ("s", 32): ctypes.c_int32,
    ("s", 64): ctypes.c_int64,
}
FLOAT_TYPES: dict[int, type[ctypes._SimpleCData]] = {32: ctypes.c_float, 64: ctypes.c_double}


def bad_argument(param: Param, kernel: str, message: str) -> LaunchError:
    return LaunchError(f"kernel {kernel}: parameter {param.name} ({param}): {message}")


def pack_argument(param: Param, value: Any, kernel: str) -> ParamStorage:
    """Host storage holding one parameter's bytes; it must live until the launch returns."""
    if param.is_array:
        if isinstance(value, TensorMap):
            if param.nbytes != TENSOR_MAP_BYTES:
                raise bad_argument(param, kernel, f"a tensor map is {TENSOR_MAP_BYTES} bytes")
            return value
        if not isinstance(value, bytes | bytearray) or len(value) != param.nbytes:
            got = type(value).__name__
            raise bad_argument(param, kernel, f"expected {param.nbytes} bytes, got {got}")
        return (ctypes.c_char * param.nbytes).from_buffer_copy(value)
    if param.kind == "f":
        if isinstance(value, TensorMap) or not isinstance(value, int | float | np.number):
            raise bad_argument(param, kernel, f"expected a float, got {type(value).__name__}")
        if param.bits in FLOAT_TYPES:
            return FLOAT_TYPES[param.bits](float(value))
        return (ctypes.c_char * 2).from_buffer_copy(np.float16(value).tobytes())
    if isinstance(value, int | np.integer):
        return integer_storage(param, int(value), kernel)
    if isinstance(value, TensorMap):
        raise bad_argument(param, kernel, "a tensor map needs a `.b8 [128]` parameter")
    if param.bits == 64:
        return ctypes.c_uint64(device_pointer(value, f"kernel {kernel}: parameter {param.name}"))
    raise bad_argument(param, kernel, f"expected an int, got {type(value).__name__}")


def integer_storage(param: Param, value: int, kernel: str) -> ctypes._SimpleCData:
    """An integer parameter, range-checked for its width and signedness (`.b` takes either)."""
    half = 1 << (param.bits - 1)
    low = 0 if param.kind == "u" else -half
    high = half - 1 if param.kind == "s" else (1 << param.bits) - 1
    if not low <= value <= high:
        raise bad_argument(param, kernel, f"{value} does not fit in {param.bits} bits")
    kind = "s" if param.kind == "s" else "u"
    return INTEGER_TYPES[kind, param.bits](value & ((1 << param.bits) - 1))


def storage_address(storage: ParamStorage) -> int:
    return storage.address if isinstance(storage, TensorMap) else ctypes.addressof(storage)


def pack_parameters(kernel: Kernel, args: Sequence[Any]) -> list[ParamStorage]:
    """One host storage per parameter; LaunchError naming the signature on a count mismatch."""
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


@functools.lru_cache(maxsize=256)
def launch_config(config: LaunchConfig) -> Any:
    """The CUlaunchConfig struct, with a cluster attribute when the cluster is not 1x1x1.

    Cached per config: the driver reads it during the call and does not keep it.
    """
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
    prepare_launch(kernel, config, *args)()


class PreparedLaunch:
    """A launch with its checks done and parameters packed once: call it to launch again.

    For timing loops and graphs: a call is one cuLaunchKernelEx. The arguments are captured
    as they were when prepared (a tensor map keeps describing the same memory).
    """

    def __init__(self, kernel: Kernel, config: LaunchConfig, args: Sequence[Any]):
        kernel.module.device.make_current()
        config.check(kernel)
        kernel.reserve_shared_memory(config.shared_bytes)
        self.kernel, self.config, self.args = kernel, config, tuple(args)
        self.storage = pack_parameters(kernel, self.args)
        self.pointers = (ctypes.c_void_p * len(self.storage))(*map(storage_address, self.storage))
        self.native = launch_config(config)

    def __call__(self) -> None:
        call(
            "cuLaunchKernelEx", self.native, self.kernel.handle, ctypes.addressof(self.pointers), 0
        )

    def release_arguments(self) -> None:
        """Drop the references to the arguments (the packed bytes stay): a launch cache keyed
        by what the bytes encode (addresses, shapes) must not keep the tensors alive."""
        self.args = ()
        for storage in self.storage:
            if isinstance(storage, TensorMap):
                storage.source = None


def prepare_launch(kernel: Kernel, config: LaunchConfig, *args: Any) -> PreparedLaunch:
    """Check and pack once; the returned object launches on each call."""
    return PreparedLaunch(kernel, config, args)


# ------------------------------------------------------------------ compiled programs


@dataclass(frozen=True)
class TensorMapInfo:
    """How to encode the tensor map of one descriptor argument."""

    arg: int
    box: tuple[int, ...]  # numpy order (outermost first): the descriptor's block shape
    swizzle: int  # bytes: 0 or 128


class ParamSource(Protocol):
    """Which host value one `.param` carries (`tawa_xdsl.backend.emit_ptx.KernelParam`):
    `field` is "value" (a scalar argument) or, of descriptor argument `arg`, "tensormap",
    "ptr", "dim{d}" (extent, outermost first) or "stride{d}" (elements)."""

    @property
    def name(self) -> str: ...
    @property
    def arg(self) -> int: ...
    @property
    def field(self) -> str: ...


class CompiledProgram(Protocol):
    """What a launch needs of a compiled kernel (`tawa_xdsl.compiler.CompiledKernel`)."""

    @property
    def ptx(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def params(self) -> Sequence[ParamSource]: ...
    @property
    def tensor_maps(self) -> Mapping[int, TensorMapInfo]: ...
    @property
    def smem_bytes(self) -> int: ...
    @property
    def threads(self) -> int: ...

    def grid(self, grid: Sequence[int] | int, sms: int) -> tuple[Dim3, list[int]]:
        """The launch grid for the logical `grid`, and the extra trailing arguments."""
        ...


# The tensor maps of every kernel argument encoded so far (one process-wide cache: the maps of
# a weight or an activation buffer are shared by every launch that reads it).
TENSOR_MAPS = TensorMapCache()


def kernel_arguments(program: CompiledProgram, args: Sequence[Any]) -> list[Any]:
    """One runtime value per `.param`, from the kernel's arguments in signature order (tensor
    maps from `TENSOR_MAPS`)."""
    values: list[Any] = []
    for p in program.params:
        arg = args[p.arg]
        if p.field == "value":
            values.append(arg)
            continue
        view = describe(arg, p.name)
        if p.field == "tensormap":
            info = program.tensor_maps[p.arg]
            values.append(TENSOR_MAPS.get(arg, info.box, info.swizzle or None, p.name))
        elif p.field == "ptr":
            values.append(view.pointer)
        elif p.field.startswith("dim"):
            values.append(int(view.shape[int(p.field[3:])]))
        else:
            values.append(int(view.strides[int(p.field[6:])]))
    return values


def prepare_compiled(
    program: CompiledProgram, grid: Sequence[int] | int, *args: Any, stream: Any = 0
) -> PreparedLaunch:
    """A launcher with tensor maps and the parameter buffers built once (for timing);
    descriptor arguments must be device tensors here."""
    device = require_gpu()
    launch_grid, extra = program.grid(grid, device_sms(device))
    kernel = load_kernel(program.ptx, program.name)
    config = LaunchConfig.make(launch_grid, program.threads, program.smem_bytes, 1, stream)
    return prepare_launch(kernel, config, *kernel_arguments(program, [*args, *extra]))


def launch_compiled(
    program: CompiledProgram, grid: Sequence[int] | int, *args: Any, stream: Any = 0
) -> None:
    """Launch on the current GPU. Descriptor arguments are device tensors, or
    `TensorDescriptor`s over numpy arrays (copied to the GPU and back)."""
    device = require_gpu()
    launch_grid, extra = program.grid(grid, device_sms(device))
    if 0 in launch_grid:
        return  # no program instances: nothing to run (a zero grid is a driver error)
    staged, host = [], []
    for a in args:
        base = getattr(a, "base", None)
        if base is not None and hasattr(a, "block_shape") and hasattr(base, "ctypes"):
            dev = to_device(base if base.size else empty_tensor_stand_in(base))
            staged.append(dev)
            if base.size:
                host.append((base, dev))
        else:
            staged.append(a)
    kernel = load_kernel(program.ptx, program.name)
    launch(
        kernel,
        launch_grid,
        program.threads,
        *kernel_arguments(program, [*staged, *extra]),
        shared_bytes=program.smem_bytes,
        stream=stream,
    )
    for base, dev in host:
        to_host(dev, out=base)


def empty_tensor_stand_in(array: np.ndarray) -> np.ndarray:
    """What to describe in place of an array with no elements, which a TMA map cannot: zeros of
    one element per dim but the last (16 bytes long, the TMA stride unit). Every element of the
    empty array is out of bounds, so its loads read zeros; the stand-in's in-bounds elements are
    zeros too, and what stores write into it is thrown away."""
    shape = (1,) * (array.ndim - 1) + (max(1, 16 // array.itemsize),)
    return np.zeros(shape, array.dtype)


def device_sms(device: Any) -> int:
    """The SM count of `device` (132 when it cannot be asked)."""
    for name in ("multiprocessors", "sm_count", "num_sms"):
        value = getattr(device, name, None)
        if value is not None:
            return int(value() if callable(value) else value)
    return 132
