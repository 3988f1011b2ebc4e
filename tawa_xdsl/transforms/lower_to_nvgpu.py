"""`lower-to-nvgpu`: from the mbarrier level (what `lower-aref` produces) to the nvgpu level.

Input: a kernel whose body holds `nvgpu.mbarrier_init`s and one `aref.warp_specialize` of
`aref.group`s; barrier ops, TMA copies and `nvgpu.smem_load`s of ring slots are explicit, and
ops run once per warpgroup. Output: the same kernel as every thread of the CTA runs it, which
`emit-ptx` prints:

1. **Threads.** The barrier inits (and their fence) run in thread 0 of the CTA. The groups
   become an `scf.if` chain on `nvgpu.warpgroup_index` (the producer is warpgroup 0, the
   consumers follow), each branch starting with `nvgpu.setmaxnreg` (decrease for the
   producer, increase for consumers: the group's register budget). The kernel gets
   `nvgpu.threads = 128 x warpgroups`. `aref.warpgroup_index` becomes the index within the
   group.
2. **Producer.** A TMA producer's whole body runs in one thread (thread 0 of its warpgroup):
   waits, `arrive.expect_tx` and the copies (producers that store registers into slots are
   refused).
3. **Consumers.** Every warpgroup thread waits; arrives run in thread 0 of each warpgroup
   (the ring's empty count is one per consumer warpgroup). Tiles become register fragments:
   `tile.splat` -> `nvgpu.fragment_splat`, `tile.dot` on smem slots -> `nvgpu.wgmma_fence`,
   `nvgpu.wgmma_mma_async` (A may be a row slice from `tile.extract_slice`, B an NxK slot read
   through `tile.trans`), `nvgpu.wgmma_commit_group`, `tile.convert` ->
   `nvgpu.fragment_convert`, `arith` on float tiles (epilogues) -> `nvgpu.fragment_binary`,
   `tile.store`/`tile.store_slice` -> `nvgpu.fragment_store_global`
   (st.global, clipped to the tensor). Loop-carried tiles become loop-carried fragments.
4. **MMA depth.** After a loop body's wgmmas are committed, `nvgpu.wgmma_wait_group P-1`
   where P-1 is the smallest lag of the slot releases in that body: an arrive on slot
   `(i - L) mod D` (the MMA-depth pipelining of `pipeline`) needs only the MMAs older than
   L groups finished; any release of another form gets `wait_group 0`. After the loop,
   `wait_group 0` before the accumulator is read.

Option `epilogue` (`lower-to-nvgpu{epilogue=tma}`): how consumers store output tiles.

* `global` (default): `nvgpu.fragment_store_global`, st.global of each register pair, clipped.
* `tma`: through smem and a TMA store. Each consumer warpgroup owns a staging buffer of
  128B-swizzled slots of `rows x span` (span = 128 bytes of elements; one slot per column
  slab of its fragment). Per store: thread 0 of each warpgroup waits until its previous TMA
  store has read the staging slots (`tma_store_wait 0`), the consumers meet on named barrier
  2 (all consumer threads), every thread writes its fragment (`fragment_store`, conflict-free
  st.shared), fences the generic proxy (`fence_proxy_async`), the consumers meet again, and
  thread 0 of each warpgroup issues one TMA store per slab and commits them. Nothing waits
  for the global writes: in persistent kernels they overlap the next tile's main loop. The
  output descriptor is re-blocked to the TMA box `rows x span` (its tensor map's box); a
  descriptor that is also loaded, or a tile whose columns are not a multiple of the span,
  keeps the st.global form. Before the consumers exit, `tma_store_wait 0`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType, i32
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from tawa_xdsl.backend.emit_ptx import THREADS_ATTR
from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.dialects import aref, nvgpu, tile
from tawa_xdsl.dialects.nvgpu import FragmentLayout, FragmentType
from tawa_xdsl.dialects.tile import DescType
from tawa_xdsl.transforms.lower_to_nvgpu_attention import (
    FLOAT_BINARY,
    lower_attention_consumers,
)

WARPGROUP_THREADS = 128


def _fail(op: Operation, message: str) -> PassFailedException:
    return PassFailedException(f"{op_location(op)}: error: lower-to-nvgpu: '{op.name}' {message}")


def _const(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _insert_before(anchor: Operation, ops: list[Operation]) -> None:
    Rewriter.insert_op(ops, InsertPoint.before(anchor))


def _insert_after(anchor: Operation, ops: list[Operation]) -> None:
    Rewriter.insert_op(ops, InsertPoint.after(anchor))


def _if(cond: SSAValue, then_ops: list[Operation], else_ops: list[Operation] | None = None):
    """`scf.if %cond { then_ops } [else { else_ops }]` without results."""
    then_region = Region(Block([*then_ops, scf.YieldOp()]))
    else_region = Region(Block([*else_ops, scf.YieldOp()])) if else_ops is not None else None
    return scf.IfOp(cond, [], then_region, else_region)


def _detach_all(block: Block) -> list[Operation]:
    ops = list(block.ops)
    for op in ops:
        op.detach()
    return ops


@dataclass
class Threads:
    """The per-thread indices every lowering step guards with (defined at kernel entry)."""

    warpgroup: SSAValue
    thread: SSAValue
    zero: SSAValue
    is_thread0: SSAValue  # thread 0 of its warpgroup


@dataclass(frozen=True)
class SmemView:
    """A tile that still lives in an smem slot: rows [row, ...) of slot `slot` of `buf`."""

    buf: SSAValue
    slot: SSAValue
    row: SSAValue | None = None
    transposed: bool = False


# ------------------------------------------------------------------------------- the pass


EPILOGUES = ("global", "tma")
EPILOGUE_BARRIER_ID = 2  # the consumers' staging barrier (lower-aref's producer barrier is 1)
SWIZZLE_BYTES = 128
# The ops that may read a tile still in its smem slot (a view); any other use is refused.
SLOT_VIEW_USERS = (tile.DotOp, tile.ExtractSliceOp, tile.TransOp)


@dataclass(frozen=True)
class LowerToNvgpuPass(ModulePass):
    """The mbarrier level -> the nvgpu level (see the module docstring)."""

    name = "lower-to-nvgpu"

    epilogue: str = "global"
    pingpong: bool = False  # attention consumers alternate their MMA issue (ping-pong)

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
    lower_attention_consumers(kernel, pingpong)  # softmax consumers first (their module)
    threads = define_threads(block)
    guard_barrier_init(block, threads)
    boxes: dict[SSAValue, DescType] = {}
    warpgroups = lower_warp_specialize(specialize[0], threads, epilogue, boxes)
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
    _insert_before(block.first_op, ops)
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
    _insert_before(inits[0], [is_wg0, first])
    for o in inits:
        o.detach()
    _insert_after(first, [_if(first.result, inits)])


def lower_warp_specialize(
    specialize: aref.WarpSpecializeOp,
    threads: Threads,
    epilogue: str = "global",
    boxes: dict[SSAValue, DescType] | None = None,
) -> int:
    """Replace the groups by an `scf.if` chain on the warpgroup index; return #warpgroups.
    TMA-stored descriptors and their new block type (the TMA box) are added to `boxes`."""
    groups = sorted(specialize.groups(), key=lambda g: g.role.data != aref.Role.PRODUCER)
    consumer_threads = WARPGROUP_THREADS * sum(
        g.num_warpgroups for g in groups if g.role.data != aref.Role.PRODUCER
    )
    base, branches = 0, []
    for group in groups:
        ops = lower_group(
            group, base, threads, epilogue, consumer_threads, {} if boxes is None else boxes
        )
        branches.append((base, group.num_warpgroups, ops))
        base += group.num_warpgroups
    chain: list[Operation] = branches[-1][2]
    for start, count, ops in reversed(branches[:-1]):
        lo = arith.ConstantOp(IntegerAttr(start + count, i32))
        inside = arith.CmpiOp(threads.warpgroup, lo, "ult")  # groups are visited in order
        chain = [lo, inside, _if(inside.result, ops, chain)]
    Rewriter.replace_op(specialize, chain, [])
    return base


def lower_group(
    group: aref.GroupOp,
    base: int,
    threads: Threads,
    epilogue: str = "global",
    consumer_threads: int = WARPGROUP_THREADS,
    boxes: dict[SSAValue, DescType] | None = None,
) -> list[Operation]:
    """The ops of one group's branch: setmaxnreg, then the body at thread level."""
    producer = group.role.data == aref.Role.PRODUCER
    action = nvgpu.RegisterAction.DECREASE if producer else nvgpu.RegisterAction.INCREASE
    body = group.body.block
    for op in list(body.walk()):
        if isinstance(op, aref.WarpgroupIndexOp):
            offset = arith.ConstantOp(IntegerAttr(base, i32))
            index = arith.SubiOp(threads.warpgroup, offset)
            Rewriter.replace_op(op, [offset, index])
    if producer:
        lower_producer(group)
    else:
        staging = None
        if epilogue == "tma":
            staging = TmaEpilogue(
                threads, base, group.num_warpgroups, consumer_threads,
                {} if boxes is None else boxes, body,
            )  # fmt: skip
        ConsumerLowering(threads, staging).block(body)
        if staging is not None:
            staging.finish()
    ops = _detach_all(body)
    setmaxnreg = nvgpu.SetMaxNRegOp(action, group.registers.value.data)
    if producer:
        return [setmaxnreg, _if(threads.is_thread0, ops)]
    return [setmaxnreg, *ops]


