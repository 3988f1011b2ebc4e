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

Shared memory is bytes (`SharedMemory`, one window per CTA, 0xFF -- a NaN -- until written),
and the legalize-nvgpu plan is what runs on them, so a wrong plan shows here as it would on
the GPU:

* every `smem_alloc` / `mbarrier_alloc` takes the bytes its `offset` says, slot k of a buffer
  those from `offset + k * slot_stride` on; two allocations sharing a byte is an error;
* TMA swizzles by address as the hardware does (`swizzle_address`, the buffer's span): a load
  lands box by box where the box plan says (slot byte, innermost coordinate), each box's rows
  packed, and must write every element of its slot once; a TMA store reads its slot the same
  way;
* a wgmma reads each instruction's operand from the bytes its descriptor points at: the
  constant bits are decoded (swizzle span, LBO, SBO), the start is the slot's address plus
  `a_row * a_row_pitch` plus the step, and each element's byte is swizzled by address (a
  start no operand can start at, or an operand leaving its slot, is an error; a wrong but
  possible plan a wrong result);
* fragment stores and loads (`ld/st.shared`) address each element as their address plan says
  (`slot_byte`: row and slab pitch, the XOR by row); a global store drops what its planned
  clip tests drop, and an element the plan lets through outside the tensor is an error.
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
from tawa_xdsl.dialects.nvgpu.fragment import slot_byte
from tawa_xdsl.dialects.nvgpu.types import swizzle_address
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
    """One smem slot's bookkeeping (its bytes are the CTA's `SharedMemory` from `start` on):
    copies writing it, and the async reads not yet done."""

    start: int
    writing: int = 0
    written: bool = False
    readers: list[PendingMma] = field(default_factory=list)
    store_readers: int = 0
    # The mbarrier (array, index) its last writer waited on before writing: the barrier a
    # consumer arrives on to release the slot.
    guard: tuple[BarrierArray, int] | None = None


UNWRITTEN = 0xFF  # a byte never written: 0xFF.. is a NaN in every float format


