"""`lower-to-nvgpu`: from the mbarrier level (what `lower-aref` produces) to the nvgpu level.

Input: a kernel whose body holds `nvgpu.mbarrier_init`s and one `aref.warp_specialize` of
`aref.group`s; barrier ops, TMA copies and `nvgpu.smem_load`s of ring slots are explicit, and
ops run once per warpgroup. Output: the same kernel as every thread of the CTA runs it, which
`emit-ptx` prints:

1. **Threads.** Every smem and barrier allocation moves to the kernel's entry; the barrier
   inits (and their fence) run in thread 0 of the CTA. The groups become an `scf.if` chain
   on `nvgpu.warpgroup_index` (the producer is warpgroup 0, the consumers follow), each
   branch starting with `nvgpu.setmaxnreg` (decrease for the producer, increase for
   consumers: the group's register budget). The kernel gets `nvgpu.threads = 128 x
   warpgroups`. `aref.warpgroup_index` becomes the index within the group.
2. **Producer.** A TMA producer's whole body runs in one thread (thread 0 of its warpgroup):
   waits, `arrive.expect_tx` and the copies (producers that store registers into slots are
   refused).
3. **Consumers**, op by op, whatever the kernel computes: the operand types choose the form.
   Every warpgroup thread waits; arrives run in thread 0 of each warpgroup (the ring's empty
   count is one per consumer warpgroup). Slot reads stay smem views (`to_nvgpu.slots`) until
   an op other than a dot reads them into registers (`fragment_load`, `fragment_load_rows`;
   the group's threads then sync before thread 0 releases the slot: once before a drain's
   releases, and not before a drain that no ring op follows, as nothing refills its slots);
   tiles become register fragments (`to_nvgpu.fragments`: splats, converts, elementwise
   math, row reductions, row and column vectors); index tiles and masks stay symbolic until
   a `tile.where` (`to_nvgpu.masks`); `tile.dot` becomes an SS or RS wgmma retired by wait
   groups (`to_nvgpu.wgmma`, which also overlaps the MMAs of lookahead loops); stores end in
   st.global or a TMA store (`to_nvgpu.stores`). Loop-carried and branch-yielded tiles
   become fragments. Slots with leading unit dims (the 1x128x64 boxes of 3-D descriptors)
   become 2-D.

Options: `epilogue` (`global` or `tma`: how consumers store 2-D fragments, see
`to_nvgpu.stores`), `pingpong` (the consumer warpgroups take turns issuing the MMAs of
overlapped loops: two, or up to three in a rotated loop, see `to_nvgpu.wgmma`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith, func, math, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType, i32
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import PassFailedException, VerifyException

from tawa_xdsl.diagnostics import first_line
from tawa_xdsl.dialects import aref, nvgpu, tile
from tawa_xdsl.dialects.nvgpu import (
    SLOT_READ_BARRIER_ID,
    THREADS_ATTR,
    WARPGROUP_THREADS,
)
from tawa_xdsl.dialects.tile import DescType
from tawa_xdsl.transforms.to_nvgpu import fragments, slots, stores, wgmma
from tawa_xdsl.transforms.to_nvgpu.common import (
    Threads,
    detach_all,
    fail,
    if_op,
    insert_after,
    insert_before,
    is_index_tile,
    is_tile,
)
from tawa_xdsl.transforms.to_nvgpu.masks import Masks
from tawa_xdsl.transforms.to_nvgpu.slots import SmemView
from tawa_xdsl.transforms.to_nvgpu.stores import EPILOGUES, TmaEpilogue

# The ops that read a tile still in its smem slot (a view) as a view; any other use reads it
# into registers where it was loaded (`slots.registers`).
SLOT_VIEW_USERS = (tile.DotOp, tile.ExtractSliceOp, tile.TransOp, tile.ReshapeOp)


# ------------------------------------------------------------------------------- the pass


@dataclass(frozen=True)
class LowerToNvgpuPass(ModulePass):
    """The mbarrier level -> the nvgpu level (see the module docstring)."""

    name = "lower-to-nvgpu"

    epilogue: str = "global"
    pingpong: bool = False  # two consumer warpgroups alternate their MMA issue (ping-pong)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.epilogue not in EPILOGUES:
            raise PassFailedException(
                f"lower-to-nvgpu: epilogue must be one of {', '.join(EPILOGUES)}, "
                f"got '{self.epilogue}'"
            )
        for kernel in [k for k in op.ops if isinstance(k, func.FuncOp)]:
            lower_kernel(kernel, self.epilogue, self.pingpong)


def lower_kernel(kernel: func.FuncOp, epilogue: str = "global", pingpong: bool = False) -> None:
    block = kernel.body.block
    specialize = [o for o in block.ops if isinstance(o, aref.WarpSpecializeOp)]
    if len(specialize) != 1:
        raise PassFailedException(
            f"lower-to-nvgpu: @{kernel.sym_name.data} needs exactly one aref.warp_specialize "
            "at its top level (run the warp-specialization pipeline and lower-aref first)"
        )
    if any(isinstance(o, aref.CreateOp | aref.PutOp | aref.GetOp) for o in kernel.walk()):
        raise PassFailedException(
            f"lower-to-nvgpu: @{kernel.sym_name.data} still has aref ops; run lower-aref first"
        )
    slots.hoist_allocations(kernel)
    slots.squeeze_slots(kernel)
    threads = define_threads(block)
    guard_barrier_init(block, threads)
    boxes: dict[SSAValue, DescType] = {}
    warpgroups = lower_warp_specialize(specialize[0], threads, epilogue, boxes, pingpong)
    kernel.attributes[THREADS_ATTR] = IntegerAttr(WARPGROUP_THREADS * warpgroups, i32)
    for desc, box in boxes.items():  # TMA-stored descriptors: their block is now the box
        assert isinstance(desc, BlockArgument)
        hint = desc.name_hint
        new = Rewriter.replace_value_with_new_type(desc, box)
        new.name_hint = hint
    if boxes:
        kernel.update_function_type()


def define_threads(block: Block) -> Threads:
    """`%wg = nvgpu.warpgroup_index`, `%tid = nvgpu.thread_index` at the kernel's entry."""
    wg, tid = nvgpu.WarpgroupIndexOp(), nvgpu.ThreadIndexOp()
    zero = arith.ConstantOp(IntegerAttr(0, i32))
    is_t0 = arith.CmpiOp(tid, zero, "eq")
    ops: list[Operation] = [wg, tid, zero, is_t0]
    assert block.first_op is not None
    insert_before(block.first_op, ops)
    wg.result.name_hint, tid.result.name_hint, is_t0.result.name_hint = "wg", "tid", "is_t0"
    return Threads(wg.result, tid.result, zero.result, is_t0.result)


