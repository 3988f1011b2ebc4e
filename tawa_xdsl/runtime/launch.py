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

Parameters are packed from the kernel's PTX signature (`ParamLayout`, one per signature: an
offset per parameter and one `struct` format): a `TensorMap` fills a `.b8 [128]` parameter
by value (its 128 bytes), a device array (ours, torch, `__cuda_array_interface__`) or an int
fills a 64-bit pointer, ints and floats fill scalars, all in one host buffer.
`cuLaunchKernelEx`, called through ctypes, receives an array of host pointers into that
buffer, one per parameter; the driver copies the bytes during the call.
"""

from __future__ import annotations

import ctypes
import functools
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tawa_xdsl.runtime.driver import libcuda, raise_for_result, require_gpu
from tawa_xdsl.runtime.errors import LaunchError
from tawa_xdsl.runtime.memory import describe, device_pointer, to_device, to_host
from tawa_xdsl.runtime.module import Kernel, Param, load_kernel
from tawa_xdsl.runtime.tensormap import (
    TENSOR_MAP_ALIGNMENT,
    TENSOR_MAP_BYTES,
    TensorMap,
    TensorMapCache,
)

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


# struct codes of the scalar parameter kinds: (kind, bits) -> code; `.b` packs as unsigned.
INTEGER_CODES: dict[tuple[str, int], str] = {
    ("u", 8): "B", ("u", 16): "H", ("u", 32): "I", ("u", 64): "Q",
    ("s", 8): "b", ("s", 16): "h", ("s", 32): "i", ("s", 64): "q",
}  # fmt: skip
FLOAT_CODES: dict[int, str] = {16: "e", 32: "f", 64: "d"}


def bad_argument(param: Param, kernel: str, message: str) -> LaunchError:
    return LaunchError(f"kernel {kernel}: parameter {param.name} ({param}): {message}")


def param_value(param: Param, value: Any, kernel: str) -> bytes | int | float:
    """What `struct` packs for one parameter (a tensor map's 128 bytes, a pointer, a scalar),
    checked against the parameter's type; LaunchError naming the parameter otherwise."""
    if param.is_array:
        if isinstance(value, TensorMap):
            if param.nbytes != TENSOR_MAP_BYTES:
                raise bad_argument(param, kernel, f"a tensor map is {TENSOR_MAP_BYTES} bytes")
            return value.data
        if not isinstance(value, bytes | bytearray) or len(value) != param.nbytes:
            got = type(value).__name__
            raise bad_argument(param, kernel, f"expected {param.nbytes} bytes, got {got}")
        return bytes(value)
    if param.kind == "f":
        if isinstance(value, TensorMap) or not isinstance(value, int | float | np.number):
            raise bad_argument(param, kernel, f"expected a float, got {type(value).__name__}")
        return float(value)
    if isinstance(value, int | np.integer):
        return integer_value(param, int(value), kernel)
    if isinstance(value, TensorMap):
        raise bad_argument(param, kernel, "a tensor map needs a `.b8 [128]` parameter")
    if param.bits == 64:
        return device_pointer(value, f"kernel {kernel}: parameter {param.name}")
    raise bad_argument(param, kernel, f"expected an int, got {type(value).__name__}")


def integer_value(param: Param, value: int, kernel: str) -> int:
    """An integer parameter, range-checked for its width and signedness (`.b` takes either,
    packed as its unsigned bits)."""
    half = 1 << (param.bits - 1)
    low = 0 if param.kind == "u" else -half
    high = half - 1 if param.kind == "s" else (1 << param.bits) - 1
    if not low <= value <= high:
        raise bad_argument(param, kernel, f"{value} does not fit in {param.bits} bits")
    return value if param.kind == "s" else value & ((1 << param.bits) - 1)


class ParamLayout:
    """Where every parameter of a kernel sits in one host buffer (each at its natural
    alignment, tensor maps at 128 bytes), and the `struct` format that writes them all."""

    def __init__(self, params: Sequence[Param]):
        self.params = tuple(params)
        codes, offsets, offset = ["<"], [], 0
        for param in self.params:
            size = param.nbytes
            align = TENSOR_MAP_ALIGNMENT if param.is_array else size
            padding = -offset % align
            codes.append(f"{padding}x" if padding else "")
            offset += padding
            offsets.append(offset)
            offset += size
            codes.append(f"{size}s" if param.is_array else parameter_code(param))
        self.format = "".join(codes)
        self.offsets = tuple(offsets)
        self.size = offset

    def pack(self, values: Sequence[Any], kernel: str) -> PackedParams:
        """One buffer with every parameter's bytes (one `struct.pack_into`), and the array of
        pointers into it that cuLaunchKernelEx takes."""
        if len(values) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise LaunchError(
                f"kernel {kernel} takes {len(self.params)} arguments ({names}); got {len(values)}"
            )
        items = [param_value(p, v, kernel) for p, v in zip(self.params, values, strict=True)]
        packed = PackedParams(self)
        try:
            struct.pack_into(self.format, packed.buffer, packed.start, *items)
        except (struct.error, OverflowError) as error:  # an f16 out of range
            param = next(p for p, v in zip(self.params, items, strict=True)
                         if not packs(p, v))  # fmt: skip
            raise bad_argument(param, kernel, str(error)) from None
        return packed

    def pack_unchecked(self, items: Sequence[Any], kernel: str) -> PackedParams:
        """`pack` for items already in `struct`'s form (a tensor map as its 128 bytes, a
        pointer as an int) that skips the per-parameter checks when `struct` takes every item
        as it is; anything it refuses (a float for an int, a negative `.b` value, a tensor for
        a pointer) goes through `pack`, which converts it or names the parameter."""
        packed = PackedParams(self)
        try:
            struct.pack_into(self.format, packed.buffer, packed.start, *items)
        except (struct.error, OverflowError, TypeError):
            return self.pack(items, kernel)
        return packed


def parameter_code(param: Param) -> str:
    if param.kind == "f":
        return FLOAT_CODES[param.bits]
    return INTEGER_CODES["s" if param.kind == "s" else "u", param.bits]


def packs(param: Param, value: Any) -> bool:
    """Whether `value` packs into `param` alone (to name the parameter a pack refused)."""
    if param.is_array:
        return True  # its bytes were checked by `param_value`
    try:
        struct.pack("<" + parameter_code(param), value)
    except (struct.error, OverflowError, KeyError):
        return False
    return True


class PackedParams:
    """A 128-aligned host buffer holding a kernel's parameters, and the pointer array into it."""

    def __init__(self, layout: ParamLayout):
        self.buffer = (ctypes.c_char * (layout.size + TENSOR_MAP_ALIGNMENT))()
        base = ctypes.addressof(self.buffer)
        self.start = -base % TENSOR_MAP_ALIGNMENT
        self.layout = layout
        addresses = [base + self.start + offset for offset in layout.offsets]
        self.pointers = (ctypes.c_void_p * max(len(addresses), 1))(*addresses)

    def param_bytes(self, index: int) -> bytes:
        """The packed bytes of parameter `index`."""
        offset = self.start + self.layout.offsets[index]
        return bytes(self.buffer[offset : offset + self.layout.params[index].nbytes])


@functools.lru_cache(maxsize=256)
def param_layout(params: tuple[Param, ...]) -> ParamLayout:
    """The layout of a kernel signature (built once per signature)."""
    return ParamLayout(params)


def pack_parameters(kernel: Kernel, args: Sequence[Any]) -> PackedParams:
    """Every parameter's bytes in one buffer; LaunchError naming the signature on a count
    mismatch or the parameter on a bad value."""
    if kernel.params is None:
        raise LaunchError(
            f"kernel {kernel.name}: parameter list unknown (load it from PTX, or "
            "pass signatures to load_cubin)"
        )
    return param_layout(kernel.params).pack(args, kernel.name)


class NativeLaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h)."""

    _fields_ = [
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p),
        ("numAttrs", ctypes.c_uint),
    ]


class NativeLaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute (cuda.h): an id padded to 8 bytes, then a 64-byte value union (a
    cluster's dims are its first three unsigned ints)."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint * 16)]


CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4


@functools.lru_cache(maxsize=256)
def launch_config(config: LaunchConfig) -> NativeLaunchConfig:
    """The CUlaunchConfig struct, with a cluster attribute when the cluster is not 1x1x1.

    Cached per config: the driver reads it during the call and does not keep it.
    """
    native = NativeLaunchConfig(*config.grid, *config.block, config.shared_bytes, config.stream)
    if config.cluster != (1, 1, 1):
        attrs = (NativeLaunchAttribute * 1)()
        attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attrs[0].value[0:3] = list(config.cluster)
        native.attrs, native.numAttrs = ctypes.addressof(attrs), 1
        native.attributes = attrs  # type: ignore[attr-defined] - kept alive with the config
    return native


@functools.cache
def launch_entry() -> Any:
    """The driver's cuLaunchKernelEx through ctypes: with its arguments built once, a launch
    is one foreign call (cuda-python's wrapper converts them again on every call)."""
    entry = libcuda().cuLaunchKernelEx
    entry.restype = ctypes.c_int
    return entry


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
    """A launch with its checks done (by `prepare_launch`, or a `LaunchPlan`) and its
    parameters packed once: call it to launch again.

    For timing loops, graphs and the launch caches: a call is one foreign call of
    cuLaunchKernelEx with the prebuilt config, function handle and parameter pointers. The
    arguments are captured as they were when prepared (a tensor map keeps describing the same
    memory).
    """

    def __init__(
        self, kernel: Kernel, config: LaunchConfig, params: PackedParams, args: Sequence[Any] = ()
    ):
        self.kernel, self.config, self.args = kernel, config, tuple(args)
        self.params, self.native = params, launch_config(config)
        self.call = functools.partial(
            launch_entry(), ctypes.byref(self.native), ctypes.c_void_p(int(kernel.handle)),
            params.pointers, None,
        )  # fmt: skip

    def __call__(self) -> None:
        result = self.call()
        if result:
            raise_for_result(result, "cuLaunchKernelEx")

    def release_arguments(self) -> None:
        """Drop the references to the arguments (the packed bytes stay): a launch cache keyed
        by what the bytes encode (addresses, shapes) must not keep the tensors alive."""
        self.args = ()


def prepare_launch(kernel: Kernel, config: LaunchConfig, *args: Any) -> PreparedLaunch:
    """Check and pack once; the returned object launches on each call."""
    kernel.module.device.make_current()
    config.check(kernel)
    kernel.reserve_shared_memory(config.shared_bytes)
    return PreparedLaunch(kernel, config, pack_parameters(kernel, args), args)


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


def kernel_arguments(
    program: CompiledProgram, args: Sequence[Any], maps_as_bytes: bool = False
) -> list[Any]:
    """One runtime value per `.param`, from the kernel's arguments in signature order (tensor
    maps from `TENSOR_MAPS`, or their 128 bytes with `maps_as_bytes`; each descriptor
    argument described once, its tensor map looked up by that description)."""
    values: list[Any] = []
    views: dict[int, Any] = {}
    for p in program.params:
        arg = args[p.arg]
        if p.field == "value":
            values.append(arg)
            continue
        view = views.get(p.arg)
        if view is None:
            view = views[p.arg] = describe(arg, p.name)
        if p.field == "tensormap":
            info = program.tensor_maps[p.arg]
            found = TENSOR_MAPS.get_view(view, info.box, info.swizzle or None, p.name)
            values.append(found.data if maps_as_bytes else found)
            continue
        if p.field == "ptr":
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
    descriptor arguments must be device tensors here, and the launcher keeps them alive."""
    handle = int(getattr(stream, "cuda_stream", stream) or 0)
    prepared = LaunchPlan(program).prepare(grid, args, handle)
    prepared.args = args  # kept alive: the caller times it over these tensors
    return prepared


class LaunchPlan:
    """The launches of one compiled program over device tensors, with what does not depend
    on the tensors worked out once: the loaded kernel, its parameter layout, where each
    `.param` comes from, and the checked launch config of each (grid, stream). Preparing a
    launch then costs the tensor maps not in `TENSOR_MAPS`, one description of each
    descriptor argument and one `struct.pack_into` (the jit's launch caches call this on
    every miss: a new output tensor each launch)."""

    def __init__(self, program: CompiledProgram):
        self.sms = device_sms(require_gpu())
        self.program = program
        self.kernel = load_kernel(program.ptx, program.name)
        if self.kernel.params is None or len(self.kernel.params) != len(program.params):
            raise LaunchError(f"kernel {program.name}: its PTX and its parameter list disagree")
        self.layout = param_layout(self.kernel.params)
        self.configs: dict[tuple[Any, int], tuple[LaunchConfig, list[int]]] = {}

    def config(self, grid: Sequence[int] | int, stream: int) -> tuple[LaunchConfig, list[int]]:
        """The checked launch config of a logical grid on `stream`, and the trailing
        arguments the program takes for it (a persistent kernel's logical grid)."""
        key = (grid if isinstance(grid, int) else tuple(grid), stream)
        found = self.configs.get(key)
        if found is None:
            launch_grid, extra = self.program.grid(grid, self.sms)
            config = LaunchConfig.make(
                launch_grid, self.program.threads, self.program.smem_bytes, 1, stream
            )
            config.check(self.kernel)
            self.kernel.reserve_shared_memory(config.shared_bytes)
            if len(self.configs) >= 256:  # grids of many shapes: forget them all, rarely
                self.configs.clear()
            found = self.configs[key] = (config, extra)
        return found

    def prepare(
        self, grid: Sequence[int] | int, args: Sequence[Any], stream: int
    ) -> PreparedLaunch:
        """The prepared launch of `args` (the kernel's arguments in signature order, device
        tensors in place of descriptors) on `grid`; it keeps no reference to them."""
        config, extra = self.config(grid, stream)
        self.kernel.module.device.make_current()
        values = kernel_arguments(self.program, [*args, *extra], maps_as_bytes=True)
        return PreparedLaunch(
            self.kernel, config, self.layout.pack_unchecked(values, self.kernel.name)
        )


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
