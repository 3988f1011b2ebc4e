"""`@jit`: Triton-style kernels, compiled on first launch and cached per specialization.

    @tawa_xdsl.jit
    def kernel(x_desc, y_desc, n, BLOCK: tl.constexpr): ...

    kernel[grid](x_desc, y_desc, n, BLOCK=128)          # compile (once) and launch
    compiled = kernel.compile(x_desc, y_desc, n, BLOCK=128)
    compiled.ir["tile"]                                  # the IR of each stage, as text
    compiled.asm["cubin"], compiled.metadata.registers   # Triton's .asm and .metadata

A kernel is specialized on the values of its `tl.constexpr` parameters and on the types of
its run-time arguments (scalar dtype, descriptor element type and block shape; a None argument
is a constexpr None, as in Triton); each distinct key compiles once (`JITFunction.cache`).
Launch keywords that are not parameters of the kernel are compile options
(`tawa_xdsl.compiler.LAUNCH_OPTIONS`: `num_stages`, `mma_depth`, `num_consumer_groups`,
`persistent`, `epilogue`, `registers`, `pingpong`, `verify`); they are
read into one `CompileOptions` at binding time (an unknown one is refused there, in one line),
are part of the compile key, and every one reaches the compiled kernel. The launch runs the
compiled kernel on the GPU (`tawa_xdsl.runtime.dispatch.gpu_launch`) or in the tile
interpreter; `select_backend` is the one place that choice is made.

Descriptors may describe numpy arrays, torch tensors (CPU or CUDA) or any
`__cuda_array_interface__` / DLPack object (`TensorDescriptor.from_tensor`). On the GPU a
device tensor is used in place on torch's current stream (or `stream=`); in the interpreter a
host tensor is read and written in place. A repeated launch with arguments of the same types
skips binding and specialization (`JITFunction.dispatch`, keyed by the argument types and the
constexpr values). On the GPU a launch whose descriptors are all over device tensors is keyed
once more by everything its packed parameters depend on (`launch_key`: addresses, shapes,
strides, block shapes, scalar values), so a repeat with the same grid and stream is two dict
lookups and the prepared cuLaunchKernelEx (`RepeatLaunch`), without choosing the backend
again; a new key (a new output tensor each launch) prepares its launch through the kernel's
`runtime.launch.LaunchPlan`, encoding only the new tensors' maps; anything else reuses the
prepared launches of `runtime.dispatch`. PTX is compiled once
per machine: `compiler.compile_cached` keeps it on disk.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import types
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

import tawa_xdsl.language as tl
from tawa_xdsl import compiler
from tawa_xdsl.backend.emit_ptx import EmitError, emit_ptx
from tawa_xdsl.backend.ptxas import PtxasResult, assemble
from tawa_xdsl.compiler import LAUNCH_OPTIONS, CompileOptions, compile_cached, options_from_launch
from tawa_xdsl.descriptor import TensorDescriptor
from tawa_xdsl.diagnostics import first_line
from tawa_xdsl.frontend.codegen import generate_kernel, is_constexpr_annotation
from tawa_xdsl.frontend.errors import SemanticError
from tawa_xdsl.frontend.signature import ArgType, arg_type_of
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.runtime import gpu_available
from tawa_xdsl.runtime.dispatch import (
    LaunchCache,
    gpu_launch,
    host_descriptor,
    is_descriptor,
    torch_stream_reader,
)
from tawa_xdsl.runtime.memory import DeviceArray
from tawa_xdsl.runtime.tensors import is_torch_tensor

Grid = tuple[int, ...] | int | Callable[[dict[str, Any]], Any]


# The stages a kernel passes through, in order; `CompiledKernel.ir` has one entry per stage.
STAGES = ("tile", "aref", "mbarrier", "nvgpu", "ptx")


@dataclass
class CompiledKernel:
    """One specialization of a kernel: its tile IR, and its later stages on demand."""

    name: str
    module: ModuleOp
    signature: list[tuple[str, ArgType]]
    constexprs: dict[str, Any]
    options: CompileOptions = field(default_factory=CompileOptions)
    _gpu_kernel: compiler.CompiledKernel | None = field(default=None, repr=False)
    _launches: Any = field(default=None, repr=False)
    _ptxas: PtxasResult | None = field(default=None, repr=False)
    _gpu_refusal: str | None = field(default=None, repr=False)

    @property
    def ir(self) -> StageIR:
        """The IR of every stage as text: `ir["tile"]`, ..., `ir["ptx"]`."""
        return StageIR(self)

    @property
    def asm(self) -> KernelAsm:
        """Triton's `.asm`: the stage IR (`asm["ptx"]`, ...) and `asm["cubin"]` (bytes)."""
        return KernelAsm(self)

    @property
    def metadata(self) -> KernelMetadata:
        """Triton's `.metadata`: registers and spills as ptxas reports them, shared memory
        and threads as the compiler planned them."""
        result, kernel = self.assembled(), self.gpu_kernel()
        return KernelMetadata(
            kernel.name, result.registers, result.spill_bytes, kernel.smem_bytes, kernel.threads
        )

    def assembled(self) -> PtxasResult:
        """`ptxas -arch=sm_90a -v` of the PTX (run once); RuntimeError in one line without
        ptxas or when it refuses the PTX."""
        if self._ptxas is None:
            try:
                result = assemble(self.gpu_kernel().ptx)
            except FileNotFoundError:
                raise RuntimeError(
                    f"{self.name}: .asm['cubin'] and .metadata run ptxas, which is not on PATH "
                    "(install the CUDA toolkit, or read .asm['ptx'])"
                ) from None
            if result.returncode != 0:
                last = result.log.strip().splitlines()[-1:] or ["no output"]
                raise RuntimeError(f"{self.name}: ptxas refused the PTX: {last[0]}")
            self._ptxas = result
        return self._ptxas

    def gpu_kernel(self) -> compiler.CompiledKernel:
        """The kernel taken to PTX with this specialization's compile options (compiled once;
        needs no GPU)."""
        if self._gpu_kernel is None:
            self._gpu_kernel = compile_cached(self.module, self.options)
        return self._gpu_kernel

    def gpu_refusal(self) -> str:
        """The one line the GPU backend refuses this specialization with ("" when it
        compiles): the kernel taken to PTX as the GPU path takes it, ring proofs included
        when `options.verify` (a protocol the verifier cannot model is a GPU refusal too;
        proofs are cached by shape, so a later GPU compile reuses them). Checked once."""
        if self._gpu_refusal is None:
            self._gpu_refusal = ""
            try:
                emit_ptx(compiler.lower_to_nvgpu_level(self.module, self.options))
            except (DiagnosticException, EmitError, ValueError) as error:
                self._gpu_refusal = first_line(error)
        return self._gpu_refusal

    def launch_cache(self) -> Any:
        """The prepared GPU launches of this specialization (`runtime.dispatch.LaunchCache`)."""
        if self._launches is None:
            self._launches = LaunchCache(self.gpu_kernel())
        return self._launches

    def run(
        self,
        grid: Sequence[int] | int,
        *args: Any,
        interpret: bool | None = None,
        stream: Any = None,
    ) -> None:
        """Launch on `grid` with the run-time arguments in signature order."""
        launcher = select_backend(interpret)
        launcher(self, grid_tuple(grid), list(args), stream)

    def __getitem__(self, grid: Grid) -> Callable[..., None]:
        """`compiled[grid](*args)`, as Triton's compiled kernels: the run-time arguments in
        signature order (or by name); constexprs given again must equal the compiled ones."""

        def launch(*args: Any, **kwargs: Any) -> None:
            interpret = kwargs.pop("interpret", None)
            stream = kwargs.pop("stream", None)
            runtime = self.runtime_arguments(args, kwargs)
            size = grid({**dict(zip(self.runtime_names(), runtime, strict=True)),
                         **self.constexprs}) if callable(grid) else grid  # fmt: skip
            self.run(size, *runtime, interpret=interpret, stream=stream)

        return launch

    def runtime_names(self) -> list[str]:
        return [name for name, _ in self.signature]

    def runtime_arguments(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Any]:
        """The run-time arguments of a `compiled[grid](...)` call, in signature order."""
        names = self.runtime_names()
        for name, value in list(kwargs.items()):
            if name in self.constexprs:
                given = value.value if isinstance(value, tl.constexpr) else value
                if given != self.constexprs[name]:
                    raise TypeError(
                        f"{self.name}: compiled with {name}={self.constexprs[name]!r}, "
                        f"called with {name}={given!r}"
                    )
                del kwargs[name]
        if len(args) > len(names):
            raise TypeError(
                f"{self.name}: takes {len(names)} run-time arguments "
                f"({', '.join(names)}); got {len(args)}"
            )
        values = dict(zip(names, args, strict=False))
        for name, value in kwargs.items():
            if name not in names or name in values:
                raise TypeError(f"{self.name}: unexpected or repeated argument '{name}'")
            values[name] = value
        missing = [n for n in names if n not in values]
        if missing:
            raise TypeError(f"{self.name}: missing run-time arguments: {', '.join(missing)}")
        return [values[n] for n in names]