@dataclass
class SharedMemory:
    """The CTA's dynamic smem window, byte by byte (byte 0 is the 1024-aligned window base)."""

    data: np.ndarray

    @staticmethod
    def sized(nbytes: int) -> SharedMemory:
        return SharedMemory(np.full(nbytes, UNWRITTEN, np.uint8))

    def bytes_of(self, op: Operation, addresses: np.ndarray, itemsize: int) -> np.ndarray:
        """The byte indices of the `itemsize`-byte elements starting at `addresses`."""
        addresses = np.asarray(addresses, np.int64)
        if addresses.size and (addresses.min() < 0 or addresses.max() + itemsize > self.data.size):
            bad = int(addresses.min()) if addresses.min() < 0 else int(addresses.max())
            raise error(op, f"reaches byte {bad}, outside the {self.data.size}-byte smem window")
        return addresses[..., None] + np.arange(itemsize)

    def read(self, op: Operation, addresses: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """The elements of `dtype` at byte `addresses` (one per address, same shape)."""
        raw = self.data[self.bytes_of(op, addresses, dtype.itemsize)]
        return raw.view(dtype).reshape(np.shape(addresses))

    def write(self, op: Operation, addresses: np.ndarray, values: np.ndarray) -> None:
        """Store `values` (one element per address) at byte `addresses`."""
        values = np.ascontiguousarray(values)
        raw = values.view(np.uint8).reshape(*np.shape(addresses), values.dtype.itemsize)
        self.data[self.bytes_of(op, addresses, values.dtype.itemsize)] = raw

    def clear(self, start: int, nbytes: int) -> None:
        self.data[start : start + nbytes] = UNWRITTEN


@dataclass
class Smem:
    """One placed buffer: slot k starts at byte `offset + k * stride` of `memory`."""

    name: str
    type: nvgpu.SmemType
    slots: list[Slot]
    offset: int
    stride: int
    memory: SharedMemory

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.type.element_type)

    def slot_index(self, addresses: np.ndarray) -> np.ndarray:
        """Which slot each byte address lies in (-1 or past the count: outside the buffer)."""
        index = (np.asarray(addresses, np.int64) - self.offset) // self.stride
        return np.where(np.asarray(addresses) < self.offset, -1, index)

    def tile_addresses(self, index: int) -> np.ndarray:
        """The byte of every element of slot `index` as TMA lays a slot out: column slabs of
        the swizzle span, rows `row_pitch` apart, 16-byte chunks swizzled by address."""
        buf = self.type
        eb = nvgpu.element_bytes(buf.element_type)
        rows, cols = buf.slot_rows(), buf.slot_shape[-1]
        r, x = np.arange(rows)[:, None], np.arange(cols)[None, :] * eb
        slab, within = x // buf.row_pitch(), x % buf.row_pitch()
        start = self.slots[index].start
        linear = start + slab * buf.slab_pitch() + r * buf.row_pitch() + within
        return swizzle_address(linear, buf.swizzle_bytes).reshape(buf.slot_shape)

    def read_tile(self, op: Operation, index: int) -> np.ndarray:
        return self.memory.read(op, self.tile_addresses(index), self.dtype)


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
    memory: SharedMemory = field(default_factory=lambda: SharedMemory.sized(0))

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
    """Take the bytes legalize-nvgpu placed the allocation at (every slot at its stride); two
    allocations may not share a byte of the smem window."""
    if op.offset is None or isinstance(op, nvgpu.SmemAllocOp) and op.slot_stride is None:
        raise error(op, "has no smem offset; run legalize-nvgpu first")
    start = op.offset.value.data
    end = start + op.placed_bytes()
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
    state = shared(ev)
    if op not in state.objects:
        place(op, state)
        assert op.offset is not None and op.slot_stride is not None
        offset, stride = op.offset.value.data, op.slot_stride.value.data
        slots = [Slot(offset + k * stride) for k in range(smem.slot_count)]
        name = op.buf.name_hint or "smem"
        state.objects[op] = Smem(name, smem, slots, offset, stride, state.memory)
    return (state.objects[op],)


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
    op: nvgpu.TmaLoadOp, desc: Descriptor, smem: Smem, index: int, offsets: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """(byte addresses, values) of what the box plan's copies write into slot `index`: box k
    is a `rows x box columns` block of the tensor from innermost coordinate
    `+ box_col_offsets[k]` on, its rows packed from slot byte `box_smem_offsets[k]` on, its
    16-byte chunks swizzled by address (the tensor map's swizzle is the buffer's). The boxes
    must write every byte of the slot once and nothing else."""
    if op.box_smem_offsets is None or op.box_col_offsets is None:
        raise error(op, "has no box plan; run legalize-nvgpu first")
    boxes = zip(op.box_smem_offsets.get_values(), op.box_col_offsets.get_values(), strict=True)
    buf = smem.type
    eb = nvgpu.element_bytes(buf.element_type)
    cols, rows, span = buf.slot_shape[-1], buf.slot_rows(), buf.swizzle_bytes
    box_cols = span // eb if span and cols * eb > span else cols
    start = smem.slots[index].start
    addresses, values = [], []
    for smem_offset, col_offset in boxes:
        box = Descriptor(desc.array, (*desc.block_shape[:-1], box_cols))
        coords = [*offsets[:-1], offsets[-1] + int(col_offset)]
        values.append(box.load(coords).reshape(rows, box_cols))
        r, c = np.arange(rows)[:, None], np.arange(box_cols)[None, :]
        linear = start + int(smem_offset) + (r * box_cols + c) * eb
        addresses.append(swizzle_address(linear, span))
    written = np.concatenate([a.reshape(-1) for a in addresses])
    inside = (written >= start) & (written < start + buf.slot_bytes())
    if not inside.all() or np.unique(written).size != buf.slot_bytes() // eb:
        raise error(
            op,
            f"box plan (slot bytes {list(op.box_smem_offsets.get_values())}) does not write "
            f"each element of a slot of {buf} once: boxes overlap or leave the slot",
        )
    return written, np.concatenate([v.reshape(-1) for v in values])


def _tma_load(ev: Evaluator, op: nvgpu.TmaLoadOp, operands: list[Any]) -> tuple[()]:
    desc, *rest = operands
    offsets, (smem, slot, bars, bar_slot) = rest[: len(op.offsets)], rest[len(op.offsets) :]
    state, wg = shared(ev), warpgroup(ev)
    for t in wg.threads():
        index = int(at(slot, t))
        target = begin_write(op, smem, index, wg.last_wait.get(int(t)))
        bar = _barrier(op, bars, at(bar_slot, t))
        target.writing += 1
        smem.memory.clear(target.start, smem.type.slot_bytes())  # partly written until it lands
        block = load_boxes(op, desc, smem, index, [int(at(o, t)) for o in offsets])
        state.in_flight += 1
        ev.state["scheduler"].spawn(
            Task(f"TMA -> {smem.name}[{index}]", _land(op, state, smem, target, block, bar), "tma")
        )
    return ()


