"""`tawa-opt`: xdsl-opt with the tawa dialects, passes and targets.

    tawa-opt kernel.mlir -p 'partition,insert-aref,ring-depth{stages=3}' [-t ptx]

Errors print as one `file:line:col: error: ...` line and exit 1; `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from tawa_xdsl.diagnostics import (
    LocatingParser,
    TawaError,
    decode_source,
    first_line,
    parse_error_message,
    parse_pass_pipeline,
    verify_module,
)
from tawa_xdsl.tools import stdout_closed
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


class PendingOutput(io.StringIO):
    """The `-o` file's text, kept until the run succeeds (a refused input writes nothing)."""

    text = ""

    def close(self) -> None:
        self.text = self.getvalue()
        super().close()


class TawaOptMain(xDSLOptMain):
    version_format = "tawa-opt (xdsl {xdsl_version})"
    pending: PendingOutput | None = None

    def prepare_output(self) -> IO[str]:
        if self.args.output_file is None:
            return super().prepare_output()
        self.pending = PendingOutput()
        return self.pending

    def run(self) -> None:
        super().run()
        if self.pending is not None:
            Path(self.args.output_file).write_text(self.pending.text)

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
        text = decode_source(chunk.read(), self.get_input_name())
        parser = LocatingParser(self.ctx, text, self.get_input_name(), line_offset=start_offset)
        return parser.parse_module(not self.args.no_implicit_module)

    def setup_pipeline(self) -> None:
        """xDSL's pipeline, after our own parse of `-p` (one line naming a bad pass or option),
        verifying between passes op by op so that a broken op is named by its place."""
        parse_pass_pipeline(self.available_passes, self.args.passes)
        super().setup_pipeline()
        callback = self.pipeline.callback
        verify = not self.args.disable_verify

        def checked(previous: ModulePass | None, module: ModuleOp, after: ModulePass | None):
            if verify:
                verify_module(module)
            if callback is not None:
                callback(previous, module, after)

        self.pipeline = PassPipeline(self.pipeline.passes, checked)

    def apply_passes(self, prog: ModuleOp) -> None:
        if not self.args.disable_verify:
            verify_module(prog)
        super().apply_passes(prog)


def main(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv)
    try:
        TawaOptMain(description="tawa-xdsl driver", args=argv).run()
    except BrokenPipeError:
        return stdout_closed()
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
    if isinstance(error, OSError) and error.filename is not None:
        return f"{error.filename}: error: {error.strerror}"
    return first_line(error)


if __name__ == "__main__":
    sys.exit(main())
