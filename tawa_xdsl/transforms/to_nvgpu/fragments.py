"""Register fragments: the tiles a consumer warpgroup holds in registers.

A 2-D tile is a `wgmma_acc` fragment (the accumulator layout), a 1-D tile a `wgmma_row`
fragment (one value per fragment row); a tile that only feeds dots as A is a
`wgmma_operand_a` fragment. The ops, wherever they appear:

* `tile.splat` -> `fragment_splat` (splat again in another layout where it meets one);
  `tile.convert` -> `fragment_convert`; a `tile.reshape` of a fragment by unit dims is the
  fragment;
* `arith` on float tiles -> `fragment_binary` (a division by a broadcast f32 vector -> the
  vector's `fragment_unary rcp`, broadcast, and a multiply); `math.exp2`/`exp`/`log2`/`log`/
  `sqrt`/`rsqrt`/`tanh`/`erf`/`absf` and `arith.negf` -> `fragment_unary`; `math.fma` -> a
  multiply and an add;
* `tile.reduce` along the row axis (columns, axis 1) -> per-thread `fragment_row_reduce` and
  two `shuffle_xor` steps (lanes 1 and 2 of a quad) combining the partials; along axis 0
  (rows) -> a `wgmma_col` column vector: `fragment_column_reduce` (the thread's rows and its
  warp's lane rows), the partials of the 4 warps of each warpgroup it spans (`across(n)`)
  through an smem slot between two named barriers over their threads
  (`fragment_column_stage`, `fragment_column_combine`); `expand_dims(v, 0)` of it is the
  fragment, `broadcast` over the rows -> `fragment_broadcast_columns`;
* `tile.reshape`, `tile.permute`, `tile.join` and `tile.split` of accumulator fragments keep
  their n-D tiles as `ColumnView`s (rows stay dim 0, only columns move) until a 2-D result
  becomes one `fragment_gather` (register moves the layout object plans);
* row vectors (`[rows]` and `[rows, 1]` tiles are `wgmma_row` fragments): `expand_dims(v,
  1)` is the fragment, `broadcast` along the columns -> `fragment_broadcast_rows`;
* column vectors read from a slot (a bias): [`convert` +] `expand_dims(v, 0)` [+ `convert`]
  + `broadcast` -> one `fragment_load_columns` where the slot is held (f32, exact) and the
  `fragment_convert`s the chain asks for (a 16-bit bias used as loaded); other slot reads
  become fragments where they were loaded (`slots.registers`);
* tiles carried by loops and branches become fragments before their bodies are lowered
  (`retype`): a 1-D tile is a row or a column vector as the vectors it is computed from and
  combined with say (`vector_kind`: a running column maximum is a `wgmma_col` fragment), and
  a splat entering it in another layout is splat again in its own (`reconcile_carries`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from xdsl.dialects import arith, func, math, scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    TensorType,
    f32,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import VerifyException

from tawa_xdsl.diagnostics import first_line
from tawa_xdsl.dialects import aref, nvgpu, tile
from tawa_xdsl.dialects.nvgpu import (
    COLUMN_REDUCE_BARRIER_ID,
    WARPGROUP_THREADS,
    BinaryKind,
    FragmentLayout,
    FragmentType,
    UnaryKind,
)
from tawa_xdsl.dialects.nvgpu.fragment import WARPS_PER_WARPGROUP as WARPS
from tawa_xdsl.dialects.tile import ReduceKind
from tawa_xdsl.transforms.to_nvgpu.common import fail, insert_before, is_index_tile, is_tile
from tawa_xdsl.transforms.to_nvgpu.masks import narrowed, widened
from tawa_xdsl.transforms.to_nvgpu.slots import SmemView

FLOAT_BINARY: dict[type[Operation], BinaryKind] = {
    arith.AddfOp: BinaryKind.ADD,
    arith.SubfOp: BinaryKind.SUB,
    arith.MulfOp: BinaryKind.MUL,
    arith.DivfOp: BinaryKind.DIV,
    arith.MaximumfOp: BinaryKind.MAX,
    arith.MaxnumfOp: BinaryKind.MAX,
    arith.MinimumfOp: BinaryKind.MIN,
    arith.MinnumfOp: BinaryKind.MIN,
}
FLOAT_UNARY: dict[type[Operation], UnaryKind] = {
    math.Exp2Op: UnaryKind.EXP2,
    math.Log2Op: UnaryKind.LOG2,
    math.ExpOp: UnaryKind.EXP,
    math.LogOp: UnaryKind.LOG,
    math.SqrtOp: UnaryKind.SQRT,
    math.RsqrtOp: UnaryKind.RSQRT,
    math.TanhOp: UnaryKind.TANH,
    math.ErfOp: UnaryKind.ERF,
    arith.NegfOp: UnaryKind.NEG,
    math.AbsFOp: UnaryKind.ABS,
}
REDUCE_COMBINE = {ReduceKind.MAX: BinaryKind.MAX, ReduceKind.SUM: BinaryKind.ADD}


def fragment_of(ty: TensorType) -> FragmentType:
    """The fragment of a consumer tile: 1-D or one column ([rows, 1]) -> wgmma_row, 2-D ->
    wgmma_acc."""
    shape = ty.get_shape()
    if len(shape) == 1 or len(shape) == 2 and shape[1] == 1:
        return FragmentType(FragmentLayout.WGMMA_ROW, shape[:1], ty.element_type)
    return FragmentType(FragmentLayout.WGMMA_ACC, shape, ty.element_type)


def _carried(value: SSAValue) -> list[SSAValue]:
    """The values `value` is carried on as: a loop result is its block argument's."""
    owner = value.owner
    if isinstance(owner, scf.ForOp):
        return [owner.body.block.args[list(owner.results).index(value) + 1]]
    return []