def _land(
    op: Operation,
    state: NvgpuState,
    smem: Smem,
    slot: Slot,
    block: tuple[np.ndarray, np.ndarray],
    bar: Barrier,
) -> Generator[Blocked]:
    yield Blocked(op, "TMA copy in flight", lambda: True)
    addresses, values = block
    smem.memory.write(op, addresses, values)
    slot.written = True
    slot.writing -= 1
    state.in_flight -= 1
    bar.complete_tx(op, values.nbytes)


def _smem_store(ev: Evaluator, op: nvgpu.SmemStoreOp, operands: list[Any]) -> tuple[()]:
    """Every active thread stores the (uniform) tile in the slot's TMA layout: the same
    bytes, once in effect."""
    value, smem, slot = operands
    wg = warpgroup(ev)
    if wg.mask.any():
        guard = wg.last_wait.get(int(wg.threads()[0]))
        index = int(uniform(op, slot, wg.mask))
        target = begin_write(op, smem, index, guard)
        smem.memory.write(op, smem.tile_addresses(index), np.asarray(value, smem.dtype))
        target.written = True
    return ()


def _smem_load(ev: Evaluator, op: nvgpu.SmemLoadOp, operands: list[Any]) -> Generator:
    smem, slot = operands
    yield from point(op)
    index = int(uniform(op, slot, warpgroup(ev).mask))
    readable(op, smem, index)
    return (smem.read_tile(op, index),)


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
        data = store.smem.read_tile(store.op, store.slot)
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
    start byte of each instruction's operand in the smem window."""

    span: int
    lbo: int
    sbo: int
    starts: list[int]

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

    def read(
        self, op: Operation, smem: Smem, index: int, n: int, shape: tuple[int, int], k_major: bool
    ) -> np.ndarray:
        """The `shape` (rows x k, K-major; k x columns, MN-major) operand of instruction n, read
        where the hardware reads it: K-major element (m, kk) at byte
        `start + (m / 8) SBO + (m mod 8) span + kk eb`; MN-major element (kk, j) at
        `start + (j / (span / eb)) LBO + (kk / 8) SBO + (kk mod 8) span + (j mod span/eb) eb`;
        both swizzled by address. Every byte must lie in the slot the op names."""
        eb = nvgpu.element_bytes(smem.type.element_type)
        start = self.starts[n]
        first, second = (np.arange(d) for d in shape)
        if k_major:
            m, kk = first[:, None], second[None, :]
            linear = start + m // 8 * self.sbo + m % 8 * self.span + kk * eb
            fits = start % self.span + shape[1] * eb <= self.span
        else:
            kk, j = first[:, None], second[None, :]
            per_span = self.span // eb
            linear = start + j // per_span * self.lbo + kk // 8 * self.sbo + kk % 8 * self.span
            linear = linear + j % per_span * eb
            fits = start % self.span == 0
        slot = smem.slots[index].start
        inside = (linear >= slot) & (linear < slot + smem.type.slot_bytes())
        if not fits or not inside.all():
            form = "K-major" if k_major else "MN-major"
            raise error(
                op,
                f"descriptor step {n} points at byte {start - slot} of a slot of {smem.name} "
                f"({smem.type}), where no {shape[0]}x{shape[1]} {form} operand starts",
            )
        return smem.memory.read(op, swizzle_address(linear, self.span), smem.dtype)


def _retire(mma: PendingMma) -> None:
    """The wgmma's smem reads and math happen now: `result = acc + A @ B`, with A and B read
    instruction by instruction from the bytes their descriptor plans point at
    (`legalize-nvgpu`)."""
    op = mma.op
    assert isinstance(op, nvgpu.WgmmaMmaAsyncOp | nvgpu.WgmmaMmaAsyncRsOp)
    b_smem, b_index = mma.b
    b_slot = readable(op, b_smem, b_index)
    b_slot.readers.remove(mma)
    rows, n = op.acc.type.get_shape()  # type: ignore[attr-defined]
    blocks, k_steps = op.instructions()
    k = (b_smem.type.slot_shape[0] if op.transpose_b else b_smem.type.slot_shape[1]) // k_steps
    b_plan = DescriptorPlan.of(op, op.b_desc_bits, op.b_desc_steps, b_slot.start)
    if op.transpose_b is not None:
        pieces = [b_plan.read(op, b_smem, b_index, j, (k, n), False) for j in range(k_steps)]
        b = np.concatenate(pieces)
    else:
        pieces = [b_plan.read(op, b_smem, b_index, j, (n, k), True) for j in range(k_steps)]
        b = np.concatenate(pieces, axis=1).T
    if isinstance(mma.a, tuple):
        a_smem, a_index, row = mma.a
        a_slot = readable(op, a_smem, a_index)
        a_slot.readers.remove(mma)
        pitch = 0 if op.a_row_pitch is None else op.a_row_pitch.value.data
        a_plan = DescriptorPlan.of(op, op.a_desc_bits, op.a_desc_steps, a_slot.start + row * pitch)
        block_rows = rows // blocks

        def a_operand(i: int) -> np.ndarray:
            if op.transpose_a is not None:
                return a_plan.read(op, a_smem, a_index, i, (k, block_rows), False).T
            return a_plan.read(op, a_smem, a_index, i, (block_rows, k), True)

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