class StageIR(Mapping[str, str]):
    """The stages of a compiled kernel; those past "tile" are lowered on first access."""

    def __init__(self, kernel: CompiledKernel):
        self.kernel = kernel

    def __getitem__(self, stage: str) -> str:
        if stage not in STAGES:
            raise KeyError(f"unknown stage '{stage}'; stages: {', '.join(STAGES)}")
        if stage == "tile":
            return str(self.kernel.module)
        return self.kernel.gpu_kernel().ir[stage]

    def __iter__(self) -> Iterator[str]:
        return iter(STAGES)

    def __len__(self) -> int:
        return len(STAGES)


class KernelAsm(Mapping[str, str | bytes]):
    """`CompiledKernel.asm`: every stage's IR as text, and "cubin", ptxas's bytes."""

    def __init__(self, kernel: CompiledKernel):
        self.kernel = kernel

    def __getitem__(self, key: str) -> str | bytes:
        if key == "cubin":
            return self.kernel.assembled().cubin
        return self.kernel.ir[key]

    def __iter__(self) -> Iterator[str]:
        return iter((*STAGES, "cubin"))

    def __len__(self) -> int:
        return len(STAGES) + 1


@dataclass(frozen=True)
class KernelMetadata:
    """What a compiled kernel uses per CTA: registers per thread and spilled bytes (ptxas),
    dynamic shared memory in bytes and threads (the compiler's plan)."""

    name: str
    registers: int | None
    spills: int
    shared: int
    threads: int

    @property
    def num_warps(self) -> int:
        return self.threads // 32