def _flows_to(use_op: Operation, index: int) -> list[SSAValue] | None:
    """Where an operand at `index` of `use_op` is carried (loop arguments and results,
    branch results), or None when `use_op` reads it."""
    if isinstance(use_op, scf.YieldOp):
        parent = use_op.parent_op()
        if isinstance(parent, scf.ForOp):
            return [parent.body.block.args[index + 1], parent.results[index]]
        if isinstance(parent, scf.IfOp):
            return [parent.results[index]]
    if isinstance(use_op, scf.ForOp) and index >= 3:
        return [use_op.body.block.args[index - 2], use_op.results[index - 3]]
    return None


def feeds_only_a(value: SSAValue) -> bool:
    """Whether `value`, followed wherever loops and branches carry it, is read only as the A
    operand of dots (at least once): it is then held in wgmma's A layout throughout (P of a
    rotated attention loop, carried into the next iteration's P V)."""
    seen: set[SSAValue] = set()
    frontier, read_as_a = [value], False
    while frontier:
        current = frontier.pop()
        if current in seen:
            continue
        seen.add(current)
        frontier.extend(_carried(current))
        for use in current.uses:
            if use.index == 0 and isinstance(use.operation, tile.DotOp | nvgpu.WgmmaMmaAsyncRsOp):
                read_as_a = True
                continue
            carried = _flows_to(use.operation, use.index)
            if carried is None:
                return False
            frontier.extend(carried)
    return read_as_a


def operand_a_of(ty: TensorType) -> FragmentType:
    """wgmma's register A operand for the tile's element type (16-bit or fp8)."""
    return FragmentType(nvgpu.operand_a_layout(ty.element_type), ty.get_shape(), ty.element_type)


def retype(op: Operation, values: list[SSAValue]) -> None:
    """The tiles `op` carries (loop arguments and results, branch results) become fragments
    (wgmma's A layout where they only feed dots as A, `feeds_only_a`; a 1-D tile in the
    layout of the vectors it is computed from, `vector_kind`); index and mask tiles cannot
    (they are never materialized)."""
    for value in values:
        if is_tile(value):
            if is_index_tile(value):
                raise fail(op, "carries an index or mask tile (they are not materialized)")
            assert isinstance(value.type, TensorType)
            Rewriter.replace_value_with_new_type(value, carried_fragment(op, value))


def carried_fragment(op: Operation, value: SSAValue) -> FragmentType:
    ty = value.type
    assert isinstance(ty, TensorType)
    if feeds_only_a(value):
        return operand_a_of(ty)
    frag = fragment_of(ty)
    if frag.kind != FragmentLayout.WGMMA_ROW or len(ty.get_shape()) != 1:
        return frag
    return FragmentType(vector_kind(op, value), ty.get_shape(), ty.element_type)


# The vector an axis makes: a reduction along axis 0 (or expand_dims(v, 0) placing v as a
# row of a tile) is a column vector, along axis 1 a row vector.
VECTOR_OF_AXIS = {0: FragmentLayout.WGMMA_COL, 1: FragmentLayout.WGMMA_ROW}
ELEMENTWISE = (*FLOAT_BINARY, *FLOAT_UNARY, math.FmaOp, tile.ConvertOp, tile.WhereOp)