def address_plan(op: nvgpu.FragmentStoreOp | nvgpu.FragmentLoadOp) -> tuple[int, int, int]:
    if op.row_pitch is None or op.slab_pitch is None or op.swizzle is None:
        raise error(op, "has no address plan; run legalize-nvgpu first")
    return op.row_pitch.value.data, op.slab_pitch.value.data, op.swizzle.value.data


def planned_bytes(
    op: nvgpu.FragmentStoreOp | nvgpu.FragmentLoadOp,
    smem: Smem,
    slot: Any,
    rows: np.ndarray,
    cols: np.ndarray,
) -> np.ndarray:
    """The byte addresses of elements (rows, cols) of slot `slot` under the op's address
    plan (`slot_byte`), as the printed ld/st.shared compute them."""
    row_pitch, slab_pitch, swizzle = address_plan(op)
    eb = nvgpu.element_bytes(smem.type.element_type)
    start = smem.offset + per_value(slot, rows.shape) * smem.stride
    return start + slot_byte(rows, cols * eb, row_pitch, slab_pitch, swizzle)


def touched_slots(op: Operation, smem: Smem, addresses: np.ndarray) -> np.ndarray:
    """The slot of each address; an address outside the buffer is an error."""
    slots = smem.slot_index(addresses)
    if ((slots < 0) | (slots >= len(smem.slots))).any():
        raise error(op, f"reaches bytes outside the {len(smem.slots)} slots of {smem.name}")
    return slots


def _fragment_store(ev: Evaluator, op: nvgpu.FragmentStoreOp, operands: list[Any]) -> tuple:
    """Each active thread runs the store plan (`legalize-nvgpu`): store k writes the pair of
    values `store_values[k]`, `+ 1` at `(store_rows[k], store_cols[k])` from its layout origin
    (plus `row`), at the bytes the address plan gives them (a fragment wider than a slot
    fills slots `slot`, `slot + 1`, ...: its column slabs are a slot apart)."""
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
    addresses = planned_bytes(op, smem, slot, rows, cols)
    slots = touched_slots(op, smem, addresses[mask])
    guard = warpgroup(ev).last_wait.get(int(np.argmax(mask)))
    for index in np.unique(slots):
        begin_write(op, smem, int(index), guard).written = True
    smem.memory.write(op, addresses[mask], values[:, first][mask].astype(smem.dtype))
    return ()


def _fragment_store_global(
    ev: Evaluator, op: nvgpu.FragmentStoreGlobalOp, operands: list[Any]
) -> tuple[()]:
    """Each active thread runs the store plan (`legalize-nvgpu`): store k writes values
    `store_values[k]..` at `(store_rows[k], store_cols[k])` from the thread's layout origin
    (an accumulator's pair along the columns; a row vector's value along the plane's columns,
    or along a rank-1 descriptor, by the first lane of each quad), when that position passes
    the clip test of every dim in `clip_dims`. An element the plan lets through outside the
    tensor is an error."""
    value, desc, *offsets = operands
    plan = op.plan()
    if plan is None or op.clip_dims is None:
        raise error(op, "has no store plan; run legalize-nvgpu first")
    values = fragment_value(op, value)
    ty = op.value.type
    assert isinstance(ty, nvgpu.FragmentType)
    origin = ty.layout_object.thread_origin(np.arange(WARPGROUP_THREADS), INT_ARITH)
    row0, col0 = origin
    threads = warpgroup(ev).mask.copy()
    if ty.kind == nvgpu.FragmentLayout.WGMMA_ROW:
        threads &= origin[nvgpu.WGMMA_ROW.copy_axis] == 0
        row0, col0 = np.zeros_like(row0), row0
    clip = [int(d) for d in op.clip_dims.get_values()]
    lead = [np.full(WARPGROUP_THREADS, int(o)) for o in offsets[:-2]]
    base_col = per_value(offsets[-1], (WARPGROUP_THREADS, 1))[:, 0] + col0
    if len(offsets) == 1:  # a row vector through a rank-1 descriptor: no plane row
        plane: list[np.ndarray] = []
    else:
        plane = [per_value(offsets[-2], (WARPGROUP_THREADS, 1))[:, 0] + row0]
    for first, drow, dcol in plan:
        index = [*lead, *(row + drow for row in plane), base_col + dcol]
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