# ------------------------------------------------------------------------------ backends

Launcher = Callable[[CompiledKernel, tuple[int, ...], list[Any], Any], Any]


def interpret_launch(
    compiled: CompiledKernel, grid: tuple[int, ...], args: list[Any], stream: Any = None
) -> None:
    """Run every program of the grid in the tile interpreter; stores write the host tensors
    behind the descriptors (numpy, torch CPU) in place. A torch CUDA tensor is copied to the
    host and back, as Triton's interpreter does; the stream is ignored.

    One truth for both paths: a kernel the GPU backend refuses still runs here (the
    interpreter is the reference, and CPU-only users debug with it), with a
    `GpuRefusalWarning` carrying the GPU's one-line refusal, naming the line."""
    refusal = compiled.gpu_refusal()
    if refusal:
        warnings.warn(GpuRefusalWarning(f"{refusal} (the GPU backend refuses this kernel)"),
                      stacklevel=3)  # fmt: skip
    staged, write_back = [], []
    for a in args:
        if is_descriptor(a) and is_torch_tensor(a.base) and a.base.is_cuda:
            host = a.base.detach().cpu()
            write_back.append((a.base, host))
            a = replace(a, base=host)
        staged.append(host_descriptor(a))
    run_kernel(compiled.module, grid, staged, kernel=compiled.name)
    for device, host in write_back:
        device.copy_(host)


class GpuRefusalWarning(UserWarning):
    """An interpreted kernel that the GPU backend would refuse: the refusal, in one line."""


