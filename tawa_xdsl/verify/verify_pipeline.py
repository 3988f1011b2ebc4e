"""`verify-pipeline`: fail the compile when a lowered ring's barrier protocol can go wrong.

Runs `verify.check.verify_module` on the module (after `lower-aref`); a module without rings
passes. On failure the exception carries the counterexample trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from tawa_xdsl.transforms.smem_budget import check_shared_memory
from tawa_xdsl.verify.check import verify_module


@dataclass(frozen=True)
class VerifyPipelinePass(ModulePass):
    """Prove every ring's protocol for all trip counts (no options)."""

    name = "verify-pipeline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        check_shared_memory(op)  # a ring too deep to run is refused before its proof
        for verdict in verify_module(op):
            if not verdict.proved:
                raise PassFailedException("\n".join([verdict.summary(), *verdict.trace]))
