"""`tawa-run`: run a tile kernel in the numpy interpreter from the command line.

    tawa-run examples/gemm.mlir --grid 6 --args a_desc=randn:300x100:f16 b_desc=randn:200x100 \\
        c_desc=zeros:300x200 m=300 n=200 k=100 [--kernel gemm] [--seed 0] [--save out.npz]

`--level nvgpu` runs the kernel as the GPU would, thread by thread, in the nvgpu-level
interpreter (`tawa_xdsl.interp.nvgpu`): a tile kernel is first compiled to that level
(`--stages`, `--mma-depth`, `--consumers`, `--epilogue` as for `tawa-warp-specialize` and
`lower-to-nvgpu`); a module already at the nvgpu level (the output of `tawa-opt -p
'tawa-warp-specialize{...},lower-aref,lower-to-nvgpu'`) runs as it is. `--schedule` picks
the interleaving of warpgroups and copies (a policy name or a seed).

Arguments are positional, one spec per kernel parameter, in the kernel's order:

    [NAME=]KIND:SHAPE[:DTYPE]   an array; KIND is zeros, ones, randn (standard normal),
                                rand (uniform in [0, 1)) or arange (0, 1, 2, ... in row-major
                                order); SHAPE is 300x100; DTYPE is f16, bf16, f32, f8E4M3FN or
                                f8E5M2 (default: the descriptor's element type)
    [NAME=]npy:PATH             an array loaded from a .npy file
    [NAME=]VALUE                a scalar: 300, 0.125, -inf

NAME, when given, must be the parameter's name in the IR (`a_desc` for `%a_desc`); it labels
the argument in the output and in the .npz file (default: arg0, arg1, ...). The grid's sizes
are at least 1.
For each array the kernel stored to, one line gives its shape, dtype, a summary (sum, mean,
min, max, NaN count) and a checksum of its bytes. Errors print one line and exit 1;
`--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    ModuleOp,
    i32,
)
from xdsl.ir import Attribute
from xdsl.utils.exceptions import PassFailedException, VerifyException

from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
from tawa_xdsl.diagnostics import TawaError, op_location, parse_file
from tawa_xdsl.dialects import make_context
from tawa_xdsl.dialects.nvgpu import THREADS_ATTR
from tawa_xdsl.dialects.tile import DescType
from tawa_xdsl.interp.dtypes import InterpreterError, numpy_dtype
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.interp.tile import KernelArgumentError, find_kernel, run_kernel

T = TypeVar("T")
ARRAY_KINDS = ("zeros", "ones", "randn", "rand", "arange")


class SpecError(Exception):
    """A malformed `--args` spec."""


@dataclass(frozen=True)
class ArgSpec:
    """One parsed `--args` entry: an array recipe, a .npy file or a scalar literal."""

    name: str
    kind: str  # one of ARRAY_KINDS, "npy" or "scalar"
    shape: tuple[int, ...] = ()
    dtype: str | None = None
    text: str = ""  # the scalar literal or the .npy path


def parse_spec(text: str, position: int) -> ArgSpec:
    """Parse `[NAME=]KIND:SHAPE[:DTYPE]`, `[NAME=]npy:PATH` or `[NAME=]VALUE`."""
    name, _, body = text.rpartition("=") if "=" in text else ("", "", text)
    name = name or f"arg{position}"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise SpecError(f"bad argument name {name!r}")
    if ":" not in body:
        return ArgSpec(name, "scalar", text=_scalar_literal(body))
    kind, _, rest = body.partition(":")
    if kind == "npy":
        return ArgSpec(name, "npy", text=rest)
    if kind not in ARRAY_KINDS:
        raise SpecError(f"unknown array kind {kind!r} (expected {', '.join(ARRAY_KINDS)} or npy)")
    shape_text, _, dtype = rest.partition(":")
    if dtype and dtype not in DTYPES:
        raise SpecError(f"unknown dtype {dtype!r} (expected {', '.join(DTYPES)})")
    return ArgSpec(name, kind, _shape(shape_text), dtype or None)


def _shape(text: str) -> tuple[int, ...]:
    if not re.fullmatch(r"[0-9]+(x[0-9]+)*", text):
        raise SpecError(f"bad shape {text!r} (expected sizes joined by 'x', such as 300x100)")
    return tuple(int(d) for d in text.split("x"))


def _scalar_literal(text: str) -> str:
    try:
        float(text)
    except ValueError:
        raise SpecError(f"bad scalar {text!r} (expected a number, or KIND:SHAPE[:DTYPE])") from None
    return text


def parse_grid(text: str) -> tuple[int, ...]:
    if not re.fullmatch(r"[0-9]+(,[0-9]+){0,2}", text):
        raise SpecError(f"--grid: bad grid {text!r} (expected 1 to 3 sizes such as 4,1,1)")
    grid = tuple(int(g) for g in text.split(","))
    if 0 in grid:  # no program would run: nothing stored, nothing to report
        raise SpecError(f"--grid: every size must be at least 1, got {text!r}")
    return grid


# ------------------------------------------------------------------------ making values


DTYPES: dict[str, Attribute] = {
    "f16": Float16Type(),
    "bf16": BFloat16Type(),
    "f32": Float32Type(),
    "f64": Float64Type(),
    "f8E4M3FN": Float8E4M3FNType(),
    "f8E5M2": Float8E5M2Type(),
    "i32": i32,
}


def make_value(spec: ArgSpec, param_type: Attribute, rng: np.random.Generator) -> object:
    """The launch value of one spec, for a parameter of type `param_type`."""
    if spec.kind == "scalar":
        return _scalar(spec.text)
    if spec.kind == "npy":
        return _load_npy(spec.text, param_type)
    if spec.dtype is not None:
        dtype = numpy_dtype(DTYPES[spec.dtype])
    elif isinstance(param_type, DescType):
        dtype = numpy_dtype(param_type.element_type)
    else:
        raise SpecError(f"give a dtype: the parameter is {param_type}, not a descriptor")
    return _array(spec.kind, spec.shape, dtype, rng)


def _load_npy(path: str, param_type: Attribute) -> np.ndarray:
    """An array from a .npy file. bf16 and fp8 arrays come back from .npy as raw bytes
    (void); for a descriptor of such a type they are viewed as that type again."""
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise SpecError(f"cannot load {path!r}: {error}") from None
    if array.dtype.kind == "V" and isinstance(param_type, DescType):
        dtype = numpy_dtype(param_type.element_type)
        if dtype.itemsize == array.dtype.itemsize:
            return array.view(dtype)
    return array


def _scalar(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


# Elements generated at a time: values are drawn in float64 and rounded through float32 (so a
# seed gives the same array in every dtype), a chunk at a time, so that only the result is
# allocated at full size.
CHUNK = 1 << 20


def _array(kind: str, shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator):
    size = math.prod(shape)
    try:
        out = np.empty(size, dtype)
    except (MemoryError, ValueError):
        gib = size * dtype.itemsize / 2**30
        raise SpecError(
            f"cannot allocate a {'x'.join(map(str, shape))} {dtype.name} array ({gib:.1f} GiB)"
        ) from None
    for start in range(0, size, CHUNK):
        count = min(CHUNK, size - start)
        out[start : start + count] = _filled(kind, start, count, rng).astype(np.float32)
    return out.reshape(shape)


def _filled(kind: str, start: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """Elements start .. start + count of a row-major array of `kind` (rng draws in order)."""
    if kind == "zeros":
        return np.zeros(count)
    if kind == "ones":
        return np.ones(count)
    if kind == "randn":
        return rng.standard_normal(count)
    if kind == "rand":
        return rng.random(count)
    return np.arange(start, start + count, dtype=np.float64)


# ---------------------------------------------------------------------------- reporting


def summary(name: str, array: np.ndarray) -> str:
    """`c: 300x200 float16 sum=... mean=... min=... max=... nan=0 sha256=...`."""
    wide = array.astype(np.float64)
    finite = wide[~np.isnan(wide)]
    stats = (
        f"sum={finite.sum():.6g} mean={finite.mean():.6g} min={finite.min():.6g} "
        f"max={finite.max():.6g}"
        if finite.size
        else "sum=nan mean=nan min=nan max=nan"
    )
    digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]
    shape = "x".join(map(str, array.shape))
    nans = int(np.isnan(wide).sum())
    return f"{name}: {shape} {array.dtype.name} {stats} nan={nans} sha256={digest}"


def save(path: str, outputs: dict[str, np.ndarray]) -> None:
    """Write the outputs to an .npz; bf16 and fp8 (not numpy types) are stored as float32."""
    plain = {
        name: a if a.dtype.isbuiltin == 1 else a.astype(np.float32) for name, a in outputs.items()
    }
    np.savez(path, **plain)


# --------------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tawa-run",
        description="Run a tile kernel in the numpy interpreter.",
        epilog="Argument specs: [NAME=]KIND:SHAPE[:DTYPE] with KIND in "
        f"{', '.join(ARRAY_KINDS)}; [NAME=]npy:PATH; [NAME=]NUMBER.",
    )
    parser.add_argument("input", help="the .mlir file holding the kernel")
    parser.add_argument("--kernel", help="the function to run (default: the only one)")
    parser.add_argument("--grid", required=True, help="launch grid, such as 4 or 4,2,1")
    parser.add_argument("--args", nargs="*", default=[], metavar="SPEC", help="one per parameter")
    parser.add_argument("--seed", type=_seed, default=0, help="seed of randn/rand (default 0)")
    parser.add_argument("--save", metavar="OUT.npz", help="write the stored arrays here")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument(
        "--level",
        choices=("tile", "nvgpu"),
        default="tile",
        help="the interpreter: tile (default) or nvgpu (per thread, after lower-to-nvgpu)",
    )
    defaults = CompileOptions()
    parser.add_argument("--stages", type=int, default=defaults.stages, help="ring depth D")
    parser.add_argument("--mma-depth", type=int, default=defaults.mma_depth, help="MMA depth P")
    parser.add_argument("--consumers", type=int, default=defaults.consumers)
    parser.add_argument("--epilogue", choices=("global", "tma"), default=defaults.epilogue)
    parser.add_argument(
        "--schedule", default="random", help="nvgpu level: a schedule policy or a seed"
    )
    return parser


def nvgpu_level(module: ModuleOp, args: argparse.Namespace) -> ModuleOp:
    """The module at the nvgpu level: as it is, or compiled there with the options given."""
    kernels = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if any(THREADS_ATTR in k.attributes for k in kernels):
        return module
    options = CompileOptions(
        stages=args.stages,
        mma_depth=args.mma_depth,
        consumers=args.consumers,
        epilogue=args.epilogue,
        verify=False,
    )
    try:
        return lower_to_nvgpu_level(module, options)
    except (PassFailedException, VerifyException, ValueError) as error:
        raise TawaError(
            f"{args.input}: error: cannot compile to the nvgpu level: {error}"
        ) from error


def _schedule(text: str) -> str | int:
    return int(text) if text.isdigit() else text


def _seed(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


def run(args: argparse.Namespace) -> list[str]:
    """Run the kernel as `args` say; returns the report lines."""
    grid = parse_grid(args.grid)
    specs = [_in_context(i, text, parse_spec, text, i) for i, text in enumerate(args.args)]
    module = parse_file(make_context(), args.input)
    try:
        kernel = find_kernel(module, args.kernel)
    except KernelArgumentError as error:
        raise TawaError(f"{args.input}: error: {error}") from error
    params = kernel.body.block.args
    if len(specs) != len(params):
        message = f"@{kernel.sym_name.data} takes {len(params)} arguments, got {len(specs)}"
        raise _located(kernel, message)
    for i, (text, param) in enumerate(zip(args.args, params, strict=True)):
        named = text.rpartition("=")[0] if "=" in text else None
        if named is not None and param.name_hint is not None and named != param.name_hint:
            message = (
                f"--args: argument {i} is named '{named}', but parameter {i} of "
                f"@{kernel.sym_name.data} is '{param.name_hint}'"
            )
            raise _located(kernel, message)
    rng = np.random.default_rng(args.seed)
    values = [
        _in_context(i, args.args[i], make_value, spec, param.type, rng)
        for i, (spec, param) in enumerate(zip(specs, params, strict=True))
    ]
    try:
        if args.level == "nvgpu":
            lowered = nvgpu_level(module, args)
            name = kernel.sym_name.data
            schedule = _schedule(args.schedule)
            written = run_nvgpu_kernel(lowered, grid, values, kernel=name, schedule=schedule)
        else:
            written = run_kernel(module, grid, values, kernel=kernel.sym_name.data)
    except KernelArgumentError as error:
        raise _located(kernel, str(error)) from error
    names = {id(v): s.name for s, v in zip(specs, values, strict=True)}
    outputs = {names[id(array)]: array for array in written}
    if args.save:
        save(args.save, outputs)
    return [summary(name, array) for name, array in outputs.items()]


def _in_context(position: int, text: str, function: Callable[..., T], *args: object) -> T:
    """Call `function`; a SpecError names the argument it came from."""
    try:
        return function(*args)
    except SpecError as error:
        raise SpecError(f"--args: argument {position} ({text!r}): {error}") from error


def _located(kernel: func.FuncOp, message: str) -> TawaError:
    return TawaError(f"{op_location(kernel)}: error: {message}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        lines = run(args)
    except (TawaError, InterpreterError, SpecError, OSError) as error:
        if args.debug:
            raise
        print(f"tawa-run: {_one_line(error)}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def _one_line(error: Exception) -> str:
    message = " ".join(str(error).split("\n")[0].split())
    if isinstance(error, TawaError):
        return message
    if isinstance(error, SpecError):
        return f"error: {message}"
    if isinstance(error, OSError) and error.filename:
        return f"{error.filename}: error: {error.strerror}"
    return f"error: {message}"


if __name__ == "__main__":
    sys.exit(main())
