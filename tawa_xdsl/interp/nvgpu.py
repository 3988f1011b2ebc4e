"""The nvgpu-level interpreter: the kernel as every thread of the CTA runs it.

`run_nvgpu_kernel(module, grid, args, schedule=...)` runs a kernel after `lower-to-nvgpu` (the
IR `emit-ptx` prints), with the same arguments and result as `tile.run_kernel`. Per program
instance, each warpgroup (`nvgpu.threads / 128` of them) runs the whole kernel body as one
coroutine, interleaved with the others and with the asynchronous copies by a `Scheduler`.

Threads. A warpgroup's 128 threads run in lockstep under an active mask: per-thread values
(`nvgpu.thread_index`, `nvgpu.elect_sync`, whatever is computed from them) are arrays `[128]`,
uniform values numpy scalars; an `scf.if` on a per-thread condition runs each branch under its
part of the mask and merges the results per thread. Register fragments are arrays
`[128, values]` whose tile positions come only from the layout objects (`interp/fragments.py`).
Ops with effects act once per active thread: an arrive by 128 threads is 128 arrivals, a TMA
issued by every thread is 128 copies. Collective ops (wgmma, setmaxnreg) need all 128 threads.

Hardware semantics modelled:

* mbarriers as at the mbarrier level (phase bit, pending count, tx-count, try_wait.parity);
  `nvgpu.tma_load` lands at a scheduler-chosen moment with complete_tx of its bytes;
* `nvgpu.wgmma_mma_async` reads nothing when issued: its smem operands are read when
  `nvgpu.wgmma_wait_group` retires its commit group (wait_group N leaves the N newest groups
  in flight). A plain `mbarrier_arrive` on the barrier that guards a slot (the one the slot's
  writer waited on last before writing it: the ring's empty barrier) while one of the
  warpgroup's unretired wgmmas reads that slot is an early release, reported at the arrive;
  a write into a slot an unretired wgmma reads is an error naming both ops, as is reading a
  result before its group retired, or issuing one on a slot a copy still writes. (Since any
  write between issue and retirement is an error, a read at any moment in between sees the
  same data: retiring is the one read point modelled.)

The legalize-nvgpu plan is what runs, so a wrong plan shows here as it would on the GPU:

* every `smem_alloc` / `mbarrier_alloc` takes the bytes its `offset` says; two allocations
  sharing a byte is an error;
* a wgmma reads each instruction's operand where its descriptor says: the constant bits are
  decoded (swizzle span, LBO, SBO must describe the slot) and each step is turned back into
  the slot row and column the instruction starts at (an offset no operand starts at is an
  error, a wrong but possible one a wrong result);
* a TMA load lands box by box where the box plan says (column slab, innermost coordinate);
* fragment stores write where their store plan puts each pair; a global store drops what
  its planned clip tests drop, and an element the plan lets through outside the tensor is an
  error.
* `nvgpu.tma_store` reads its slot and writes global memory at a scheduler-chosen moment after
  `nvgpu.tma_store_commit`; `nvgpu.tma_store_wait N` blocks until at most N of the thread's
  groups are unread; writing a slot a store still reads is an error;
* named barriers count arriving warps (32 threads each) against the op's thread count;
  `nvgpu.cta_barrier` is barrier 0 over the whole CTA;
* `nvgpu.setmaxnreg` changes nothing but checks the register pool: an increase waits until
  the CTA's warpgroups fit 64K registers.

Errors are `NvgpuError`s naming the op's `file:line:col`; a schedule where everyone waits
raises the scheduler's `DeadlockError` with every barrier's state.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp
from xdsl.ir import Block, Operation

from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import INT_ARITH, THREADS_ATTR
from tawa_xdsl.dialects.tile import ReduceKind
from tawa_xdsl.interp.dtypes import InterpreterError, numpy_dtype
from tawa_xdsl.interp.engine import Blocked, Evaluator, Handler, Program, Return, sync_point
from tawa_xdsl.interp.fragments import (
    FRAGMENT_HANDLERS,
    WARPGROUP_THREADS,
    NvgpuError,
    PendingResult,
    coords_of,
    error,
    fragment_value,
    from_tile,
    to_tile,
)
from tawa_xdsl.interp.mbarrier import Barrier, BarrierArray
from tawa_xdsl.interp.scheduler import (
    Scheduler,
    ScheduleSpec,
    Task,
    TraceEvent,
    make_policy,
)
from tawa_xdsl.interp.tile import (
    HANDLERS,
    Descriptor,
    bind_arguments,
    find_kernel,
    normalize_grid,
)

REGISTER_FILE = 65536  # 32-bit registers per SM (one CTA per SM)
WARP_THREADS = 32


# --------------------------------------------------------------------------------- state


@dataclass
class Slot:
    """One smem slot: its contents, copies writing it, and the async reads not yet done."""

    data: np.ndarray
    writing: int = 0
    written: bool = False
    readers: list[PendingMma] = field(default_factory=list)
    store_readers: int = 0
    # The mbarrier (array, index) its last writer waited on before writing: the barrier a
    # consumer arrives on to release the slot.
    guard: tuple[BarrierArray, int] | None = None


@dataclass
class Smem:
    name: str
    type: nvgpu.SmemType
    slots: list[Slot]


@dataclass(eq=False)
class PendingMma:
    """A wgmma issued and not retired: what it will read, and where its result goes."""

    op: Operation
    a: tuple[Smem, int, int] | np.ndarray  # (buffer, slot, first row), or A's tile
    b: tuple[Smem, int]
    acc: Any
    result: PendingResult
    reads: list[tuple[Smem, int]] = field(default_factory=list)  # (buffer, slot) read


@dataclass(eq=False)
class PendingStore:
    op: nvgpu.TmaStoreOp
    desc: Descriptor
    offsets: list[int]
    smem: Smem
    slot: int


@dataclass
class Warpgroup:
    """One warpgroup's execution state: its active threads and its async operations."""

    index: int
    registers: int
    task: Task | None = None
    mask: np.ndarray = field(default_factory=lambda: np.ones(WARPGROUP_THREADS, bool))
    uncommitted: list[PendingMma] = field(default_factory=list)
    groups: deque[list[PendingMma]] = field(default_factory=deque)
    # Per thread: the mbarrier (array, index) it waited on last.
    last_wait: dict[int, tuple[BarrierArray, int]] = field(default_factory=dict)
    # Per thread: TMA stores issued but not committed, and committed groups not yet read.
    stores: dict[int, list[PendingStore]] = field(default_factory=dict)
    store_groups: dict[int, list[object]] = field(default_factory=dict)

    def threads(self) -> np.ndarray:
        return np.flatnonzero(self.mask)

    def unretired(self) -> list[PendingMma]:
        """The wgmmas issued and not yet retired by a wgmma_wait_group."""
        return [*itertools.chain.from_iterable(self.groups), *self.uncommitted]

    def warps_arriving(self) -> int:
        return int(self.mask.reshape(-1, WARP_THREADS).any(axis=1).sum())