def vector_kind(op: Operation, value: SSAValue) -> FragmentLayout:
    """Whether the 1-D tile `value` that `op` carries is a row or a column vector: the kind
    of every vector it is computed from, combined with, or carried as (through elementwise
    math, converts, loops and branches), where one is a reduction along an axis, an
    `expand_dims` along one, or a fragment already made; a row vector where none is (a
    splat alone has no layout: it is splat again in the kind found)."""
    kinds: set[FragmentLayout] = set()
    seen: set[SSAValue] = set()
    frontier = [value]
    while frontier:
        current = frontier.pop()
        if current in seen:
            continue
        seen.add(current)
        if isinstance(ty := current.type, FragmentType):
            if not _is_splat(current):
                kinds.add(ty.kind)
            continue
        kind, linked = _vector_links(current)
        kinds |= kind
        frontier += [v for v in linked if _is_vector(v)]
    if len(kinds) > 1:
        raise fail(op, "carries a vector that is both a row and a column vector")
    return kinds.pop() if kinds else FragmentLayout.WGMMA_ROW


def _vector_links(value: SSAValue) -> tuple[set[FragmentLayout], list[SSAValue]]:
    """The vector kinds `value`'s definition and uses show, and the vectors linked to it."""
    kinds: set[FragmentLayout] = set()
    linked: list[SSAValue] = list(_carried(value))
    owner = value.owner
    if isinstance(owner, tile.ReduceOp):
        kinds.add(VECTOR_OF_AXIS[owner.axis.value.data])
    elif isinstance(owner, ELEMENTWISE):
        linked += owner.operands
    elif isinstance(owner, scf.IfOp):
        index = list(owner.results).index(value)
        linked += [r.block.last_op.operands[index] for r in owner.regions if r.blocks]  # type: ignore[union-attr]
    elif isinstance(owner, Block) and isinstance(loop := owner.parent_op(), scf.ForOp):
        index = owner.args.index(value) - 1  # type: ignore[arg-type]
        if index >= 0:
            linked += [loop.operands[3 + index], loop.results[index]]
            yielded = owner.last_op
            if isinstance(yielded, scf.YieldOp):
                linked.append(yielded.operands[index])
    for use in value.uses:
        user = use.operation
        if isinstance(user, tile.ExpandDimsOp):
            kinds.add(VECTOR_OF_AXIS[user.axis.value.data])
        elif isinstance(user, ELEMENTWISE):
            linked += [*user.operands, *user.results]
        else:
            linked += _flows_to(user, use.index) or []
    return kinds, linked


def _is_vector(value: SSAValue) -> bool:
    ty = value.type
    if isinstance(ty, FragmentType):
        return ty.kind in VECTOR_OF_AXIS.values()
    return is_tile(value) and not is_index_tile(value) and len(tile.shape_of(value)) == 1


def _is_splat(value: SSAValue) -> bool:
    """Whether the fragment `value` is a splat (maybe converted): it has no layout of its own."""
    owner = value.owner
    if isinstance(owner, nvgpu.FragmentConvertOp):
        owner = owner.source.owner
    return isinstance(owner, nvgpu.FragmentSplatOp)


def reconcile_carries(op: scf.ForOp | scf.IfOp) -> None:
    """After its body is lowered: the values entering what `op` carries have its types."""
    if isinstance(op, scf.ForOp):
        body = op.body.block
        for index, arg in enumerate(body.args[1:]):
            op.operands[3 + index] = reconcile(op, arg, op.operands[3 + index])
        yields = [(body.last_op, list(body.args[1:]))]
    else:
        yields = [(r.block.last_op, list(op.results)) for r in op.regions if r.blocks]
    for yielded, carried in yields:
        assert isinstance(yielded, scf.YieldOp)
        for index, target in enumerate(carried):
            yielded.operands[index] = reconcile(yielded, target, yielded.operands[index])


def reconcile(op: Operation, carried: SSAValue, value: SSAValue) -> SSAValue:
    """`value` as it enters `carried` (a loop's initial value, a yielded one): a splat made
    in another layout is splat again in `carried`'s."""
    if value.type == carried.type:
        return value
    again = resplat(op, value, carried)
    if again.type != carried.type:
        raise fail(op, f"carries {carried.type} but is given {value.type}")
    return again