def read_planned(op: Operation, smem: Smem, addresses: np.ndarray) -> np.ndarray:
    """The elements at `addresses`, every slot they lie in readable."""
    for index in np.unique(touched_slots(op, smem, addresses)):
        readable(op, smem, int(index))
    return smem.memory.read(op, addresses, smem.dtype)


def _load_columns(ev: Evaluator, op: nvgpu.FragmentLoadColumnsOp, operands: list[Any]) -> tuple:
    """Each thread reads element c of the (unswizzled) vector slot for its values of column c."""
    smem, slot = operands
    index = int(uniform(op, slot, warpgroup(ev).mask))
    cols = coords_of(op.result.type)[1]
    eb = nvgpu.element_bytes(smem.type.element_type)
    addresses = smem.slots[index].start + cols * eb
    return (read_planned(op, smem, addresses).astype(np.float32),)


def _fragment_load(ev: Evaluator, op: nvgpu.FragmentLoadOp, operands: list[Any]) -> tuple:
    """Each thread reads its values of the slot's tile, from row `row` on, at the bytes the
    address plan gives them."""
    smem, slot, *row = operands
    index = int(uniform(op, slot, warpgroup(ev).mask))
    rows, cols = coords_of(op.result.type)
    if row:
        rows = rows + per_value(row[0], rows.shape)
    return (read_planned(op, smem, planned_bytes(op, smem, index, rows, cols)),)


def _fragment_load_rows(ev: Evaluator, op: nvgpu.FragmentLoadRowsOp, operands: list[Any]) -> tuple:
    """Each thread reads its rows of the 1-D (unswizzled) slot, from element `row` on."""
    smem, slot, *row = operands
    index = int(uniform(op, slot, warpgroup(ev).mask))
    (rows,) = coords_of(op.result.type)
    if row:
        rows = rows + per_value(row[0], rows.shape)
    eb = nvgpu.element_bytes(smem.type.element_type)
    return (read_planned(op, smem, smem.slots[index].start + rows * eb),)


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
    """The thread's values of each column in value order, then a butterfly over the lanes
    holding the same columns (the layout's `copy_lane_masks`)."""
    (source,) = [fragment_value(op, v) for v in operands]
    combine = COLUMN_COMBINE[op.kind.data]
    match = _column_match(op.source.type, op.result.type)
    result = np.full(match.shape[:2], np.nan, np.float32)
    for i in range(source.shape[1]):
        here = match[:, :, i]
        value = np.broadcast_to(source[:, i : i + 1], here.shape)
        result = np.where(here, np.where(np.isnan(result), value, combine(result, value)), result)
    for mask in nvgpu.WGMMA_COL.copy_lane_masks():
        result = combine(result, result[np.arange(WARPGROUP_THREADS) ^ mask])
    return (result.astype(np.float32),)


def _partials_plan(op: nvgpu.FragmentColumnStageOp | nvgpu.FragmentColumnCombineOp):
    """(row pitch, value columns, rows) of the op's partials plan (`legalize-nvgpu`)."""
    rows = op.warp_rows if isinstance(op, nvgpu.FragmentColumnStageOp) else op.partial_rows
    if op.row_pitch is None or op.value_cols is None or rows is None:
        raise error(op, "has no partials plan; run legalize-nvgpu first")
    return op.row_pitch.value.data, np.array(op.value_cols.get_values()), rows.value.data


def in_slot(op: Operation, smem: Smem, index: int, addresses: np.ndarray) -> np.ndarray:
    """`addresses`, each of which must lie in slot `index` of `smem`."""
    if (touched_slots(op, smem, addresses) != index).any():
        raise error(op, f"reaches bytes outside slot {index} of {smem.name}")
    return addresses