def gpu_backend() -> Launcher | None:
    """The GPU launcher when a usable GPU and driver are present, else None."""
    return gpu_launch if gpu_available() else None


def interpret_requested(interpret: bool | None) -> bool | None:
    """`interpret` if given, else True when TAWA_INTERPRET (or Triton's TRITON_INTERPRET) is
    set to a non-zero value."""
    if interpret is not None:
        return interpret
    for variable in ("TAWA_INTERPRET", "TRITON_INTERPRET"):
        flag = os.environ.get(variable, "").strip().lower()
        if flag not in ("", "0", "false", "no"):
            return True
    return None


def select_backend(interpret: bool | None) -> Launcher:
    """The interpreter when asked for (or when no GPU backend exists); the GPU otherwise.
    Forcing `interpret=False` without a GPU backend is an error."""
    requested = interpret_requested(interpret)
    if requested:
        return interpret_launch
    backend = gpu_backend()
    if backend is not None:
        return backend
    if requested is False:
        raise RuntimeError(
            "interpret=False, but no usable GPU was found (tawa_xdsl.runtime.gpu_available() "
            "is False); use interpret=True or leave interpret unset"
        )
    return interpret_launch


# --------------------------------------------------------------------------- the decorator


class JITFunction:
    """A kernel (or a helper inlined into kernels). Launch with `kernel[grid](*args, **meta)`."""

    def __init__(self, fn: Callable[..., Any], interpret: bool | None = None):
        self.fn = fn
        self.interpret = interpret
        self.signature = inspect.signature(fn)
        self.constexpr_names = [
            name
            for name, param in self.signature.parameters.items()
            if is_constexpr_annotation(param.annotation)
        ]
        self.param_names = list(self.signature.parameters)
        self.specialized_names = frozenset([*self.constexpr_names, *LAUNCH_OPTIONS])
        self.defaults = {
            name: param.default
            for name, param in self.signature.parameters.items()
            if param.default is not inspect.Parameter.empty
        }
        self.meta_defaults = {
            name: value.value if isinstance(value, tl.constexpr) else value
            for name, value in self.defaults.items()
        }
        self.cache: dict[tuple[Any, ...], CompiledKernel] = {}
        self.dispatch: dict[tuple[Any, ...], DispatchEntry] = {}
        self.launches: dict[tuple[Any, ...], RepeatLaunch] = {}
        self.repeat_hits = 0
        self.__tawa_jit_function__ = fn
        functools.update_wrapper(self, fn)

    def __repr__(self) -> str:
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"@jit function {self.fn.__name__} cannot be called directly; launch it with "
            f"{self.fn.__name__}[grid](...) or call it from another @jit function"
        )

    def __getitem__(self, grid: Grid) -> Callable[..., CompiledKernel]:
        return functools.partial(self.launch, grid)

    # ------------------------------------------------------------------------- binding

    def bind(
        self, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], CompileOptions]:
        """(every parameter by name, with defaults), (the compile options of the launch
        keywords that are not parameters)."""
        params = self.signature.parameters
        launch = {k: kwargs.pop(k) for k in list(kwargs) if k not in params}
        try:
            options = options_from_launch(launch)
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{self.fn.__name__}: {error}") from None
        bound.apply_defaults()
        arguments = {
            name: value.value if isinstance(value, tl.constexpr) else value
            for name, value in bound.arguments.items()
        }
        return arguments, options

    def specialize(
        self, arguments: dict[str, Any]
    ) -> tuple[list[tuple[str, ArgType]], dict[str, Any]]:
        """(run-time parameters with their types), (constexpr values). A run-time parameter
        given None is a constexpr None, as in Triton (`if bias_desc is not None:` in the kernel
        is decided when it compiles)."""
        constexprs = {name: arguments[name] for name in self.constexpr_names}
        signature = []
        for name, value in arguments.items():
            if name in constexprs:
                continue
            if value is None:
                constexprs[name] = None
                continue
            try:
                signature.append((name, arg_type_of(value)))
            except SemanticError as error:
                raise TypeError(f"{self.fn.__name__} argument '{name}': {error}") from None
        return signature, constexprs

    # ------------------------------------------------------------------------- compiling

    def compile(self, *args: Any, **kwargs: Any) -> CompiledKernel:
        """Compile for these arguments (values, or `ScalarArg`/`DescriptorArg` types for the
        run-time ones) without launching; cached per specialization."""
        arguments, options = self.bind(args, dict(kwargs))
        return self._compile(arguments, options)

    def warmup(self, *args: Any, grid: Grid | None = None, **kwargs: Any) -> CompiledKernel:
        """Triton's name for `compile` (the grid is accepted and unused)."""
        return self.compile(*args, **kwargs)

    def _compile(self, arguments: dict[str, Any], options: CompileOptions) -> CompiledKernel:
        signature, constexprs = self.specialize(arguments)
        key = (
            tuple(signature),
            tuple(sorted((k, _hashable(v)) for k, v in constexprs.items())),
            options,
        )
        if key not in self.cache:
            module = generate_kernel(self.fn, signature, constexprs)
            compiled = CompiledKernel(self.fn.__name__, module, signature, constexprs, options)
            self.cache[key] = compiled
        return self.cache[key]

    # ------------------------------------------------------------------------- launching

    def run(self, *args: Any, grid: Grid, **kwargs: Any) -> CompiledKernel:
        """Triton's spelling of `kernel[grid](*args, **kwargs)`."""
        return self.launch(grid, *args, **kwargs)

    def launch(self, grid: Grid, *args: Any, **kwargs: Any) -> CompiledKernel:
        """`kernel[grid](*args, **kwargs)`. A repeat of a GPU launch (the same `launch_key`)
        goes straight to its `RepeatLaunch`, without choosing the backend again (the
        interpret variables are read when a launch is first seen)."""
        if "interpret" in kwargs or "stream" in kwargs:
            interpret = kwargs.pop("interpret", self.interpret)
            stream = kwargs.pop("stream", None)
        else:
            interpret, stream = self.interpret, None
        key = None if interpret else launch_key(args, kwargs)
        if key is not None:
            repeat = self.launches.get(key)
            if repeat is not None:
                return repeat.launch(self, grid, args, kwargs, stream)
        backend = select_backend(interpret)
        if backend is gpu_launch and key is not None:
            return self.repeat_launch(key, args, kwargs).launch(self, grid, args, kwargs, stream)
        entry = self.entry_for(args, kwargs)
        if callable(grid):
            grid = grid(entry.meta(self, args, kwargs))
        backend(entry.compiled, grid_tuple(grid), entry.runtime_args(args, kwargs), stream)
        return entry.compiled

    def repeat_launch(
        self, key: tuple[Any, ...], args: Sequence[Any], kwargs: dict[str, Any]
    ) -> RepeatLaunch:
        """The `RepeatLaunch` of a new launch key (its arguments all device tensors and plain
        values), the oldest forgotten past `MAX_REPEAT_LAUNCHES`."""
        wrapped = any(isinstance(v, tl.constexpr) for v in (*args, *kwargs.values()))
        repeat = RepeatLaunch(self.entry_for(args, kwargs), current_stream(args), wrapped)
        if len(self.launches) >= MAX_REPEAT_LAUNCHES:
            del self.launches[next(iter(self.launches))]
        self.launches[key] = repeat
        return repeat

    def entry_for(self, args: Sequence[Any], kwargs: dict[str, Any]) -> DispatchEntry:
        """The dispatch entry of a launch (bound, specialized and compiled on the first)."""
        key = self.dispatch_key(args, kwargs)
        try:
            entry = self.dispatch.get(key) if key is not None else None
        except TypeError:  # an unhashable constexpr value: bind, which reports or handles it
            entry = key = None
        if entry is None:
            entry = self.dispatch_entry(args, kwargs)
            if key is not None:
                self.dispatch[key] = entry
        return entry

    def dispatch_key(
        self, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> tuple[Any, ...] | None:
        """What selects the specialization of a launch, computed without binding: constexpr
        and option values, run-time argument types. None when a value is not hashable or not a
        kernel argument (the launch then binds, which reports the error)."""
        names = self.param_names
        if len(args) > len(names):
            return None
        key: list[Any] = [len(args)]
        try:
            for name, value in zip(names, args, strict=False):
                key.append(self.value_key(name, value))
            for name, value in kwargs.items():
                key.append(name)
                key.append(self.value_key(name, value))
        except SemanticError:
            return None
        return tuple(key)

    def value_key(self, name: str, value: Any) -> Any:
        """A constexpr's or option's value; a run-time argument's type (what `arg_type_of`
        depends on: for an int whether it fits in int32, for a descriptor its element type
        and block shape)."""
        if name in self.specialized_names:
            return value.value if isinstance(value, tl.constexpr) else value
        if value is None:
            return None
        kind = type(value)
        if kind is int:
            return int if -(2**31) <= value < 2**31 else arg_type_of(value)
        if kind is float or kind is bool:
            return kind
        if hasattr(value, "block_shape"):
            return getattr(value, "element_type", None) or value.dtype, tuple(value.block_shape)
        return arg_type_of(value)

    def dispatch_entry(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> DispatchEntry:
        """Bind, specialize and compile once; record where each run-time argument comes from."""
        arguments, options = self.bind(args, dict(kwargs))
        compiled = self._compile(arguments, options)
        position = {name: i for i, name in enumerate(self.param_names[: len(args)])}
        sources = []
        for name, _ in compiled.signature:
            if name in position:
                sources.append(("arg", position[name]))
            elif name in kwargs:
                sources.append(("kwarg", name))
            else:
                sources.append(("default", arguments[name]))
        return DispatchEntry(compiled, tuple(sources))


@dataclass(frozen=True)
class DispatchEntry:
    """A launch's specialization and where its run-time arguments are in a call's (args,
    kwargs): ("arg", index), ("kwarg", name) or ("default", value)."""

    compiled: CompiledKernel
    sources: tuple[tuple[str, Any], ...]

    def runtime_args(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any]:
        return [
            args[ref] if kind == "arg" else kwargs[ref] if kind == "kwarg" else ref
            for kind, ref in self.sources
        ]

    def meta(
        self, fn: JITFunction, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Every parameter and launch option by name, for a grid callable."""
        merged = {**fn.defaults, **dict(zip(fn.param_names, args, strict=False)), **kwargs}
        return {k: v.value if isinstance(v, tl.constexpr) else v for k, v in merged.items()}


# How many launch keys a kernel remembers (and prepared launches per key) before forgetting
# the oldest: a training loop whose activations move every step must not grow without bound.
MAX_REPEAT_LAUNCHES = 256


@dataclass
class RepeatLaunch:
    """What a repeated GPU launch needs beyond its `launch_key`: the dispatch entry, how to
    read the stream it runs on when `stream=` is not given (torch's current stream on the
    tensors' device, the raw getter bound once; else the default stream), and the prepared
    launches by (grid, stream)."""

    entry: DispatchEntry
    stream: Callable[[], int]
    wrapped: bool  # an argument is a tl.constexpr (the launch key says so: fixed per key)
    prepared: dict[tuple[Any, int], Any] = field(default_factory=dict)

    def launch(
        self, fn: JITFunction, grid: Grid, args: Sequence[Any], kwargs: dict[str, Any],
        stream: Any,
    ) -> CompiledKernel:  # fmt: skip
        """Run the prepared launch of (grid, stream), preparing it on first use."""
        if callable(grid):
            if self.wrapped:
                grid = grid(self.entry.meta(fn, args, kwargs))
            else:  # the meta dict without looking for constexpr wrappers
                meta = dict(fn.meta_defaults)
                meta.update(zip(fn.param_names, args, strict=False))
                meta.update(kwargs)
                grid = grid(meta)
        handle = self.stream() if stream is None else stream_handle(stream)
        try:
            prepared = self.prepared.get((grid, handle))
        except TypeError:  # an unhashable grid (a list): launch without remembering it
            prepared, grid = None, grid_tuple(grid)
        if prepared is not None:
            fn.repeat_hits += 1
            prepared()
            return self.entry.compiled
        dims = grid_tuple(grid)
        if 0 in dims:
            return self.entry.compiled  # no program instances: nothing to run
        runtime = self.entry.runtime_args(args, kwargs)
        # the launch key names every tensor: prepare without the LaunchCache's own keying
        prepared = self.entry.compiled.launch_cache().prepared(dims, runtime, handle)
        prepared()
        if not isinstance(grid, list):
            if len(self.prepared) >= MAX_REPEAT_LAUNCHES:
                self.prepared.clear()
            self.prepared[grid, handle] = prepared
        return self.entry.compiled


# The types whose values `launch_key` takes as they are (with the type: 1, 1.0 and True are
# equal as dict keys but not as kernel arguments).
PLAIN_VALUES = frozenset((int, float, bool, str, type(None)))


def launch_item(value: Any) -> Hashable | None:
    """The key of an argument that is neither a plain value nor a descriptor: a constexpr
    wrapper's value, a dtype; None for anything else (the launch then takes the general
    path)."""
    kind = value.__class__
    if kind in PLAIN_VALUES:
        return kind, value
    if kind is tl.constexpr:
        return tl.constexpr, launch_item(value.value)
    if isinstance(value, tl.dtype):
        return kind, str(value)
    return None


def launch_key(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """The key of a GPU launch's `RepeatLaunch`: all that its specialization and its packed
    parameter bytes depend on, or None when an argument is none of these (the launch then
    takes the general path). Runs on every launch, so the items go in flat: an int as itself
    (its value also decides int32 or int64); a descriptor over a torch CUDA tensor or a
    DeviceArray as five entries, its element type (a str), block shape, address, shape and
    strides; any other plain value as (type, value) and anything else as its `launch_item`,
    both tuples. A bare str always begins a descriptor's five, so two different argument
    lists never give one key."""
    key: list[Any] = [len(args), *kwargs]
    append, extend = key.append, key.extend
    torch = sys.modules.get("torch")
    tensor_type = None if torch is None else torch.Tensor
    for value in (*args, *kwargs.values()):
        kind = value.__class__
        if kind is int:
            append(value)
        elif kind is TensorDescriptor:
            base = value.base
            if base.__class__ is DeviceArray:
                view = base.view
                layout = (view.pointer, view.shape, view.strides)
            elif tensor_type is not None and isinstance(base, tensor_type) and base.is_cuda:
                layout = (base.data_ptr(), base.shape, base.stride())
            else:
                return None
            extend((value.element_type, tuple(value.block_shape), *layout))
        elif kind in PLAIN_VALUES:
            append((kind, value))
        else:
            item = launch_item(value)
            if item is None:
                return None
            append(item)
    return tuple(key)


def current_stream(args: Sequence[Any]) -> Callable[[], int]:
    """How to read the stream of a launch without `stream=`: torch's current stream on the
    device of the first torch CUDA tensor behind a descriptor argument, else the default
    stream (0)."""
    torch = sys.modules.get("torch")
    for value in args:
        base = getattr(value, "base", None)
        if torch is not None and isinstance(base, torch.Tensor) and base.is_cuda:
            return torch_stream_reader(base.get_device())
    return int


def stream_handle(stream: Any) -> int:
    """`stream=` as a handle (an int, or an object with `.cuda_stream`)."""
    return int(getattr(stream, "cuda_stream", stream) or 0)


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def grid_tuple(grid: Any) -> tuple[int, ...]:
    dims = (grid,) if isinstance(grid, int) else tuple(grid)
    return tuple(int(d) for d in dims)


def jit(fn: Callable[..., Any] | None = None, *, interpret: bool | None = None, **_: Any) -> Any:
    """Decorate a kernel or a helper: `@jit`, or `@jit(interpret=True)`.

    Other Triton keyword arguments (`do_not_specialize`, `debug`, ...) are accepted and
    ignored."""
    if fn is None:
        return lambda f: JITFunction(f, interpret=interpret)
    return JITFunction(fn, interpret=interpret)


class _CallableModule(types.ModuleType):
    """Makes `tawa_xdsl.jit` usable as the decorator although it is also this module's name:
    once `tawa_xdsl.jit` is imported as a module, the package attribute is the module, so the
    module itself must decorate."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return jit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