def splat(op: tile.SplatOp) -> None:
    """A 16-bit or fp8 constant is splat in f32 and converted (PTX has no 16-bit or 8-bit
    float immediates)."""
    ty = op.result.type
    assert isinstance(ty, TensorType)
    value = op.operands[0]
    frag = operand_a_of(ty) if feeds_only_a(op.result) else fragment_of(ty)
    constant = value.owner
    if isinstance(constant, arith.ConstantOp) and isinstance(
        ty.element_type, (Float16Type, BFloat16Type, *nvgpu.FP8_TYPES)
    ):
        assert isinstance(constant.value, FloatAttr)
        wide = arith.ConstantOp(FloatAttr(constant.value.value.data, Float32Type()))
        operand_a = (FragmentLayout.WGMMA_OPERAND_A, FragmentLayout.WGMMA_OPERAND_A8)
        kind = FragmentLayout.WGMMA_ACC if frag.kind in operand_a else frag.kind
        spread = nvgpu.FragmentSplatOp(wide.result, FragmentType(kind, frag.get_shape(), f32))
        # a splat's columns are all alike: into the fp8 A layout, take each thread's own
        columns = None
        if frag.kind == FragmentLayout.WGMMA_OPERAND_A8:
            columns = nvgpu.WGMMA_OPERAND_A8.own_columns(frag.get_shape()[1])
        converted = nvgpu.FragmentConvertOp(spread.result, frag, columns)
        Rewriter.replace_op(op, [wide, spread, converted])
        if not constant.result.uses:
            Rewriter.erase_op(constant)
        return
    Rewriter.replace_op(op, nvgpu.FragmentSplatOp(value, frag))


def binary(op: Operation) -> None:
    """A splat has no layout of its own: one meeting a fragment of another layout (a column
    vector scaled by a scalar) is splat again in that layout. A division by a broadcast f32
    vector (softmax's `acc / l_i[:, None]`) divides once per vector value and multiplies:
    `x * broadcast(rcp(v))`, within 1.5 ulp of the quotient, where the per-value
    `div.rn.f32` is a dozen instructions and a branch (on the H200 6% of the attention
    kernel's instructions were its epilogue's divisions; bench/NOTES.md, round 16)."""
    lhs, rhs = (resplat(op, value, other) for value, other in (op.operands, op.operands[::-1]))
    spread = rhs.owner
    if (
        isinstance(op, arith.DivfOp)
        and isinstance(spread, nvgpu.FragmentBroadcastRowsOp | nvgpu.FragmentBroadcastColumnsOp)
        and isinstance(spread.source.type, FragmentType)
        and isinstance(spread.source.type.element_type, Float32Type)
    ):
        inverse = nvgpu.FragmentUnaryOp(UnaryKind.RCP, spread.source)
        count = rhs.type.get_shape()[1 if isinstance(spread, nvgpu.FragmentBroadcastRowsOp) else 0]
        again = type(spread)(inverse.result, count)
        product = nvgpu.FragmentBinaryOp(BinaryKind.MUL, lhs, again.result)
        name = op.results[0].name_hint
        Rewriter.replace_op(op, [inverse, again, product])
        divisor = spread.source.name_hint or "divisor"
        inverse.result.name_hint, again.result.name_hint = f"{divisor}_inv", f"{divisor}_inv_b"
        product.result.name_hint = name
        if not spread.result.uses:
            Rewriter.erase_op(spread)
        return
    Rewriter.replace_op(op, nvgpu.FragmentBinaryOp(FLOAT_BINARY[type(op)], lhs, rhs))


def resplat(op: Operation, value: SSAValue, other: SSAValue) -> SSAValue:
    """`value`, or the splat it is made again in the layout of `other` (see `binary`)."""
    ty, want = value.type, other.type
    if ty == want or not isinstance(ty, FragmentType) or not isinstance(want, FragmentType):
        return value
    chain: list[Operation] = []
    owner = value.owner
    if isinstance(owner, nvgpu.FragmentConvertOp):
        chain, owner = [owner], owner.source.owner
    if not isinstance(owner, nvgpu.FragmentSplatOp):
        return value
    spread = nvgpu.FragmentSplatOp(
        owner.value,
        FragmentType(want.kind, want.get_shape(), owner.result.type.element_type),  # type: ignore[union-attr]
    )
    ops: list[Operation] = [spread]
    if chain:
        ops.append(nvgpu.FragmentConvertOp(spread.result, want))
    insert_before(op, ops)
    return ops[-1].results[0]


