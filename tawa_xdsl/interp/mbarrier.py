"""The mbarrier-level interpreter: lowered warp groups as coroutines on real barrier semantics.

`run_mbarrier_kernel(module, grid, args, schedule=...)` runs a kernel after `lower-aref`, with
the same arguments and result as `tile.run_kernel`. As at the aref level, every warpgroup of
every `aref.group` is a coroutine interleaved by a `Scheduler` (`interp/scheduler.py`); ops
run once per warpgroup. The barriers follow the PTX ISA's mbarrier semantics:

* an mbarrier has a phase bit, a pending arrival count (reloaded from the init count when a
  phase completes) and a signed tx-count; `arrive` takes one pending arrival,
  `arrive_expect_tx(n)` first adds n to the tx-count; the phase completes (the bit flips) when
  pending == 0 and tx == 0, by an arrive or by a copy's complete_tx;
* `mbarrier_wait(bar, p)` blocks until the phase bit differs from p (try_wait.parity);
* `tma_load` starts an asynchronous copy: the slot reads as NaN (partially written) until the
  copy lands, at a moment the scheduler picks (the copy is a task of its own), when it writes
  the tile and does complete_tx(bytes) on its barrier.

Protocol errors (`MBarrierError`, naming the op's `file:line:col`): an arrive with no pending
arrival left, a tx-count out of the 20-bit range, a read of a slot a copy is writing (or that
was never written), a copy into a slot another copy is still writing, copies or expected bytes
left at the end of the warp-specialized region. A schedule where everyone waits raises the
scheduler's `DeadlockError` with every barrier's state.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.dialects import aref, nvgpu
from tawa_xdsl.interp.aref import warpgroup_index, warpgroup_tasks
from tawa_xdsl.interp.dtypes import InterpreterError, numpy_dtype
from tawa_xdsl.interp.engine import Blocked, Evaluator, Handler, sync_point
from tawa_xdsl.interp.scheduler import (
    Policy,
    Scheduler,
    ScheduleSpec,
    Task,
    TraceEvent,
    make_policy,
)
from tawa_xdsl.interp.tile import HANDLERS, run_kernel

TX_LIMIT = 2**20 - 1


class MBarrierError(InterpreterError):
    """A barrier or shared-memory protocol violation observed while running."""


def _error(op: Operation | None, message: str) -> MBarrierError:
    if op is None:
        return MBarrierError(message)
    return MBarrierError(f"{op_location(op)}: '{op.name}': {message}")


# --------------------------------------------------------------------------------- state


@dataclass(eq=False)
class Barrier:
    """One mbarrier: phase number (its parity is the bit), pending arrivals, tx-count."""

    expected: int = 0
    pending: int = 0
    tx: int = 0
    phase: int = 0
    initialized: bool = False

    @property
    def bit(self) -> int:
        return self.phase & 1

    def init(self, count: int) -> None:
        self.expected = self.pending = count
        self.tx, self.phase, self.initialized = 0, 0, True

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.expected

    def arrive(self, op: Operation | None, expect_tx: int = 0) -> None:
        if not self.initialized:
            raise _error(op, "arrive on an uninitialized mbarrier")
        self.tx += expect_tx
        if abs(self.tx) > TX_LIMIT:
            raise _error(op, f"tx-count {self.tx} out of range")
        if self.pending == 0:
            raise _error(op, "arrive with no pending arrival left (arrival count too low)")
        self.pending -= 1
        self._maybe_complete()

    def complete_tx(self, op: Operation | None, count: int) -> None:
        self.tx -= count
        if abs(self.tx) > TX_LIMIT:
            raise _error(op, f"tx-count {self.tx} out of range")
        self._maybe_complete()

    def describe(self) -> str:
        return (
            f"phase {self.phase} (bit {self.bit}) "
            f"pending {self.pending}/{self.expected} tx {self.tx}"
        )


@dataclass(eq=False)
class BarrierArray:
    name: str
    barriers: list[Barrier]

    def describe(self) -> str:
        return "\n".join(f"  {self.name}[{s}]: {b.describe()}" for s, b in enumerate(self.barriers))


@dataclass
class SmemBuffer:
    """D slots; `writing[s]` counts copies in flight into slot s."""

    name: str
    slots: list[np.ndarray]
    writing: list[int]
    written: list[bool]


@dataclass
class MBarrierState:
    arrays: list[BarrierArray] = field(default_factory=list)
    buffers: list[SmemBuffer] = field(default_factory=list)
    in_flight: int = 0
    named: dict[int, list[int]] = field(default_factory=dict)

    def describe(self) -> str:
        lines = ["barrier states:"] + [a.describe() for a in self.arrays]
        lines.append(f"  copies in flight: {self.in_flight}")
        return "\n".join(lines)


def _state(ev: Evaluator) -> MBarrierState:
    """The barriers and buffers of the running program (shared by its warp groups)."""
    return ev.state.setdefault("mbarrier", MBarrierState())


# ------------------------------------------------------------------------------ handlers


def _alloc(ev: Evaluator, op: nvgpu.MBarrierAllocOp, operands: list[Any]) -> tuple[BarrierArray]:
    assert isinstance(op.bars.type, nvgpu.MBarrierType)
    bars = BarrierArray(
        op.bars.name_hint or "bar", [Barrier() for _ in range(op.bars.type.num_barriers)]
    )
    _state(ev).arrays.append(bars)
    return (bars,)


def _init(ev: Evaluator, op: nvgpu.MBarrierInitOp, operands: list[Any]) -> tuple[()]:
    for bar in operands[0].barriers:
        bar.init(op.count.value.data)
    return ()


def _barrier(op: Operation, bars: BarrierArray, slot: Any) -> Barrier:
    s = int(slot)
    if not 0 <= s < len(bars.barriers):
        raise _error(op, f"barrier slot {s} out of range 0..{len(bars.barriers) - 1}")
    return bars.barriers[s]


def _point(op: Operation) -> Generator[Blocked]:
    """A scheduling point before a barrier or slot access: other groups may move first."""
    yield Blocked(op, "scheduling point", lambda: True)


def _arrive(
    ev: Evaluator, op: nvgpu.MBarrierArriveOp, operands: list[Any]
) -> Generator[Blocked, None, tuple[()]]:
    yield from _point(op)
    _barrier(op, operands[0], operands[1]).arrive(op)
    return ()


def _arrive_tx(
    ev: Evaluator, op: nvgpu.MBarrierArriveExpectTxOp, operands: list[Any]
) -> Generator[Blocked, None, tuple[()]]:
    yield from _point(op)
    _barrier(op, operands[0], operands[1]).arrive(op, op.tx_bytes.value.data)
    return ()


def _wait(
    ev: Evaluator, op: nvgpu.MBarrierWaitOp, operands: list[Any]
) -> Generator[Blocked, None, tuple[()]]:
    bars, slot, parity = operands
    bar = _barrier(op, bars, slot)
    p = int(parity) & 1
    yield from _point(op)
    if bar.bit == p:
        reason = f"try_wait.parity({p}) on {bars.name}[{int(slot)}], {bar.describe()}"
        yield from sync_point(op, reason, lambda: bar.bit != p)
    return ()


def _smem_alloc(ev: Evaluator, op: nvgpu.SmemAllocOp, operands: list[Any]) -> tuple[SmemBuffer]:
    smem = op.buf.type
    assert isinstance(smem, nvgpu.SmemType)
    dtype = numpy_dtype(smem.element_type)
    n = smem.slot_count
    buf = SmemBuffer(
        op.buf.name_hint or "smem",
        [np.full(smem.slot_shape, np.nan, dtype) for _ in range(n)],
        [0] * n,
        [False] * n,
    )
    _state(ev).buffers.append(buf)
    return (buf,)


def _slot(op: Operation, buf: SmemBuffer, slot: Any) -> int:
    s = int(slot)
    if not 0 <= s < len(buf.slots):
        raise _error(op, f"smem slot {s} out of range 0..{len(buf.slots) - 1}")
    return s


def _tma_load(ev: Evaluator, op: nvgpu.TmaLoadOp, operands: list[Any]) -> tuple[()]:
    desc, *rest = operands
    offsets = rest[: len(op.offsets)]
    buf, slot, bars, bar_slot = rest[len(op.offsets) :]
    s = _slot(op, buf, slot)
    bar = _barrier(op, bars, bar_slot)
    if buf.writing[s]:
        raise _error(op, f"copy into {buf.name}[{s}] while another copy still writes it")
    buf.writing[s] += 1
    buf.slots[s] = np.full_like(buf.slots[s], np.nan)  # partially written until it lands
    state = _state(ev)
    state.in_flight += 1
    tile_data = desc.load([int(o) for o in offsets])
    nbytes = tile_data.nbytes

    def copy() -> Generator[Blocked]:
        yield Blocked(op, f"TMA copy into {buf.name}[{s}] in flight", lambda: True)
        buf.slots[s] = tile_data
        buf.writing[s] -= 1
        buf.written[s] = True
        state.in_flight -= 1
        bar.complete_tx(op, nbytes)

    ev.state["scheduler"].spawn(Task(f"TMA -> {buf.name}[{s}]", copy(), role="tma"))
    return ()


def _smem_store(ev: Evaluator, op: nvgpu.SmemStoreOp, operands: list[Any]) -> tuple[()]:
    value, buf, slot = operands
    s = _slot(op, buf, slot)
    if buf.writing[s]:
        raise _error(op, f"store into {buf.name}[{s}] while a copy still writes it")
    buf.slots[s] = np.array(value, copy=True)
    buf.written[s] = True
    return ()


def _smem_load(
    ev: Evaluator, op: nvgpu.SmemLoadOp, operands: list[Any]
) -> Generator[Blocked, None, tuple[np.ndarray]]:
    buf, slot = operands
    yield from _point(op)
    s = _slot(op, buf, slot)
    if buf.writing[s]:
        raise _error(op, f"read of {buf.name}[{s}] while a copy is writing it (partial read)")
    if not buf.written[s]:
        raise _error(op, f"read of {buf.name}[{s}] before anything was written to it")
    return (buf.slots[s].copy(),)


def _named_barrier(
    ev: Evaluator, op: nvgpu.NamedBarrierSyncOp, operands: list[Any]
) -> Generator[Blocked, None, tuple[()]]:
    """A counting barrier over warpgroups (threads / 128 of them)."""
    expected = max(1, op.threads.value.data // 128)
    if expected == 1:
        return ()
    state = _state(ev)
    ident = op.barrier_id.value.data
    arrived, generation = state.named.setdefault(ident, [0, 0])
    state.named[ident][0] += 1
    if state.named[ident][0] == expected:
        state.named[ident] = [0, generation + 1]
        return ()
    yield from sync_point(op, f"bar.sync {ident}", lambda: state.named[ident][1] != generation)
    return ()


def _unsigned(fn: Callable[[int, int], int]) -> Handler:
    def run(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[Any]:
        a, b = operands
        return (type(a)(fn(int(a), int(b))),)

    return run


def _warp_specialize(
    ev: Evaluator,
    op: aref.WarpSpecializeOp,
    operands: list[Any],
    schedule: Policy,
    trace: list[TraceEvent] | None,
) -> tuple[()]:
    ev.state.setdefault("written", set())
    state = _state(ev)
    scheduler = Scheduler(schedule, state.describe, trace)
    ev.state["scheduler"] = scheduler  # `tma_load` spawns its copies here
    for task in warpgroup_tasks(ev, op):
        scheduler.spawn(task)
    scheduler.run()
    leftover = [
        f"{a.name}[{s}] tx {b.tx}" for a in state.arrays for s, b in enumerate(a.barriers) if b.tx
    ]
    if state.in_flight or leftover:
        raise _error(
            op,
            f"warp groups finished with {state.in_flight} copies in flight, "
            f"outstanding tx: {', '.join(leftover) or 'none'}",
        )
    return ()


MBARRIER_HANDLERS: dict[type[Operation], Handler] = {
    nvgpu.MBarrierAllocOp: _alloc,
    nvgpu.MBarrierInitOp: _init,
    nvgpu.MBarrierArriveOp: _arrive,
    nvgpu.MBarrierArriveExpectTxOp: _arrive_tx,
    nvgpu.MBarrierWaitOp: _wait,
    nvgpu.FenceMBarrierInitOp: lambda ev, op, _: (),
    nvgpu.CtaBarrierOp: lambda ev, op, _: (),
    nvgpu.FenceProxyAsyncOp: lambda ev, op, _: (),
    nvgpu.SmemAllocOp: _smem_alloc,
    nvgpu.TmaLoadOp: _tma_load,
    nvgpu.SmemStoreOp: _smem_store,
    nvgpu.SmemLoadOp: _smem_load,
    nvgpu.NamedBarrierSyncOp: _named_barrier,
    arith.RemUIOp: _unsigned(lambda a, b: a % b),
    arith.DivUIOp: _unsigned(lambda a, b: a // b),
    aref.WarpgroupIndexOp: warpgroup_index,
}


def mbarrier_handlers(
    schedule: ScheduleSpec = "random", trace: list[TraceEvent] | None = None
) -> dict[type[Operation], Handler]:
    """The tile handlers plus the mbarrier ones; one policy spans all programs."""
    policy = make_policy(schedule)
    return {
        **HANDLERS,
        **MBARRIER_HANDLERS,
        aref.WarpSpecializeOp: partial(_warp_specialize, schedule=policy, trace=trace),
    }


def run_mbarrier_kernel(
    module: ModuleOp,
    grid: Sequence[int] | int,
    args: Sequence[Any],
    kernel: str | None = None,
    schedule: ScheduleSpec = "random",
    trace: list[TraceEvent] | None = None,
) -> list[np.ndarray]:
    """Run every program of `grid` on the lowered barriers; returns the arrays stored to."""
    return run_kernel(module, grid, args, kernel, handlers=mbarrier_handlers(schedule, trace))
