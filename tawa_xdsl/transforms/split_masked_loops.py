"""`split-masked-loops`: split a loop where its masks stop being all true (tile level).

A loop `scf.for %i = %lo to %hi step C` (C a positive constant) whose body selects with
`tile.where %mask, %x, %y`, where every lane of %mask is true for every iteration %i < B, B
computed from the IR, becomes two loops over the same iterations, the carried values flowing
from the first into the second:

    %split = min(%lo + C * ceil(max(B - %lo, 0) / C), %hi)
    scf.for %i = %lo to %split step C { ... %x in place of every such where ... }
    scf.for %i = %split to %hi step C { ... the body as it was ... }

So the iterations no mask touches run a body without selects (in attention: the key blocks
before `seq` and before the tile's first row, FlashAttention's unmasked blocks), as if the
user had written two loops; rings continue their counters from one loop into the next.

What a mask may be: a conjunction (`arith.andi`, through `tile.broadcast`, `tile.expand_dims`
and `tile.reshape`) of signed comparisons `tile.cmp lt|le|gt|ge` between lane-affine i32
tiles: %i + v + lane, with v a sum of loop-invariant scalars and constants (`arith.addi`,
`arith.subi`, `tile.splat`) and `lane` ranging over `tile.arange`'s values. The induction
variable must appear with coefficient 1 on the side it makes grow toward failure. A where
whose mask is anything else stays in both loops (still correct, only not split on); a loop
with no such where is left alone. B is computed in i32, as the mask itself is: exact while
the comparison's operands and their difference do not wrap.

No options (`CompileOptions.split_loops=False` leaves it out of the pipeline).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.dead_code_elimination import region_dce

from tawa_xdsl.dialects import tile
from tawa_xdsl.dialects.tile import ComparePredicate, element_type_of
from tawa_xdsl.transforms.ws_utils import find_kernel

PASS = "split-masked-loops"

SHAPE_OPS = (tile.BroadcastOp, tile.ExpandDimsOp, tile.ReshapeOp)


@dataclass(frozen=True)
class LaneAffine:
    """An i32 tile (or scalar) whose every element is `iv * %i + sum(terms) + const + lane`,
    `lane` somewhere in [low, high]; `terms` are loop-invariant scalars with coefficients."""

    iv: int
    terms: tuple[tuple[SSAValue, int], ...]
    const: int
    low: int
    high: int

    def __add__(self, other: LaneAffine) -> LaneAffine:
        coefficients: dict[SSAValue, int] = {}
        for value, k in (*self.terms, *other.terms):
            coefficients[value] = coefficients.get(value, 0) + k
        terms = tuple((v, k) for v, k in coefficients.items() if k)
        return LaneAffine(
            self.iv + other.iv, terms, self.const + other.const,
            self.low + other.low, self.high + other.high,
        )  # fmt: skip

    def __neg__(self) -> LaneAffine:
        terms = tuple((v, -k) for v, k in self.terms)
        return LaneAffine(-self.iv, terms, -self.const, -self.high, -self.low)


def constant(value: int) -> LaneAffine:
    return LaneAffine(0, (), value, 0, 0)


class MaskAnalysis:
    """Reads masks of one loop's body as bounds on its induction variable."""

    def __init__(self, loop: scf.ForOp):
        self.loop = loop
        self.iv = loop.body.block.args[0]

    def invariant_scalar(self, value: SSAValue) -> bool:
        """Whether `value` is a scalar of the iv's type defined outside the loop."""
        if value.type != self.iv.type:
            return False
        return not self.loop.is_ancestor(value.owner)

    def affine(self, value: SSAValue) -> LaneAffine | None:
        """`value` as a LaneAffine, or None when it is not one."""
        if value is self.iv:
            return LaneAffine(1, (), 0, 0, 0)
        op = value.owner
        if isinstance(op, arith.ConstantOp):
            attr = op.value
            return constant(attr.value.data) if isinstance(attr, IntegerAttr) else None
        if self.invariant_scalar(value):
            return LaneAffine(0, ((value, 1),), 0, 0, 0)
        if isinstance(op, tile.ArangeOp):
            return LaneAffine(0, (), 0, op.start.value.data, op.end.value.data - 1)
        if isinstance(op, (tile.SplatOp, *SHAPE_OPS)):
            return self.affine(op.operands[0])
        if isinstance(op, arith.AddiOp | arith.SubiOp):
            lhs, rhs = self.affine(op.lhs), self.affine(op.rhs)
            if lhs is None or rhs is None:
                return None
            return lhs + rhs if isinstance(op, arith.AddiOp) else lhs + -rhs
        return None

    def prefix_bound(self, mask: SSAValue) -> list[tuple[LaneAffine, int]] | None:
        """Conditions (d, t), each `d <= t` on every lane, whose conjunction is `mask`; the
        iv's coefficient in each d is 1. None when `mask` is not such a conjunction."""
        op = mask.owner
        if isinstance(op, SHAPE_OPS):
            return self.prefix_bound(op.operands[0])
        if isinstance(op, arith.AndIOp):
            lhs, rhs = self.prefix_bound(op.lhs), self.prefix_bound(op.rhs)
            return None if lhs is None or rhs is None else lhs + rhs
        if not isinstance(op, tile.CmpOp) or element_type_of(op.lhs) != self.iv.type:
            return None
        lhs, rhs = self.affine(op.lhs), self.affine(op.rhs)
        if lhs is None or rhs is None:
            return None
        predicate = op.predicate.data
        # lhs < rhs  <=>  lhs - rhs <= -1; lhs >= rhs  <=>  rhs - lhs <= 0; ...
        forms = {
            ComparePredicate.LT: (lhs + -rhs, -1),
            ComparePredicate.LE: (lhs + -rhs, 0),
            ComparePredicate.GT: (rhs + -lhs, -1),
            ComparePredicate.GE: (rhs + -lhs, 0),
        }
        if predicate not in forms:
            return None
        difference, limit = forms[predicate]
        # the split point's constant must be an i32 (an arange spanning 2^31 lanes is not)
        fits = -(2**31) <= limit + 1 - difference.const - difference.high < 2**31
        return [(difference, limit)] if difference.iv == 1 and fits else None