def unary(op: Operation) -> None:
    """The function register by register; an exp2 that emulate-exp2 marked keeps its share."""
    share = op.attributes.get(aref.EXP2_EMULATED_ATTR)
    emulated = share.value.data if isinstance(share, IntegerAttr) else None
    Rewriter.replace_op(op, nvgpu.FragmentUnaryOp(FLOAT_UNARY[type(op)], op.operands[0], emulated))


def fma(op: math.FmaOp) -> None:
    """`a * b + c` as a multiply and an add (ptxas contracts them into one fma.rn)."""
    product = nvgpu.FragmentBinaryOp(BinaryKind.MUL, op.a, op.b)
    total = nvgpu.FragmentBinaryOp(BinaryKind.ADD, product.result, op.c)
    Rewriter.replace_op(op, [product, total])


def convert(op: tile.ConvertOp, view: ColumnView | None = None) -> None:
    """A convert feeding dots as A makes their register operand (the accumulator layout of
    each k16 slice is the 16-bit A layout: conversion only; to fp8, values move within each
    quad of lanes); any other makes a fragment. A `view` source (columns of a fragment in
    another order) must convert into the fp8 A layout, each value staying in its thread."""
    ty = op.result.type
    assert isinstance(ty, TensorType)
    if view is not None:
        convert_columns(op, ty, view)
        return
    feeds_a = any(isinstance(u.operation, tile.DotOp) and u.index == 0 for u in op.result.uses)
    if feeds_only_a(op.result):
        result = operand_a_of(ty)
    elif feeds_a:
        raise fail(op, "feeds a dot's A operand and something else")
    elif isinstance(source := op.operands[0].type, FragmentType):  # layout and shape kept
        result = FragmentType(source.kind, source.get_shape(), ty.element_type)
    else:
        result = fragment_of(ty)
    Rewriter.replace_op(op, nvgpu.FragmentConvertOp(op.operands[0], result))


def convert_columns(op: tile.ConvertOp, ty: TensorType, view: ColumnView) -> None:
    """The fp8 A operand from a fragment's columns in the order `view` holds them. Anything
    else is refused with the reason the accumulator layout cannot hold the columns (`place`
    left the view only because that gather failed)."""
    result = operand_a_of(ty) if feeds_only_a(op.result) else None
    if result is None or result.kind != FragmentLayout.WGMMA_OPERAND_A8:
        try:
            ColumnViews.gather(view).verify_()
        except VerifyException as error:
            raise fail(op, f"cannot be register moves: {first_line(error)}") from None
        raise AssertionError("a view is left for a convert only where its gather fails")
    if len(view.fragments) != 1:
        raise fail(op, "converts the columns of several tiles into one fp8 A operand")
    converted = nvgpu.FragmentConvertOp(view.fragments[0], result, view.column.tolist())
    try:
        converted.verify_()
    except VerifyException as error:
        raise fail(op, f"cannot be register moves: {first_line(error)}") from None
    Rewriter.replace_op(op, converted)


def reduce(op: tile.ReduceOp, warpgroups: int) -> None:
    """A reduction along a fragment's columns (axis 1) or its rows (axis 0)."""
    src = op.source.type
    if not isinstance(src, FragmentType) or src.kind != FragmentLayout.WGMMA_ACC:
        raise fail(op, "must reduce a 2-D tile along its columns (axis 1) or rows (axis 0)")
    if op.axis.value.data == 1:
        row_reduce(op)
    else:
        column_reduce(op, warpgroups)


def row_reduce(op: tile.ReduceOp) -> None:
    """Per-thread partial over its columns, then butterflies over the quad's 4 lanes."""
    partial = nvgpu.FragmentRowReduceOp(op.kind.data, op.source)
    ops, value = quad_combine(partial.result, REDUCE_COMBINE[op.kind.data])
    Rewriter.replace_op(op, [partial, *ops], [value])


def quad_combine(value: SSAValue, combine: BinaryKind) -> tuple[list[Operation], SSAValue]:
    """`value`'s lane partials combined over each quad: `shuffle_xor` 1 and 2, each followed
    by `combine` (the ops, and the combined row value)."""
    ops: list[Operation] = []
    for mask in (1, 2):
        other = nvgpu.ShuffleXorOp(value, mask)
        both = nvgpu.FragmentBinaryOp(combine, value, other)
        ops += [other, both]
        value = both.result
    return ops, value


