"""The aref-level interpreter: warp groups as coroutines talking through rings.

`run_warp_specialized(module, grid, args, schedule=...)` runs a kernel whose body holds an
`aref.warp_specialize`, with the same arguments and result as `tile.run_kernel`. For each
program instance:

1. the ops before `aref.warp_specialize` run once, with the tile-level handlers;
2. every warpgroup of every `aref.group` then runs the group's region as its own coroutine (a
   forked evaluator: all see the values defined before, `aref.warpgroup_index` gives
   0 .. warpgroups - 1), and a `Scheduler` interleaves them at every put/get/consumed;
3. the ops after it run once the groups are done.

Ring semantics (`!aref.ring<[...], D>`; the index `i` is the logical use counter):

* `put(i)` waits until use i - D of slot i mod D has been consumed by every consumer
  warpgroup -- every warpgroup of every group whose region gets from the ring -- then stores
  a copy of the payload;
* `get(i)` waits until use i has been put and returns a private copy of the payload;
* `consumed(i)` releases it. The copy that `get` returned is then dead: SSA values holding it
  read as an error, and its memory is filled with NaN, so a read after release never passes.
  `consumed(i) lag(L)` must run after the get of use i + L - 1 (it holds L younger uses);
* `drain[start, end] lag(L)` releases uses max(end - L, start) .. end - 1 in order, each as
  `consumed` does.

Protocol errors (`ArefProtocolError`, with the op's `file:line:col`): indices that are not
0, 1, 2, ... per warpgroup, per ring and per side; consumed without get; a get of a use whose
slot was already overwritten. A group may finish with uses it never released; a group that
waits forever is reported as a `DeadlockError` with every blocked warpgroup and ring state.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.dialects import aref
from tawa_xdsl.interp.dtypes import InterpreterError
from tawa_xdsl.interp.engine import Blocked, Evaluator, Handler, sync_point
from tawa_xdsl.interp.scheduler import ScheduleSpec, Task, TraceEvent, make_policy, run_tasks
from tawa_xdsl.interp.tile import HANDLERS, run_kernel


class ArefProtocolError(InterpreterError):
    """A warp group broke the put/get/consumed protocol of a ring."""


# ------------------------------------------------------------------------------- rings


@dataclass
class Slot:
    """One slot of a ring: the last use written into it and how many consumers released it."""

    use: int = -1  # -1: never written
    payload: tuple[np.ndarray, ...] = ()
    released: int = 0

    def describe(self, consumers: int) -> str:
        if self.use < 0:
            return "empty"
        return f"use {self.use} released by {self.released}/{consumers}"


@dataclass
class Ring:
    """The runtime state of one `aref.create`."""

    op: aref.CreateOp
    depth: int
    consumers: int  # warpgroups that must release each use before its slot is reused
    slots: list[Slot] = field(default_factory=list)
    # (warpgroup, side) -> how many uses that warpgroup completed on that side (put, get or
    # consumed), which is also the next index it may use there.
    next_index: dict[tuple[str, str], int] = field(default_factory=dict)
    # (warpgroup, use) -> the copies `get` gave it, killed at `consumed`.
    borrowed: dict[tuple[str, int], tuple[np.ndarray, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.slots = [Slot() for _ in range(self.depth)]

    @property
    def name(self) -> str:
        return f"%{self.op.ring.name_hint or 'ring'}"

    def slot(self, use: int) -> Slot:
        return self.slots[use % self.depth]

    def can_put(self, use: int) -> bool:
        slot = self.slot(use)
        if slot.use < 0:
            return use < self.depth
        return slot.use == use - self.depth and slot.released >= self.consumers

    def has_arrived(self, use: int) -> bool:
        return self.slot(use).use >= use

    def describe(self) -> str:
        head = (
            f"  {self.name} ({self.depth} slots, {self.consumers} consumer warpgroups) "
            f"created at {op_location(self.op)}"
        )
        slots = ", ".join(
            f"slot {k}: {slot.describe(self.consumers)}" for k, slot in enumerate(self.slots)
        )
        done: dict[str, list[str]] = {}
        for (who, side), count in sorted(self.next_index.items()):
            done.setdefault(who, []).append(f"{count} {side}")
        counters = "; ".join(f"{who}: {', '.join(sides)}" for who, sides in done.items())
        return f"{head}\n    {slots}\n    completed: {counters or 'nothing'}"


def _consumer_warpgroups(op: aref.CreateOp) -> int:
    """Warpgroups of every group whose region gets from the ring `op` creates."""
    groups: dict[int, aref.GroupOp] = {}
    for use in op.ring.uses:
        if isinstance(use.operation, aref.GetOp):
            group = _enclosing_group(use.operation)
            if group is not None:
                groups[id(group)] = group
    return sum(group.num_warpgroups for group in groups.values())


def _enclosing_group(op: Operation) -> aref.GroupOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, aref.GroupOp):
        parent = parent.parent_op()
    return parent


# ------------------------------------------------------------------------ op handlers


def _protocol_error(ev: Evaluator, op: Operation, ring: Ring, message: str) -> ArefProtocolError:
    who = ev.state.get("task", "the kernel body")
    return ArefProtocolError(f"{op_location(op)}: '{op.name}' on {ring.name} by {who}: {message}")


def _check_index(ev: Evaluator, op: Operation, ring: Ring, side: str, use: int) -> None:
    """Check that `use` is the next index of this warpgroup on this side."""
    expected = ring.next_index.get((ev.state.get("task", ""), side), 0)
    if use != expected:
        raise _protocol_error(
            ev, op, ring, f"use counter out of order: expected {side} {expected}, got {side} {use}"
        )


def _complete(ev: Evaluator, ring: Ring, side: str, use: int) -> None:
    ring.next_index[(ev.state.get("task", ""), side)] = use + 1


def _create(ev: Evaluator, op: aref.CreateOp, operands: list[Any]) -> tuple[Ring]:
    assert isinstance(op.ring.type, aref.RingType)
    ring = Ring(op, op.ring.type.depth.data, _consumer_warpgroups(op))
    ev.state.setdefault("rings", []).append(ring)
    return (ring,)


def _put(ev: Evaluator, op: aref.PutOp, operands: list[Any]) -> Generator[Blocked, None, Any]:
    ring, index, *values = operands
    use = int(index)
    _check_index(ev, op, ring, "put", use)
    reason = f"waits for {ring.name} slot {use % ring.depth} to be released"
    if use >= ring.depth:
        reason += f" from use {use - ring.depth} by {ring.consumers} consumer warpgroups"
    yield from sync_point(op, reason, partial(ring.can_put, use))
    slot = ring.slot(use)
    slot.use, slot.released = use, 0
    slot.payload = tuple(np.array(v, copy=True) for v in values)
    _complete(ev, ring, "put", use)
    return ()


def _get(ev: Evaluator, op: aref.GetOp, operands: list[Any]) -> Generator[Blocked, None, Any]:
    ring, index = operands
    use = int(index)
    _check_index(ev, op, ring, "get", use)
    reason = f"waits for use {use} of {ring.name} (slot {use % ring.depth}) to be put"
    yield from sync_point(op, reason, partial(ring.has_arrived, use))
    slot = ring.slot(use)
    if slot.use != use:
        raise _protocol_error(
            ev, op, ring, f"use {use} was already overwritten by use {slot.use} in its slot"
        )
    copies = tuple(np.array(v, copy=True) for v in slot.payload)
    ring.borrowed[(ev.state.get("task", ""), use)] = copies
    _complete(ev, ring, "get", use)
    return copies


def _release(ev: Evaluator, op: Operation, ring: Ring, use: int) -> None:
    """Give use `use` back: one more consumer warpgroup released its slot."""
    copies = ring.borrowed.pop((ev.state.get("task", ""), use), None)
    if copies is None:
        raise _protocol_error(ev, op, ring, f"consumed use {use} without a get of it")
    _check_index(ev, op, ring, "consumed", use)
    ring.slot(use).released += 1
    _complete(ev, ring, "consumed", use)
    _kill(ev, copies, f"reads use {use} of {ring.name} after its '{op.name}' at {op_location(op)}")


def _consumed(ev: Evaluator, op: aref.ConsumedOp, operands: list[Any]) -> Generator[Blocked]:
    ring, index = operands
    use = int(index)
    lag = op.lag_value
    got = ring.next_index.get((ev.state.get("task", ""), "get"), 0)
    if lag and got < use + lag:
        raise _protocol_error(
            ev, op, ring, f"release of use {use} lagged by {lag} runs before the get of use "
            f"{use + lag - 1} (it must hold {lag} younger uses)",
        )  # fmt: skip
    yield from sync_point(op, "never blocks", lambda: True)
    _release(ev, op, ring, use)
    return ()


def _drain(ev: Evaluator, op: aref.DrainOp, operands: list[Any]) -> Generator[Blocked]:
    """Release uses max(end - lag, start) .. end - 1, in order."""
    ring, start, end = operands
    for use in range(max(int(end) - op.lag_value, int(start)), int(end)):
        yield from sync_point(op, "never blocks", lambda: True)
        _release(ev, op, ring, use)
    return ()


# ------------------------------------------------------------------- released payloads


class StaleRead(ValueError):
    """A warp group read a payload after releasing it (the engine adds the reading op)."""


class Released:
    """Stands in for an SSA value whose payload was released: any read raises `StaleRead`."""

    def __init__(self, message: str):
        self.message = message

    def fail(self, *args: Any, **kwargs: Any) -> Any:
        raise StaleRead(self.message)

    __array__ = __array_ufunc__ = __array_function__ = fail
    __int__ = __float__ = __index__ = __bool__ = __len__ = __getitem__ = fail

    def __getattr__(self, name: str) -> Any:
        raise StaleRead(self.message)

    def __repr__(self) -> str:
        return f"Released({self.message!r})"


def _kill(ev: Evaluator, copies: Sequence[np.ndarray], message: str) -> None:
    """Make the released copies unreadable: poison their memory and every SSA value that
    holds them or a view of them."""
    for value, held in list(ev.env.items()):
        if isinstance(held, np.ndarray) and any(np.may_share_memory(held, c) for c in copies):
            ev.env[value] = Released(message)
    for copy in copies:
        if copy.dtype.kind in "fV":  # floats, and ml_dtypes (bf16, fp8)
            copy.fill(np.nan)


# ------------------------------------------------------------------ warp_specialize


def warpgroup_index(ev: Evaluator, op: aref.WarpgroupIndexOp, operands: list[Any]) -> Any:
    if "warpgroup" not in ev.state:
        raise InterpreterError(f"{op_location(op)}: 'aref.warpgroup_index' outside an aref.group")
    return (np.int32(ev.state["warpgroup"]),)


def warpgroup_tasks(ev: Evaluator, op: aref.WarpSpecializeOp) -> list[Task]:
    """One task per warpgroup of every group, each running the group's region in a forked
    evaluator; named `producer wg0`, `consumer wg1`, or `consumer 1 wg0` when several groups
    share a role."""
    groups = op.groups()
    roles = [str(g.role.data) for g in groups]
    ev.state.setdefault("collectives", {})  # forks share it: reductions across warpgroups
    tasks = []
    for k, (group, role) in enumerate(zip(groups, roles, strict=True)):
        label = role if roles.count(role) == 1 else f"{role} {roles[:k].count(role)}"
        for w in range(group.num_warpgroups):
            name = f"{label} wg{w}"
            body = ev.fork(warpgroup=w, task=name).run_block(group.body.block)
            tasks.append(Task(name, body, role))
    return tasks


def _warp_specialize(
    ev: Evaluator,
    op: aref.WarpSpecializeOp,
    operands: list[Any],
    schedule: Any,
    trace: list[TraceEvent] | None,
) -> tuple[()]:
    ev.state.setdefault("written", set())  # forks share it, so their stores are reported
    rings: list[Ring] = ev.state.setdefault("rings", [])
    tasks = warpgroup_tasks(ev, op)

    def dump() -> str:
        lines = [f"ring states of program {ev.program.program_id}:"]
        return "\n".join(lines + [ring.describe() for ring in rings])

    run_tasks(tasks, schedule, dump, trace, name=f"program {ev.program.program_id}")
    return ()


AREF_HANDLERS: dict[type[Operation], Handler] = {
    aref.CreateOp: _create,
    aref.PutOp: _put,
    aref.GetOp: _get,
    aref.ConsumedOp: _consumed,
    aref.DrainOp: _drain,
    aref.WarpgroupIndexOp: warpgroup_index,
}


def aref_handlers(
    schedule: ScheduleSpec = "random", trace: list[TraceEvent] | None = None
) -> dict[type[Operation], Handler]:
    """The tile handlers plus the aref ones, the groups interleaved by `schedule`."""
    policy = make_policy(schedule)
    return {
        **HANDLERS,
        **AREF_HANDLERS,
        aref.WarpSpecializeOp: partial(_warp_specialize, schedule=policy, trace=trace),
    }


def run_warp_specialized(
    module: ModuleOp,
    grid: Sequence[int] | int,
    args: Sequence[Any],
    kernel: str | None = None,
    schedule: ScheduleSpec = "random",
    trace: list[TraceEvent] | None = None,
) -> list[np.ndarray]:
    """Run every program instance of `grid`, each interleaving its warp groups as `schedule`
    says (see `scheduler.make_policy`; one policy spans all programs); returns the arrays the
    kernel stored to. `trace`, when a list, receives one `TraceEvent` per scheduling step."""
    return run_kernel(module, grid, args, kernel, handlers=aref_handlers(schedule, trace))
