"""`@jit`: Triton-style kernels, compiled on first launch and cached per specialization.

    @tawa_xdsl.jit
    def kernel(x_desc, y_desc, n, BLOCK: tl.constexpr): ...

    kernel[grid](x_desc, y_desc, n, BLOCK=128)          # compile (once) and launch
    compiled = kernel.compile(x_desc, y_desc, n, BLOCK=128)
    compiled.ir["tile"]                                  # the IR of each stage, as text

A kernel is specialized on the values of its `tl.constexpr` parameters and on the types of
its run-time arguments (scalar dtype, descriptor element type and block shape); each distinct
key compiles once (`JITFunction.cache`). Launch keywords that are not parameters of the kernel
are compile options (`tawa_xdsl.compiler.LAUNCH_OPTIONS`: `num_stages`, `mma_depth`,
`num_consumer_groups`, `persistent`, `epilogue`, `registers`, `pingpong`, `verify`); they are
read into one `CompileOptions` at binding time (an unknown one is refused there, in one line),
are part of the compile key, and every one reaches the compiled kernel. The launch runs the
compiled kernel on the GPU (`tawa_xdsl.runtime.gpu_launch`) or in the tile interpreter;
`select_backend` is the one place that choice is made.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import ModuleOp

import tawa_xdsl.language as tl
from tawa_xdsl import compiler
from tawa_xdsl.compiler import CompileOptions, compile_to_ptx, options_from_launch
from tawa_xdsl.frontend.codegen import generate_kernel, is_constexpr_annotation
from tawa_xdsl.frontend.errors import SemanticError
from tawa_xdsl.frontend.signature import ArgType, arg_type_of
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.runtime import gpu_available, gpu_launch

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

    @property
    def ir(self) -> StageIR:
        """The IR of every stage as text: `ir["tile"]`, ..., `ir["ptx"]`."""
        return StageIR(self)

    def gpu_kernel(self) -> compiler.CompiledKernel:
        """The kernel taken to PTX with this specialization's compile options (compiled once;
        needs no GPU)."""
        if self._gpu_kernel is None:
            self._gpu_kernel = compile_to_ptx(self.module, self.options)
        return self._gpu_kernel

    def run(self, grid: Sequence[int] | int, *args: Any, interpret: bool | None = None) -> None:
        """Launch on `grid` with the run-time arguments in signature order."""
        launcher = select_backend(interpret)
        launcher(self, grid, list(args))


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


# ------------------------------------------------------------------------------ backends

Launcher = Callable[[CompiledKernel, Sequence[int] | int, list[Any]], None]


def interpret_launch(compiled: CompiledKernel, grid: Sequence[int] | int, args: list[Any]) -> None:
    """Run every program of the grid in the tile interpreter; stores write the numpy arrays
    behind the descriptors in place."""
    run_kernel(compiled.module, grid, args, kernel=compiled.name)


def gpu_backend() -> Launcher | None:
    """The GPU launcher when a usable GPU and driver are present, else None."""
    return gpu_launch if gpu_available() else None


def interpret_requested(interpret: bool | None) -> bool | None:
    """`interpret` if given, else True when TAWA_INTERPRET is set to a non-zero value."""
    if interpret is not None:
        return interpret
    flag = os.environ.get("TAWA_INTERPRET", "").strip().lower()
    return True if flag not in ("", "0", "false", "no") else None


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
        self.cache: dict[tuple[Any, ...], CompiledKernel] = {}
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
        def launch(*args: Any, **kwargs: Any) -> CompiledKernel:
            return self.run(*args, grid=grid, **kwargs)

        return launch

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
        """(run-time parameters with their types), (constexpr values)."""
        constexprs = {name: arguments[name] for name in self.constexpr_names}
        signature = []
        for name, value in arguments.items():
            if name in constexprs:
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
        interpret = kwargs.pop("interpret", self.interpret)
        arguments, options = self.bind(args, dict(kwargs))
        compiled = self._compile(arguments, options)
        meta = {**arguments, **{k: v for k, v in kwargs.items() if k not in arguments}}
        grid_size = grid(meta) if callable(grid) else grid
        runtime_args = [arguments[name] for name, _ in compiled.signature]
        compiled.run(_grid_tuple(grid_size), *runtime_args, interpret=interpret)
        return compiled


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _grid_tuple(grid: Any) -> tuple[int, ...]:
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
