"""`partition`: tag every op of a tile kernel with the warp group that runs it.

Task-aware partitioning (Tawa §2.1): walk back from the stores and the dots. Descriptor (TMA)
loads, and the address/index arithmetic that only feeds them, go to the producer; dots,
elementwise math, reductions and the epilogue go to the consumer; what both need (loop
counters, offsets, the `scf.for` ops themselves) is tagged `both` and later cloned into each
warp group. The role is stored on each op as the string attribute `aref.role`.

An `scf.if` is tagged like a loop (both roles when both need what it holds): its condition
is then computed by both groups, so it must be uniform -- scalars only, never a loaded tile
(refused like any loaded tile feeding what the producer needs).

No options. Refused, with a one-line diagnostic at the op: ops outside arith/math/tile,
scf.for/if/yield and func.return (for example a pointer-based load), a kernel without
a `tile.store` or without a `tile.load`, a loaded tile that escapes its block (yielded,
returned, or carried into a loop), and a loaded tile that feeds address arithmetic.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, scf
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from tawa_xdsl.dialects import tile
from tawa_xdsl.transforms.ws_utils import (
    BOTH,
    CONSUMER,
    PRODUCER,
    error,
    find_kernel,
    set_role,
)

PASS = "partition"
_SUPPORTED_DIALECTS = ("arith.", "math.", "tile.")
_SUPPORTED_OPS = (scf.ForOp, scf.IfOp, scf.YieldOp, func.ReturnOp)


@dataclass
class _Needs:
    """Which roles need each op, and each loop-carried value or branch result (op, index)."""

    ops: defaultdict[Operation, set[str]]
    carried: defaultdict[tuple[Operation, int], set[str]]

    def op(self, op: Operation, role: str) -> None:
        if role in self.ops[op]:
            return
        self.ops[op].add(role)
        parent = op.parent_op()
        if isinstance(parent, scf.ForOp | scf.IfOp):
            self.op(parent, role)
        operands = (op.lb, op.ub, op.step) if isinstance(op, scf.ForOp) else op.operands
        for operand in operands:
            self.value(operand, role, op)

    def carried_value(self, loop: scf.ForOp, index: int, role: str) -> None:
        if role in self.carried[(loop, index)]:
            return
        self.carried[(loop, index)].add(role)
        self.op(loop, role)
        self.value(loop.iter_args[index], role, loop)
        terminator = loop.body.block.last_op
        assert isinstance(terminator, scf.YieldOp)
        self.value(terminator.operands[index], role, terminator)

    def branch_result(self, branch: scf.IfOp, index: int, role: str) -> None:
        """Result `index` of an `scf.if`: what each region yields there."""
        if role in self.carried[(branch, index)]:
            return
        self.carried[(branch, index)].add(role)
        self.op(branch, role)
        for region in branch.regions:  # an scf.if with results has both regions
            terminator = region.block.last_op
            assert isinstance(terminator, scf.YieldOp)
            self.value(terminator.operands[index], role, terminator)

    def value(self, value: SSAValue, role: str, user: Operation) -> None:
        if isinstance(value, OpResult):
            op = value.op
            if isinstance(op, tile.LoadOp):
                if role != CONSUMER:
                    raise error(
                        user,
                        PASS,
                        f"a loaded tile feeds '{user.name}', which the producer needs for "
                        "address computation; loaded tiles may only feed consumer math",
                    )
                return  # a producer -> consumer edge: insert-aref turns it into a ring
            if isinstance(op, scf.ForOp):
                self.carried_value(op, value.index, role)
                return
            if isinstance(op, scf.IfOp):
                self.branch_result(op, value.index, role)
                return
            self.op(op, role)
        elif isinstance(value, BlockArgument):
            loop = value.block.parent_op()
            if not isinstance(loop, scf.ForOp):
                return  # a kernel argument: every group reads it
            if value.index == 0:
                self.op(loop, role)
            else:
                self.carried_value(loop, value.index - 1, role)


def _check_supported(kernel: func.FuncOp) -> None:
    for op in kernel.body.walk():
        if isinstance(op, _SUPPORTED_OPS) or op.name.startswith(_SUPPORTED_DIALECTS):
            continue
        if op.name.startswith("aref."):
            raise error(op, PASS, "the kernel is already warp-specialized")
        raise error(
            op,
            PASS,
            f"'{op.name}' is not supported in a kernel to warp-specialize (only arith, math, "
            "tile ops, scf.for, scf.if and func.return; global memory only through "
            "tile.load/store)",
        )


def _check_loads(kernel: func.FuncOp) -> None:
    for op in kernel.body.walk():
        if not isinstance(op, tile.LoadOp):
            continue
        for use in op.result.uses:
            if isinstance(use.operation, scf.YieldOp | func.ReturnOp | scf.ForOp):
                raise error(
                    use.operation,
                    PASS,
                    f"the tile loaded at {_where(op)} escapes through '{use.operation.name}'; "
                    "a loaded tile must be used in the block that loads it (its aref slot is "
                    "released there)",
                )


def _where(op: Operation) -> str:
    from tawa_xdsl.diagnostics import op_location

    return op_location(op)


def _dead_role(op: Operation) -> str:
    if isinstance(op, tile.LoadOp):
        return PRODUCER
    values = [*op.operands, *op.results]
    return CONSUMER if any(isinstance(v.type, TensorType) for v in values) else BOTH


def partition_kernel(kernel: func.FuncOp) -> None:
    _check_supported(kernel)
    ops = list(kernel.body.walk())
    if not any(isinstance(op, tile.StoreOp) for op in ops):
        raise error(kernel, PASS, f"@{kernel.sym_name.data} has no tile.store: nothing to compute")
    if not any(isinstance(op, tile.LoadOp) for op in ops):
        raise error(
            kernel, PASS, f"@{kernel.sym_name.data} has no tile.load: no work for a producer"
        )
    _check_loads(kernel)
    needs = _Needs(defaultdict(set), defaultdict(set))
    for op in ops:
        if isinstance(op, tile.StoreOp | tile.DotOp):
            needs.op(op, CONSUMER)
        elif isinstance(op, tile.LoadOp):
            needs.op(op, PRODUCER)
    for op in ops:
        if isinstance(op, scf.YieldOp | func.ReturnOp):
            continue
        roles = needs.ops.get(op)
        if not roles:
            set_role(op, _dead_role(op))
        else:
            set_role(op, BOTH if len(roles) == 2 else next(iter(roles)))
    for op in ops:
        if isinstance(op, scf.YieldOp):
            parent = op.parent_op()
            assert parent is not None
            set_role(op, str(parent.attributes["aref.role"].data))  # type: ignore[attr-defined]
        elif isinstance(op, func.ReturnOp):
            set_role(op, BOTH)


@dataclass(frozen=True)
class PartitionPass(ModulePass):
    """Tag each op of the kernel with `aref.role` = producer / consumer / both. No options."""

    name = "partition"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        partition_kernel(find_kernel(op, PASS))
