"""What every part of `lower-to-nvgpu` shares: thread indices, errors, small IR builders."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr, IntegerType, TensorType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from tawa_xdsl.diagnostics import op_location


@dataclass
class Threads:
    """The per-thread indices every lowering step guards with (defined at kernel entry)."""

    warpgroup: SSAValue
    thread: SSAValue
    zero: SSAValue
    is_thread0: SSAValue  # thread 0 of its warpgroup


def fail(op: Operation, message: str) -> PassFailedException:
    """The one-line refusal of `op`, led by its place in the source."""
    return PassFailedException(f"{op_location(op)}: error: lower-to-nvgpu: '{op.name}' {message}")


def constant_int(value: SSAValue) -> int | None:
    """The value of an integer `arith.constant`, else None."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def is_tile(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType)


def is_index_tile(value: SSAValue) -> bool:
    """i32 and i1 tiles: indices and masks, kept symbolic."""
    return is_tile(value) and isinstance(value.type.get_element_type(), IntegerType)  # type: ignore[union-attr]


def insert_before(anchor: Operation, ops: list[Operation]) -> None:
    Rewriter.insert_op(ops, InsertPoint.before(anchor))


def insert_after(anchor: Operation, ops: list[Operation]) -> None:
    Rewriter.insert_op(ops, InsertPoint.after(anchor))


def if_op(cond: SSAValue, then_ops: list[Operation], else_ops: list[Operation] | None = None):
    """`scf.if %cond { then_ops } [else { else_ops }]` without results."""
    then_region = Region(Block([*then_ops, scf.YieldOp()]))
    else_region = Region(Block([*else_ops, scf.YieldOp()])) if else_ops is not None else None
    return scf.IfOp(cond, [], then_region, else_region)


def detach_all(block: Block) -> list[Operation]:
    ops = list(block.ops)
    for op in ops:
        op.detach()
    return ops