def guard_barrier_init(block: Block, threads: Threads) -> None:
    """Move the mbarrier inits and their fence into `scf.if` thread 0 of the CTA."""
    inits = [
        o for o in block.ops if isinstance(o, nvgpu.MBarrierInitOp | nvgpu.FenceMBarrierInitOp)
    ]
    if not inits:
        return
    is_wg0 = arith.CmpiOp(threads.warpgroup, threads.zero, "eq")
    first = arith.AndIOp(is_wg0, threads.is_thread0)
    insert_before(inits[0], [is_wg0, first])
    for o in inits:
        o.detach()
    insert_after(first, [if_op(first.result, inits)])


def lower_warp_specialize(
    specialize: aref.WarpSpecializeOp,
    threads: Threads,
    epilogue: str = "global",
    boxes: dict[SSAValue, DescType] | None = None,
    pingpong: bool = False,
) -> int:
    """Replace the groups by an `scf.if` chain on the warpgroup index; return #warpgroups.
    TMA-stored descriptors and their new block type (the TMA box) are added to `boxes`."""
    groups = sorted(specialize.groups(), key=lambda g: g.role.data != aref.Role.PRODUCER)
    boxes = {} if boxes is None else boxes
    base, branches = 0, []
    for group in groups:
        ops = lower_group(group, base, threads, epilogue, boxes, pingpong)
        branches.append((base, group.num_warpgroups, ops))
        base += group.num_warpgroups
    chain: list[Operation] = branches[-1][2]
    for start, count, ops in reversed(branches[:-1]):
        lo = arith.ConstantOp(IntegerAttr(start + count, i32))
        inside = arith.CmpiOp(threads.warpgroup, lo, "ult")  # groups are visited in order
        chain = [lo, inside, if_op(inside.result, ops, chain)]
    Rewriter.replace_op(specialize, chain, [])
    return base


