"""`distribute`: split a kernel with arefs into one region per warp group.

The kernel body becomes

    %ring = aref.create ...                  (once per program, before the groups start)
    aref.warp_specialize {
      aref.group producer warpgroups(1) registers(40) { producer + both ops }
      aref.group consumer warpgroups(1) registers(232) { consumer + both ops }
    }
    func.return

Each group gets a clone of the loop nest with only its own ops (and the `both` ops: loop
counters, offsets, the aref use counters), so both sides run loops with identical bounds and
trip counts. A loop-carried value stays in the groups whose role it has (the accumulator only
in the consumer, the use counters in both). The role attributes are dropped, and dead pure ops
of each group are removed.

No options. Refused: a kernel without `aref.role` tags or aref ops (run partition and
insert-aref first), a loop-carried value mixing producer and consumer values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.dead_code_elimination import region_dce

from tawa_xdsl.dialects import aref
from tawa_xdsl.dialects.aref import CONSUMER_REGISTERS, PRODUCER_REGISTERS, ROLE_ATTR, Role
from tawa_xdsl.transforms.set_registers import fit_registers
from tawa_xdsl.transforms.ws_utils import (
    BOTH,
    CONSUMER,
    PRODUCER,
    error,
    find_kernel,
    require_role,
)

PASS = "distribute"


@dataclass
class _Roles:
    """The role of every value: the op's tag, or, for loop-carried values, the role of what
    flows in and out of the loop."""

    carried: dict[tuple[Operation, int], str] = field(default_factory=dict)

    def value(self, value: SSAValue) -> str:
        if isinstance(value, OpResult):
            if isinstance(value.op, scf.ForOp):
                return self.loop_value(value.op, value.index)
            if isinstance(value.op, scf.IfOp):
                return self.branch_value(value.op, value.index)
            return require_role(value.op, PASS)
        assert isinstance(value, BlockArgument)
        loop = value.block.parent_op()
        if isinstance(loop, scf.ForOp) and value.index > 0:
            return self.loop_value(loop, value.index - 1)
        return BOTH  # a kernel argument or an induction variable

    def loop_value(self, loop: scf.ForOp, index: int) -> str:
        key = (loop, index)
        if key in self.carried:
            return self.carried[key]
        self.carried[key] = BOTH  # a value that only cycles through the loop
        terminator = loop.body.block.last_op
        assert terminator is not None
        roles = {self.value(loop.iter_args[index]), self.value(terminator.operands[index])}
        roles.discard(BOTH)
        if len(roles) > 1:
            raise error(
                loop,
                PASS,
                f"loop-carried value #{index} mixes producer and consumer values",
            )
        self.carried[key] = roles.pop() if roles else BOTH
        return self.carried[key]

    def branch_value(self, branch: scf.IfOp, index: int) -> str:
        """The role of result `index` of an `scf.if`: that of what its regions yield."""
        key = (branch, index)
        if key not in self.carried:
            yields = [region.block.last_op for region in branch.regions]
            roles = {self.value(y.operands[index]) for y in yields if y is not None}
            roles.discard(BOTH)
            if len(roles) > 1:
                raise error(branch, PASS, f"result #{index} mixes producer and consumer values")
            self.carried[key] = roles.pop() if roles else BOTH
        return self.carried[key]


def _clone_block(
    src: Block,
    dst: Block,
    role: str,
    roles: _Roles,
    mapper: dict[SSAValue, SSAValue],
    kept: list[int] | None = None,
) -> None:
    for op in src.ops:
        if isinstance(op, aref.CreateOp | func.ReturnOp):
            continue
        if isinstance(op, scf.YieldOp):
            assert kept is not None
            dst.add_op(scf.YieldOp(*(mapper[op.operands[k]] for k in kept)))
            continue
        if require_role(op, PASS) not in (role, BOTH):
            continue
        if isinstance(op, scf.ForOp):
            dst.add_op(_clone_loop(op, role, roles, mapper))
            continue
        if isinstance(op, scf.IfOp):
            dst.add_op(_clone_branch(op, role, roles, mapper))
            continue
        new = op.clone(value_mapper=mapper)
        new.attributes.pop(ROLE_ATTR, None)
        dst.add_op(new)


def _clone_loop(
    loop: scf.ForOp, role: str, roles: _Roles, mapper: dict[SSAValue, SSAValue]
) -> scf.ForOp:
    kept = [k for k in range(len(loop.iter_args)) if roles.loop_value(loop, k) in (role, BOTH)]
    src = loop.body.block
    body = Block(arg_types=[src.args[0].type, *(src.args[k + 1].type for k in kept)])
    mapper[src.args[0]] = body.args[0]
    body.args[0].name_hint = src.args[0].name_hint
    for new_arg, k in zip(body.args[1:], kept, strict=True):
        mapper[src.args[k + 1]] = new_arg
        new_arg.name_hint = src.args[k + 1].name_hint
    _clone_block(src, body, role, roles, mapper, kept)
    new = scf.ForOp(
        mapper.get(loop.lb, loop.lb),
        mapper.get(loop.ub, loop.ub),
        mapper.get(loop.step, loop.step),
        [mapper.get(loop.iter_args[k], loop.iter_args[k]) for k in kept],
        Region(body),
    )
    new.location = loop.location
    for new_result, k in zip(new.results, kept, strict=True):
        mapper[loop.results[k]] = new_result
        new_result.name_hint = loop.results[k].name_hint
    return new


def _clone_branch(
    branch: scf.IfOp, role: str, roles: _Roles, mapper: dict[SSAValue, SSAValue]
) -> scf.IfOp:
    """`branch` with the ops and results of `role` (and `both`) in each region."""
    kept = [k for k in range(len(branch.results)) if roles.branch_value(branch, k) in (role, BOTH)]
    regions = []
    for region in branch.regions:
        block = Block()
        if region.blocks:
            _clone_block(region.block, block, role, roles, mapper, kept)
        else:
            block.add_op(scf.YieldOp())
        regions.append(Region(block))
    new = scf.IfOp(mapper.get(branch.cond, branch.cond), [branch.results[k].type for k in kept],
                   *regions)  # fmt: skip
    new.location = branch.location
    for new_result, k in zip(new.results, kept, strict=True):
        mapper[branch.results[k]] = new_result
        new_result.name_hint = branch.results[k].name_hint
    return new


def distribute_kernel(kernel: func.FuncOp) -> None:
    entry = kernel.body.block
    for op in kernel.body.walk():
        require_role(op, PASS)
    creates = [op for op in entry.ops if isinstance(op, aref.CreateOp)]
    if not creates:
        raise error(kernel, PASS, "the kernel has no aref.create; run insert-aref first")
    roles = _Roles()
    groups = []
    for role, enum, registers in (
        (PRODUCER, Role.PRODUCER, PRODUCER_REGISTERS),
        (CONSUMER, Role.CONSUMER, CONSUMER_REGISTERS),
    ):
        block = Block()
        _clone_block(entry, block, role, roles, {})
        groups.append(aref.GroupOp(enum, 1, registers, Region(block)))
    specialized = aref.WarpSpecializeOp(groups)
    specialized.location = kernel.location
    terminator = entry.last_op
    assert isinstance(terminator, func.ReturnOp)
    for op in reversed(list(entry.ops)):
        if op is not terminator and not isinstance(op, aref.CreateOp):
            op.detach()
            op.erase(safe_erase=False)
    for create in creates:
        create.attributes.pop(ROLE_ATTR, None)
    Rewriter.insert_op(specialized, InsertPoint.before(terminator))
    fit_registers(specialized)  # the defaults over a CTA's share when CTAs share an SM
    terminator.attributes.pop(ROLE_ATTR, None)
    for group in groups:
        region_dce(group.body)


@dataclass(frozen=True)
class DistributePass(ModulePass):
    """Clone the loop nest into one `aref.group` per warp group. No options."""

    name = "distribute"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        distribute_kernel(find_kernel(op, PASS))