def _column_stage(ev: Evaluator, op: nvgpu.FragmentColumnStageOp, operands: list[Any]) -> tuple:
    """Each active thread whose origin row r is a multiple of `warp_rows` writes value v at
    partials row `row + r / warp_rows`, column `origin + value_cols[v]` (the partials plan)."""
    value, smem, slot, *row = operands
    values = fragment_value(op, value)
    pitch, cols, warp_rows = _partials_plan(op)
    row0, col0 = op.value.type.layout_object.thread_origin(np.arange(WARPGROUP_THREADS), INT_ARITH)
    mask = warpgroup(ev).mask
    writers = mask & (row0 % warp_rows == 0)
    rows = row0 // warp_rows
    if row:
        rows = rows + per_value(row[0], (WARPGROUP_THREADS, 1))[:, 0]
    guard = warpgroup(ev).last_wait.get(int(np.argmax(mask)))
    index = int(uniform(op, slot, mask))
    target = begin_write(op, smem, index, guard)
    eb = smem.dtype.itemsize
    addresses = target.start + (rows * pitch + eb * col0)[:, None] + eb * cols
    addresses = in_slot(op, smem, index, addresses[writers])
    smem.memory.write(op, addresses, values[writers].astype(np.float32))
    target.written = True
    return ()


def _column_combine(ev: Evaluator, op: nvgpu.FragmentColumnCombineOp, operands: list[Any]):
    """Every thread combines partials rows 0 .. partial_rows - 1 of its columns, in order."""
    smem, slot = operands
    pitch, cols, rows = _partials_plan(op)
    index = int(uniform(op, slot, warpgroup(ev).mask))
    start = readable(op, smem, index).start
    _, col0 = op.result.type.layout_object.thread_origin(np.arange(WARPGROUP_THREADS), INT_ARITH)
    eb = smem.dtype.itemsize
    columns = start + eb * (col0[:, None] + cols)

    def row(k: int) -> np.ndarray:  # partials row k, one f32 per value
        addresses = in_slot(op, smem, index, columns + k * pitch)
        return smem.memory.read(op, addresses, np.dtype(np.float32))

    result = row(0)
    for k in range(1, rows):
        result = COLUMN_COMBINE[op.kind.data](result, row(k))
    return (result.astype(np.float32),)


def _broadcast_columns(ev: Evaluator, op: nvgpu.FragmentBroadcastColumnsOp, operands: list[Any]):
    (source,) = [fragment_value(op, v) for v in operands]
    match = _column_match(op.source.type, op.result.type)  # [128, acc values, column values]
    if not match.any(axis=-1).all():
        raise error(op, "a thread holds an accumulator value of a column it has no value for")
    return (np.take_along_axis(source, match.argmax(axis=-1), axis=1),)


def _store_columns(ev: Evaluator, op: nvgpu.FragmentStoreColumnsOp, operands: list[Any]):
    """The threads holding one copy of every column (origin 0 on the layout's `copy_axis`:
    warp 0's first lane row) store their values along the last dim from `offsets[-1]`,
    inside the tensor only."""
    value, desc, *offsets = operands
    values = fragment_value(op, value)
    (cols,) = coords_of(op.value.type)
    layout = nvgpu.WGMMA_COL
    origin = layout.thread_origin(np.arange(WARPGROUP_THREADS), INT_ARITH)
    threads = warpgroup(ev).mask & (origin[layout.copy_axis] == 0)
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


def window_bytes(kernel: func.FuncOp) -> int:
    """The end of the last placed allocation: the bytes of smem window the kernel uses."""
    ends = [
        op.offset.value.data + op.placed_bytes()
        for op in kernel.walk()
        if isinstance(op, nvgpu.SmemAllocOp | nvgpu.MBarrierAllocOp)
        and op.offset is not None
        and (isinstance(op, nvgpu.MBarrierAllocOp) or op.slot_stride is not None)
    ]
    return max(ends, default=0)


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
    window = window_bytes(kernel_op)
    grid3 = normalize_grid(grid)
    policy = make_policy(schedule)
    initial = min(256, REGISTER_FILE // threads // 8 * 8)  # registers per thread at launch
    written: set[int] = set()
    for program_id in itertools.product(*(range(g) for g in reversed(grid3))):
        program = Program(tuple(reversed(program_id)), grid3)  # type: ignore[arg-type]
        state = NvgpuState(threads, memory=SharedMemory.sized(window))
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