def lower_group(
    group: aref.GroupOp,
    base: int,
    threads: Threads,
    epilogue: str = "global",
    boxes: dict[SSAValue, DescType] | None = None,
    pingpong: bool = False,
) -> list[Operation]:
    """The ops of one group's branch: setmaxnreg, then the body at thread level."""
    producer = group.role.data == aref.Role.PRODUCER
    action = nvgpu.RegisterAction.DECREASE if producer else nvgpu.RegisterAction.INCREASE
    body = group.body.block
    if producer:
        lower_producer(group)
    else:
        if pingpong and group.num_warpgroups not in (2, 3):  # the turns go round them
            raise fail(
                group,
                f"pingpong takes turns between two or three consumer warpgroups; this group "
                f"has {group.num_warpgroups}",
            )
        staging = None
        if epilogue == "tma":
            staging = TmaEpilogue(
                threads, base, group.num_warpgroups, {} if boxes is None else boxes, body,
            )  # fmt: skip
        consumers = ConsumerLowering(threads, staging, pingpong, group.num_warpgroups)
        consumers.block(body)
        if staging is not None:
            staging.finish()
    for op in list(body.walk()):  # after the consumers: ping-pong asks for the index too
        if isinstance(op, aref.WarpgroupIndexOp):
            offset = arith.ConstantOp(IntegerAttr(base, i32))
            index = arith.SubiOp(threads.warpgroup, offset)
            Rewriter.replace_op(op, [offset, index])
    ops = detach_all(body)
    setmaxnreg = nvgpu.SetMaxNRegOp(action, group.registers.value.data)
    if producer:
        return [setmaxnreg, if_op(threads.is_thread0, ops)]
    return [setmaxnreg, *ops]


def lower_producer(group: aref.GroupOp) -> None:
    """A TMA producer runs in one thread; register payloads would need the whole group."""
    for op in group.body.walk():
        if isinstance(op, nvgpu.SmemStoreOp | nvgpu.NamedBarrierSyncOp):
            raise fail(op, "in a producer group: only TMA producers are supported")
        if any(isinstance(r.type, TensorType) for r in op.results):
            raise fail(op, "computes a tile in the producer group (only TMA copies)")


# -------------------------------------------------------------------------- consumers

RING_OPS = (nvgpu.MBarrierWaitOp, nvgpu.MBarrierArriveOp, nvgpu.MBarrierArriveExpectTxOp)


def refilled_after(drain: scf.ForOp) -> bool:
    """Whether the producer may refill a slot `drain` releases: a loop around the drain
    repeats it (the persistent tile loop), or a ring op follows it in its group."""
    op: Operation = drain
    while True:
        later = op.next_op
        while later is not None:
            if any(isinstance(o, RING_OPS) for o in later.walk()):
                return True
            later = later.next_op
        parent = op.parent_op()
        if parent is None or isinstance(parent, aref.GroupOp):
            return False
        if isinstance(parent, scf.ForOp):
            return True
        op = parent