def lower_producer(group: aref.GroupOp) -> None:
    """A TMA producer runs in one thread; register payloads would need the whole group."""
    for op in group.body.walk():
        if isinstance(op, nvgpu.SmemStoreOp | nvgpu.NamedBarrierSyncOp):
            raise _fail(op, "in a producer group: only TMA producers are supported")
        if any(isinstance(r.type, TensorType) for r in op.results):
            raise _fail(op, "computes a tile in the producer group (only TMA copies)")


# -------------------------------------------------------------------------- consumers


def fragment_type(ty: TensorType) -> FragmentType:
    return FragmentType(FragmentLayout.WGMMA_ACC, ty.get_shape(), ty.element_type)


def _is_tile(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType)


class ConsumerLowering:
    """Tiles -> fragments and wgmmas, arrives -> one thread per warpgroup."""

    def __init__(self, threads: Threads, epilogue: TmaEpilogue | None = None):
        self.threads = threads
        self.epilogue = epilogue
        self.views: dict[SSAValue, SmemView] = {}
        self.dead: list[Operation] = []

    def block(self, block: Block) -> None:
        outer, self.dead = self.dead, []
        for op in list(block.ops):
            self.op(op)
        for op in reversed(self.dead):  # slot views die once their dots are wgmmas
            if op.parent is not None and not any(r.uses for r in op.results):
                Rewriter.erase_op(op)
        self.dead = outer

    def op(self, op: Operation) -> None:
        if not isinstance(op, SLOT_VIEW_USERS) and any(v in self.views for v in op.operands):
            raise _fail(op, "uses a loaded tile other than as a tl.dot operand (not lowered yet)")
        match op:
            case nvgpu.SmemLoadOp():
                self.views[op.result] = SmemView(op.buf, op.slot)
                self.dead.append(op)
            case tile.ExtractSliceOp() if op.source in self.views:
                self.slice_view(op)
            case tile.TransOp() if op.source in self.views:
                view = self.views[op.source]
                self.views[op.result] = SmemView(view.buf, view.slot, view.row, True)
                self.dead.append(op)
            case tile.DotOp():
                self.dot(op)
            case tile.SplatOp():
                ty = op.result.type
                assert isinstance(ty, TensorType)
                Rewriter.replace_op(op, nvgpu.FragmentSplatOp(op.operands[0], fragment_type(ty)))
            case tile.ConvertOp():
                ty = op.result.type
                assert isinstance(ty, TensorType)
                Rewriter.replace_op(op, nvgpu.FragmentConvertOp(op.operands[0], fragment_type(ty)))
            case _ if type(op) in FLOAT_BINARY and _is_tile(op.results[0]):
                # epilogue arithmetic (scale, bias, relu): register by register
                kind = FLOAT_BINARY[type(op)]
                Rewriter.replace_op(op, nvgpu.FragmentBinaryOp(kind, *op.operands))
            case tile.StoreOp() | tile.StoreSliceOp() if (
                self.epilogue is not None and self.epilogue.accepts(op)
            ):
                self.epilogue.store(op)
            case tile.StoreOp() | tile.StoreSliceOp():
                Rewriter.replace_op(
                    op, nvgpu.FragmentStoreGlobalOp(op.value, op.desc, list(op.offsets))
                )
            case scf.ForOp():
                self.for_(op)
            case scf.IfOp():
                for result in list(op.results):
                    if _is_tile(result):
                        assert isinstance(result.type, TensorType)
                        Rewriter.replace_value_with_new_type(result, fragment_type(result.type))
                for region in op.regions:
                    for block in region.blocks:
                        self.block(block)
            case nvgpu.MBarrierArriveOp() | nvgpu.MBarrierArriveExpectTxOp() | nvgpu.TmaLoadOp():
                guard = _if(self.threads.is_thread0, [])
                _insert_before(op, [guard])
                op.detach()
                block = guard.true_region.block
                assert block.last_op is not None
                _insert_before(block.last_op, [op])
            case _:
                tiles = [v for v in (*op.operands, *op.results) if _is_tile(v)]
                if tiles and not isinstance(op, scf.YieldOp):
                    raise _fail(op, "on tiles is not lowered to the nvgpu level yet")

    def slice_view(self, op: tile.ExtractSliceOp) -> None:
        view = self.views[op.source]
        src, dst = op.source.type, op.result.type
        assert isinstance(src, TensorType) and isinstance(dst, TensorType)
        if view.transposed or view.row is not None or _const(op.offsets[1]) != 0:
            raise _fail(op, "must take whole rows of an untransposed smem slot")
        if src.get_shape()[1] != dst.get_shape()[1]:
            raise _fail(op, "must keep every column of the slot (a row slice)")
        self.views[op.result] = SmemView(view.buf, view.slot, op.offsets[0])
        self.dead.append(op)

    def dot(self, op: tile.DotOp) -> None:
        """`tile.dot %a, %b, %acc` -> fence, one wgmma_mma_async, commit."""
        a, b = self.views.get(op.lhs), self.views.get(op.rhs)
        if a is None or b is None:
            raise _fail(op, "needs both operands read from smem slots (register A: future work)")
        if a.transposed:
            raise _fail(op, "needs a K-major A (an untransposed MxK slot)")
        mma = nvgpu.WgmmaMmaAsyncOp(
            a.buf, a.slot, b.buf, b.slot, op.acc, a_row=a.row, transpose_b=not b.transposed
        )
        Rewriter.replace_op(
            op, [nvgpu.WgmmaFenceOp(), mma, nvgpu.WgmmaCommitGroupOp()], [mma.result]
        )

    def for_(self, op: scf.ForOp) -> None:
        body = op.body.block
        for arg in list(body.args[1:]):
            if _is_tile(arg):
                assert isinstance(arg.type, TensorType)
                Rewriter.replace_value_with_new_type(arg, fragment_type(arg.type))
        for result in list(op.results):
            if _is_tile(result):
                assert isinstance(result.type, TensorType)
                Rewriter.replace_value_with_new_type(result, fragment_type(result.type))
        self.block(body)
        commits = [o for o in body.ops if isinstance(o, nvgpu.WgmmaCommitGroupOp)]
        if commits:
            # A body that already waits right after its last commit (the attention
            # lowering's overlapped schedule) keeps its own waits.
            if not isinstance(commits[-1].next_op, nvgpu.WgmmaWaitGroupOp):
                _insert_after(commits[-1], [nvgpu.WgmmaWaitGroupOp(release_lag(body))])
            _insert_after(op, [nvgpu.WgmmaWaitGroupOp(0)])


