"""`persistent`: turn a one-program-per-tile kernel into a persistent one (tile level).

The kernel gets three trailing i32 arguments, the logical grid `(%grid_x, %grid_y, %grid_z)`
it would have been launched with, and its body becomes a loop over the logical program ids

    scf.for %walk = program_id(0) to grid_x * grid_y * grid_z step num_programs(0)

Launch it with grid = (number of SMs, 1, 1). The tiles are dealt in waves of #SMs in the
kernel's own order (GEMM's grouped order, attention's longest row blocks first), and every
other full wave is dealt backwards (a snake): step k of program p takes

    %tile = k * #SMs + (k odd and wave k full ? #SMs - 1 - p : p)      (%walk = k * #SMs + p)

so where tile costs fall along the order, each program's total evens out (program 0 takes the
longest tile of wave 0 and the shortest of wave 1), while the set of tiles in flight is still
one wave (the same L2 traffic) and each program's trip count is that of the plain walk.
`pid_x = tile mod grid_x`, `pid_y = (tile div grid_x) mod grid_y`, `pid_z = ...` replace
`tile.program_id`, and `%grid_x/y/z` replace `tile.num_programs a`. Run it before `partition`:
the tile loop is then an ordinary loop shared by every warp group, so the aref use counters
continue across tiles.

Options:
  order: str = "xyz"   the axes of the logical grid from the fastest along the walk to the
                       slowest ("yxz": every y of one x before the next x; causal attention,
                       whose x is its row blocks longest first, then takes the longest row
                       block of every head first).

Refused: a kernel that returns values; an order that is not a permutation of "xyz".
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tawa_xdsl.dialects import tile
from tawa_xdsl.transforms.ws_utils import add_grid_args, error, find_kernel, loop_around_body

PASS = "persistent"


def persistent_launch(
    grid: tuple[int, ...] | list[int] | int, sms: int
) -> tuple[tuple[int, int, int], list[int]]:
    """The launch grid and the extra trailing arguments of the persistent form of a kernel
    that was launched with `grid`."""
    dims = [grid] if isinstance(grid, int) else list(grid)
    dims += [1] * (3 - len(dims))
    return (max(sms, 1), 1, 1), dims


def make_persistent(kernel: func.FuncOp, order: str = "xyz") -> None:
    if sorted(order) != ["x", "y", "z"]:
        raise error(kernel, PASS, f"order must be a permutation of xyz, got '{order}'")
    grid = add_grid_args(kernel, PASS, "persistent", ["grid_x", "grid_y", "grid_z"])

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
    walk = body.args[0]
    walk.name_hint = "walk"
    snake = _snake(walk, pid.result, nprog.result, total.result)
    body.add_ops(snake)
    tile_id = snake[-1].results[0]
    tile_id.name_hint = "tile_id"
    logical = _decompose(body, tile_id, [grid["xyz".index(a)] for a in order])
    logical = [logical[order.index(a)] for a in "xyz"]
    for axis, value in enumerate(logical):
        value.name_hint = f"pid_{'xyz'[axis]}"
    loop_around_body(kernel, head, body, (pid.result, total.result, nprog.result))

    for op in list(body.walk()):
        if isinstance(op, tile.ProgramIdOp):
            _replace(op, logical[op.axis.value.data])
        elif isinstance(op, tile.NumProgramsOp):
            _replace(op, grid[op.axis.value.data])


def _decompose(body: Block, tile_id: SSAValue, extents: list[SSAValue]) -> list[SSAValue]:
    """The coordinates of `tile_id` over `extents`, the first the fastest: a remainder
    and a quotient per axis but the last, which takes the quotient left."""
    coords, rest = [], tile_id
    for extent in extents[:-1]:
        coord, rest_op = arith.RemSIOp(rest, extent), arith.DivSIOp(rest, extent)
        body.add_ops([coord, rest_op])
        coords.append(coord.result)
        rest = rest_op.result
    return [*coords, rest]


def _snake(walk: SSAValue, pid: SSAValue, programs: SSAValue, total: SSAValue) -> list[Operation]:
    """The tile of step `walk = k * programs + pid`: mirrored within wave k when k is odd
    and the wave is full (the module docstring)."""
    one = arith.ConstantOp(IntegerAttr(1, i32))
    wave = arith.DivSIOp(walk, programs)
    start = arith.SubiOp(walk, pid)
    end = arith.AddiOp(start, programs)
    full = arith.CmpiOp(end, total, "sle")
    parity = arith.AndIOp(wave, one)
    odd = arith.CmpiOp(parity, one, "eq")
    flip = arith.AndIOp(odd, full)
    last = arith.SubiOp(end, one)
    mirrored = arith.SubiOp(last, pid)
    tile_id = arith.SelectOp(flip, mirrored, walk)
    wave.result.name_hint = "wave"
    return [one, wave, start, end, full, parity, odd, flip, last, mirrored, tile_id]


def _replace(op: tile.ProgramIdOp | tile.NumProgramsOp, value: SSAValue) -> None:
    op.result.replace_all_uses_with(value)
    Rewriter.erase_op(op)


@dataclass(frozen=True)
class PersistentPass(ModulePass):
    """Loop each program over the logical tiles; see the module docstring.

    Options:
      order: str = "xyz"   the grid's axes, the fastest along the walk first.
    """

    name = "persistent"

    order: str = "xyz"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        make_persistent(find_kernel(op, PASS), self.order)
