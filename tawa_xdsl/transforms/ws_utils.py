"""Helpers the warp-specialization passes share: roles, errors, the kernel, loop surgery,
layout ops.

Roles are recorded by `partition` as the discardable attribute `aref.role` (ROLE_ATTR) holding
the string "producer", "consumer" or "both" (both: cloned into every warp group, such as loop
counters, offsets and the loops themselves).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import ModuleOp, StringAttr, i32
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.diagnostics import TawaError, op_location
from tawa_xdsl.dialects import aref, tile
from tawa_xdsl.dialects.aref import ROLE_ATTR

PRODUCER = "producer"
CONSUMER = "consumer"
BOTH = "both"
ROLES = (PRODUCER, CONSUMER, BOTH)

# Ops a loaded tile may pass through on its way into a dot operand and still count as
# "feeding that dot" (they change the layout, not the data).
LAYOUT_OPS = (tile.ReshapeOp, tile.TransOp, tile.ConvertOp, tile.BroadcastOp, tile.ExpandDimsOp)


def error(op: Operation, pass_name: str, message: str) -> TawaError:
    """A one-line `file:line:col: error: <pass>: <message>` diagnostic at `op`."""
    return TawaError(f"{op_location(op)}: error: {pass_name}: {message}")


def find_kernel(module: ModuleOp, pass_name: str) -> func.FuncOp:
    """The one function with a body in the module."""
    kernels = [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    if len(kernels) != 1:
        # The module has no location of its own: point at the second kernel when there is one.
        where = kernels[1] if kernels else module
        raise error(
            where, pass_name, f"expected one kernel function in the module, found {len(kernels)}"
        )
    return kernels[0]


def role_of(op: Operation) -> str | None:
    attr = op.attributes.get(ROLE_ATTR)
    return attr.data if isinstance(attr, StringAttr) else None


def set_role(op: Operation, role: str) -> None:
    op.attributes[ROLE_ATTR] = StringAttr(role)


def require_role(op: Operation, pass_name: str) -> str:
    role = role_of(op)
    if role not in ROLES:
        raise error(op, pass_name, f"'{op.name}' has no {ROLE_ATTR}; run partition first")
    return role


def with_role(op: Operation, role: str) -> Operation:
    set_role(op, role)
    return op


def ancestor_in(op: Operation, block: Block) -> Operation | None:
    """The op of `block` that is `op` or contains it, or None."""
    current: Operation | None = op
    while current is not None and current.parent_block() is not block:
        current = current.parent_op()
    return current


def add_iter_args(
    loop: scf.ForOp, inits: Sequence[SSAValue], yields: Sequence[SSAValue] | None = None
) -> tuple[scf.ForOp, list[BlockArgument]]:
    """Rebuild `loop` with extra loop-carried values; returns the new loop and their block
    arguments. The new values are yielded unchanged unless `yields` names what to yield (the
    caller may also rewrite the yield later with `set_yield`)."""
    body = loop.body.block
    new_args = [body.insert_arg(v.type, len(body.args)) for v in inits]
    old_yield = body.last_op
    assert isinstance(old_yield, scf.YieldOp)
    extra = list(yields) if yields is not None else list(new_args)
    new_yield = scf.YieldOp(*old_yield.operands, *extra)
    new_yield.attributes.update(old_yield.attributes)
    Rewriter.replace_op(old_yield, new_yield)
    new_loop = scf.ForOp(
        loop.lb,
        loop.ub,
        loop.step,
        [*loop.iter_args, *inits],
        Rewriter.move_region_contents_to_new_regions(loop.body),
    )
    new_loop.attributes.update(loop.attributes)
    new_loop.location = loop.location
    for old, new in zip(loop.results, new_loop.results, strict=False):
        new.name_hint = old.name_hint
    Rewriter.insert_op(new_loop, InsertPoint.before(loop))
    Rewriter.replace_op(loop, [], list(new_loop.results[: len(loop.results)]))
    return new_loop, new_args


def set_yield_operand(loop: scf.ForOp, index: int, value: SSAValue) -> None:
    """Make the loop yield `value` as its `index`-th carried value."""
    terminator = loop.body.block.last_op
    assert isinstance(terminator, scf.YieldOp)
    operands = list(terminator.operands)
    operands[index] = value
    terminator.operands = operands


def consumer_groups(kernel: func.FuncOp, pass_name: str) -> list[aref.GroupOp]:
    """The consumer groups of the kernel's `aref.warp_specialize` (refused without one)."""
    for op in kernel.body.block.ops:
        if isinstance(op, aref.WarpSpecializeOp):
            return [g for g in op.groups() if g.role.data == aref.Role.CONSUMER]
    raise error(kernel, pass_name, "no aref.warp_specialize in the kernel; run distribute first")


def in_loop(op: Operation) -> bool:
    """Whether an `scf.for` encloses `op` (inside its group, or its function)."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, aref.GroupOp | func.FuncOp):
        if isinstance(parent, scf.ForOp):
            return True
        parent = parent.parent_op()
    return False


def own_ops(loop: scf.ForOp) -> Iterator[Operation]:
    """The ops of `loop`'s body and its branches, not those of the loops nested in it."""
    frontier = list(loop.body.block.ops)
    while frontier:
        op = frontier.pop()
        yield op
        if not isinstance(op, scf.ForOp):
            frontier += [
                inner for region in op.regions for block in region.blocks for inner in block.ops
            ]


# ----------------------------------------------------------- a loop around the kernel body


def add_grid_args(
    kernel: func.FuncOp, pass_name: str, what: str, names: list[str]
) -> list[BlockArgument]:
    """Append one i32 argument per name to `kernel` (the grid facts a pass hands the body),
    refusing in one line a kernel that returns values (`what`: "persistent", "folded")."""
    block = kernel.body.block
    terminator = block.last_op
    if not isinstance(terminator, func.ReturnOp) or terminator.arguments:
        raise error(kernel, pass_name, f"@{kernel.sym_name.data} must return nothing to be {what}")
    args = [block.insert_arg(i32, len(block.args)) for _ in names]
    for arg, name in zip(args, names, strict=True):
        arg.name_hint = name
    kernel.update_function_type()
    return args


def loop_around_body(
    kernel: func.FuncOp, head: list[Operation], body: Block, bounds: tuple[SSAValue, ...]
) -> None:
    """Move the kernel's ops (but its return) to the end of `body` and run it as
    `scf.for (lb, ub, step) = bounds`, built after the ops of `head`, in front of the return."""
    block = kernel.body.block
    terminator = block.last_op
    assert terminator is not None
    for op in list(block.ops):
        if op is terminator:
            break
        op.detach()
        body.add_op(op)
    body.add_op(scf.YieldOp())
    loop = scf.ForOp(*bounds, [], Region(body))
    for op in [*head, loop]:
        Rewriter.insert_op(op, InsertPoint.before(terminator))
