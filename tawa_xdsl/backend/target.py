"""`tawa-opt -t ptx`: print an nvgpu-level module as PTX text (see `emit_ptx`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target


@dataclass(frozen=True)
class PtxTarget(Target):
    """PTX 8.0 for sm_90a, pure ASCII; the input must be at the nvgpu level."""

    name = "ptx"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from tawa_xdsl.backend.emit_ptx import emit_ptx

        output.write(emit_ptx(module))
