"""`defer-row-sums`: carry a loop's running row sum as each lane's partial; combine it over
the quad once, where it leaves the loops.

An online softmax carries l, the sum of each row of P: `l' = l * alpha + rowsum(P)`, where
rowsum is each lane's partial over its own columns (`nvgpu.fragment_row_reduce sum`) combined
over the 4 lanes of its quad by two shuffle-adds (`nvgpu.shuffle_xor` 1 and 2). The quad's
partials of `l * alpha + r` sum to l' whenever alpha is the same in the quad's four lanes, so a
loop may carry the lane's partial and combine it after the loop: two shuffles and two adds a
row fewer per iteration, on the MIO queue the softmax's exp2s wait in (FA3 and FA4 keep l
this way; bench/NOTES.md round 18).

A chain starts at a zero splat (every lane's partial of zero is zero) and follows its links:

    loop:    scf.for ... iter_args(%l = %v): the body yields `%l * a + q`, %l used only there
    branch:  scf.if: the then-branch yields `%v * a + q`, the else-branch %v itself

(also through `scf.if`s of the body that yield the update or %l unchanged: the lookahead's
guard), q the quad-combined row sum (its lane partial replaces it), a quad-uniform (built
only from quad-combined values, splats and elementwise math on them: `_uniform`). A chain
with a loop among its links is rewritten; every other use of a link's result gets the quad
combine inserted right after that result is defined.

Input and output: nvgpu-level IR (`lower-to-nvgpu`'s).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import FloatAttr, ModuleOp
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.dialects import aref, nvgpu
from tawa_xdsl.dialects.nvgpu import BinaryKind, FragmentLayout, FragmentType
from tawa_xdsl.dialects.tile import ReduceKind
from tawa_xdsl.transforms.to_nvgpu.fragments import quad_combine

ELEMENTWISE = (nvgpu.FragmentBinaryOp, nvgpu.FragmentUnaryOp)
REDUCED_BY = {BinaryKind.ADD: ReduceKind.SUM, BinaryKind.MAX: ReduceKind.MAX}
Use = tuple[Operation, int]  # an operand: its op and index


@dataclass
class _Link:
    """One step of a chain: to `result`, through the update `add`, whose operand `sum_at` is
    the quad-combined row sum (its lane partial `partial`)."""

    result: SSAValue
    add: nvgpu.FragmentBinaryOp
    sum_at: int
    partial: SSAValue
    uses: list[Use] = field(default_factory=list)  # the uses of its source it accounts for
    loop: bool = False


def quad_partial(value: SSAValue, combine: BinaryKind) -> SSAValue | None:
    """r when `value` is r combined over its quad: `c(t, shuffle_xor(t, 2))` of
    `t = c(r, shuffle_xor(r, 1))`, r a `fragment_row_reduce` (either operand order)."""
    for mask in (2, 1):
        op = value.owner
        if not (isinstance(op, nvgpu.FragmentBinaryOp) and op.kind.data == combine):
            return None
        for own, other in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            shuffle = other.owner
            if (
                isinstance(shuffle, nvgpu.ShuffleXorOp)
                and shuffle.source is own
                and shuffle.mask.value.data == mask
            ):
                value = own
                break
        else:
            return None
    reduce = value.owner
    if isinstance(reduce, nvgpu.FragmentRowReduceOp) and reduce.kind.data == REDUCED_BY[combine]:
        return value
    return None


def _uniform(value: SSAValue, seen: set[int]) -> bool:
    """The value is the same in the four lanes of each quad (conservatively)."""
    if id(value) in seen:
        return True  # around a loop: the other definitions decide
    seen.add(id(value))
    owner = value.owner
    if quad_partial(value, BinaryKind.ADD) is not None:
        return True
    if quad_partial(value, BinaryKind.MAX) is not None:
        return True
    if isinstance(owner, nvgpu.FragmentSplatOp):
        return True
    if isinstance(owner, ELEMENTWISE):
        return all(_uniform(v, seen) for v in owner.operands)
    if isinstance(value, BlockArgument) and isinstance(loop := owner.parent_op(), scf.ForOp):
        if value.index == 0:
            return False
        last = loop.body.block.last_op
        assert isinstance(last, scf.YieldOp)
        return _uniform(loop.iter_args[value.index - 1], seen) and _uniform(
            last.operands[value.index - 1], seen
        )
    if isinstance(value, OpResult) and isinstance(owner, scf.ForOp):
        return _uniform(owner.body.block.args[value.index + 1], seen)
    if isinstance(value, OpResult) and isinstance(owner, scf.IfOp):
        return all(_uniform(_yielded(b, value.index), seen) for b in _branches(owner))
    return False


def _branches(op: scf.IfOp) -> list:
    return [r.block for r in (op.true_region, op.false_region) if r.blocks]


def _yielded(block, index: int) -> SSAValue:
    last = block.last_op
    assert isinstance(last, scf.YieldOp)
    return last.operands[index]


def _update(source: SSAValue, value: SSAValue, uses: list[Use]) -> tuple | None:
    """(add, sum operand, partial) when `value` is `source * a + q` (q a quad-combined row
    sum, a quad-uniform), directly or through `scf.if`s whose else-branch yields `source`
    (their uses of `source` go into `uses`)."""
    owner = value.owner
    if isinstance(owner, scf.IfOp) and isinstance(value, OpResult) and owner.false_region.blocks:
        other = owner.false_region.block.last_op
        assert isinstance(other, scf.YieldOp)
        if other.operands[value.index] is not source:
            return None
        uses.append((other, value.index))
        return _update(source, _yielded(owner.true_region.block, value.index), uses)
    if not (isinstance(owner, nvgpu.FragmentBinaryOp) and owner.kind.data == BinaryKind.ADD):
        return None
    for at in (0, 1):
        total, scaled = owner.operands[at], owner.operands[1 - at]
        partial = quad_partial(total, BinaryKind.ADD)
        mul = scaled.owner
        if partial is None or _count(scaled) != 1 or not isinstance(mul, nvgpu.FragmentBinaryOp):
            continue
        if mul.kind.data != BinaryKind.MUL or source not in mul.operands:
            continue
        scale = mul.rhs if mul.lhs is source else mul.lhs
        if scale is not source and _uniform(scale, set()):
            uses.append((mul, list(mul.operands).index(source)))
            return owner, at, partial
    return None


def _next(source: SSAValue) -> _Link | None:
    """The link `source` starts (module docstring), if one of its uses starts one."""
    for use in list(source.uses):
        op = use.operation
        if isinstance(op, scf.ForOp) and use.index >= 3:
            index = use.index - 3
            arg = op.body.block.args[index + 1]
            inner: list[Use] = []
            found = _update(arg, _yielded(op.body.block, index), inner)
            if found is not None and len(inner) == _count(arg):
                return _Link(op.results[index], *found, [(op, use.index)], loop=True)
        if isinstance(op, nvgpu.FragmentBinaryOp) and op.kind.data == BinaryKind.MUL:
            guard = op.parent_op()
            if not isinstance(guard, scf.IfOp) or op.parent_block() is not guard.true_region.block:
                continue
            for result in guard.results:
                uses: list[Use] = []
                found = _update(source, result, uses)
                if found is not None and any(u[0] is op for u in uses):
                    return _Link(result, *found, uses)
    return None


def _count(value: SSAValue) -> int:
    return len(list(value.uses))


def _is_zero_row(op: Operation) -> bool:
    if not isinstance(op, nvgpu.FragmentSplatOp):
        return False
    kind = op.result.type
    value = op.value.owner
    return (
        isinstance(kind, FragmentType)
        and kind.kind == FragmentLayout.WGMMA_ROW
        and isinstance(value, arith.ConstantOp)
        and isinstance(value.value, FloatAttr)
        and value.value.value.data == 0.0
    )


def _chain(zero: SSAValue) -> list[_Link]:
    links: list[_Link] = []
    value = zero
    while (link := _next(value)) is not None:
        links.append(link)
        value = link.result
    return links


def _combine_after(value: SSAValue, keep: list[Use]) -> None:
    """The quad combine of `value`, for every use not in `keep`: right after its definition,
    or after the peeled last stage that follows a loop (`aref.is_peeled_last`: nothing but
    index arithmetic and wgmma waits may sit between the two)."""
    escapes = [
        (u.operation, u.index) for u in list(value.uses) if (u.operation, u.index) not in keep
    ]
    if not escapes:
        return
    anchor = value.owner
    assert isinstance(anchor, Operation)
    if isinstance(anchor, scf.ForOp):
        anchor = aref.peeled_last_after(anchor) or anchor
    ops, total = quad_combine(value, BinaryKind.ADD)
    Rewriter.insert_op(ops, InsertPoint.after(anchor))
    for op, index in escapes:
        op.operands[index] = total


def _erase_unused(value: SSAValue) -> None:
    """Erase the quad combine of a row sum nothing reads any more (its shuffle-adds)."""
    op = value.owner
    while isinstance(op, nvgpu.FragmentBinaryOp | nvgpu.ShuffleXorOp) and not op.results[0].uses:
        operands = list(op.operands)
        Rewriter.erase_op(op)
        owners = [v.owner for v in operands if isinstance(v.owner, Operation)]
        for inner in owners:
            if isinstance(inner, nvgpu.ShuffleXorOp) and not inner.result.uses:
                Rewriter.erase_op(inner)
        op = next((o for o in owners if not isinstance(o, nvgpu.ShuffleXorOp)), None)


def defer(links: list[_Link]) -> None:
    """Rewrite one chain: each update adds the lane partial; each link's result is combined
    for the uses that leave the chain."""
    for n, link in enumerate(links):
        total = link.add.operands[link.sum_at]
        link.add.operands[link.sum_at] = link.partial
        _erase_unused(total)
        keep = links[n + 1].uses if n + 1 < len(links) else []
        _combine_after(link.result, keep)


@dataclass(frozen=True)
class DeferRowSumsPass(ModulePass):
    """Keep loop-carried row sums as lane partials (module docstring)."""

    name = "defer-row-sums"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        zeros = [o.results[0] for o in op.walk() if _is_zero_row(o)]
        for zero in zeros:
            while True:
                links = _chain(zero)
                if not any(link.loop for link in links):
                    break
                defer(links)
