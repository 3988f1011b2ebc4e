"""Index tiles and masks: never materialized, kept as affine expressions over a fragment's
row r and column c until a `tile.where` reads them.

`tile.arange`, `tile.splat`, `arith.addi`/`subi`, `tile.expand_dims` and `tile.broadcast` of
i32 tiles build `a*r + b*c + scalars`; `tile.cmp` and `arith.andi` turn them into conditions
`index < 0`; `tile.where(cond, x, splat(fill))` becomes one `nvgpu.fragment_mask` whose bounds
are computed from the scalars (sequence-end and causal masks alike, in any kernel). A
`tile.cmp` of float fragments is data-dependent: its `tile.where` is a `fragment_select`."""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerAttr,
    TensorType,
    f32,
    i32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import Rewriter

from tawa_xdsl.dialects import nvgpu, tile
from tawa_xdsl.dialects.nvgpu import FragmentType
from tawa_xdsl.dialects.tile import ComparePredicate
from tawa_xdsl.transforms.to_nvgpu.common import fail


@dataclass(frozen=True)
class Index:
    """An i32 tile as `row * r + col * c + lane * i + sum(k * v for k, v in terms) + const`:
    r, c are the fragment's coordinates; a 1-D tile keeps its position i until
    `expand_dims` makes it a row (axis 1) or a column (axis 0) index."""

    row: int = 0
    col: int = 0
    lane: int = 0
    terms: tuple[tuple[int, SSAValue], ...] = ()
    const: int = 0

    def __add__(self, other: Index) -> Index:
        return Index(
            self.row + other.row,
            self.col + other.col,
            self.lane + other.lane,
            self.terms + other.terms,
            self.const + other.const,
        )

    def __neg__(self) -> Index:
        return Index(
            -self.row, -self.col, -self.lane, tuple((-k, v) for k, v in self.terms), -self.const
        )


@dataclass(frozen=True)
class Condition:
    """`index < 0` for an `Index` over the fragment's coordinates (no lane term)."""

    index: Index