def column_reduce(op: tile.ReduceOp, warpgroups: int) -> None:
    """In f32: each warp's partial in registers (`fragment_column_reduce`), the partials of
    every warp of the n warpgroups the reduction spans (`across(n)`, else 1) through an smem
    slot of one row per warp (warpgroup w's from row 4 w), between two named barriers over
    their threads (the second lets the next reduction reuse nothing half-read)."""
    spans = 1 if op.warpgroups is None else op.warpgroups.value.data
    if spans != warpgroups:
        raise fail(op, f"reduces along rows that {warpgroups} warpgroups hold, across {spans}")
    kind = op.kind.data
    ops, (source,) = widened([op.source])
    partial = nvgpu.FragmentColumnReduceOp(kind, source)
    columns = partial.result.type.get_shape()[0]  # type: ignore[union-attr]
    scratch = nvgpu.SmemAllocOp(nvgpu.SmemType((1, WARPS * warpgroups, columns), f32, 0))
    scratch.buf.name_hint = "column_partials"
    kernel = op.get_toplevel_object()
    first = next(o for o in kernel.walk() if isinstance(o, func.FuncOp)).body.block.first_op
    assert first is not None
    insert_before(first, [scratch])
    slot = arith.ConstantOp(IntegerAttr(0, i32))
    row: list[Operation] = []
    if warpgroups > 1:  # warpgroup w of the group stages rows 4 w .. 4 w + 3
        wg, warps = aref.WarpgroupIndexOp(), arith.ConstantOp(IntegerAttr(WARPS, i32))
        row = [wg, warps, arith.MuliOp(wg.result, warps.result)]
    threads = WARPGROUP_THREADS * warpgroups
    total = nvgpu.FragmentColumnCombineOp(kind, scratch.buf, slot.result, partial.result.type)  # type: ignore[arg-type]
    stage = nvgpu.FragmentColumnStageOp(
        partial.result, scratch.buf, slot.result, row[-1].results[0] if row else None
    )
    ops += [
        partial,
        slot,
        *row,
        stage,
        nvgpu.NamedBarrierSyncOp(COLUMN_REDUCE_BARRIER_ID, threads),
        total,
        nvgpu.NamedBarrierSyncOp(COLUMN_REDUCE_BARRIER_ID, threads),
    ]
    narrow = narrowed(total.result, op.result.type)
    Rewriter.replace_op(op, [*ops, *narrow], [narrow[-1].results[0] if narrow else total.result])


@dataclass
class Vectors:
    """Column vectors read from a slot on their way to a broadcast over the rows (row
    vectors, `[rows]` or `[rows, 1]`, are `wgmma_row` fragments like any other tile)."""

    # 1-D slot reads spread over rows (a bias): the fragment_load_columns they become
    columns: dict[SSAValue, SSAValue] = field(default_factory=dict)

    def holds(self, value: SSAValue) -> bool:
        return value in self.columns

    @staticmethod
    def spreads_over_rows(op: Operation) -> bool:
        """Whether `op` is `expand_dims(v, 0)` of a 1-D slot read, or its `convert` that only
        such expand_dims read: a per-column vector (a bias) spread over the rows."""
        if isinstance(op, tile.ExpandDimsOp):
            return op.axis.value.data == 0
        if not isinstance(op, tile.ConvertOp):
            return False
        spread = [u.operation for u in op.result.uses]
        return bool(spread) and all(
            isinstance(e, tile.ExpandDimsOp) and e.axis.value.data == 0 for e in spread
        )

    def load_columns(self, op: tile.ConvertOp | tile.ExpandDimsOp, view: SmemView) -> None:
        """`convert` (or `expand_dims` axis 0) of a 1-D slot read that `expand_dims` (axis 0),
        maybe `convert`s, and `broadcast` spread over the rows: one `fragment_load_columns`
        here, where the slot is held (widened to f32, exact), converted as the chain's converts
        and broadcasts say (`follow`, `broadcast`)."""
        if isinstance(op, tile.ExpandDimsOp):
            spread: list[Operation] = [op]
        else:
            spread = [u.operation for u in op.result.uses]
        if view.row is not None:
            raise fail(op, "spreads a slice of a vector slot over rows (load the whole vector)")
        rows = [u.operation for e in spread for u in e.results[0].uses]
        rows += [u.operation for c in rows if isinstance(c, tile.ConvertOp) for u in c.result.uses]
        shapes = {b.result.type.get_shape() for b in rows if isinstance(b, tile.BroadcastOp)}  # type: ignore[union-attr]
        spreads = all(isinstance(b, tile.BroadcastOp | tile.ConvertOp) for b in rows)
        if len(shapes) != 1 or not spreads:
            raise fail(op, "of a slot read needs broadcasts over rows of one shape")
        (shape,) = shapes
        load = nvgpu.FragmentLoadColumnsOp(
            view.buf, view.slot, FragmentType(FragmentLayout.WGMMA_ACC, shape, f32)
        )
        insert_before(op, [load])
        self.columns[op.operands[0]] = load.result
        self.follow(op)

    def follow(self, op: tile.ExpandDimsOp | tile.ConvertOp) -> None:
        """An `expand_dims` (axis 0) of a column read stays that read, a `convert` converts
        it (the fragment of a column read holds its values exactly, maybe in f32)."""
        result = op.results[0].type
        assert isinstance(result, TensorType)
        if isinstance(op, tile.ConvertOp):
            self.columns[op.result] = self.converted(op, op.source, result.element_type)
        else:
            self.columns[op.result] = self.columns[op.source]

    def converted(self, op: Operation, value: SSAValue, element: Attribute) -> SSAValue:
        """The fragment of the column read `value`, converted to `element` before `op`."""
        frag = self.columns[value]
        ty = frag.type
        assert isinstance(ty, FragmentType)
        if ty.element_type == element:
            return frag
        convert = nvgpu.FragmentConvertOp(frag, FragmentType(ty.kind, ty.get_shape(), element))
        insert_before(op, [convert])
        return convert.result

    def broadcast(self, op: tile.BroadcastOp) -> bool:
        """Replace a broadcast of a vector by its fragment; False if `op` is not one."""
        if op.source in self.columns:
            ty = op.result.type
            assert isinstance(ty, TensorType)
            Rewriter.replace_op(op, [], [self.converted(op, op.source, ty.element_type)])
            return True
        source, ty = op.source.type, op.result.type
        assert isinstance(ty, TensorType)
        if isinstance(source, FragmentType) and source.kind == FragmentLayout.WGMMA_ROW:
            Rewriter.replace_op(op, nvgpu.FragmentBroadcastRowsOp(op.source, ty.get_shape()[1]))
            return True
        if isinstance(source, FragmentType) and source.kind == FragmentLayout.WGMMA_COL:
            rows = ty.get_shape()[0]
            Rewriter.replace_op(op, nvgpu.FragmentBroadcastColumnsOp(op.source, rows))
            return True
        return False