class TmaEpilogue:
    """The `epilogue=tma` store of one consumer group (see the module docstring)."""

    def __init__(
        self,
        threads: Threads,
        base: int,
        warpgroups: int,
        consumer_threads: int,
        boxes: dict[SSAValue, DescType],
        body: Block,
    ):
        self.threads, self.base, self.warpgroups = threads, base, warpgroups
        self.consumer_threads = consumer_threads
        self.boxes = boxes
        self.body = body
        self.staging: dict[SSAValue, tuple[SSAValue, SSAValue]] = {}  # desc -> (buf, slot0)

    def _box(self, op: tile.StoreOp | tile.StoreSliceOp) -> DescType | None:
        """The TMA box `rows x span` of the store, or None when it keeps st.global."""
        desc, value = op.desc, op.value.type  # a fragment once its convert is lowered
        assert isinstance(desc.type, DescType) and isinstance(value, TensorType | FragmentType)
        shape = value.get_shape()
        if len(shape) != 2 or not isinstance(desc, BlockArgument):
            return None
        span = SWIZZLE_BYTES // nvgpu.element_bytes(value.element_type)
        rows, cols = shape
        if cols % span or rows % 64 or rows > 256:
            return None
        users = {type(u.operation) for u in desc.uses}
        if not users <= {tile.StoreOp, tile.StoreSliceOp, nvgpu.TmaStoreOp}:
            return None  # also loaded: its tensor map keeps the block as box
        box = DescType((rows, span), value.element_type)
        previous = self.boxes.get(desc)
        return box if previous is None or previous == box else None

    def accepts(self, op: tile.StoreOp | tile.StoreSliceOp) -> bool:
        return self._box(op) is not None

    def _staging(self, op: tile.StoreOp | tile.StoreSliceOp) -> tuple[SSAValue, SSAValue]:
        """The staging buffer of `op.desc` (allocated once, at the top of the group body) and
        the first slot of this warpgroup."""
        if op.desc in self.staging:
            return self.staging[op.desc]
        value = op.value.type
        assert isinstance(value, TensorType | FragmentType)
        rows, cols = value.get_shape()
        span = SWIZZLE_BYTES // nvgpu.element_bytes(value.element_type)
        slabs = cols // span
        buf = nvgpu.SmemAllocOp(
            nvgpu.SmemType((self.warpgroups * slabs, rows, span), value.element_type, 128)
        )
        buf.buf.name_hint = "c_stage"
        ops: list[Operation] = [buf]
        if self.warpgroups > 1:
            offset = arith.ConstantOp(IntegerAttr(self.base, i32))
            local = arith.SubiOp(self.threads.warpgroup, offset)
            per_wg = arith.ConstantOp(IntegerAttr(slabs, i32))
            slot0 = arith.MuliOp(local, per_wg)
            ops += [offset, local, per_wg, slot0]
            first = slot0.result
        else:
            first = self.threads.zero
        assert self.body.first_op is not None
        _insert_before(self.body.first_op, ops)
        self.staging[op.desc] = (buf.buf, first)
        return self.staging[op.desc]

    def store(self, op: tile.StoreOp | tile.StoreSliceOp) -> None:
        box = self._box(op)
        assert box is not None
        self.boxes[op.desc] = box
        buf, slot0 = self._staging(op)
        value = op.value.type
        assert isinstance(value, TensorType | FragmentType)
        span = box.get_block_shape()[1]
        is_t0 = self.threads.is_thread0
        stores: list[Operation] = []
        for j in range(value.get_shape()[1] // span):
            if j == 0:
                col, slot = op.offsets[1], slot0
            else:
                delta = arith.ConstantOp(IntegerAttr(j * span, i32))
                col_op = arith.AddiOp(op.offsets[1], delta)
                step = arith.ConstantOp(IntegerAttr(j, i32))
                slot_op = arith.AddiOp(slot0, step)
                stores += [delta, col_op, step, slot_op]
                col, slot = col_op.result, slot_op.result
            stores.append(nvgpu.TmaStoreOp(op.desc, [op.offsets[0], col], buf, slot))
        stores.append(nvgpu.TmaStoreCommitOp())
        if _is_tile(op.value):
            raise _fail(op, "stores a tile that is not a register fragment")
        ops: list[Operation] = [
            _if(is_t0, [nvgpu.TmaStoreWaitOp(0)]),
            nvgpu.NamedBarrierSyncOp(EPILOGUE_BARRIER_ID, self.consumer_threads),
            nvgpu.FragmentStoreOp(op.value, buf, slot0),
            nvgpu.FenceProxyAsyncOp(),
            nvgpu.NamedBarrierSyncOp(EPILOGUE_BARRIER_ID, self.consumer_threads),
            _if(is_t0, stores),
        ]
        Rewriter.replace_op(op, ops, [])

    def finish(self) -> None:
        """Before the consumers exit: their last TMA stores have read the staging slots."""
        if self.staging:
            self.body.add_op(_if(self.threads.is_thread0, [nvgpu.TmaStoreWaitOp(0)]))


def release_lag(body: Block) -> int:
    """How many wgmma groups may stay in flight when the body's releases run: the smallest
    L over arrives on slot `(i - L) mod D` in `body`; 0 for any other release form."""
    lags = []
    for op in body.walk():
        if not isinstance(op, nvgpu.MBarrierArriveOp):
            continue
        lag = 0
        slot = op.slot.owner
        if isinstance(slot, arith.RemUIOp | arith.RemSIOp):
            use = slot.operands[0].owner
            if isinstance(use, arith.SubiOp) and (value := _const(use.rhs)) is not None:
                lag = max(value, 0)
        lags.append(lag)
    return min(lags) if lags else 0