@dataclass
class Masks:
    """The symbolic index tiles and masks of one consumer group."""

    indices: dict[SSAValue, Index] = field(default_factory=dict)
    conditions: dict[SSAValue, list[Condition]] = field(default_factory=dict)
    float_compares: dict[SSAValue, tile.CmpOp] = field(default_factory=dict)  # float tile.cmp

    def holds(self, value: SSAValue) -> bool:
        return value in self.indices or value in self.conditions

    def splat(self, op: tile.SplatOp) -> None:
        self.indices[op.result] = Index(terms=((1, op.operands[0]),))

    def arange(self, op: tile.ArangeOp) -> None:
        self.indices[op.result] = Index(lane=1, const=op.start.value.data)

    def add(self, op: arith.AddiOp | arith.SubiOp) -> None:
        lhs, rhs = self.index(op, op.lhs), self.index(op, op.rhs)
        self.indices[op.result] = lhs + (rhs if isinstance(op, arith.AddiOp) else -rhs)

    def conjunction(self, op: arith.AndIOp) -> None:
        self.conditions[op.result] = self.condition(op, op.lhs) + self.condition(op, op.rhs)

    def expand_dims(self, op: tile.ExpandDimsOp) -> None:
        """A 1-D index becomes a column index (axis 0) or a row index (axis 1)."""
        index = self.indices[op.source]
        placed = Index(col=index.lane) if op.axis.value.data == 0 else Index(row=index.lane)
        self.indices[op.result] = placed + Index(index.row, index.col, 0, index.terms, index.const)

    def broadcast(self, op: tile.BroadcastOp) -> None:
        if op.source in self.indices:
            self.indices[op.result] = self.indices[op.source]
        else:
            self.conditions[op.result] = self.conditions[op.source]

    def index(self, op: Operation, value: SSAValue) -> Index:
        if value not in self.indices:
            raise fail(op, "needs an index tile built from arange, splat, addi and expand_dims")
        return self.indices[value]

    def condition(self, op: Operation, value: SSAValue) -> list[Condition]:
        if value not in self.conditions:
            raise fail(op, "needs a mask built from tile.cmp and arith.andi")
        return self.conditions[value]

    def compare(self, op: tile.CmpOp) -> None:
        """a < b: a - b < 0; a <= b: a - b - 1 < 0; a > b: b - a < 0; a >= b: b - a - 1 < 0.
        A compare of float fragments (a data-dependent mask) waits for its `tile.where`."""
        if isinstance(op.lhs.type, FragmentType):
            self.float_compares[op.result] = op
            return
        lhs, rhs = self.index(op, op.lhs), self.index(op, op.rhs)
        predicate = op.predicate.data
        minus_one = Index(const=-1)
        forms = {
            ComparePredicate.LT: lhs + -rhs,
            ComparePredicate.LE: lhs + -rhs + minus_one,
            ComparePredicate.GT: rhs + -lhs,
            ComparePredicate.GE: rhs + -lhs + minus_one,
        }
        if predicate not in forms:
            raise fail(op, f"with predicate '{predicate}' is not supported (lt, le, gt, ge)")
        index = forms[predicate]
        if index.lane:
            raise fail(op, "compares 1-D index tiles (expand them to 2-D first)")
        self.conditions[op.result] = [Condition(index)]

    def where(self, op: tile.WhereOp) -> None:
        """A data-dependent `where` is a `fragment_select`, an index mask a `fragment_mask`;
        both run in f32, so 16-bit operands are widened first and the result rounded back
        (exact: a select and a widening never round)."""
        if op.condition in self.float_compares:  # e.g. leaky relu: x < 0 ? x * a : x
            cmp = self.float_compares[op.condition]
            ops, (lhs, rhs, on_true, on_false) = widened(
                [cmp.lhs, cmp.rhs, op.true_value, op.false_value]
            )
            select = nvgpu.FragmentSelectOp(cmp.predicate, lhs, rhs, on_true, on_false)
            Rewriter.replace_op(op, [*ops, select, *narrowed(select.result, op.result.type)])
            return
        fill = splat_scalar(op.false_value)
        if fill is None:
            raise fail(op, "needs a splat of a scalar as its false value (the fill)")
        if not isinstance(op.true_value.type, FragmentType) or not isinstance(
            op.true_value.type.element_type, FLOATS
        ):
            raise fail(op, "needs a float tile as its true value")
        ops, (source,) = widened([op.true_value])
        conditions = []
        for cond in self.condition(op, op.condition):
            bound, bound_ops = self.bound(cond.index)
            ops += bound_ops
            conditions.append((cond.index.row, cond.index.col, bound))
        mask = nvgpu.FragmentMaskOp(source, fill, conditions)
        Rewriter.replace_op(op, [*ops, mask, *narrowed(mask.result, op.true_value.type)])

    @staticmethod
    def bound(index: Index) -> tuple[SSAValue, list[Operation]]:
        """`-(sum of terms + const)`: the right-hand side of `row*r + col*c < bound`."""
        start = arith.ConstantOp(IntegerAttr(-index.const, i32))
        ops: list[Operation] = [start]
        value = start.result
        for k, term in index.terms:
            if k == 1:
                step: Operation = arith.SubiOp(value, term)
            elif k == -1:
                step = arith.AddiOp(value, term)
            else:
                scale = arith.ConstantOp(IntegerAttr(-k, i32))
                product = arith.MuliOp(term, scale)
                ops += [scale, product]
                step = arith.AddiOp(value, product)
            ops.append(step)
            value = step.results[0]
        value.name_hint = "mask_bound"
        return value, ops


FLOATS = (Float32Type, Float16Type, BFloat16Type)


def widened(values: list[SSAValue]) -> tuple[list[Operation], list[SSAValue]]:
    """`values` as f32 fragments: 16-bit ones through a `fragment_convert` (the ops made)."""
    ops: list[Operation] = []
    wide: list[SSAValue] = []
    for value in values:
        ty = value.type
        assert isinstance(ty, FragmentType)
        if isinstance(ty.element_type, Float32Type):
            wide.append(value)
            continue
        convert = nvgpu.FragmentConvertOp(value, FragmentType(ty.kind, ty.get_shape(), f32))
        ops.append(convert)
        wide.append(convert.result)
    return ops, wide


def narrowed(value: SSAValue, ty: Attribute) -> list[Operation]:
    """The convert of an f32 fragment back to `ty`'s element type, if it differs."""
    assert isinstance(ty, TensorType | FragmentType)
    element = ty.element_type
    if isinstance(element, Float32Type):
        return []
    frag = value.type
    assert isinstance(frag, FragmentType)
    return [nvgpu.FragmentConvertOp(value, FragmentType(frag.kind, frag.get_shape(), element))]


def splat_scalar(value: SSAValue) -> SSAValue | None:
    """The f32 scalar a fill fragment splats (a 16-bit fill is an f32 splat converted)."""
    owner = value.owner
    if isinstance(owner, nvgpu.FragmentConvertOp):
        owner = owner.source.owner
    if not isinstance(owner, nvgpu.FragmentSplatOp) or not isinstance(
        owner.value.type, Float32Type
    ):
        return None
    return owner.value
