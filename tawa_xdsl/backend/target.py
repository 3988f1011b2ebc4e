"""`tawa-opt -t ptx`: legalize an nvgpu-level module and print it as PTX text (see `emit_ptx`).

`legalize-nvgpu` writes the same plans when run twice, so `-p ...,lower-to-nvgpu -t ptx` and
`-p ...,lower-to-nvgpu,legalize-nvgpu -t ptx` print the same text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target


@dataclass(frozen=True)
class PtxTarget(Target):
    """PTX 8.0 for sm_90a, pure ASCII; the input must be at the nvgpu level (legalized here
    if it is not yet)."""

    name = "ptx"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        from tawa_xdsl.backend.emit_ptx import emit_ptx
        from tawa_xdsl.transforms.legalize_nvgpu import LegalizeNvgpuPass

        LegalizeNvgpuPass().apply(ctx, module)
        output.write(emit_ptx(module))
