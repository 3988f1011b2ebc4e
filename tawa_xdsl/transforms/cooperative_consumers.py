"""`cooperative-consumers`: the consumer group runs on several warpgroups that split the rows.

With `consumers=2` (or 3) every consumer group runs on 2 (3) warpgroups (the decision is the
group's `warpgroups(n)`) that split the M rows of each output tile. With `consumers` unset the
pass chooses per group from the tile rows: 3 warpgroups for 192 rows, 2 where the rows are a
multiple of 128, else one (a 64-row tile, or a group whose rows cannot be split), and writes
the choice as `warpgroups(n)`. A dataflow analysis finds the row dimension of every consumer
tile: seeded by the rows of dot lhs/acc/result and of stored 2-D tiles of several rows (so a
kernel with no dot splits as a GEMM does) or, where there are neither, of the 2-D tiles of
several rows read from the rings (a kernel reducing down the columns of what it reads),
followed through elementwise ops, reductions, expand_dims, broadcast, reshape, trans, permute,
join, split and loop-carried values. Each warpgroup w takes rows [w*R, w*R + R) of every ring
payload (`tile.extract_slice` after each get), builds its own R-row splats and aranges, and
writes its rows with `tile.store_slice`; R = M / n. A reduction along the rows becomes
`tile.reduce ... across(n)`: each warpgroup reduces its rows and gets the reduction over all.
Every warpgroup gets and releases every use (lower-aref counts them on the empty barrier).
Where the groups' register budgets no longer fit the SM (three consumer warpgroups at
distribute's 40/232), the producer drops to 24 registers and the consumers get the most that
fits (160 for three); `set-registers` may override both.

Options:
  consumers: int | None = 1   cooperative consumer warpgroups: 1 (nothing to do), 2, 3, or
                              None (chosen from the tile rows: 3 for 192, 2 for a
                              multiple of 128, else 1).

Refused: input not produced by distribute, consumers not in {1, 2, 3}, a tile whose rows cannot
be split (a dot whose B operand depends on the rows, row counts that differ or are not a
multiple of 64 per warpgroup).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType, i32
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.diagnostics import TawaError
from tawa_xdsl.dialects import aref, tile
from tawa_xdsl.transforms.set_registers import fit_registers
from tawa_xdsl.transforms.ws_utils import consumer_groups, error, find_kernel

PASS = "cooperative-consumers"

# An equality between a dim of one value and a dim of another.
_Link = tuple[SSAValue, int, SSAValue, int]


def _tensor_rank(value: SSAValue) -> int | None:
    return len(value.type.get_shape()) if isinstance(value.type, TensorType) else None


def _links(op: Operation) -> list[_Link]:
    links: list[_Link] = []
    if isinstance(op, tile.ReduceOp):
        axis = op.axis.value.data
        for d in range(len(tile.shape_of(op.source))):
            if d != axis:
                links.append((op.source, d, op.result, d - (d > axis)))
    elif isinstance(op, tile.ExpandDimsOp):
        axis = op.axis.value.data
        for d in range(len(tile.shape_of(op.source))):
            links.append((op.source, d, op.result, d + (d >= axis)))
    elif isinstance(op, tile.BroadcastOp):
        for d, size in enumerate(tile.shape_of(op.source)):
            if size != 1:
                links.append((op.source, d, op.result, d))
    elif isinstance(op, tile.ReshapeOp):
        src = [(d, n) for d, n in enumerate(tile.shape_of(op.source)) if n != 1]
        dst = [(d, n) for d, n in enumerate(tile.shape_of(op.result)) if n != 1]
        if [n for _, n in src] == [n for _, n in dst]:
            links += [(op.source, a, op.result, b) for (a, _), (b, _) in zip(src, dst, strict=True)]
        elif tile.shape_of(op.source)[:1] == tile.shape_of(op.result)[:1]:
            links.append((op.source, 0, op.result, 0))  # row-major: dim 0 stays dim 0
    elif isinstance(op, tile.PermuteOp):
        links += [(op.source, d, op.result, k) for k, d in enumerate(op.permutation())]
    elif isinstance(op, tile.JoinOp):
        for d in range(len(tile.shape_of(op.lhs))):
            links += [(op.lhs, d, op.result, d), (op.rhs, d, op.result, d)]
    elif isinstance(op, tile.SplitOp):
        for d in range(len(tile.shape_of(op.lhs))):
            links += [(op.source, d, op.lhs, d), (op.source, d, op.rhs, d)]
    elif isinstance(op, tile.TransOp):
        links += [(op.source, 0, op.result, 1), (op.source, 1, op.result, 0)]
    elif isinstance(op, tile.DotOp):
        links += [(op.lhs, 0, op.result, 0), (op.acc, 0, op.result, 0)]
        links += [(op.acc, 1, op.result, 1)]
    elif isinstance(op, scf.IfOp):
        for region in op.regions:
            terminator = region.block.last_op if region.blocks else None
            for k, result in enumerate(op.results):
                if terminator is not None:
                    yielded = terminator.operands[k]
                    links += [(yielded, d, result, d) for d in range(_tensor_rank(result) or 0)]
    elif isinstance(op, scf.ForOp):
        terminator = op.body.block.last_op
        assert terminator is not None
        for k, init in enumerate(op.iter_args):
            for d in range(_tensor_rank(init) or 0):
                arg, out = op.body.block.args[k + 1], op.results[k]
                links += [(init, d, arg, d), (arg, d, terminator.operands[k], d)]
                links += [(terminator.operands[k], d, out, d)]
    elif op.name.startswith(("arith.", "math.")) or isinstance(
        op, tile.ConvertOp | tile.WhereOp | tile.CmpOp
    ):
        for result in op.results:
            rank = _tensor_rank(result)
            for operand in op.operands:
                if rank is not None and _tensor_rank(operand) == rank:
                    links += [(operand, d, result, d) for d in range(rank)]
    return links


def _is_block_of_rows(value: SSAValue) -> bool:
    """A 2-D tile of more than one row (a `[1, N]` row of column values has no rows to split)."""
    return _tensor_rank(value) == 2 and tile.shape_of(value)[0] > 1


def _row_axes(group: aref.GroupOp) -> dict[SSAValue, int]:
    axes: dict[SSAValue, int] = {}
    ops = list(group.body.walk())
    links = [link for op in ops for link in _links(op)]

    def assign(value: SSAValue, dim: int, why: Operation) -> bool:
        if axes.get(value, dim) != dim:
            raise error(
                why,
                PASS,
                f"cannot split rows across consumer warpgroups: a tile of "
                f"{value.type} would be split along dims {axes[value]} and {dim}",
            )
        changed = value not in axes
        axes[value] = dim
        return changed

    for op in ops:  # the rows: of every dot's A and accumulator, and of every 2-D output
        if isinstance(op, tile.DotOp):
            assign(op.lhs, 0, op)
            assign(op.acc, 0, op)
            assign(op.result, 0, op)
        elif isinstance(op, tile.StoreOp) and _is_block_of_rows(op.value):
            assign(op.value, 0, op)
    if not axes:  # no dot and no tile stored: the rows of the tiles read from the rings
        for op in ops:
            if isinstance(op, aref.GetOp):
                for value in op.values:
                    if _is_block_of_rows(value):
                        assign(value, 0, op)
    changed = True
    while changed:
        changed = False
        for a, da, b, db in links:
            if axes.get(a) == da:
                changed |= assign(b, db, a.owner if isinstance(a.owner, Operation) else group)
            if axes.get(b) == db:
                changed |= assign(a, da, b.owner if isinstance(b.owner, Operation) else group)
    for op in ops:
        if isinstance(op, tile.DotOp) and op.rhs in axes:
            raise error(op, PASS, "cannot split rows: the dot's B operand depends on the rows")
    return axes


def _row_sizes(axes: dict[SSAValue, int]) -> set[int]:
    return {value.type.get_shape()[d] for value, d in axes.items()}  # type: ignore[attr-defined]


def chosen_consumers(group: aref.GroupOp) -> int:
    """The warpgroups a consumer group's rows fill: 3 for 192 rows (64 each: one warpgroup
    holding all 192 spills, 0.22x on the H200, bench/NOTES.md round 13), 2 when its row count
    is a multiple of 128 (64 rows each at least), else 1 (also when its rows cannot be split
    at all)."""
    try:
        sizes = _row_sizes(_row_axes(group))
    except TawaError:  # a row-dependent B, a tile split along two dims: one warpgroup
        return 1
    if len(sizes) != 1:
        return 1
    rows = next(iter(sizes))
    return 3 if rows == 192 else 2 if rows % 128 == 0 else 1


def split_rows(group: aref.GroupOp, consumers: int) -> None:
    group.properties["warpgroups"] = IntegerAttr(consumers, i32)
    if consumers == 1:
        return
    axes = _row_axes(group)
    sizes = _row_sizes(axes)
    if not axes:
        return
    if len(sizes) != 1 or next(iter(sizes)) % (64 * consumers):
        raise error(
            group,
            PASS,
            f"cannot split rows {sorted(sizes)} into {consumers} warpgroups of a "
            "multiple of 64 rows",
        )
    rows = next(iter(sizes)) // consumers
    block = group.body.block
    first = block.first_op
    assert first is not None
    wg = aref.WarpgroupIndexOp()
    rows_c = arith.ConstantOp.from_int_and_width(rows, i32)
    row0 = arith.MuliOp(wg.result, rows_c.result)
    zero = arith.ConstantOp.from_int_and_width(0, i32)
    wg.result.name_hint, row0.result.name_hint = "wg", "row0"
    Rewriter.insert_op([wg, rows_c, row0, zero], InsertPoint.before(first))

    for op in group.body.walk():  # a reduction along the rows spans every warpgroup's rows
        if isinstance(op, tile.ReduceOp) and axes.get(op.source) == op.axis.value.data:
            op.warpgroups = IntegerAttr(consumers, i32)
    stores = [
        (op, axes[op.value])
        for op in group.body.walk()
        if isinstance(op, tile.StoreOp) and op.value in axes
    ]
    for value, dim in list(axes.items()):
        assert isinstance(value.type, TensorType)
        shape = list(value.type.get_shape())
        shape[dim] = rows
        owner = value.owner
        if isinstance(owner, aref.GetOp):
            offsets = [row0.result if d == dim else zero.result for d in range(len(shape))]
            part = tile.ExtractSliceOp(value, offsets, shape)
            part.result.name_hint = value.name_hint
            Rewriter.insert_op(part, InsertPoint.after(owner))
            value.replace_uses_with_if(part.result, lambda use, p=part: use.operation is not p)
        elif isinstance(owner, tile.ArangeOp):
            start = owner.start.value.data
            local = tile.ArangeOp(start, start + rows)
            shift = tile.SplatOp(row0.result, local.result.type)  # type: ignore[arg-type]
            total = arith.AddiOp(local.result, shift.result)
            total.result.name_hint = value.name_hint
            Rewriter.replace_op(owner, [local, shift, total])
        elif isinstance(owner, arith.ConstantOp):
            raise error(owner, PASS, "cannot split a dense tensor constant across warpgroups")
        else:
            Rewriter.replace_value_with_new_type(value, TensorType(value.type.element_type, shape))
    for store, dim in stores:
        _split_store(store, dim, row0.result)


def _split_store(op: tile.StoreOp, dim: int, row0: SSAValue) -> None:
    offsets = list(op.offsets)
    shifted = arith.AddiOp(offsets[dim], row0)
    Rewriter.insert_op(shifted, InsertPoint.before(op))
    offsets[dim] = shifted.result
    Rewriter.replace_op(op, tile.StoreSliceOp(op.desc, offsets, op.value))


@dataclass(frozen=True)
class CooperativeConsumersPass(ModulePass):
    """Consumer groups on `consumers` warpgroups splitting the rows of every tile.

    Options:
      consumers: int | None = 1   cooperative consumer warpgroups (1 or 2; None: chosen
                                  from each group's tile rows).
    """

    name = "cooperative-consumers"

    consumers: int | None = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernel = find_kernel(op, PASS)
        if self.consumers not in (None, 1, 2, 3):
            raise error(
                kernel, PASS, f"consumers must be 1, 2 or 3 warpgroups, got {self.consumers}"
            )
        for group in consumer_groups(kernel, PASS):
            split_rows(group, self.consumers or chosen_consumers(group))
        for specialize in kernel.walk():
            if isinstance(specialize, aref.WarpSpecializeOp):
                fit_registers(specialize)
