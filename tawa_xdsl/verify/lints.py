"""Lints for what the phase model cannot see (README, `tawa-verify`: Lints).

The barrier proof treats a group as one actor; these checks look at the threads behind it, on
lowered IR (mbarrier level or later), in each warp group's program order:

* `publication` (error): an mbarrier arrive (or a TMA store) is executed by one elected thread,
  and a release arrive publishes only that thread's prior accesses. Smem stores by the whole
  group (`nvgpu.smem_store`, `nvgpu.fragment_store`) must be followed by a group barrier
  (`nvgpu.named_barrier_sync`) before the arrive or the TMA store (cuDNN-frontend PR #426).
* `proxy-fence` (error): generic-proxy smem writes read by the async proxy (a TMA store of the
  buffer, or an arrive that hands the slot to another group's wgmma / TMA) need a
  `nvgpu.fence_proxy_async` between the writes and the read (PTX mixed-proxy model).
* `cta-barrier` (error): a CTA-wide `bar.sync` (`nvgpu.cta_barrier`) inside a warp-group region
  waits for threads of the other groups, which never arrive at it: a deadlock.
* `named-barrier-count` (warning): a group barrier whose thread count is not the group's.

`lint_module(module)` returns `Lint`s ordered by source position; `str(lint)` is
`file:line:col: error|warning: [name] message`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.dialects import aref, nvgpu
from tawa_xdsl.dialects.nvgpu.hardware import WARPGROUP_THREADS


@dataclass(frozen=True)
class Lint:
    """One finding."""

    loc: str
    severity: str  # "error" | "warning"
    name: str
    message: str

    def __str__(self) -> str:
        return f"{self.loc}: {self.severity}: [{self.name}] {self.message}"


def _stored_buffer(op: Operation) -> SSAValue | None:
    if isinstance(op, nvgpu.SmemStoreOp | nvgpu.FragmentStoreOp):
        return op.buf
    return None


def _program_order(op: Operation):
    """The ops of `op`'s regions, nested regions inline (program order of one group)."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                yield inner
                yield from _program_order(inner)


class _GroupLinter:
    def __init__(self, group: Operation | None, root: Operation):
        self.group, self.root = group, root
        self.lints: list[Lint] = []
        self.unsynced: list[Operation] = []  # group-wide stores not yet behind a group barrier
        self.unfenced: list[Operation] = []  # generic-proxy stores not yet behind a proxy fence

    def add(self, op: Operation, severity: str, name: str, message: str) -> None:
        self.lints.append(Lint(op_location(op), severity, name, message))

    def run(self) -> list[Lint]:
        for op in _program_order(self.root):
            if _is_region(op):
                continue  # linted as its own group
            if self.group is not None and _group_of(op) is not self.group:
                continue
            self.visit(op)
        return self.lints

    def visit(self, op: Operation) -> None:
        if _stored_buffer(op) is not None:
            self.unsynced.append(op)
            self.unfenced.append(op)
        elif isinstance(op, nvgpu.FenceProxyAsyncOp):
            self.unfenced = []
        elif isinstance(op, scf.IfOp) and _warpgroup_branch(op) and _every_arm_syncs(op):
            self.unsynced = []  # each warpgroup meets its own barrier here
        elif isinstance(op, nvgpu.NamedBarrierSyncOp):
            if not _inside_warpgroup_branch(op):  # there: only where every arm syncs (above)
                self.unsynced = []
            if isinstance(self.group, aref.GroupOp):
                want = WARPGROUP_THREADS * self.group.num_warpgroups
                got = op.threads.value.data
                if got != want:
                    self.add(
                        op,
                        "warning",
                        "named-barrier-count",
                        f"group barrier for {got} threads in a group of {want}",
                    )
        elif isinstance(op, nvgpu.CtaBarrierOp):
            if self.group is not None:
                self.add(
                    op,
                    "error",
                    "cta-barrier",
                    f"CTA-wide bar.sync inside the {_role(self.group)} warp-group region: "
                    "the other groups never reach it (deadlock); use a named barrier",
                )
            self.unsynced = []
        elif isinstance(op, nvgpu.MBarrierArriveOp | nvgpu.MBarrierArriveExpectTxOp):
            if self.unsynced and self.group is not None:
                first = self.unsynced[0]
                self.add(
                    op,
                    "error",
                    "publication",
                    f"arrive by one elected thread after smem stores by the whole group "
                    f"({first.name} at {op_location(first)}) with no group barrier in "
                    "between: the release publishes only the electing thread's stores",
                )
                self.unsynced = []
            if self.unfenced:
                first = self.unfenced[0]
                self.add(
                    op,
                    "error",
                    "proxy-fence",
                    f"arrive hands smem written by generic-proxy stores ({first.name} at "
                    f"{op_location(first)}) to async-proxy readers without "
                    "nvgpu.fence_proxy_async",
                )
                self.unfenced = []
        elif isinstance(op, nvgpu.TmaStoreOp):
            mine = [s for s in self.unsynced if _stored_buffer(s) == op.buf]
            if mine and self.group is not None:
                self.add(
                    op,
                    "error",
                    "publication",
                    f"TMA store by one elected thread reads smem the whole group wrote "
                    f"({mine[0].name} at {op_location(mine[0])}) with no group barrier in "
                    "between",
                )
                self.unsynced = [s for s in self.unsynced if s not in mine]
            hit = [s for s in self.unfenced if _stored_buffer(s) == op.buf]
            if hit:
                self.add(
                    op,
                    "error",
                    "proxy-fence",
                    f"TMA store reads smem written by generic-proxy stores ({hit[0].name} at "
                    f"{op_location(hit[0])}) without nvgpu.fence_proxy_async in between",
                )
                self.unfenced = [s for s in self.unfenced if s not in hit]


