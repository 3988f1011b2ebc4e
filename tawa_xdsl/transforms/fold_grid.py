"""`fold-grid`: each program runs the kernel body for two mirror-image programs along x (tile
level).

The kernel gets one trailing i32 argument, `%unfolded_x`, the x extent of the grid it would
have been launched with, and is launched over ceil(unfolded_x / 2) programs along x; program p
runs the old body for program id p and then for its mirror unfolded_x - 1 - p (once when they
are the same, the middle of an odd extent):

    scf.for %half = 0 to min(unfolded_x - 2 p, 2) step 1
        %pid_x = p + %half * (unfolded_x - 1 - 2 p)

`tile.program_id 0` in the body becomes `%pid_x` and `tile.num_programs 0` `%unfolded_x`.
Where a program's work grows (or shrinks) along x, as causal attention's row blocks do, every
pair then does the same work, so the programs finish together and a persistent deal of the
pairs (`persistent`, run after this pass) is even. Run it before `partition`: the pair loop is
an ordinary loop shared by every warp group, the aref use counters continuing through it.
`fold_launch` maps the grid.

Refused: a kernel that returns values.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32
from xdsl.ir import Block
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tawa_xdsl.dialects import tile
from tawa_xdsl.transforms.ws_utils import add_grid_args, find_kernel, loop_around_body

PASS = "fold-grid"


def fold_launch(dims: list[int]) -> tuple[list[int], list[int]]:
    """The launch grid of the folded form of a kernel launched over `dims` (x, y, z), and its
    extra trailing argument."""
    return [-(-dims[0] // 2), *dims[1:]], [dims[0]]


def fold_grid(kernel: func.FuncOp) -> None:
    (extent,) = add_grid_args(kernel, PASS, "folded", ["unfolded_x"])

    # trips = min(unfolded_x - 2 p, 2): 2, or 1 for the middle program of an odd extent
    head = [
        pid := tile.ProgramIdOp(0),
        zero := arith.ConstantOp(IntegerAttr(0, i32)),
        one := arith.ConstantOp(IntegerAttr(1, i32)),
        two := arith.ConstantOp(IntegerAttr(2, i32)),
        last := arith.SubiOp(extent, one),
        mirror := arith.SubiOp(last, pid),
        span := arith.SubiOp(mirror, pid),
        left := arith.AddiOp(span, one),
        trips := arith.MinSIOp(left, two),
    ]
    pid.result.name_hint, trips.result.name_hint = "pid", "trips"
    mirror.result.name_hint, span.result.name_hint = "mirror", "span"
    body = Block(arg_types=[i32])
    half = body.args[0]
    half.name_hint = "half"
    step = arith.MuliOp(half, span)
    logical = arith.AddiOp(pid, step)
    logical.result.name_hint = "pid_x"
    body.add_ops([step, logical])
    loop_around_body(kernel, head, body, (zero.result, trips.result, one.result))

    for op in list(body.walk()):
        if isinstance(op, tile.ProgramIdOp) and op.axis.value.data == 0:
            op.result.replace_all_uses_with(logical.result)
            Rewriter.erase_op(op)
        elif isinstance(op, tile.NumProgramsOp) and op.axis.value.data == 0:
            op.result.replace_all_uses_with(extent)
            Rewriter.erase_op(op)


@dataclass(frozen=True)
class FoldGridPass(ModulePass):
    """Run each program's body for it and its mirror along x; see the module docstring."""

    name = "fold-grid"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fold_grid(find_kernel(op, PASS))