@dataclass
class NamedBarrier:
    threads: int = 0
    arrived: int = 0
    generation: int = 0


@dataclass
class NvgpuState:
    """Everything the warpgroups of one program instance share."""

    threads: int
    objects: dict[Operation, Any] = field(default_factory=dict)  # allocations by op
    named: dict[int, NamedBarrier] = field(default_factory=dict)
    warpgroups: list[Warpgroup] = field(default_factory=list)
    in_flight: int = 0
    written: set[int] = field(default_factory=set)
    placed: dict[Operation, tuple[int, int]] = field(default_factory=dict)  # [start, end)

    def describe(self) -> str:
        lines = ["barrier states:"]
        for value in self.objects.values():
            if isinstance(value, BarrierArray):
                lines.append(value.describe())
        for ident, bar in sorted(self.named.items()):
            lines.append(f"  named barrier {ident}: {bar.arrived}/{bar.threads} threads arrived")
        lines.append(f"  copies in flight: {self.in_flight}")
        return "\n".join(lines)


def shared(ev: Evaluator) -> NvgpuState:
    return ev.state["nvgpu"]


def warpgroup(ev: Evaluator) -> Warpgroup:
    return ev.state["warpgroup"]


def at(value: Any, thread: int) -> Any:
    """One thread's value of a per-thread (`[128]`) or uniform operand."""
    return value[thread] if np.ndim(value) else value


def uniform(op: Operation, value: Any, mask: np.ndarray) -> Any:
    """The value all active threads agree on (loop bounds, a branch with results)."""
    if np.ndim(value) == 0:
        return value
    active = np.asarray(value)[mask]
    if active.size and not (active == active[0]).all():
        raise error(op, f"needs one value for all threads, got {sorted(set(active.tolist()))}")
    return active[0] if active.size else np.asarray(value)[0]


def point(op: Operation) -> Generator[Blocked]:
    """A scheduling point: other warpgroups and copies may move first."""
    yield Blocked(op, "scheduling point", lambda: True)


def collective(ev: Evaluator, op: Operation) -> Warpgroup:
    """The warpgroup running `op`, which all 128 of its threads must execute together."""
    wg = warpgroup(ev)
    if not wg.mask.all():
        raise error(op, f"must be run by all 128 threads of the warpgroup, got {wg.mask.sum()}")
    return wg


# -------------------------------------------------------------------------- control flow


def _if(ev: Evaluator, op: scf.IfOp, operands: list[Any]) -> Generator[Blocked, None, Any]:
    cond = operands[0]
    if np.ndim(cond) == 0:
        region = op.true_region if bool(cond) else op.false_region
        return (yield from ev.run_block(region.block)) if region.blocks else ()
    wg = warpgroup(ev)
    mask = wg.mask
    cond = np.asarray(cond, bool)
    branches = [(mask & cond, op.true_region), (mask & ~cond, op.false_region)]
    results: list[Any] = [None, None]
    try:
        for k, (part, region) in enumerate(branches):
            if part.any() and region.blocks:
                wg.mask = part
                results[k] = yield from ev.run_block(region.block)
    finally:
        wg.mask = mask
    if not op.results:
        return ()
    taken, other = results
    if taken is None or other is None:
        return taken if other is None else other
    return [_merge(op, cond, t, f) for t, f in zip(taken, other, strict=True)]


def _merge(op: Operation, cond: np.ndarray, on_true: Any, on_false: Any) -> Any:
    if isinstance(on_true, PendingResult) or isinstance(on_false, PendingResult):
        raise error(op, "yields an unretired wgmma result from a per-thread branch")
    shape = (-1,) + (1,) * (max(np.ndim(on_true), np.ndim(on_false), 1) - 1)
    return np.where(cond.reshape(shape), on_true, on_false)


def _for(ev: Evaluator, op: scf.ForOp, operands: list[Any]) -> Generator[Blocked, None, Any]:
    mask = warpgroup(ev).mask
    lower, upper, step = (int(uniform(op, v, mask)) for v in operands[:3])
    carried = operands[3:]
    if step <= 0:
        raise error(op, f"step must be positive, got {step}")
    dtype = numpy_dtype(op.body.block.args[0].type)
    for i in range(lower, upper, step):
        carried = yield from ev.run_block(op.body.block, [dtype.type(i), *carried])
    return carried


# ------------------------------------------------------------------- per-thread scalars

_SIGNED = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater}
_SIGNED[5] = np.greater_equal
_UNSIGNED = {6: np.less, 7: np.less_equal, 8: np.greater, 9: np.greater_equal}


def _unsigned(value: Any, type_: Any) -> Any:
    bits = type_.width.data if isinstance(type_, IntegerType) else 64
    return np.asarray(value, np.int64) % (1 << bits)


def _cmpi(ev: Evaluator, op: arith.CmpiOp, operands: list[Any]) -> tuple[Any]:
    a, b = operands
    predicate = op.predicate.value.data
    if predicate in _UNSIGNED:
        a, b = _unsigned(a, op.lhs.type), _unsigned(b, op.rhs.type)
        result = _UNSIGNED[predicate](a, b)
    else:
        result = _SIGNED[predicate](a, b)
    return (np.bool_(result) if np.ndim(result) == 0 else np.asarray(result),)


