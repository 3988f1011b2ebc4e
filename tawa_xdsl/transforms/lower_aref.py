"""`lower-aref`: rewrite aref rings into mbarriers, smem slots, TMA copies and smem loads.

For every `%ring = aref.create : !aref.ring<[T0, ..., Tn], D>` (with K consumer warpgroups:
every warpgroup of every `aref.group` whose region gets from the ring):

    %full  = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<D>        init count 1
    %empty = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<D>        init count K
    %buf_j = nvgpu.smem_alloc : !nvgpu.smem<DxTj, swizzle>    one per payload
    nvgpu.fence_mbarrier_init ; nvgpu.cta_barrier

`aref.put %ring[%i], %v...` (producer):

    nvgpu.mbarrier_wait %empty[slot(i)], producer_parity(i)
    TMA payloads (values defined by `tile.load`; the load is folded into the copy):
      nvgpu.mbarrier_arrive_expect_tx %full[slot(i)], bytes <sum of the TMA tiles' bytes>
      nvgpu.tma_load %desc[offs] -> %buf_j[slot(i)], %full[slot(i)]     (one per payload)
    register payloads: nvgpu.smem_store %v, %buf_j[slot(i)]; nvgpu.fence_proxy_async;
      nvgpu.named_barrier_sync (the whole producer group: the elected arrive publishes
      every thread's stores); then the arrive (expect_tx if some payload also came by TMA)

`%v... = aref.get %ring[%i]` (consumer): `nvgpu.mbarrier_wait %full[slot(i)],
consumer_parity(i)` then `%v_j = nvgpu.smem_load %buf_j[slot(i)]`.

`aref.consumed %ring[%i]`: `nvgpu.mbarrier_arrive %empty[slot(i)]`; with `lag(L)` the arrive
carries `tawa.lag = L` (lower-to-nvgpu leaves L wgmma groups in flight before it, the verifier
checks its slot is the loop's use - L).

`aref.drain %ring[%start, %end] lag(L)`: the loop it stands for, marked `tawa.drain = L`:

    %from = arith.maxsi (arith.subi %end, L), %start
    scf.for %j = %from to %end step 1 { nvgpu.mbarrier_arrive %empty[slot(j)] } {tawa.drain = L}

slot/parity/counts/bytes come from `tawa_xdsl.protocol`. Ops at this level are executed once
per warpgroup (the later lowering to threads elects one thread for arrives and copies). The
full barrier allocation carries the certificate parameters the verifier instantiates:
`tawa.ring = {name, depth, consumers, expect_tx}` (what this pass meant to emit).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, builtin, scf
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, i32
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl import protocol
from tawa_xdsl.dialects import aref, nvgpu, tile
from tawa_xdsl.dialects.nvgpu.hardware import WARPGROUP_THREADS
from tawa_xdsl.transforms.ws_utils import error

PASS = "lower-aref"
RING_ATTR = "tawa.ring"
NAMED_BARRIER_ID = 1  # the producer group's own barrier for publishing register payloads


@dataclass
class LoweredRing:
    """What one `aref.create` became."""

    name: str
    depth: int
    full: SSAValue
    empty: SSAValue
    buffers: list[SSAValue]


def _group_of(op: Operation) -> aref.GroupOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, aref.GroupOp):
        parent = parent.parent_op()
    return parent


def consumer_warpgroups(create: aref.CreateOp) -> int:
    """Every warpgroup of every group whose region gets from the ring arrives on `empty`."""
    groups = {
        id(g): g
        for use in create.ring.uses
        if isinstance(use.operation, aref.GetOp)
        if (g := _group_of(use.operation)) is not None
    }
    return sum(g.num_warpgroups for g in groups.values())


def _insert(ops: list[Operation], before: Operation) -> None:
    """Insert `ops` before `before`, giving them its source location (for traces)."""
    for op in ops:
        op.location = before.location
    Rewriter.insert_op(ops, InsertPoint.before(before))


def _tma_source(value: SSAValue) -> tile.LoadOp | None:
    op = value.owner
    return op if isinstance(op, tile.LoadOp) else None


class _Lowering:
    def __init__(self) -> None:
        self.rings: dict[SSAValue, LoweredRing] = {}

    # -- create ---------------------------------------------------------------------------

    def lower_create(self, create: aref.CreateOp, index: int) -> None:
        ring_type = create.ring.type
        assert isinstance(ring_type, aref.RingType)
        depth, payloads = ring_type.depth.data, ring_type.payload_types()
        consumers = consumer_warpgroups(create)
        if consumers == 0:
            raise error(
                create,
                PASS,
                "ring has no consumer warp group (no aref.get in an aref.group); "
                "run distribute first",
            )
        name = create.ring.name_hint or f"ring{index}"
        tma = self._tma_payloads(create)
        proto = protocol.RingProtocol(depth, consumers, protocol.expect_tx_bytes(tma))
        full = nvgpu.MBarrierAllocOp(nvgpu.MBarrierType(depth))
        empty = nvgpu.MBarrierAllocOp(nvgpu.MBarrierType(depth))
        full.bars.name_hint, empty.bars.name_hint = f"{name}_full", f"{name}_empty"
        full.attributes[RING_ATTR] = DictionaryAttr(
            {
                "name": StringAttr(name),
                "depth": IntegerAttr(depth, i32),
                "consumers": IntegerAttr(consumers, i32),
                "expect_tx": IntegerAttr(proto.expect_tx, i32),
            }
        )
        bufs = []
        for j, t in enumerate(payloads):
            assert isinstance(t, builtin.TensorType)
            smem = nvgpu.SmemType((depth, *t.get_shape()), t.element_type, protocol.swizzle_for(t))
            buf = nvgpu.SmemAllocOp(smem)
            buf.buf.name_hint = f"{name}_buf{j}"
            bufs.append(buf)
        ops: list[Operation] = [
            full,
            empty,
            *bufs,
            nvgpu.MBarrierInitOp(full.bars, proto.full_count),
            nvgpu.MBarrierInitOp(empty.bars, proto.empty_count),
            nvgpu.FenceMBarrierInitOp(),
            nvgpu.CtaBarrierOp(),
        ]
        _insert(ops, create)
        self.rings[create.ring] = LoweredRing(
            name, depth, full.bars, empty.bars, [b.buf for b in bufs]
        )

    @staticmethod
    def _tma_payloads(create: aref.CreateOp) -> list:
        """Payload types that every put of the ring delivers by TMA."""
        puts = [u.operation for u in create.ring.uses if isinstance(u.operation, aref.PutOp)]
        ring_type = create.ring.type
        assert isinstance(ring_type, aref.RingType)
        return [
            t
            for j, t in enumerate(ring_type.payload_types())
            if puts and all(_tma_source(p.values[j]) is not None for p in puts)
        ]

    # -- put / get / consumed ---------------------------------------------------------------

    def lower_put(self, put: aref.PutOp) -> None:
        ring = self.rings[put.ring]
        slot_ops, slot = protocol.emit_slot(put.index, ring.depth)
        par_ops, parity = protocol.emit_producer_parity(put.index, ring.depth)
        ops: list[Operation] = [*slot_ops, *par_ops, nvgpu.MBarrierWaitOp(ring.empty, slot, parity)]
        tma_bytes, copies, stores = 0, [], []
        for value, buf in zip(put.values, ring.buffers, strict=True):
            load = _tma_source(value)
            if load is not None and self._all_puts_tma(put, value):
                tma_bytes += protocol.tile_bytes(value.type)
                copies.append(
                    nvgpu.TmaLoadOp(load.desc, list(load.offsets), buf, slot, ring.full, slot)
                )
            else:
                stores.append(nvgpu.SmemStoreOp(value, buf, slot))
        if stores:
            group = _group_of(put)
            threads = WARPGROUP_THREADS * (group.num_warpgroups if group is not None else 1)
            ops += [
                *stores,
                nvgpu.FenceProxyAsyncOp(),
                nvgpu.NamedBarrierSyncOp(NAMED_BARRIER_ID, threads),
            ]
        if tma_bytes:
            ops += [nvgpu.MBarrierArriveExpectTxOp(ring.full, slot, tma_bytes), *copies]
        else:
            ops.append(nvgpu.MBarrierArriveOp(ring.full, slot))
        _insert(ops, put)
        loads = {v.owner for v in put.values if isinstance(v.owner, tile.LoadOp)}
        Rewriter.erase_op(put)
        for load in loads:
            if not load.result.uses:
                Rewriter.erase_op(load)

    def _all_puts_tma(self, put: aref.PutOp, value: SSAValue) -> bool:
        j = list(put.values).index(value)
        return all(
            _tma_source(u.operation.values[j]) is not None
            for u in put.ring.uses
            if isinstance(u.operation, aref.PutOp)
        )

    def lower_get(self, get: aref.GetOp) -> None:
        ring = self.rings[get.ring]
        slot_ops, slot = protocol.emit_slot(get.index, ring.depth)
        par_ops, parity = protocol.emit_consumer_parity(get.index, ring.depth)
        loads = [nvgpu.SmemLoadOp(buf, slot) for buf in ring.buffers]
        for load, value in zip(loads, get.values, strict=True):
            load.result.name_hint = value.name_hint
        _insert([*slot_ops, *par_ops, nvgpu.MBarrierWaitOp(ring.full, slot, parity), *loads], get)
        for load, value in zip(loads, get.values, strict=True):
            value.replace_all_uses_with(load.result)
        Rewriter.erase_op(get)

    def lower_consumed(self, consumed: aref.ConsumedOp) -> None:
        ring = self.rings[consumed.ring]
        slot_ops, slot = protocol.emit_slot(consumed.index, ring.depth)
        arrive = nvgpu.MBarrierArriveOp(ring.empty, slot)
        if consumed.lag_value:
            arrive.attributes[aref.LAG_ATTR] = IntegerAttr(consumed.lag_value, i32)
        _insert([*slot_ops, arrive], consumed)
        Rewriter.erase_op(consumed)

    def lower_drain(self, drain: aref.DrainOp) -> None:
        ring = self.rings[drain.ring]
        lag = arith.ConstantOp(IntegerAttr(drain.lag_value, i32))
        one = arith.ConstantOp(IntegerAttr(1, i32))
        back = arith.SubiOp(drain.end, lag.result)
        low = arith.MaxSIOp(back.result, drain.start)
        lag.result.name_hint, low.result.name_hint = "lag", "drain_from"
        body = Block(arg_types=[i32])
        body.args[0].name_hint = "j"
        slot_ops, slot = protocol.emit_slot(body.args[0], ring.depth)
        body.add_ops([*slot_ops, nvgpu.MBarrierArriveOp(ring.empty, slot), scf.YieldOp()])
        loop = scf.ForOp(low.result, drain.end, one.result, [], Region(body))
        loop.attributes[aref.DRAIN_ATTR] = IntegerAttr(drain.lag_value, i32)
        for op in body.ops:
            op.location = drain.location
        _insert([lag, one, back, low, loop], drain)
        Rewriter.erase_op(drain)


def lower_arefs(module: ModuleOp) -> None:
    """Lower every ring of `module` in place (see the module docstring)."""
    lowering = _Lowering()
    creates = [op for op in module.walk() if isinstance(op, aref.CreateOp)]
    for index, create in enumerate(creates):
        lowering.lower_create(create, index)
    for op in list(module.walk()):
        if isinstance(op, aref.PutOp):
            lowering.lower_put(op)
        elif isinstance(op, aref.GetOp):
            lowering.lower_get(op)
        elif isinstance(op, aref.ConsumedOp):
            lowering.lower_consumed(op)
        elif isinstance(op, aref.DrainOp):
            lowering.lower_drain(op)
    for create in creates:
        if create.ring.uses:
            user = next(iter(create.ring.uses)).operation
            raise error(user, PASS, f"'{user.name}' still uses the ring after lowering")
        Rewriter.erase_op(create)


@dataclass(frozen=True)
class LowerArefPass(ModulePass):
    """Lower aref rings to mbarriers, smem and TMA (no options)."""

    name = "lower-aref"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not any(o.dialect_name() == "aref" for o in op.walk()):  # tile IR: nothing to do
            kernel = next((k for k in op.ops if k.name == "func.func"), op)
            raise error(kernel, PASS, "no aref ops to lower: run tawa-warp-specialize first")
        lower_arefs(op)
