"""`tawa-opt`: xdsl-opt with the tawa dialects, passes and targets.

    tawa-opt kernel.mlir -p 'partition,insert-aref,ring-depth{stages=3}' [-t ptx]

Errors print as one `file:line:col: error: ...` line and exit 1; `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from tawa_xdsl.diagnostics import LocatingParser, TawaError, parse_error_message, verify_module
from tawa_xdsl.transforms import get_all_passes

# Dialects a tawa program may use, beside our own three (xDSL's other dialects stay out).
UPSTREAM_DIALECTS = ("builtin", "func", "arith", "scf", "math")


def get_dialects() -> dict[str, object]:
    def get_tile():
        from tawa_xdsl.dialects.tile import Tile

        return Tile

    def get_aref():
        from tawa_xdsl.dialects.aref import Aref

        return Aref

    def get_nvgpu():
        from tawa_xdsl.dialects.nvgpu import Nvgpu

        return Nvgpu

    return {"tile": get_tile, "aref": get_aref, "nvgpu": get_nvgpu}


def get_targets() -> dict[str, object]:
    def get_ptx():
        from tawa_xdsl.backend.target import PtxTarget

        return PtxTarget

    return {"ptx": get_ptx}


class TawaOptMain(xDSLOptMain):
    version_format = "tawa-opt (xdsl {xdsl_version})"

    def register_all_dialects(self) -> None:
        from xdsl.universe import Universe

        upstream = Universe.get_multiverse().all_dialects
        for name in UPSTREAM_DIALECTS:
            self.ctx.register_dialect(name, upstream[name])
        for name, factory in get_dialects().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()  # keep cse, dce, canonicalize, ...
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        self.available_targets.update(get_targets())

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--debug", action="store_true", help="show Python tracebacks on errors"
        )

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        if (self.args.frontend or file_extension) != "mlir":
            return super().parse_chunk(chunk, file_extension, start_offset)
        text = chunk.read().decode()
        parser = LocatingParser(self.ctx, text, self.get_input_name(), line_offset=start_offset)
        return parser.parse_module(not self.args.no_implicit_module)

    def apply_passes(self, prog: ModuleOp) -> None:
        if not self.args.disable_verify:
            verify_module(prog)
        super().apply_passes(prog)


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv)
    try:
        TawaOptMain(description="tawa-xdsl driver", args=argv).run()
    except (ParseError, DiagnosticException, ValueError, OSError) as error:
        if debug:
            raise
        print(f"tawa-opt: {_one_line(error)}", file=sys.stderr)
        return 1
    return 0


def _one_line(error: Exception) -> str:
    if isinstance(error, ParseError):
        return parse_error_message(error)
    if isinstance(error, TawaError):
        return str(error)
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


if __name__ == "__main__":
    sys.exit(main())