def expand_rows(op: tile.ExpandDimsOp) -> None:
    """A row vector as a column `[rows, 1]` is the same `wgmma_row` fragment, a column vector
    as a row `[1, columns]` the same `wgmma_col` fragment."""
    source = op.source.type
    kinds = {1: FragmentLayout.WGMMA_ROW, 0: FragmentLayout.WGMMA_COL}
    if not isinstance(source, FragmentType) or kinds.get(op.axis.value.data) != source.kind:
        raise fail(
            op,
            "must turn a row vector into a column (axis 1), a column vector (a reduction "
            "along axis 0) into a row (axis 0), or place an index",
        )
    Rewriter.replace_op(op, [], [op.source])


def only_unit_dims(op: tile.ReshapeOp) -> bool:
    """Whether `op` reshapes a fragment only by adding or dropping unit dims (`[1, rows,
    cols]`, a row vector as `[rows, 1]`): the fragment itself."""
    source = op.source.type
    if not isinstance(source, FragmentType):
        return False
    kept = [d for d in tile.shape_of(op.result) if d != 1]
    return kept == [d for d in source.get_shape() if d != 1]


@dataclass(frozen=True)
class ColumnView:
    """An n-D tile that is 2-D accumulator fragments seen through reshapes, permutes and
    joins: dim 0 is the fragments' rows, and each position of the other dims is column
    `column[pos]` of fragment `fragments[source[pos]]` (the rows never leave their threads,
    so only columns move; where the layout lets them, `tl.split` and reshapes back to 2-D
    are register moves)."""

    fragments: tuple[SSAValue, ...]
    source: np.ndarray  # int, the tile's dims but the first
    column: np.ndarray

    @staticmethod
    def of(fragment: SSAValue) -> ColumnView:
        ty = fragment.type
        assert isinstance(ty, FragmentType)
        columns = np.arange(ty.get_shape()[1])
        return ColumnView((fragment,), np.zeros_like(columns), columns)


