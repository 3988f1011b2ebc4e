"""`tawa`: the user-facing command line, one subcommand per task.

    tawa compile examples/gemm.py --kernel gemm \\
        --constexpr BLOCK_M=128 --constexpr BLOCK_N=128 --constexpr BLOCK_K=64 \\
        --constexpr GROUP_M=8 \\
        --signature 'desc<128x64xf16>,desc<128x64xf16>,desc<128x128xf16>,i32,i32,i32' \\
        --stage tile

prints the IR of one stage of a `@jit` kernel. Subcommands register themselves in
`SUBCOMMANDS` (name -> function adding its parser); each parser sets `handler`. Errors print
as one `file:line: error: ...` message (plus the source line for kernel errors) and exit 1.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tawa_xdsl.tools import stdout_closed
from tawa_xdsl.tools.fuzz_cli import FuzzUsageError, add_fuzz, add_repro


class UsageError(Exception):
    """A bad command line; the message says what to change."""


# ------------------------------------------------------------------------------- compile


def load_kernel(path: str, name: str) -> Any:
    """The `@jit` function `name` defined in the Python file `path` (imported as a module, so
    its `if __name__ == "__main__"` block does not run)."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: error: no such file")
    spec = importlib.util.spec_from_file_location(f"_tawa_kernel_{file.stem}", file)
    assert spec is not None and spec.loader is not None  # a .py file always has both
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        raise UsageError(f"{path}:{error.lineno}: error: {error.msg}") from error
    except ImportError as error:
        raise UsageError(f"{path}: error: {error}") from error
    finally:
        sys.path.pop(0)
    kernel = getattr(module, name, None)
    if kernel is None or not hasattr(kernel, "__tawa_jit_function__"):
        kernels = [k for k, v in vars(module).items() if hasattr(v, "__tawa_jit_function__")]
        found = ", ".join(kernels) or "none"
        raise UsageError(f"{path}: error: no @jit function named '{name}' (found: {found})")
    return kernel


def parse_constexpr(text: str) -> tuple[str, Any]:
    """`BLOCK_M=128` -> ("BLOCK_M", 128); values are Python literals or tl dtypes
    (`tl.float16`, `float16`)."""
    import tawa_xdsl.language as tl

    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise UsageError(f"--constexpr expects NAME=VALUE, got '{text}'")
    dtype_name = value.removeprefix("tl.")
    if isinstance(getattr(tl, dtype_name, None), tl.dtype):
        return name, getattr(tl, dtype_name)
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise UsageError(f"--constexpr {name}: '{value}' is not a Python literal") from None


def parse_signature(text: str, params: list[str]) -> dict[str, Any]:
    """`'desc<128x64xf16>,M=i32'`: types of the run-time parameters, by position or name."""
    from tawa_xdsl.frontend.errors import SemanticError
    from tawa_xdsl.frontend.signature import parse_arg_type

    types: dict[str, Any] = {}
    entries = [e.strip() for e in text.split(",") if e.strip()]
    for position, entry in enumerate(entries):
        name, sep, type_text = entry.rpartition("=") if "=" in entry else ("", "", entry)
        if not sep:
            if position >= len(params):
                raise UsageError(f"--signature has more entries than run-time parameters {params}")
            name = params[position]
        if name not in params:
            raise UsageError(
                f"--signature: '{name}' is not a run-time parameter of the kernel {params}"
            )
        try:
            types[name] = parse_arg_type(type_text)
        except SemanticError as error:
            raise UsageError(f"--signature {name}: {error}") from None
    return types


def run_compile(args: argparse.Namespace) -> int:
    kernel = load_kernel(args.file, args.kernel)
    constexprs = dict(parse_constexpr(c) for c in args.constexpr)
    runtime_params = [p for p in kernel.signature.parameters if p not in kernel.constexpr_names]
    types = parse_signature(args.signature or "", runtime_params)
    missing = [p for p in runtime_params if p not in types and p not in kernel.defaults]
    if missing:
        raise UsageError(
            f"no type for run-time parameter(s) {', '.join(missing)}; give them with "
            f"--signature, e.g. --signature '{missing[0]}=i32'"
        )
    compiled = kernel.compile(**types, **constexprs)
    if args.stage not in compiled.ir:
        raise UsageError(f"stage '{args.stage}' is not available; stages: {', '.join(compiled.ir)}")
    print(compiled.ir[args.stage])
    return 0


def add_compile(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "compile", help="print the IR of a @jit kernel at one compiler stage"
    )
    parser.add_argument("file", help="the Python file defining the kernel")
    parser.add_argument("--kernel", required=True, help="the name of the @jit function")
    parser.add_argument(
        "--constexpr",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a tl.constexpr parameter value (repeatable)",
    )
    parser.add_argument(
        "--signature",
        metavar="TYPES",
        help="comma-separated types of the run-time parameters, positional or NAME=TYPE: "
        "i32, f32, f16, bf16, i1, desc<128x64xf16>",
    )
    parser.add_argument("--stage", default="tile", help="the stage to print (default: tile)")
    parser.set_defaults(handler=run_compile)


# ---------------------------------------------------------------------------------- main


def add_demo(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo", help="run the bundled examples through the compiler and check them"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.set_defaults(handler=lambda args: _demo(args.seed))


def _demo(seed: int) -> int:
    from tawa_xdsl.tools.demo import run_demo

    return run_demo(seed)


SUBCOMMANDS: dict[str, Callable[[Any], None]] = {
    "compile": add_compile,
    "demo": add_demo,
    "fuzz": add_fuzz,
    "repro": add_repro,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tawa", description="tawa-xdsl: compile and run Triton-style kernels"
    )
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in SUBCOMMANDS.values():
        add(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from xdsl.utils.exceptions import DiagnosticException

    from tawa_xdsl.frontend.errors import CompilationError

    try:
        return args.handler(args)
    except BrokenPipeError:
        return stdout_closed()
    except (UsageError, FuzzUsageError, CompilationError, DiagnosticException, TypeError) as error:
        if args.debug:
            raise
        print(f"tawa {args.command}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
