"""Tile stores of a consumer group, in either form (option `epilogue`), whatever computed the
stored fragment.

* `global`: `nvgpu.fragment_store_global`, st.global of each register pair (of each row
  value, for a row vector), clipped to the tensor.
* `tma`: through smem and a TMA store. Each consumer warpgroup owns a staging buffer of
  128B-swizzled slots of `rows x span` (span = 128 bytes of elements; one slot per column
  slab of its fragment). Per store: thread 0 of each warpgroup waits until its previous TMA
  store has read the staging slots (`tma_store_wait 0`), the warpgroup's threads meet on its
  own named barrier (`EPILOGUE_BARRIER_IDS[w]`, 128 threads: no warpgroup waits for another's
  epilogue, so the others' MMAs run under it), every thread writes its fragment
  (`fragment_store`, conflict-free st.shared), fences the generic proxy
  (`fence_proxy_async`), the warpgroup meets again, and its thread 0 issues one TMA store
  per slab and commits them. Nothing waits
  for the global writes: in persistent kernels they overlap the next tile's main loop. The
  output descriptor is re-blocked to the TMA box `rows x span` (leading unit dims kept: a
  `1 x rows x span` box of a rank-3 descriptor); a descriptor that is also loaded, a tile
  whose columns are not a multiple of the span, or a row vector keeps the st.global form.
  Before the consumers exit, `tma_store_wait 0`.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, TensorType, i32
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.rewriter import Rewriter

from tawa_xdsl.dialects import nvgpu, tile
from tawa_xdsl.dialects.nvgpu import EPILOGUE_BARRIER_IDS, WARPGROUP_THREADS, FragmentType
from tawa_xdsl.dialects.tile import DescType
from tawa_xdsl.transforms.to_nvgpu.common import Threads, fail, if_op, insert_before, is_tile

EPILOGUES = ("global", "tma")
SWIZZLE_BYTES = 128


def global_store(op: tile.StoreOp | tile.StoreSliceOp) -> None:
    """st.global of the fragment, clipped to the tensor (a column vector by its own op; a
    row vector along one row of a 2-D plane)."""
    value = op.value.type
    if isinstance(value, FragmentType) and value.kind == nvgpu.FragmentLayout.WGMMA_COL:
        store: Operation = nvgpu.FragmentStoreColumnsOp(op.value, op.desc, list(op.offsets))
    else:
        if isinstance(value, FragmentType) and value.kind == nvgpu.FragmentLayout.WGMMA_ROW:
            check_row_vector_store(op)
        store = nvgpu.FragmentStoreGlobalOp(op.value, op.desc, list(op.offsets))
    Rewriter.replace_op(op, store)


def check_row_vector_store(op: tile.StoreOp | tile.StoreSliceOp) -> None:
    """A row vector is stored through a rank-1 descriptor or along one row of a 2-D plane (a
    `[1, rows]` block, as `v.reshape(1, BLOCK_M)`); down a column it is refused, not written
    wrongly."""
    desc = op.desc.type
    assert isinstance(desc, DescType)
    block = desc.get_block_shape()
    if len(block) >= 2 and block[-2] != 1:
        raise fail(
            op,
            f"stores a row vector down a column (block {list(block)}; not supported: store "
            "it through a rank-1 descriptor, or v.reshape(1, BLOCK_M) through a descriptor of "
            "block [1, BLOCK_M])",
        )


def tma_store_box(op: tile.StoreOp | tile.StoreSliceOp) -> DescType | None:
    """The TMA box `[1, ...,] rows x span` through which `epilogue=tma` writes `op`'s tile,
    or None when the store keeps the st.global form (see the module docstring). Also asked
    at the aref level, on whole tiles, by `smem_budget.staging_bytes`."""
    desc, value = op.desc, op.value.type  # a fragment once its convert is lowered
    assert isinstance(desc.type, DescType) and isinstance(value, TensorType | FragmentType)
    shape = value.get_shape()
    if len(shape) != 2 or not isinstance(desc, BlockArgument):
        return None
    lead = desc.type.get_block_shape()[:-2]
    if any(d != 1 for d in lead):
        return None
    span = SWIZZLE_BYTES // nvgpu.element_bytes(value.element_type)
    rows, cols = shape
    if cols % span or rows % 64 or rows > 256:
        return None
    users = {type(u.operation) for u in desc.uses}
    if not users <= {tile.StoreOp, tile.StoreSliceOp, nvgpu.TmaStoreOp}:
        return None  # also loaded: its tensor map keeps the block as box
    return DescType((*lead, rows, span), value.element_type)


class TmaEpilogue:
    """The `epilogue=tma` stores of one consumer group (see the module docstring)."""

    def __init__(
        self,
        threads: Threads,
        base: int,
        warpgroups: int,
        boxes: dict[SSAValue, DescType],
        body: Block,
    ):
        self.threads, self.base, self.warpgroups = threads, base, warpgroups
        self.boxes = boxes
        self.body = body
        self.staging: dict[SSAValue, tuple[SSAValue, SSAValue]] = {}  # desc -> (buf, slot0)
        self.local: SSAValue | None = None  # the warpgroup's index in the group (n > 1)

    def _box(self, op: tile.StoreOp | tile.StoreSliceOp) -> DescType | None:
        """The TMA box `[1, ...,] rows x span` of the store, or None when it keeps st.global."""
        box = tma_store_box(op)
        previous = self.boxes.get(op.desc)
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
            first, self.local = slot0.result, local.result
        else:
            first = self.threads.zero
        assert self.body.first_op is not None
        insert_before(self.body.first_op, ops)
        self.staging[op.desc] = (buf.buf, first)
        return self.staging[op.desc]

    def store(self, op: tile.StoreOp | tile.StoreSliceOp) -> None:
        box = self._box(op)
        assert box is not None
        self.boxes[op.desc] = box
        buf, slot0 = self._staging(op)
        value = op.value.type
        assert isinstance(value, TensorType | FragmentType)
        span = box.get_block_shape()[-1]
        is_t0 = self.threads.is_thread0
        *outer, first_col = op.offsets
        stores: list[Operation] = []
        for j in range(value.get_shape()[1] // span):
            if j == 0:
                col, slot = first_col, slot0
            else:
                delta = arith.ConstantOp(IntegerAttr(j * span, i32))
                col_op = arith.AddiOp(first_col, delta)
                step = arith.ConstantOp(IntegerAttr(j, i32))
                slot_op = arith.AddiOp(slot0, step)
                stores += [delta, col_op, step, slot_op]
                col, slot = col_op.result, slot_op.result
            stores.append(nvgpu.TmaStoreOp(op.desc, [*outer, col], buf, slot))
        stores.append(nvgpu.TmaStoreCommitOp())
        if is_tile(op.value):
            raise fail(op, "stores a tile that is not a register fragment")
        ops: list[Operation] = [
            if_op(is_t0, [nvgpu.TmaStoreWaitOp(0)]),
            *self._meet(),
            nvgpu.FragmentStoreOp(op.value, buf, slot0),
            nvgpu.FenceProxyAsyncOp(),
            *self._meet(),
            if_op(is_t0, stores),
        ]
        Rewriter.replace_op(op, ops, [])

    def _meet(self) -> list[Operation]:
        """The warpgroup's threads meet on its own epilogue barrier (an `scf.if` chain on its
        index in the group when there are several)."""
        ids = EPILOGUE_BARRIER_IDS[: self.warpgroups]
        chain: list[Operation] = [nvgpu.NamedBarrierSyncOp(ids[-1], WARPGROUP_THREADS)]
        for k in reversed(range(len(ids) - 1)):
            assert self.local is not None
            index = arith.ConstantOp(IntegerAttr(k, i32))
            mine = arith.CmpiOp(self.local, index, "eq")
            sync = nvgpu.NamedBarrierSyncOp(ids[k], WARPGROUP_THREADS)
            chain = [index, mine, if_op(mine.result, [sync], chain)]
        return chain

    def finish(self) -> None:
        """Before the consumers exit: their last TMA stores have read the staging slots."""
        if self.staging:
            self.body.add_op(if_op(self.threads.is_thread0, [nvgpu.TmaStoreWaitOp(0)]))
