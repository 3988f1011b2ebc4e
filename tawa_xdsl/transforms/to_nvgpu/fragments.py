"""Register fragments: the tiles a consumer warpgroup holds in registers.

A 2-D tile is a `wgmma_acc` fragment (the accumulator layout), a 1-D tile a `wgmma_row`
fragment (one value per fragment row); a tile that only feeds dots as A is a
`wgmma_operand_a` fragment. The ops, wherever they appear:

* `tile.splat` -> `fragment_splat`; `tile.convert` -> `fragment_convert`; `tile.reshape` of
  a fragment is the fragment;
* `arith` on float tiles -> `fragment_binary`; `math.exp2`, `math.log2`, `arith.negf` ->
  `fragment_unary`;
* `tile.reduce` along the row axis (columns, axis 1) -> per-thread `fragment_row_reduce` and
  two `shuffle_xor` steps (lanes 1 and 2 of a quad) combining the partials;
* row vectors: `expand_dims(v, 1)` + `broadcast` -> `fragment_broadcast_rows`;
* column vectors read from a slot (a bias): `convert` + `expand_dims(v, 0)` + `broadcast` ->
  one `fragment_load_columns` where the slot is held."""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith, math
from xdsl.dialects.builtin import Float32Type, TensorType
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
    arith.NegfOp: UnaryKind.NEG,
}
REDUCE_COMBINE = {ReduceKind.MAX: BinaryKind.MAX, ReduceKind.SUM: BinaryKind.ADD}


def fragment_of(ty: TensorType) -> FragmentType:
    """The fragment of a consumer tile: 1-D -> wgmma_row, 2-D -> wgmma_acc."""
    shape = ty.get_shape()
    if len(shape) == 1:
        return FragmentType(FragmentLayout.WGMMA_ROW, shape, ty.element_type)
    return FragmentType(FragmentLayout.WGMMA_ACC, shape, ty.element_type)


def retype(op: Operation, values: list[SSAValue]) -> None:
    """The tiles `op` carries (loop arguments and results, branch results) become fragments;
    index and mask tiles cannot (they are never materialized)."""
    for value in values:
        if is_tile(value):
            if is_index_tile(value):
                raise fail(op, "carries an index or mask tile (they are not materialized)")
            assert isinstance(value.type, TensorType)
            Rewriter.replace_value_with_new_type(value, fragment_of(value.type))


def splat(op: tile.SplatOp) -> None:
    ty = op.result.type
    assert isinstance(ty, TensorType)
    Rewriter.replace_op(op, nvgpu.FragmentSplatOp(op.operands[0], fragment_of(ty)))


def binary(op: Operation) -> None:
    lhs, rhs = op.operands
    Rewriter.replace_op(op, nvgpu.FragmentBinaryOp(FLOAT_BINARY[type(op)], lhs, rhs))


def unary(op: Operation) -> None:
    Rewriter.replace_op(op, nvgpu.FragmentUnaryOp(FLOAT_UNARY[type(op)], op.operands[0]))


def convert(op: tile.ConvertOp) -> None:
    """A convert feeding dots as A makes their register operand (the accumulator layout of
    each k16 slice is the A layout: conversion only); any other makes a fragment."""
    ty = op.result.type
    assert isinstance(ty, TensorType)
    feeds_a = any(isinstance(u.operation, tile.DotOp) and u.index == 0 for u in op.result.uses)
    if feeds_a:
        if not all(isinstance(u.operation, tile.DotOp) and u.index == 0 for u in op.result.uses):
            raise fail(op, "feeds a dot's A operand and something else")
        result = FragmentType(FragmentLayout.WGMMA_OPERAND_A, ty.get_shape(), ty.element_type)
    else:
        result = fragment_of(ty)
    Rewriter.replace_op(op, nvgpu.FragmentConvertOp(op.operands[0], result))


def row_reduce(op: tile.ReduceOp) -> None:
    """Per-thread partial over its columns, then butterflies over the quad's 4 lanes."""
    src = op.source.type
    if not isinstance(src, FragmentType) or op.axis.value.data != 1:
        raise fail(op, "must reduce an accumulator tile along its columns (axis 1)")
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
    """Row and column vectors on their way to a broadcast over a fragment."""

    row_columns: dict[SSAValue, SSAValue] = field(default_factory=dict)  # [rows, 1] of a row vec
    # 1-D slot reads spread over rows (a bias): the fragment_load_columns they become
    columns: dict[SSAValue, SSAValue] = field(default_factory=dict)

    def holds(self, value: SSAValue) -> bool:
        return value in self.row_columns or value in self.columns

    def load_columns(self, op: tile.ConvertOp, view: SmemView) -> None:
        """`convert` of a 1-D slot read that `expand_dims` (axis 0) and `broadcast` spread over
        the rows: one `fragment_load_columns` here, where the slot is held."""
        spread = [u.operation for u in op.result.uses]
        if not all(isinstance(e, tile.ExpandDimsOp) and e.axis.value.data == 0 for e in spread):
            raise fail(op, "of a slot read needs a 1-D vector spread over rows (expand_dims 0)")
        shapes = {
            b.result.type
            for e in spread
            for b in (u.operation for u in e.results[0].uses)
            if isinstance(b, tile.BroadcastOp)
        }
        ty = op.result.type
        if len(shapes) != 1 or not isinstance(ty, TensorType) or ty.element_type != Float32Type():
            raise fail(op, "of a slot read needs one f32 broadcast over rows")
        (shape,) = shapes
        load = nvgpu.FragmentLoadColumnsOp(view.buf, view.slot, fragment_of(shape))  # type: ignore[arg-type]
        insert_before(op, [load])
        self.columns[op.result] = load.result

    def expand_dims(self, op: tile.ExpandDimsOp) -> None:
        """A row vector becomes a column `[rows, 1]`; a column read stays one."""
        axis = op.axis.value.data
        if isinstance(op.source.type, FragmentType) and axis == 1:
            self.row_columns[op.result] = op.source
        elif op.source in self.columns and axis == 0:
            self.columns[op.result] = self.columns[op.source]
        else:
            raise fail(op, "must turn a row vector into a column (axis 1) or place an index")

    def broadcast(self, op: tile.BroadcastOp) -> bool:
        """Replace a broadcast of a vector by its fragment; False if `op` is not one."""
        if op.source in self.columns:
            Rewriter.replace_op(op, [], [self.columns[op.source]])
            return True
        if op.source in self.row_columns:
            ty = op.result.type
            assert isinstance(ty, TensorType)
            rows = nvgpu.FragmentBroadcastRowsOp(self.row_columns[op.source], ty.get_shape()[1])
            Rewriter.replace_op(op, rows)
            return True
        return False