def split_point(
    loop: scf.ForOp, conditions: list[tuple[LaneAffine, int]]
) -> tuple[list[Operation], SSAValue]:
    """Ops computing the first iteration of `loop` at which some condition may fail, and
    that value. Condition (d, t) holds on every lane while %i + v + high <= t, that is while
    %i < t + 1 - v - high =: B; the iterations before min(B) form the first loop."""
    kind = loop.lb.type
    ops: list[Operation] = []

    def const(value: int) -> SSAValue:
        ops.append(c := arith.ConstantOp(IntegerAttr(value, kind)))
        return c.result

    def emit(op: Operation) -> SSAValue:
        ops.append(op)
        return op.results[0]

    bound: SSAValue | None = None
    for difference, limit in conditions:
        b = const(limit + 1 - difference.const - difference.high)
        for value, k in difference.terms:  # b -= k * value
            scaled = value if abs(k) == 1 else emit(arith.MuliOp(value, const(abs(k))))
            b = emit(arith.SubiOp(b, scaled) if k > 0 else arith.AddiOp(b, scaled))
        bound = b if bound is None else emit(arith.MinSIOp(bound, b))
    assert bound is not None
    ahead = emit(arith.MaxSIOp(emit(arith.SubiOp(bound, loop.lb)), const(0)))
    trips = emit(arith.CeilDivSIOp(ahead, loop.step))
    start = emit(arith.AddiOp(loop.lb, emit(arith.MuliOp(trips, loop.step))))
    split = emit(arith.MinSIOp(start, loop.ub))
    split.name_hint = "split"
    return ops, split


def positive_step(loop: scf.ForOp) -> bool:
    """Whether the loop's step is a positive constant (the iv grows every iteration)."""
    op = loop.step.owner
    return (
        isinstance(op, arith.ConstantOp)
        and isinstance(op.value, IntegerAttr)
        and op.value.value.data > 0
    )


def split_loop(loop: scf.ForOp) -> bool:
    """Split `loop` where its analyzable masks may stop holding; False when it has none."""
    if not positive_step(loop):
        return False
    analysis = MaskAnalysis(loop)
    wheres, conditions = [], []
    for index, op in enumerate(loop.body.walk()):
        if isinstance(op, tile.WhereOp):
            found = analysis.prefix_bound(op.condition)
            if found is not None:
                wheres.append(index)
                conditions += found
    if not wheres:
        return False
    ops, split = split_point(loop, conditions)
    Rewriter.insert_op(ops, InsertPoint.before(loop))
    first = loop.clone()
    Rewriter.insert_op(first, InsertPoint.before(loop))
    first.operands = [loop.lb, split, loop.step, *loop.iter_args]
    loop.operands = [split, loop.ub, loop.step, *first.results]
    body = list(first.body.walk())
    for index in wheres:
        where = body[index]
        assert isinstance(where, tile.WhereOp)
        Rewriter.replace_op(where, [], [where.true_value])
    region_dce(first.body)  # the masks' compares and index tiles, now unused
    return True


@dataclass(frozen=True)
class SplitMaskedLoopsPass(ModulePass):
    """Every loop with masks that hold for a prefix of its iterations becomes two loops: the
    prefix without the selects, then the rest as it was."""

    name = "split-masked-loops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernel = find_kernel(op, PASS)
        # innermost first: a split outer loop then carries its inner loops already split
        loops = [o for o in kernel.body.walk() if isinstance(o, scf.ForOp)]
        for loop in reversed(loops):
            split_loop(loop)
