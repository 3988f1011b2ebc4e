"""Register fragments: the tiles a consumer warpgroup holds in registers.

A 2-D tile is a `wgmma_acc` fragment (the accumulator layout), a 1-D tile a `wgmma_row`
fragment (one value per fragment row); a tile that only feeds dots as A is a
`wgmma_operand_a` fragment. The ops, wherever they appear:

* `tile.splat` -> `fragment_splat`; `tile.convert` -> `fragment_convert`; `tile.reshape` of
  a fragment is the fragment;
* `arith` on float tiles -> `fragment_binary`; `math.exp2`/`exp`/`log2`/`log`/`sqrt`/
  `rsqrt`/`tanh`/`erf`/`absf` and `arith.negf` -> `fragment_unary`; `math.fma` -> a
  multiply and an add;
* `tile.reduce` along the row axis (columns, axis 1) -> per-thread `fragment_row_reduce` and
  two `shuffle_xor` steps (lanes 1 and 2 of a quad) combining the partials;
* row vectors (`[rows]` and `[rows, 1]` tiles are `wgmma_row` fragments): `expand_dims(v,
  1)` is the fragment, `broadcast` along the columns -> `fragment_broadcast_rows`;
* column vectors read from a slot (a bias): [`convert` +] `expand_dims(v, 0)` + `broadcast`
  -> one `fragment_load_columns` where the slot is held; other slot reads become fragments
  where they were loaded (`slots.registers`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith, math, scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    TensorType,
    f32,
)
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import Rewriter

from tawa_xdsl.dialects import nvgpu, tile
from tawa_xdsl.dialects.nvgpu import BinaryKind, FragmentLayout, FragmentType, UnaryKind
from tawa_xdsl.dialects.tile import ReduceKind
from tawa_xdsl.transforms.to_nvgpu.common import fail, insert_before, is_index_tile, is_tile
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
    return FragmentType(FragmentLayout.WGMMA_OPERAND_A, ty.get_shape(), ty.element_type)


def retype(op: Operation, values: list[SSAValue]) -> None:
    """The tiles `op` carries (loop arguments and results, branch results) become fragments
    (wgmma's A layout where they only feed dots as A, `feeds_only_a`); index and mask tiles
    cannot (they are never materialized)."""
    for value in values:
        if is_tile(value):
            if is_index_tile(value):
                raise fail(op, "carries an index or mask tile (they are not materialized)")
            assert isinstance(value.type, TensorType)
            carried = operand_a_of(value.type) if feeds_only_a(value) else None
            Rewriter.replace_value_with_new_type(value, carried or fragment_of(value.type))


def splat(op: tile.SplatOp) -> None:
    """A 16-bit float constant is splat in f32 and converted (PTX has no 16-bit float
    immediates)."""
    ty = op.result.type
    assert isinstance(ty, TensorType)
    value = op.operands[0]
    frag = operand_a_of(ty) if feeds_only_a(op.result) else fragment_of(ty)
    constant = value.owner
    if isinstance(constant, arith.ConstantOp) and isinstance(
        ty.element_type, Float16Type | BFloat16Type
    ):
        assert isinstance(constant.value, FloatAttr)
        wide = arith.ConstantOp(FloatAttr(constant.value.value.data, Float32Type()))
        kind = (
            FragmentLayout.WGMMA_ACC if frag.kind == FragmentLayout.WGMMA_OPERAND_A else frag.kind
        )
        spread = nvgpu.FragmentSplatOp(wide.result, FragmentType(kind, frag.get_shape(), f32))
        Rewriter.replace_op(op, [wide, spread, nvgpu.FragmentConvertOp(spread.result, frag)])
        if not constant.result.uses:
            Rewriter.erase_op(constant)
        return
    Rewriter.replace_op(op, nvgpu.FragmentSplatOp(value, frag))


def binary(op: Operation) -> None:
    lhs, rhs = op.operands
    Rewriter.replace_op(op, nvgpu.FragmentBinaryOp(FLOAT_BINARY[type(op)], lhs, rhs))


def unary(op: Operation) -> None:
    Rewriter.replace_op(op, nvgpu.FragmentUnaryOp(FLOAT_UNARY[type(op)], op.operands[0]))


def fma(op: math.FmaOp) -> None:
    """`a * b + c` as a multiply and an add (ptxas contracts them into one fma.rn)."""
    product = nvgpu.FragmentBinaryOp(BinaryKind.MUL, op.a, op.b)
    total = nvgpu.FragmentBinaryOp(BinaryKind.ADD, product.result, op.c)
    Rewriter.replace_op(op, [product, total])


def convert(op: tile.ConvertOp) -> None:
    """A convert feeding dots as A makes their register operand (the accumulator layout of
    each k16 slice is the A layout: conversion only); any other makes a fragment."""
    ty = op.result.type
    assert isinstance(ty, TensorType)
    feeds_a = any(isinstance(u.operation, tile.DotOp) and u.index == 0 for u in op.result.uses)
    if feeds_only_a(op.result):
        result = operand_a_of(ty)
    elif feeds_a:
        raise fail(op, "feeds a dot's A operand and something else")
    else:
        result = fragment_of(ty)
    Rewriter.replace_op(op, nvgpu.FragmentConvertOp(op.operands[0], result))


def row_reduce(op: tile.ReduceOp) -> None:
    """Per-thread partial over its columns, then butterflies over the quad's 4 lanes."""
    src = op.source.type
    if not isinstance(src, FragmentType) or op.axis.value.data != 1:
        raise fail(
            op,
            "must reduce a 2-D tile along its columns (axis 1): a reduction along axis 0 "
            "crosses warps and is not lowered for the GPU (reduce the transposed tile)",
        )
    combine = REDUCE_COMBINE[op.kind.data]
    partial = nvgpu.FragmentRowReduceOp(op.kind.data, op.source)
    ops: list[Operation] = [partial]
    value = partial.result
    for mask in (1, 2):
        other = nvgpu.ShuffleXorOp(value, mask)
        both = nvgpu.FragmentBinaryOp(combine, value, other)
        ops += [other, both]
        value = both.result
    Rewriter.replace_op(op, ops, [value])


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
        maybe an f32 `convert`, and `broadcast` spread over the rows: one
        `fragment_load_columns` here, where the slot is held."""
        if isinstance(op, tile.ExpandDimsOp):
            spread: list[Operation] = [op]
        else:
            spread = [u.operation for u in op.result.uses]
        if view.row is not None:
            raise fail(op, "spreads a slice of a vector slot over rows (load the whole vector)")
        rows = [u.operation for e in spread for u in e.results[0].uses]
        rows += [u.operation for c in rows if isinstance(c, tile.ConvertOp) for u in c.result.uses]
        shapes = {b.result.type for b in rows if isinstance(b, tile.BroadcastOp)}
        f32 = all(
            isinstance(ty := b.result.type, TensorType) and ty.element_type == Float32Type()
            for b in rows
        )
        if len(shapes) != 1 or not f32:
            raise fail(op, "of a slot read needs one f32 broadcast over rows (convert to f32)")
        (shape,) = shapes
        load = nvgpu.FragmentLoadColumnsOp(view.buf, view.slot, fragment_of(shape))  # type: ignore[arg-type]
        insert_before(op, [load])
        self.columns[op.result] = load.result

    def follow(self, op: tile.ExpandDimsOp | tile.ConvertOp) -> None:
        """An `expand_dims` (axis 0) or f32 `convert` of a column read stays that read."""
        self.columns[op.results[0]] = self.columns[op.operands[0]]

    def broadcast(self, op: tile.BroadcastOp) -> bool:
        """Replace a broadcast of a vector by its fragment; False if `op` is not one."""
        if op.source in self.columns:
            Rewriter.replace_op(op, [], [self.columns[op.source]])
            return True
        source = op.source.type
        if isinstance(source, FragmentType) and source.kind == FragmentLayout.WGMMA_ROW:
            ty = op.result.type
            assert isinstance(ty, TensorType)
            Rewriter.replace_op(op, nvgpu.FragmentBroadcastRowsOp(op.source, ty.get_shape()[1]))
            return True
        return False


def expand_rows(op: tile.ExpandDimsOp) -> None:
    """A row vector as a column `[rows, 1]` is the same `wgmma_row` fragment."""
    source = op.source.type
    if (
        op.axis.value.data != 1
        or not isinstance(source, FragmentType)
        or source.kind != FragmentLayout.WGMMA_ROW
    ):
        raise fail(op, "must turn a row vector into a column (axis 1) or place an index")
    Rewriter.replace_op(op, [], [op.source])