def _reads(value: SSAValue, kind: type) -> bool:
    """`value` is computed (through arith ops) from an op of `kind`."""
    op = value.owner
    if isinstance(op, kind):
        return True
    if isinstance(op, Operation) and op.name.startswith("arith."):
        return any(_reads(v, kind) for v in op.operands)
    return False


def _warpgroup_branch(op: Operation) -> bool:
    """An `scf.if` inside a group on the warpgroup index alone (not a thread guard)."""
    return (
        isinstance(op, scf.IfOp)
        and not _is_region(op)
        and _reads(op.cond, nvgpu.WarpgroupIndexOp)
        and not _reads(op.cond, nvgpu.ThreadIndexOp)
    )


def _every_arm_syncs(op: scf.IfOp) -> bool:
    """Every warpgroup, whichever arm it takes, meets a named barrier in `op`'s arms."""

    def arm(region) -> bool:
        if not region.blocks:
            return False
        ops = list(region.blocks[0].ops)
        return any(isinstance(o, nvgpu.NamedBarrierSyncOp) for o in ops) or any(
            _warpgroup_branch(o) and _every_arm_syncs(o)
            for o in ops  # type: ignore[arg-type]
        )

    return arm(op.true_region) and arm(op.false_region)


def _inside_warpgroup_branch(op: Operation) -> bool:
    parent = op.parent_op()
    while parent is not None and not _is_region(parent):
        if _warpgroup_branch(parent):
            return True
        parent = parent.parent_op()
    return False


def _is_region(op: Operation) -> bool:
    """A warp-group region: `aref.group`, or (after lower-to-nvgpu) a link of the `scf.if`
    chain that splits the warpgroups into groups, `wg < c`. A branch on the warpgroup index
    inside a group (`wg - base == k`: one warpgroup's own barrier, a ping-pong turn) is part
    of the group's program: the named-barrier proof follows each warpgroup through it."""
    if isinstance(op, aref.GroupOp):
        return True
    if not isinstance(op, scf.IfOp) or not isinstance(op.cond.owner, arith.CmpiOp):
        return False
    cmp = op.cond.owner
    return (
        cmp.predicate.value.data in (2, 6)  # slt, ult
        and isinstance(cmp.lhs.owner, nvgpu.WarpgroupIndexOp)
        and isinstance(cmp.rhs.owner, arith.ConstantOp)
    )


def _group_of(op: Operation) -> Operation | None:
    parent = op.parent_op()
    while parent is not None and not _is_region(parent):
        parent = parent.parent_op()
    return parent


def lint_module(module: ModuleOp) -> list[Lint]:
    """Every lint finding of `module` (module docstring)."""
    lints: list[Lint] = []
    for op in module.walk():
        if _is_region(op):
            lints += _GroupLinter(op, op).run()
    for op in module.ops:  # code outside any warp-group region (e.g. a plain kernel)
        lints += _GroupLinter(None, op).run() if _has_no_groups(op) else []
    return lints


def _has_no_groups(op: Operation) -> bool:
    return not any(_is_region(o) for o in op.walk())


def _role(region: Operation) -> str:
    return str(region.role.data) if isinstance(region, aref.GroupOp) else "lowered"