@dataclass
class ConsumerLowering:
    """One consumer group's body, op by op: each op goes to the lowering of its operands'
    kind (slot views, masks, vectors, fragments, wgmma, stores)."""

    threads: Threads
    epilogue: TmaEpilogue | None = None
    pingpong: bool = False
    warpgroups: int = 1
    views: dict[SSAValue, SmemView] = field(default_factory=dict)
    loaded: dict[SSAValue, SSAValue] = field(default_factory=dict)  # views read into registers
    # A slot was read into registers by every thread and, on some path through the branches
    # since, no sync of the group followed: the next arrive (by one thread) waits for the
    # whole group first, or the producer could overwrite the slot under a lagging warp's
    # ld.shared. After a loop the state is its body's end (check_slot_reads refuses a
    # release that a zero-trip loop would leave unsynced).
    reads_pending: bool = False
    masks: Masks = field(default_factory=Masks)
    vectors: fragments.Vectors = field(default_factory=fragments.Vectors)
    columns: fragments.ColumnViews = field(default_factory=fragments.ColumnViews)
    dead: list[Operation] = field(default_factory=list)

    def block(self, block: Block) -> None:
        outer, self.dead = self.dead, []
        for op in list(block.ops):
            self.op(op)
        for op in reversed(self.dead):  # symbolic tiles and slot views, once unused
            if op.parent is not None and not any(r.uses for r in op.results):
                Rewriter.erase_op(op)
        self.dead = outer

    def symbolic(self, op: Operation) -> None:
        """`op` lives on as a view, index, mask or vector: erased once nothing uses it."""
        self.dead.append(op)

    def registers(self, op: Operation) -> None:
        """Read the views `op` takes into fragments (one load per view, where it was
        loaded), unless `op` reads them as views."""
        if isinstance(op, tile.ReshapeOp) and not slots.squeezes(op):
            pass  # a reshape that regroups dims reads the tile into registers first
        elif isinstance(op, SLOT_VIEW_USERS) or self.vectors.spreads_over_rows(op):
            return
        for index, value in enumerate(op.operands):
            if value not in self.views:
                continue
            if value not in self.loaded:
                load = slots.registers(op, value, self.views[value])
                owner = value.owner
                assert isinstance(owner, Operation)
                insert_after(owner, [load])
                self.loaded[value] = load.results[0]
            op.operands[index] = self.loaded[value]
            self.reads_pending = True

    def sync_reads(self, before: Operation) -> None:
        """Every thread of the group ends its pending register reads of slots before
        `before` (where one thread releases them)."""
        threads = WARPGROUP_THREADS * self.warpgroups
        insert_before(before, [nvgpu.NamedBarrierSyncOp(SLOT_READ_BARRIER_ID, threads)])
        self.reads_pending = False

    def branches(self, op: scf.IfOp) -> None:
        """Lower both branches of `op`; reads still pend after it unless every branch synced."""
        pending = self.reads_pending
        after = pending and not op.false_region.blocks  # no else: the branch not taken
        for region in op.regions:
            for block in region.blocks:
                self.reads_pending = pending
                self.block(block)
                after |= self.reads_pending
        self.reads_pending = after

    def loop_body(self, loop: scf.ForOp) -> None:
        """Lower the body of `loop`. The releases of a drain (`tawa.drain`) get one sync
        before the loop, none if no ring op follows the drain (no later use refills the
        slots it releases)."""
        if aref.DRAIN_ATTR not in loop.attributes:
            self.block(loop.body.block)
            return
        pending, refilled = self.reads_pending, refilled_after(loop)
        if pending and refilled:
            self.sync_reads(loop)
        self.reads_pending = False
        self.block(loop.body.block)
        self.reads_pending = pending and not refilled

    def op(self, op: Operation) -> None:
        """Lower `op`; a tile no fragment layout holds is refused naming `op`."""
        wgmma.wait_before(op)
        try:
            self.lower(op)
        except (ValueError, VerifyException) as error:
            raise fail(op, f"makes a tile no fragment layout holds: {first_line(error)}") from None

    def lower(self, op: Operation) -> None:  # noqa: C901 (one case per kind of op)
        self.registers(op)
        self.columns.check(op)
        match op:
            # smem slots
            case nvgpu.SmemLoadOp():
                self.views[op.result] = slots.read(op)
                self.symbolic(op)
            case tile.ReshapeOp() if op.source in self.views and slots.squeezes(op):
                self.views[op.result] = self.views[op.source]
                self.symbolic(op)
            case tile.ExtractSliceOp() if op.source in self.views:
                self.views[op.result] = slots.row_slice(op, self.views[op.source])
                self.symbolic(op)
            case tile.TransOp() if op.source in self.views:
                self.views[op.result] = slots.transpose(self.views[op.source])
                self.symbolic(op)
            case tile.ConvertOp() | tile.ExpandDimsOp() if op.operands[0] in self.views:
                self.vectors.load_columns(op, self.views[op.operands[0]])
                self.reads_pending = True
                self.symbolic(op)
            case tile.DotOp():
                wgmma.dot(op, self.views, self.dead)
            # index tiles and masks
            case tile.SplatOp() if is_index_tile(op.result):
                self.masks.splat(op)
                self.symbolic(op)
            case tile.ArangeOp():
                self.masks.arange(op)
                self.symbolic(op)
            case arith.AddiOp() | arith.SubiOp() if is_index_tile(op.result):
                self.masks.add(op)
                self.symbolic(op)
            case arith.AndIOp() if is_index_tile(op.result):
                self.masks.conjunction(op)
                self.symbolic(op)
            case tile.ExpandDimsOp() if op.source in self.masks.indices:
                self.masks.expand_dims(op)
                self.symbolic(op)
            case tile.BroadcastOp() if self.masks.holds(op.source):
                self.masks.broadcast(op)
                self.symbolic(op)
            case tile.CmpOp():
                self.masks.compare(op)
                self.symbolic(op)
            case tile.WhereOp():
                self.masks.where(op)
            # fragments
            case tile.ExpandDimsOp() | tile.ConvertOp() if self.vectors.holds(op.operands[0]):
                self.vectors.follow(op)
                self.symbolic(op)
            case tile.ExpandDimsOp():
                fragments.expand_rows(op)
            case tile.BroadcastOp():
                if not self.vectors.broadcast(op):
                    raise fail(op, "must broadcast a row vector along columns, or an index or mask")
            case tile.ReshapeOp() if fragments.only_unit_dims(op):
                Rewriter.replace_op(op, [], [op.source])
            case tile.ReshapeOp():
                self.columns.reshape(op)
                self.symbolic(op)
            case tile.PermuteOp():
                self.columns.permute(op)
                self.symbolic(op)
            case tile.SplitOp():
                self.columns.split(op)
                self.symbolic(op)
            case tile.JoinOp():
                self.columns.join(op)
                self.symbolic(op)
            case tile.SplatOp():
                fragments.splat(op)
            case tile.ConvertOp() if self.columns.flat(op.operands[0]):
                fragments.convert(op, self.columns.views[op.operands[0]])
            case tile.ConvertOp():
                fragments.convert(op)
            case tile.ReduceOp():
                fragments.reduce(op, self.warpgroups)
            case _ if type(op) in fragments.FLOAT_BINARY and is_tile(op.results[0]):
                fragments.binary(op)
            case _ if type(op) in fragments.FLOAT_UNARY and is_tile(op.results[0]):
                fragments.unary(op)
            case math.FmaOp() if is_tile(op.result):
                fragments.fma(op)
            # stores
            case tile.StoreOp() | tile.StoreSliceOp() if (
                self.epilogue is not None and self.epilogue.accepts(op)
            ):
                self.epilogue.store(op)
            case tile.StoreOp() | tile.StoreSliceOp():
                stores.global_store(op)
            # control flow and barriers
            case scf.ForOp():
                fragments.retype(op, [*op.body.block.args[1:], *op.results])
                self.loop_body(op)
                fragments.reconcile_carries(op)
                wgmma.schedule_loop(op, self.pingpong, self.warpgroups)
            case scf.IfOp():
                fragments.retype(op, list(op.results))
                self.branches(op)
                fragments.reconcile_carries(op)
            case nvgpu.MBarrierArriveOp() | nvgpu.MBarrierArriveExpectTxOp() | nvgpu.TmaLoadOp():
                if self.reads_pending and isinstance(op, nvgpu.MBarrierArriveOp):
                    self.sync_reads(op)
                guard = if_op(self.threads.is_thread0, [])
                insert_before(op, [guard])
                op.detach()
                block = guard.true_region.block
                assert block.last_op is not None
                insert_before(block.last_op, [op])
            case _:
                tiles = [v for v in (*op.operands, *op.results) if is_tile(v)]
                if tiles and not isinstance(op, scf.YieldOp):
                    raise fail(op, "on tiles is not lowered to the nvgpu level yet")