@dataclass
class ColumnViews:
    """The tiles of one consumer group that are `ColumnView`s (never materialized)."""

    views: dict[SSAValue, ColumnView] = field(default_factory=dict)

    def view(self, op: Operation, value: SSAValue) -> ColumnView:
        if value in self.views:
            return self.views[value]
        ty = value.type
        if not isinstance(ty, FragmentType) or ty.kind != FragmentLayout.WGMMA_ACC:
            raise fail(op, f"needs a 2-D register tile (an accumulator fragment), got {ty}")
        return ColumnView.of(value)

    def check(self, op: Operation) -> None:
        """Refuse an op other than a reshape, permute or split reading an n-D view, or a
        convert reading a 2-D one."""
        if isinstance(op, tile.ReshapeOp | tile.PermuteOp | tile.SplitOp):
            return
        if isinstance(op, tile.ConvertOp) and self.flat(op.operands[0]):
            return
        if any(v in self.views for v in op.operands):
            raise fail(
                op,
                "takes a tile of rank 3 or more: only tl.reshape, tl.permute and tl.split read "
                "one (split it or reshape it back to 2-D)",
            )

    def reshape(self, op: tile.ReshapeOp) -> None:
        """Row-major, dim 0 (the rows) kept: only the other dims are regrouped."""
        view, shape = self.view(op, op.source), tile.shape_of(op.result)
        rows = op.source.type.get_shape()[0]  # type: ignore[union-attr] (tile or fragment)
        if len(shape) < 2 or shape[0] != rows:
            raise fail(op, f"must keep the {rows} rows as dim 0 (rows stay in their threads)")
        others = shape[1:]
        regrouped = replace(
            view, source=view.source.reshape(others), column=view.column.reshape(others)
        )
        self.place(op, op.result, regrouped)

    def permute(self, op: tile.PermuteOp) -> None:
        dims = op.permutation()
        if dims[0] != 0:
            raise fail(op, f"must keep dim 0 (the rows) first, got dims {list(dims)}")
        view, axes = self.view(op, op.source), [d - 1 for d in dims[1:]]
        source, column = view.source.transpose(axes), view.column.transpose(axes)
        moved = replace(view, source=source, column=column)
        self.place(op, op.result, moved)

    def split(self, op: tile.SplitOp) -> None:
        view = self.view(op, op.source)
        for half, result in enumerate(op.results):
            part = replace(view, source=view.source[..., half], column=view.column[..., half])
            self.place(op, result, part)

    def join(self, op: tile.JoinOp) -> None:
        lhs, rhs = self.view(op, op.lhs), self.view(op, op.rhs)
        if lhs.fragments != rhs.fragments:
            fragments = lhs.fragments + rhs.fragments
            rhs = replace(rhs, fragments=fragments, source=rhs.source + len(lhs.fragments))
        joined = ColumnView(
            rhs.fragments,
            np.stack([lhs.source, rhs.source], axis=-1),
            np.stack([lhs.column, rhs.column], axis=-1),
        )
        self.place(op, op.result, joined)

    @staticmethod
    def gather(view: ColumnView) -> nvgpu.FragmentGatherOp:
        """The accumulator fragment a 2-D view is, as register moves (to be verified)."""
        first = view.fragments[0].type
        assert isinstance(first, FragmentType)
        shape = [first.rows, len(view.column)]
        result = FragmentType(FragmentLayout.WGMMA_ACC, shape, first.element_type)
        sources, columns = view.source.tolist(), view.column.tolist()
        return nvgpu.FragmentGatherOp(view.fragments, sources, columns, result)

    def flat(self, value: SSAValue) -> bool:
        """Whether `value` is a 2-D view left for the convert that reads it."""
        return value in self.views and self.views[value].column.ndim == 1

    def place(self, op: Operation, value: SSAValue, view: ColumnView) -> None:
        """A 2-D result is a fragment (a gather, or its source itself); else a view. A 2-D
        view that is not register moves in the accumulator layout but is read only by
        converts stays a view: converting into wgmma's fp8 A layout may take its columns
        where the accumulator layout cannot (`convert`)."""
        if view.column.ndim != 1:
            self.views[value] = view
            return
        first = view.fragments[0].type
        assert isinstance(first, FragmentType)
        whole = np.arange(first.get_shape()[1])
        if len(view.fragments) == 1 and np.array_equal(view.column, whole):
            value.replace_all_uses_with(view.fragments[0])
            return
        gather = self.gather(view)
        try:
            gather.verify_()
        except VerifyException as error:
            if value.uses and all(isinstance(u.operation, tile.ConvertOp) for u in value.uses):
                self.views[value] = view
                return
            raise fail(op, f"cannot be register moves: {first_line(error)}") from None
        insert_before(op, [gather])
        value.replace_all_uses_with(gather.result)
