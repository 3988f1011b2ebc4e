"""The GPU launch of a `@jit` kernel: device tensors in place, prepared launches cached.

`gpu_launch(compiled, grid, args, stream)` is the `jit` GPU backend. Descriptor arguments over
device memory (torch CUDA tensors, `__cuda_array_interface__` or DLPack objects, DeviceArrays)
are used in place: the kernel reads and writes the caller's tensor, nothing is copied. A
launch with any descriptor over host memory (numpy, torch CPU) takes the copying path of
`CompiledKernel.launch` instead (copied in, and back out after the launch).

A device launch goes through the kernel's `LaunchCache`: the key is (grid, stream, and for
every argument what its packed bytes depend on: a descriptor's address, element type, shape,
strides and block shape; a scalar's type and value). A hit is one dict lookup and one
cuLaunchKernelEx with the tensor maps and parameter buffers built by the first launch. A miss
prepares through the kernel's `runtime.launch.LaunchPlan` (the loaded kernel, parameter
layout and launch configs worked out once): only the new tensors' maps are encoded. The
cached launch holds no reference to the tensors (their memory is named by the key: a new
tensor at the same address with the same layout is described by the same bytes).

The stream is `stream=` (an int handle or an object with `.cuda_stream`), else torch's
current stream when an argument is a torch CUDA tensor, else the default stream.
"""

from __future__ import annotations

import functools
import sys
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from tawa_xdsl.runtime.memory import is_device_tensor, layout_key
from tawa_xdsl.runtime.tensors import host_array, is_torch_tensor


class Prepared(Protocol):
    """What a cache entry is: a launcher that can drop its argument references."""

    def __call__(self) -> None: ...

    def release_arguments(self) -> None: ...


Prepare = Callable[[Any, tuple[int, ...], list[Any], int], Prepared]


def is_descriptor(value: Any) -> bool:
    return hasattr(value, "block_shape") and getattr(value, "base", None) is not None


def argument_key(value: Any) -> Hashable:
    """What the packed parameter bytes of one kernel argument depend on (a scalar and a torch
    tensor, the arguments of `tawa_xdsl.ops`, recognised first: this runs on every launch)."""
    kind = value.__class__
    if kind is int or kind is float or kind is bool:
        return kind, value
    if is_torch_tensor(value):  # a tensor a program takes as it is (tawa_xdsl.ops)
        return value.data_ptr(), value.dtype, value.shape, value.stride()
    if is_descriptor(value):
        return layout_key(value.base), tuple(value.block_shape)
    return kind, value


class LaunchCache:
    """Prepared launches of one compiled kernel, least recently used dropped past `capacity`.
    `prepare` makes one on a miss (default: the kernel's `runtime.launch.LaunchPlan`, built on
    the first miss)."""

    def __init__(self, kernel: Any, prepare: Prepare | None = None, capacity: int = 64):
        self.kernel = kernel
        self.prepare = prepare or self.prepare_planned
        self.capacity = capacity
        self.entries: OrderedDict[Hashable, Prepared] = OrderedDict()
        self.plan: Any = None
        self.hits = 0
        self.misses = 0

    def prepare_planned(
        self, kernel: Any, grid: tuple[int, ...], args: list[Any], stream: int
    ) -> Prepared:
        """A prepared launch through the kernel's launch plan."""
        if self.plan is None:
            from tawa_xdsl.runtime.launch import LaunchPlan

            self.plan = LaunchPlan(kernel)
        return self.plan.prepare(grid, args, stream)

    def prepared(self, grid: tuple[int, ...], args: Sequence[Any], stream: int) -> Prepared:
        """A new prepared launch of `args` (descriptors or device tensors), not remembered
        here: for callers that key their own cache (`jit.RepeatLaunch`)."""
        self.misses += 1
        device_args = [a.base if is_descriptor(a) else a for a in args]
        prepared = self.prepare(self.kernel, grid, device_args, stream)
        prepared.release_arguments()
        return prepared

    def launch(self, grid: tuple[int, ...], args: Sequence[Any], stream: int) -> Prepared:
        """Launch, preparing first on a miss; returns the prepared launch it ran."""
        key = (grid, stream, tuple(argument_key(a) for a in args))
        prepared = self.entries.get(key)
        if prepared is None:
            prepared = self.entries[key] = self.prepared(grid, args, stream)
            if len(self.entries) > self.capacity:
                self.entries.popitem(last=False)
        else:
            self.hits += 1
            self.entries.move_to_end(key)
        prepared()
        return prepared


def torch_stream(tensor: Any) -> int:
    """The raw handle of torch's current stream on `tensor`'s device."""
    return current_torch_stream(tensor.get_device())


def current_torch_stream(device: int) -> int:
    """The raw handle of torch's current stream on CUDA device `device`."""
    return torch_stream_reader(device)()


def torch_stream_reader(device: int) -> Callable[[], int]:
    """A function returning the raw handle of torch's current stream on CUDA device `device`:
    the raw getter bound to the device (Triton reads the stream the same way: the public
    `current_stream()` builds a Stream object on every call, microseconds of a launch)."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return functools.partial(raw, device)
    return lambda: int(torch.cuda.current_stream(device).cuda_stream)


def resolve_stream(stream: Any, args: Sequence[Any]) -> int:
    """`stream` as a handle; None: torch's current stream for a torch argument, else 0."""
    if stream is not None:
        return int(getattr(stream, "cuda_stream", stream) or 0)
    if "torch" in sys.modules:
        for a in args:
            base = a.base if is_descriptor(a) else a
            if is_torch_tensor(base) and base.is_cuda:
                return torch_stream(base)
    return 0


def host_descriptor(value: Any) -> Any:
    """A descriptor over a host tensor as one over a numpy array sharing its memory (the form
    the interpreter and the copying launch read); anything else unchanged."""
    if not is_descriptor(value) or isinstance(value.base, np.ndarray):
        return value
    array = host_array(value.base)
    if array is None:
        return value
    return replace(value, base=array)


def has_host_descriptor(args: Sequence[Any]) -> bool:
    return any(is_descriptor(a) and not is_device_tensor(a.base) for a in args)


def gpu_launch(
    jit_kernel: Any, grid: tuple[int, ...], args: list[Any], stream: Any = None
) -> Prepared | None:
    """A `jit.Launcher` for the GPU (see the module docstring). Returns the prepared launch
    when the launch went through the cache (a caller may run it again for the same
    arguments), None for the copying path and an empty grid."""
    kernel = jit_kernel.gpu_kernel()
    if has_host_descriptor(args):
        staged = [
            a.base if is_descriptor(a) and is_device_tensor(a.base) else host_descriptor(a)
            for a in args
        ]
        kernel.launch(grid, *staged, stream=resolve_stream(stream, args))
        return None
    if 0 in grid:
        return None  # no program instances: nothing to run (a zero grid is a driver error)
    return jit_kernel.launch_cache().launch(grid, args, resolve_stream(stream, args))