def _unsigned_binary(function: Callable[[Any, Any], Any]) -> Handler:
    def run(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[Any]:
        type_ = op.results[0].type
        a, b = (_unsigned(x, type_) for x in operands)
        if np.any(b == 0):
            raise error(op, "integer division by zero")
        result = np.asarray(function(a, b)).astype(numpy_dtype(type_))
        return (result if result.ndim else result[()],)

    return run


def _select(ev: Evaluator, op: arith.SelectOp, operands: list[Any]) -> tuple[Any]:
    cond, on_true, on_false = operands
    if np.ndim(cond) == 0:
        return (on_true if bool(cond) else on_false,)
    return (_merge(op, np.asarray(cond, bool), on_true, on_false),)


def _thread_index(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[np.ndarray]:
    return (np.arange(WARPGROUP_THREADS, dtype=np.int32),)


def _warpgroup_index(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[Any]:
    return (np.int32(warpgroup(ev).index),)


def _elect(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[np.ndarray]:
    """The lowest active lane of each warp."""
    mask = warpgroup(ev).mask.reshape(-1, WARP_THREADS)
    elected = np.zeros_like(mask)
    for warp, lanes in enumerate(mask):
        if lanes.any():
            elected[warp, int(np.argmax(lanes))] = True
    return (elected.reshape(-1),)


# ----------------------------------------------------------------------------- mbarriers


def place(op: nvgpu.SmemAllocOp | nvgpu.MBarrierAllocOp, state: NvgpuState) -> None:
    """Take the bytes legalize-nvgpu placed the allocation at; two allocations may not share
    a byte of the smem window."""
    if op.offset is None:
        raise error(op, "has no smem offset; run legalize-nvgpu first")
    start = op.offset.value.data
    end = start + nvgpu.allocation_bytes(op.results[0].type)
    for other, (lo, hi) in state.placed.items():
        if start < hi and lo < end:
            raise error(
                op,
                f"placed at smem bytes [{start}, {end}) overlaps "
                f"{other.results[0].name_hint or other.name} at [{lo}, {hi}) "
                f"({op_location(other)})",
            )
    state.placed[op] = (start, end)


def _alloc_barriers(ev: Evaluator, op: nvgpu.MBarrierAllocOp, operands: list[Any]) -> tuple:
    assert isinstance(op.bars.type, nvgpu.MBarrierType)
    name = op.bars.name_hint or "bar"
    count = op.bars.type.num_barriers
    objects = shared(ev).objects
    if op not in objects:
        place(op, shared(ev))
        objects[op] = BarrierArray(name, [Barrier() for _ in range(count)])
    return (objects[op],)


def _barrier(op: Operation, bars: BarrierArray, slot: Any) -> Barrier:
    s = int(slot)
    if not 0 <= s < len(bars.barriers):
        raise error(op, f"barrier slot {s} out of range 0..{len(bars.barriers) - 1}")
    return bars.barriers[s]


def _init(ev: Evaluator, op: nvgpu.MBarrierInitOp, operands: list[Any]) -> tuple[()]:
    for _ in warpgroup(ev).threads():
        for bar in operands[0].barriers:
            if bar.initialized:
                raise error(op, f"re-initializes {operands[0].name} (once per thread that runs it)")
            bar.init(op.count.value.data)
    return ()


def _arrive(ev: Evaluator, op: Operation, operands: list[Any]) -> Generator[Blocked, None, tuple]:
    yield from point(op)
    bars, slot = operands
    tx = op.tx_bytes.value.data if isinstance(op, nvgpu.MBarrierArriveExpectTxOp) else 0
    wg = warpgroup(ev)
    for t in wg.threads():
        index = int(at(slot, t))
        if not tx:
            check_release(op, wg, bars, index)
        _barrier(op, bars, index).arrive(op, tx)
    return ()


def check_release(op: Operation, wg: Warpgroup, bars: BarrierArray, index: int) -> None:
    """An arrive on the barrier that guards a slot releases it: none of the warpgroup's
    unretired wgmmas may still read that slot."""
    for mma in wg.unretired():
        for smem, slot in mma.reads:
            if smem.slots[slot].guard == (bars, index):
                raise error(
                    op,
                    f"releases slot {slot} of {smem.name} ({bars.name}[{index}]) while the "
                    f"wgmma at {op_location(mma.op)} still reads it: no wgmma_wait_group "
                    "retired that wgmma before the release",
                )


def _wait(ev: Evaluator, op: nvgpu.MBarrierWaitOp, operands: list[Any]) -> Generator[Blocked]:
    bars, slot, parity = operands
    yield from point(op)
    wg = warpgroup(ev)
    waits = {(int(at(slot, t)), int(at(parity, t)) & 1) for t in wg.threads()}
    for t in wg.threads():
        wg.last_wait[int(t)] = (bars, int(at(slot, t)))
    for s, p in sorted(waits):
        bar = _barrier(op, bars, s)
        if bar.bit == p:
            reason = f"try_wait.parity({p}) on {bars.name}[{s}], {bar.describe()}"
            yield from sync_point(op, reason, lambda bar=bar, p=p: bar.bit != p)
    return ()


# ---------------------------------------------------------------------- shared memory, TMA


def _alloc_smem(ev: Evaluator, op: nvgpu.SmemAllocOp, operands: list[Any]) -> tuple[Smem]:
    smem = op.buf.type
    assert isinstance(smem, nvgpu.SmemType)
    objects = shared(ev).objects
    if op not in objects:
        place(op, shared(ev))
        dtype = numpy_dtype(smem.element_type)
        slots = [Slot(np.full(smem.slot_shape, np.nan, dtype)) for _ in range(smem.slot_count)]
        objects[op] = Smem(op.buf.name_hint or "smem", smem, slots)
    return (objects[op],)


def slot_of(op: Operation, smem: Smem, slot: Any) -> Slot:
    s = int(slot)
    if not 0 <= s < len(smem.slots):
        raise error(op, f"slot {s} of {smem.name} out of range 0..{len(smem.slots) - 1}")
    return smem.slots[s]


def begin_write(
    op: Operation, smem: Smem, index: int, guard: tuple[BarrierArray, int] | None
) -> Slot:
    """A write into a slot is starting: nothing asynchronous may still read or write it.
    `guard` is the barrier the writing thread waited on last: the one that releases it."""
    slot = slot_of(op, smem, index)
    for reader in slot.readers:
        raise error(
            reader.op,
            f"wgmma read slot {index} of ring {smem.name} after it was released: "
            f"'{op.name}' at {op_location(op)} overwrites it before the wgmma_wait_group "
            "that retires the read",
        )
    if slot.store_readers:
        raise error(op, f"writes slot {index} of {smem.name} while a TMA store still reads it")
    if slot.writing:
        raise error(op, f"writes slot {index} of {smem.name} while a TMA copy still writes it")
    slot.guard = guard
    return slot


def readable(op: Operation, smem: Smem, index: int) -> Slot:
    slot = slot_of(op, smem, index)
    if slot.writing:
        raise error(op, f"reads slot {index} of {smem.name} while a TMA copy writes it")
    if not slot.written:
        raise error(op, f"reads slot {index} of {smem.name} before anything was written to it")
    return slot


def load_boxes(
    op: nvgpu.TmaLoadOp, desc: Descriptor, buf: nvgpu.SmemType, offsets: list[int]
) -> np.ndarray:
    """The slot as the box plan fills it: box k is a `rows x span` column slab read from the
    tensor at innermost coordinate `+ box_col_offsets[k]`, landing at slot byte
    `box_smem_offsets[k]` (which must start a slab; every slab must be written once)."""
    if op.box_smem_offsets is None or op.box_col_offsets is None:
        raise error(op, "has no box plan; run legalize-nvgpu first")
    boxes = zip(op.box_smem_offsets.get_values(), op.box_col_offsets.get_values(), strict=True)
    eb = nvgpu.element_bytes(buf.element_type)
    cols = buf.slot_shape[-1]
    rows = math.prod(buf.slot_shape) // cols
    span = buf.swizzle_bytes
    box_cols = span // eb if span and cols * eb > span else cols
    data = np.full((rows, cols), np.nan, numpy_dtype(buf.element_type))
    landed: set[int] = set()
    for smem_offset, col_offset in boxes:
        slab, rest = divmod(int(smem_offset), rows * box_cols * eb)
        if rest or not 0 <= slab < cols // box_cols or slab in landed:
            raise error(
                op,
                f"box at slot byte {smem_offset} does not start a free {rows}x{box_cols} "
                f"column slab of {buf}",
            )
        landed.add(slab)
        box = Descriptor(desc.array, (*desc.block_shape[:-1], box_cols))
        coords = [*offsets[:-1], offsets[-1] + int(col_offset)]
        data[:, slab * box_cols : (slab + 1) * box_cols] = box.load(coords).reshape(rows, -1)
    if len(landed) != cols // box_cols:
        raise error(op, f"box plan fills {len(landed)} of the {cols // box_cols} slabs of {buf}")
    return data.reshape(buf.slot_shape)


def _tma_load(ev: Evaluator, op: nvgpu.TmaLoadOp, operands: list[Any]) -> tuple[()]:
    desc, *rest = operands
    offsets, (smem, slot, bars, bar_slot) = rest[: len(op.offsets)], rest[len(op.offsets) :]
    state, wg = shared(ev), warpgroup(ev)
    for t in wg.threads():
        index = int(at(slot, t))
        target = begin_write(op, smem, index, wg.last_wait.get(int(t)))
        bar = _barrier(op, bars, at(bar_slot, t))
        target.writing += 1
        target.data = np.full_like(target.data, np.nan)  # partially written until it lands
        block = load_boxes(op, desc, smem.type, [int(at(o, t)) for o in offsets])
        state.in_flight += 1
        ev.state["scheduler"].spawn(
            Task(f"TMA -> {smem.name}[{index}]", _land(op, state, target, block, bar), "tma")
        )
    return ()


def _land(
    op: Operation, state: NvgpuState, slot: Slot, block: np.ndarray, bar: Barrier
) -> Generator[Blocked]:
    yield Blocked(op, "TMA copy in flight", lambda: True)
    slot.data, slot.written = block, True
    slot.writing -= 1
    state.in_flight -= 1
    bar.complete_tx(op, block.nbytes)


def _smem_store(ev: Evaluator, op: nvgpu.SmemStoreOp, operands: list[Any]) -> tuple[()]:
    """Every active thread stores the (uniform) tile: the same bytes, once in effect."""
    value, smem, slot = operands
    wg = warpgroup(ev)
    if wg.mask.any():
        guard = wg.last_wait.get(int(wg.threads()[0]))
        target = begin_write(op, smem, int(uniform(op, slot, wg.mask)), guard)
        target.data, target.written = np.array(value, copy=True), True
    return ()


def _smem_load(ev: Evaluator, op: nvgpu.SmemLoadOp, operands: list[Any]) -> Generator:
    smem, slot = operands
    yield from point(op)
    index = int(uniform(op, slot, warpgroup(ev).mask))
    return (readable(op, smem, index).data.copy(),)


def _tma_store(ev: Evaluator, op: nvgpu.TmaStoreOp, operands: list[Any]) -> tuple[()]:
    desc, *rest = operands
    offsets, (smem, slot) = rest[: len(op.offsets)], rest[len(op.offsets) :]
    wg = warpgroup(ev)
    for t in wg.threads():
        index = int(at(slot, t))
        readable(op, smem, index).store_readers += 1
        store = PendingStore(op, desc, [int(at(o, t)) for o in offsets], smem, index)
        wg.stores.setdefault(int(t), []).append(store)
    return ()


def _tma_store_commit(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[()]:
    wg, state = warpgroup(ev), shared(ev)
    for t in wg.threads():
        stores = wg.stores.pop(int(t), [])
        group = object()
        wg.store_groups.setdefault(int(t), []).append(group)
        task = _store_group(op, state, stores, wg.store_groups[int(t)], group)
        ev.state["scheduler"].spawn(Task(f"TMA store wg{wg.index}.{t}", task, "tma"))
    return ()


def _store_group(
    op: Operation,
    state: NvgpuState,
    stores: list[PendingStore],
    pending: list[object],
    group: object,
) -> Generator[Blocked]:
    yield Blocked(op, "TMA store in flight", lambda: True)
    for store in stores:
        data = store.smem.slots[store.slot].data
        store.desc.store(store.offsets, data.reshape(store.desc.block_shape))
        store.smem.slots[store.slot].store_readers -= 1
        state.written.add(id(store.desc.array))
    pending.remove(group)


def _tma_store_wait(ev: Evaluator, op: nvgpu.TmaStoreWaitOp, operands: list[Any]) -> Generator:
    wg, allowed = warpgroup(ev), op.pending.value.data
    yield from point(op)
    for t in wg.threads():
        groups = wg.store_groups.setdefault(int(t), [])
        if len(groups) > allowed:
            reason = f"cp.async.bulk.wait_group.read {allowed}: {len(groups)} store groups unread"
            yield from sync_point(op, reason, lambda g=groups: len(g) <= allowed)
    return ()


# ------------------------------------------------------------------------------------ wgmma


def _wgmma(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[PendingResult]:
    """Issue: only the registers (acc, an RS A operand) are taken now; smem is read later."""
    wg = collective(ev, op)
    read: list[Slot] = []
    if isinstance(op, nvgpu.WgmmaMmaAsyncOp):
        rows = 0 if op.a_row is None else 1
        a_smem, a_slot, *a_row = operands[: 2 + rows]
        b_smem, b_slot, acc = operands[2 + rows :]
        row = int(uniform(op, a_row[0], wg.mask)) if a_row else 0
        a_index = int(uniform(op, a_slot, wg.mask))
        a: tuple[Smem, int, int] | np.ndarray = (a_smem, a_index, row)
        read.append(readable(op, a_smem, a_index))
    else:
        a_value, b_smem, b_slot, acc = operands
        a = to_tile(op.a.type, fragment_value(op, a_value))
    b_index = int(uniform(op, b_slot, wg.mask))
    read.append(readable(op, b_smem, b_index))
    mma = PendingMma(op, a, (b_smem, b_index), acc, PendingResult(op))
    mma.reads = [(b_smem, b_index)] + ([(a[0], a[1])] if isinstance(a, tuple) else [])
    for slot in read:
        slot.readers.append(mma)
    wg.uncommitted.append(mma)
    return (mma.result,)


SPAN_OF_LAYOUT = {code: span for span, code in nvgpu.DESCRIPTOR_LAYOUT_CODE.items()}
FIELD = 0x3FFF  # a 14-bit descriptor field (start address, LBO, SBO) in 16-byte units


@dataclass(frozen=True)
class DescriptorPlan:
    """One smem operand's descriptor plan, decoded: swizzle span, LBO, SBO (bytes) and the
    byte offset of each instruction's operand in the slot."""

    span: int
    lbo: int
    sbo: int
    offsets: list[int]

    @staticmethod
    def of(op: Operation, bits: Any, steps: Any, start: int) -> DescriptorPlan:
        if bits is None or steps is None:
            raise error(op, "has no descriptor plan; run legalize-nvgpu first")
        value = bits.value.data & (2**64 - 1)  # an i64 attribute holds the bits signed
        if value & FIELD or (value >> 49) & 0x7:
            raise error(op, f"descriptor bits 0x{value:016X} set a start address or base offset")
        span = SPAN_OF_LAYOUT.get(value >> 62)
        if span is None:
            raise error(op, f"descriptor bits 0x{value:016X} name no swizzle layout")
        lbo = ((value >> 16) & FIELD) * nvgpu.DESCRIPTOR_UNIT
        sbo = ((value >> 32) & FIELD) * nvgpu.DESCRIPTOR_UNIT
        unit = nvgpu.DESCRIPTOR_UNIT
        return DescriptorPlan(span, lbo, sbo, [start + int(x) * unit for x in steps.get_values()])

    def check(self, op: Operation, smem: Smem, mn_major: bool) -> None:
        """The bits describe the slot's layout: its swizzle, 8-row core groups (SBO) and, for
        MN-major slots wider than the span, the distance between column slabs (LBO)."""
        buf = smem.type
        rows = math.prod(buf.slot_shape[:-1])
        wide = buf.slot_shape[-1] * nvgpu.element_bytes(buf.element_type) > self.span
        if self.span != buf.swizzle_bytes or self.sbo != 8 * self.span:
            raise error(
                op,
                f"descriptor of {smem.name} says swizzle {self.span} B, SBO {self.sbo} B; the "
                f"slot is {buf} (SBO {8 * buf.swizzle_bytes} B)",
            )
        if mn_major and wide and self.lbo != rows * self.span:
            raise error(
                op,
                f"descriptor of {smem.name} says LBO {self.lbo} B between column slabs; the "
                f"slot's slabs are {rows * self.span} B apart",
            )

    def k_major(self, op: Operation, smem: Smem, data: np.ndarray, n: int, rows: int, k: int):
        """The `rows x k` operand of instruction n of a K-major slot: a byte offset is
        slab * (slot rows * span) + row * span + byte within the row's span."""
        eb = nvgpu.element_bytes(smem.type.element_type)
        slab, rest = divmod(self.offsets[n], data.shape[0] * self.span)
        row, within = divmod(rest, self.span)
        col, odd = divmod(slab * self.span + within, eb)
        if odd or within + k * eb > self.span or row + rows > data.shape[0]:
            raise error(op, self.outside(smem, n, f"{rows}x{k} K-major"))
        if col + k > data.shape[1]:
            raise error(op, self.outside(smem, n, f"{rows}x{k} K-major"))
        return data[row : row + rows, col : col + k]

    def mn_major(self, op: Operation, smem: Smem, data: np.ndarray, n: int, k: int):
        """The `k x N` operand of instruction n of an MN-major slot: it starts at a K row of
        the first column slab and spans every column (slabs LBO apart)."""
        row, within = divmod(self.offsets[n], self.span)
        if within or row + k > data.shape[0]:
            raise error(op, self.outside(smem, n, f"{k}-row MN-major"))
        return data[row : row + k]

    def mn_major_block(self, op: Operation, smem: Smem, data: np.ndarray, n: int, k: int):
        """The `64 x k` A operand of instruction n of an MN-major (K x M) slot: it starts at a
        K row of one column slab (64 columns of M), slabs `K rows * span` bytes apart."""
        eb = nvgpu.element_bytes(smem.type.element_type)
        slab, rest = divmod(self.offsets[n], data.shape[0] * self.span)
        row, within = divmod(rest, self.span)
        cols = self.span // eb
        if within or row + k > data.shape[0] or (slab + 1) * cols > data.shape[1]:
            raise error(op, self.outside(smem, n, f"{k}-row MN-major A"))
        return data[row : row + k, slab * cols : (slab + 1) * cols].T

    def outside(self, smem: Smem, n: int, what: str) -> str:
        return (
            f"descriptor step {n} points at byte {self.offsets[n]} of a slot of {smem.name} "
            f"({smem.type}), where no {what} operand starts"
        )


def _retire(mma: PendingMma) -> None:
    """The wgmma's smem reads and math happen now: `result = acc + A @ B`, with A and B read
    instruction by instruction where the descriptor plans say (`legalize-nvgpu`)."""
    op = mma.op
    assert isinstance(op, nvgpu.WgmmaMmaAsyncOp | nvgpu.WgmmaMmaAsyncRsOp)
    b_smem, b_index = mma.b
    b_slot = readable(op, b_smem, b_index)
    b_slot.readers.remove(mma)
    rows, n = op.acc.type.get_shape()  # type: ignore[attr-defined]
    transposed = op.transpose_b is not None
    k = b_smem.type.slot_shape[0] if transposed else b_smem.type.slot_shape[1]
    blocks, k_steps = nvgpu.instruction_count(rows, k, b_smem.type.element_type)
    step = k // k_steps
    b_plan = DescriptorPlan.of(op, op.b_desc_bits, op.b_desc_steps, 0)
    b_plan.check(op, b_smem, transposed)
    if transposed:
        b = np.concatenate(
            [b_plan.mn_major(op, b_smem, b_slot.data, j, step) for j in range(k_steps)]
        )
    else:
        pieces = [b_plan.k_major(op, b_smem, b_slot.data, j, n, step) for j in range(k_steps)]
        b = np.concatenate(pieces, axis=1).T
    if isinstance(mma.a, tuple):
        a_smem, a_index, row = mma.a
        a_slot = readable(op, a_smem, a_index)
        a_slot.readers.remove(mma)
        mn_major = op.transpose_a is not None
        span = a_smem.type.swizzle_bytes
        # the descriptor starts at slot row `row` (K-major) or column slab row / 64 (MN-major)
        start = row * (a_smem.type.slot_shape[0] * span // 64 if mn_major else span)
        a_plan = DescriptorPlan.of(op, op.a_desc_bits, op.a_desc_steps, start)
        a_plan.check(op, a_smem, mn_major)
        block_rows = rows // blocks

        def a_operand(n: int) -> np.ndarray:
            if mn_major:
                return a_plan.mn_major_block(op, a_smem, a_slot.data, n, step)
            return a_plan.k_major(op, a_smem, a_slot.data, n, block_rows, step)

        a = np.concatenate(
            [
                np.concatenate([a_operand(bl * k_steps + j) for j in range(k_steps)], axis=1)
                for bl in range(blocks)
            ]
        )
    else:
        a = mma.a
    acc = to_tile(op.acc.type, fragment_value(op, mma.acc))
    # As tile.dot: products and sums in f64, rounded once to f32, then the accumulator added.
    product = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    mma.result.value = from_tile(op.result.type, product + acc.astype(np.float32))


def _wgmma_fence(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[()]:
    collective(ev, op)
    return ()


def _commit(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[()]:
    wg = collective(ev, op)
    wg.groups.append(wg.uncommitted)
    wg.uncommitted = []
    return ()


def _wait_group(ev: Evaluator, op: nvgpu.WgmmaWaitGroupOp, operands: list[Any]) -> Generator:
    wg = collective(ev, op)
    yield from point(op)
    while len(wg.groups) > op.pending.value.data:
        for mma in wg.groups.popleft():
            _retire(mma)
    return ()


# ------------------------------------------------------------ fragments and memory


def per_value(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A uniform or per-thread (`[128]`) operand as one number per thread and value."""
    return np.broadcast_to(np.asarray(value, np.int64).reshape(-1, 1), shape)


def _fragment_store(ev: Evaluator, op: nvgpu.FragmentStoreOp, operands: list[Any]) -> tuple:
    """Each active thread runs the store plan (`legalize-nvgpu`): store k writes the pair of
    values `store_values[k]`, `+ 1` at `(store_rows[k], store_cols[k])` from its layout origin
    (plus `row`); a fragment wider than a slot fills slots `slot`, `slot + 1`, ..., one
    column slab each."""
    value, smem, slot, *row = operands
    plan = op.plan()
    if plan is None:
        raise error(op, "has no store plan; run legalize-nvgpu first")
    values = fragment_value(op, value)
    mask = warpgroup(ev).mask
    ty = op.value.type
    assert isinstance(ty, nvgpu.FragmentType)
    row0, col0 = ty.layout_object.thread_origin(np.arange(WARPGROUP_THREADS), INT_ARITH)
    if row:
        row0 = row0 + per_value(row[0], (WARPGROUP_THREADS, 1))[:, 0]
    first = np.array([v + i for v, _, _ in plan for i in range(2)])
    rows = row0[:, None] + np.array([r for _, r, _ in plan for _ in range(2)])
    cols = col0[:, None] + np.array([c + i for _, _, c in plan for i in range(2)])
    slot_rows, slab = smem.type.slot_shape
    slots = per_value(slot, rows.shape) + cols // slab
    if ((rows < 0) | (rows >= slot_rows))[mask].any():
        raise error(op, f"store plan writes rows outside the {slot_rows}-row slot of {smem.name}")
    guard = warpgroup(ev).last_wait.get(int(np.argmax(mask)))
    for index in np.unique(slots[mask]):
        target = begin_write(op, smem, int(index), guard)
        mine = (slots == index) & mask[:, None]
        target.data[rows[mine], cols[mine] % slab] = values[:, first][mine]
        target.written = True
    return ()


def _fragment_store_global(
    ev: Evaluator, op: nvgpu.FragmentStoreGlobalOp, operands: list[Any]
) -> tuple[()]:
    """Each active thread runs the store plan (`legalize-nvgpu`): store k writes values
    `store_values[k]..` at `(store_rows[k], store_cols[k])` from the thread's layout origin
    (an accumulator's pair along the columns; a row vector's value along the plane's columns,
    by the first lane of each quad), when that position passes the clip test of every dim in
    `clip_dims`. An element the plan lets through outside the tensor is an error."""
    value, desc, *offsets = operands
    plan = op.plan()
    if plan is None or op.clip_dims is None:
        raise error(op, "has no store plan; run legalize-nvgpu first")
    values = fragment_value(op, value)
    ty = op.value.type
    assert isinstance(ty, nvgpu.FragmentType)
    row0, col0 = ty.layout_object.thread_origin(np.arange(WARPGROUP_THREADS), INT_ARITH)
    threads = warpgroup(ev).mask.copy()
    if ty.kind == nvgpu.FragmentLayout.WGMMA_ROW:
        threads &= col0 == 0
        row0, col0 = np.zeros_like(row0), row0
    clip = [int(d) for d in op.clip_dims.get_values()]
    lead = [np.full(WARPGROUP_THREADS, int(o)) for o in offsets[:-2]]
    base_row = per_value(offsets[-2], (WARPGROUP_THREADS, 1))[:, 0] + row0
    base_col = per_value(offsets[-1], (WARPGROUP_THREADS, 1))[:, 0] + col0
    for first, drow, dcol in plan:
        index = [*lead, base_row + drow, base_col + dcol]
        passes = threads.copy()
        for d in clip:
            passes &= index[d] < desc.array.shape[d]
        extent = desc.array.shape[-1]
        for i in range(op.store_width()):
            element = [*index[:-1], index[-1] + i]
            inside = [(x >= 0) & (x < n) for x, n in zip(element, desc.array.shape, strict=True)]
            outside = ~np.all(inside, axis=0)
            if i:
                # A pair straddling an odd last extent keeps its first element only: no
                # TMA-describable tensor has one (rows are 16-byte multiples), the CPU may.
                straddles = outside & np.all(inside[:-1], axis=0) & (index[-1] < extent)
                passes &= ~straddles
                outside &= ~straddles
            if (passes & outside).any():
                t = int(np.argmax(passes & outside))
                where = [int(x[t]) for x in element]
                raise error(
                    op,
                    f"thread {t} stores value {first + i} at {where}, outside the "
                    f"{list(desc.array.shape)} tensor: the clip plan (dims {clip}) lets it through",
                )
            desc.array[tuple(x[passes] for x in element)] = values[passes, first + i]
    shared(ev).written.add(id(desc.array))
    return ()


def _load_columns(ev: Evaluator, op: nvgpu.FragmentLoadColumnsOp, operands: list[Any]) -> tuple:
    smem, slot = operands
    index = int(uniform(op, slot, warpgroup(ev).mask))
    vector = readable(op, smem, index).data.reshape(-1).astype(np.float32)
    return (vector[coords_of(op.result.type)[1]],)


def _fragment_load(ev: Evaluator, op: nvgpu.FragmentLoadOp, operands: list[Any]) -> tuple:
    """Each thread reads its values of the slot's tile, from row `row` on."""
    smem, slot, *row = operands
    mask = warpgroup(ev).mask
    tile = readable(op, smem, int(uniform(op, slot, mask))).data
    rows, cols = coords_of(op.result.type)
    if row:
        rows = rows + per_value(row[0], rows.shape)
    return (tile[rows, cols].astype(tile.dtype),)


def _fragment_load_rows(ev: Evaluator, op: nvgpu.FragmentLoadRowsOp, operands: list[Any]) -> tuple:
    """Each thread reads its rows of the 1-D slot, from element `row` on."""
    smem, slot, *row = operands
    vector = readable(op, smem, int(uniform(op, slot, warpgroup(ev).mask))).data.reshape(-1)
    (rows,) = coords_of(op.result.type)
    if row:
        rows = rows + per_value(row[0], rows.shape)
    return (vector[rows],)


# ---------------------------------------------------------------- threads and registers


def _named_arrive(
    ev: Evaluator, op: Operation, ident: int, threads: int
) -> tuple[NamedBarrier, int]:
    bar = shared(ev).named.setdefault(ident, NamedBarrier())
    if bar.arrived == 0:
        bar.threads = threads
    elif bar.threads != threads:
        raise error(op, f"barrier {ident} expects {threads} threads, but {bar.threads} are in use")
    generation = bar.generation
    bar.arrived += WARP_THREADS * warpgroup(ev).warps_arriving()
    if bar.arrived > threads:
        raise error(op, f"{bar.arrived} threads arrived at barrier {ident} expecting {threads}")
    if bar.arrived == threads:
        bar.arrived, bar.generation = 0, generation + 1
    return bar, generation


def _bar_sync(ev: Evaluator, op: Operation, ident: int, threads: int) -> Generator[Blocked]:
    yield from point(op)
    bar, generation = _named_arrive(ev, op, ident, threads)
    if bar.generation == generation:
        reason = f"bar.sync {ident}, {threads}: {bar.arrived} threads arrived"
        yield from sync_point(op, reason, lambda: bar.generation != generation)
    return ()


def _named_sync(ev: Evaluator, op: nvgpu.NamedBarrierSyncOp, operands: list[Any]) -> Generator:
    return (yield from _bar_sync(ev, op, op.barrier_id.value.data, op.threads.value.data))


def _cta_barrier(ev: Evaluator, op: Operation, operands: list[Any]) -> Generator:
    return (yield from _bar_sync(ev, op, 0, shared(ev).threads))


def _named_arrive_op(
    ev: Evaluator, op: nvgpu.NamedBarrierArriveOp, operands: list[Any]
) -> Generator:
    yield from point(op)
    _named_arrive(ev, op, op.barrier_id.value.data, op.threads.value.data)
    return ()


def _setmaxnreg(ev: Evaluator, op: nvgpu.SetMaxNRegOp, operands: list[Any]) -> Generator:
    wg, state = collective(ev, op), shared(ev)
    registers = op.registers.value.data
    if not (24 <= registers <= 256 and registers % 8 == 0):
        raise error(op, f"registers must be a multiple of 8 in 24..256, got {registers}")
    increase = op.action.data == nvgpu.RegisterAction.INCREASE
    if wg.task is not None:  # what the IR says this warpgroup is, for the priority policies
        wg.task.role = "consumer" if increase else "producer"

    def fits() -> bool:
        others = sum(w.registers for w in state.warpgroups if w is not wg)
        return (others + registers) * WARPGROUP_THREADS <= REGISTER_FILE

    yield from point(op)
    if increase and not fits():
        reason = f"setmaxnreg.inc {registers}: the register file is full"
        yield from sync_point(op, reason, fits)
    wg.registers = registers
    return ()


def _no_op(ev: Evaluator, op: Operation, operands: list[Any]) -> tuple[()]:
    return ()


def _return(ev: Evaluator, op: func.ReturnOp, operands: list[Any]) -> None:
    raise Return(operands)


# ------------------------------------------------------ reshapes of fragments (register moves)


def _fragment_gather(ev: Evaluator, op: nvgpu.FragmentGatherOp, operands: list[Any]) -> tuple:
    """Each thread copies its own registers as the op's plan says: a plan that moved a
    column to other threads would leave the wrong element in the result tile."""
    sources = [fragment_value(op, v) for v in operands]
    plan = op.register_plan()
    return (np.stack([sources[s][:, v] for s, v in plan], axis=1),)


# ------------------------------------------- column vectors (reductions along axis 0)

COLUMN_COMBINE = {ReduceKind.MAX: np.fmax, ReduceKind.SUM: np.add}


def _column_match(source: Any, target: Any) -> np.ndarray:
    """`[128, target values, source values]`: a thread's source values in the column of
    each of its target values (accumulator <-> column vector)."""
    return coords_of(target)[-1][:, :, None] == coords_of(source)[-1][:, None, :]


def _column_reduce(ev: Evaluator, op: nvgpu.FragmentColumnReduceOp, operands: list[Any]):
    """The thread's values of each column in value order, then lanes 4, 8, 16 apart."""
    (source,) = [fragment_value(op, v) for v in operands]
    combine = COLUMN_COMBINE[op.kind.data]
    match = _column_match(op.source.type, op.result.type)
    result = np.full(match.shape[:2], np.nan, np.float32)
    for i in range(source.shape[1]):
        here = match[:, :, i]
        value = np.broadcast_to(source[:, i : i + 1], here.shape)
        result = np.where(here, np.where(np.isnan(result), value, combine(result, value)), result)
    for mask in (4, 8, 16):
        result = combine(result, result[np.arange(WARPGROUP_THREADS) ^ mask])
    return (result.astype(np.float32),)


def _column_stage(ev: Evaluator, op: nvgpu.FragmentColumnStageOp, operands: list[Any]) -> tuple:
    """The active threads of each warp's first lane row write row `warp` of the slot."""
    value, smem, slot = operands
    values = fragment_value(op, value)
    mask = warpgroup(ev).mask
    (cols,) = coords_of(op.value.type)
    threads = np.arange(WARPGROUP_THREADS)
    writers = mask & (threads % 32 < 4)
    guard = warpgroup(ev).last_wait.get(int(np.argmax(mask)))
    target = begin_write(op, smem, int(uniform(op, slot, mask)), guard)
    warps = np.broadcast_to((threads // 32)[:, None], cols.shape)
    target.data[warps[writers], cols[writers]] = values[writers]
    target.written = True
    return ()


def _column_combine(ev: Evaluator, op: nvgpu.FragmentColumnCombineOp, operands: list[Any]):
    """Every thread combines rows 0..3 (the warps) of its columns, in warp order."""
    smem, slot = operands
    data = readable(op, smem, int(uniform(op, slot, warpgroup(ev).mask))).data
    (cols,) = coords_of(op.result.type)
    result = data[0][cols]
    for warp in range(1, data.shape[0]):
        result = COLUMN_COMBINE[op.kind.data](result, data[warp][cols])
    return (result.astype(np.float32),)


def _broadcast_columns(ev: Evaluator, op: nvgpu.FragmentBroadcastColumnsOp, operands: list[Any]):
    (source,) = [fragment_value(op, v) for v in operands]
    match = _column_match(op.source.type, op.result.type)  # [128, acc values, column values]
    if not match.any(axis=-1).all():
        raise error(op, "a thread holds an accumulator value of a column it has no value for")
    return (np.take_along_axis(source, match.argmax(axis=-1), axis=1),)


def _store_columns(ev: Evaluator, op: nvgpu.FragmentStoreColumnsOp, operands: list[Any]):
    """Threads 0..3 (warp 0's first lane row, every column once) store their values along
    the last dim from `offsets[-1]`, inside the tensor only."""
    value, desc, *offsets = operands
    values = fragment_value(op, value)
    (cols,) = coords_of(op.value.type)
    threads = warpgroup(ev).mask & (np.arange(WARPGROUP_THREADS) < 4)
    index = [per_value(o, cols.shape) for o in offsets[:-1]]
    index.append(per_value(offsets[-1], cols.shape) + cols)
    inside = np.all([(x >= 0) & (x < n) for x, n in zip(index, desc.array.shape, strict=True)], 0)
    keep = threads[:, None] & inside
    desc.array[tuple(x[keep] for x in index)] = values[keep]
    shared(ev).written.add(id(desc.array))
    return ()


NVGPU_HANDLERS: dict[type[Operation], Handler] = {
    **HANDLERS,
    scf.IfOp: _if,
    scf.ForOp: _for,
    func.ReturnOp: _return,
    arith.CmpiOp: _cmpi,
    arith.SelectOp: _select,
    arith.RemUIOp: _unsigned_binary(np.remainder),
    arith.DivUIOp: _unsigned_binary(np.floor_divide),
    nvgpu.ThreadIndexOp: _thread_index,
    nvgpu.WarpgroupIndexOp: _warpgroup_index,
    nvgpu.ElectSyncOp: _elect,
    nvgpu.MBarrierAllocOp: _alloc_barriers,
    nvgpu.MBarrierInitOp: _init,
    nvgpu.MBarrierArriveOp: _arrive,
    nvgpu.MBarrierArriveExpectTxOp: _arrive,
    nvgpu.MBarrierWaitOp: _wait,
    nvgpu.FenceMBarrierInitOp: _no_op,
    nvgpu.CtaBarrierOp: _cta_barrier,
    nvgpu.SmemAllocOp: _alloc_smem,
    nvgpu.TmaLoadOp: _tma_load,
    nvgpu.SmemStoreOp: _smem_store,
    nvgpu.SmemLoadOp: _smem_load,
    nvgpu.TmaStoreOp: _tma_store,
    nvgpu.TmaStoreCommitOp: _tma_store_commit,
    nvgpu.TmaStoreWaitOp: _tma_store_wait,
    nvgpu.FenceProxyAsyncOp: _no_op,
    nvgpu.WgmmaFenceOp: _wgmma_fence,
    nvgpu.WgmmaCommitGroupOp: _commit,
    nvgpu.WgmmaWaitGroupOp: _wait_group,
    nvgpu.WgmmaMmaAsyncOp: _wgmma,
    nvgpu.WgmmaMmaAsyncRsOp: _wgmma,
    nvgpu.SetMaxNRegOp: _setmaxnreg,
    nvgpu.NamedBarrierSyncOp: _named_sync,
    nvgpu.NamedBarrierArriveOp: _named_arrive_op,
    nvgpu.FragmentStoreOp: _fragment_store,
    nvgpu.FragmentStoreGlobalOp: _fragment_store_global,
    nvgpu.FragmentLoadColumnsOp: _load_columns,
    nvgpu.FragmentLoadOp: _fragment_load,
    nvgpu.FragmentLoadRowsOp: _fragment_load_rows,
    nvgpu.FragmentGatherOp: _fragment_gather,
    nvgpu.FragmentColumnReduceOp: _column_reduce,
    nvgpu.FragmentColumnStageOp: _column_stage,
    nvgpu.FragmentColumnCombineOp: _column_combine,
    nvgpu.FragmentBroadcastColumnsOp: _broadcast_columns,
    nvgpu.FragmentStoreColumnsOp: _store_columns,
    **FRAGMENT_HANDLERS,
}
"""The op handlers of the nvgpu level, one per op class (tile-level handlers underneath)."""


# ----------------------------------------------------------------------------- launcher


def cta_threads(kernel: func.FuncOp) -> int:
    threads = kernel.attributes.get(THREADS_ATTR)
    if not isinstance(threads, IntegerAttr) or threads.value.data % WARPGROUP_THREADS:
        raise InterpreterError(
            f"@{kernel.sym_name.data} is not at the nvgpu level: it has no '{THREADS_ATTR}' "
            "attribute of whole warpgroups (run lower-to-nvgpu first)"
        )
    return threads.value.data


def _warpgroup_body(ev: Evaluator, body: Block, args: Sequence[Any]) -> Generator[Blocked]:
    try:
        yield from ev.run_block(body, args)
    except Return:
        pass
    wg = warpgroup(ev)
    if wg.uncommitted or wg.groups or any(wg.stores.values()):
        raise InterpreterError(
            f"warpgroup {wg.index} exited with {len(wg.uncommitted) + sum(map(len, wg.groups))} "
            f"wgmmas not retired and {sum(map(len, wg.stores.values()))} TMA stores not committed"
        )
    if any(wg.store_groups.values()):  # the CTA's smem goes away under a store still reading it
        raise InterpreterError(
            f"warpgroup {wg.index} exited with {sum(map(len, wg.store_groups.values()))} TMA "
            "store groups still reading shared memory (no tma_store_wait 0 before the exit)"
        )


def _check_finished(kernel: func.FuncOp, state: NvgpuState) -> None:
    leftover = [
        f"{bars.name}[{s}] tx {bar.tx}"
        for bars in state.objects.values()
        if isinstance(bars, BarrierArray)
        for s, bar in enumerate(bars.barriers)
        if bar.tx
    ]
    if state.in_flight or leftover:
        raise NvgpuError(
            f"@{kernel.sym_name.data}: warpgroups finished with {state.in_flight} copies in "
            f"flight, outstanding tx: {', '.join(leftover) or 'none'}"
        )


def run_nvgpu_kernel(
    module: ModuleOp,
    grid: Sequence[int] | int,
    args: Sequence[Any],
    kernel: str | None = None,
    schedule: ScheduleSpec = "random",
    trace: list[TraceEvent] | None = None,
) -> list[np.ndarray]:
    """Run every program of `grid` thread by thread; returns the arrays stored to."""
    kernel_op = find_kernel(module, kernel)
    values = bind_arguments(kernel_op, args)
    threads = cta_threads(kernel_op)
    grid3 = normalize_grid(grid)
    policy = make_policy(schedule)
    initial = min(256, REGISTER_FILE // threads // 8 * 8)  # registers per thread at launch
    written: set[int] = set()
    for program_id in itertools.product(*(range(g) for g in reversed(grid3))):
        program = Program(tuple(reversed(program_id)), grid3)  # type: ignore[arg-type]
        state = NvgpuState(threads)
        scheduler = Scheduler(policy, state.describe, trace, f"program {program.program_id}")
        for index in range(threads // WARPGROUP_THREADS):
            wg = Warpgroup(index, initial)
            state.warpgroups.append(wg)
            ev = Evaluator(
                NVGPU_HANDLERS,
                program,
                state={"nvgpu": state, "warpgroup": wg, "scheduler": scheduler},
            )
            body = _warpgroup_body(ev, kernel_op.body.block, values)
            wg.task = scheduler.spawn(Task(f"warpgroup {index}", body))
        scheduler.run()
        _check_finished(kernel_op, state)
        written |= state.written
    return [v.array for v in values if isinstance(v, Descriptor) and id(v.array) in written]
