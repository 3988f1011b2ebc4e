"""`persistent`: turn a one-program-per-tile kernel into a persistent one (tile level).

The kernel gets three trailing i32 arguments, the logical grid `(%grid_x, %grid_y, %grid_z)`
it would have been launched with, and its body becomes a loop over the logical program ids

    scf.for %tile_id = program_id(0) to grid_x * grid_y * grid_z step num_programs(0)

with `pid_x = tile_id mod grid_x`, `pid_y = (tile_id div grid_x) mod grid_y`, `pid_z = ...`
replacing `tile.program_id`, and `%grid_x/y/z` replacing `tile.num_programs a`. Launch it with
grid = (number of SMs, 1, 1): each program walks the tiles pid, pid + #SMs, ... and keeps the
kernel's own tile order (GEMM's grouped order). Run it before `partition`: the tile loop is then
an ordinary loop shared by every warp group, so the aref use counters continue across tiles.

No options. Refused: a kernel that returns values.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import ModuleOp, i32
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.dialects import tile
from tawa_xdsl.transforms.ws_utils import error, find_kernel

PASS = "persistent"


def persistent_launch(
    grid: tuple[int, ...] | list[int] | int, sms: int
) -> tuple[tuple[int, int, int], list[int]]:
    """The launch grid and the extra trailing arguments of the persistent form of a kernel
    that was launched with `grid`."""
    dims = [grid] if isinstance(grid, int) else list(grid)
    dims += [1] * (3 - len(dims))
    return (max(sms, 1), 1, 1), dims


def make_persistent(kernel: func.FuncOp) -> None:
    block = kernel.body.block
    terminator = block.last_op
    if not isinstance(terminator, func.ReturnOp) or terminator.arguments:
        raise error(kernel, PASS, f"@{kernel.sym_name.data} must return nothing to be persistent")
    grid = [block.insert_arg(i32, len(block.args)) for _ in range(3)]
    for axis, arg in enumerate(grid):
        arg.name_hint = f"grid_{'xyz'[axis]}"
    kernel.update_function_type()

    # The loop over logical tiles, built in front of the old body.
    head = [
        pid := tile.ProgramIdOp(0),
        nprog := tile.NumProgramsOp(0),
        total_xy := arith.MuliOp(grid[0], grid[1]),
        total := arith.MuliOp(total_xy, grid[2]),
    ]
    pid.result.name_hint, nprog.result.name_hint, total.result.name_hint = (
        "pid",
        "num_programs",
        "num_tiles",
    )
    body = Block(arg_types=[i32])
    tile_id = body.args[0]
    tile_id.name_hint = "tile_id"
    pid_x = arith.RemSIOp(tile_id, grid[0])
    rest = arith.DivSIOp(tile_id, grid[0])
    pid_y = arith.RemSIOp(rest, grid[1])
    pid_z = arith.DivSIOp(rest, grid[1])
    logical = [pid_x.result, pid_y.result, pid_z.result]
    for axis, value in enumerate(logical):
        value.name_hint = f"pid_{'xyz'[axis]}"
    body.add_ops([pid_x, rest, pid_y, pid_z])
    for op in list(block.ops):
        if op is terminator:
            break
        op.detach()
        body.add_op(op)
    body.add_op(scf.YieldOp())
    loop = scf.ForOp(pid, total, nprog, [], Region(body))
    for op in [*head, loop]:
        Rewriter.insert_op(op, InsertPoint.before(terminator))

    for op in list(body.walk()):
        if isinstance(op, tile.ProgramIdOp):
            _replace(op, logical[op.axis.value.data])
        elif isinstance(op, tile.NumProgramsOp):
            _replace(op, grid[op.axis.value.data])


def _replace(op: tile.ProgramIdOp | tile.NumProgramsOp, value: SSAValue) -> None:
    op.result.replace_all_uses_with(value)
    Rewriter.erase_op(op)


@dataclass(frozen=True)
class PersistentPass(ModulePass):
    """Loop each program over the logical tiles; see the module docstring. No options."""

    name = "persistent"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        make_persistent(find_kernel(op, PASS))
