"""The attention part of `lower-to-nvgpu`: softmax consumers from tiles to fragments.

`lower_to_nvgpu.lower_kernel` calls `lower_attention_consumers` first; it rewrites every
consumer group that computes a softmax (a `tile.reduce`, `math.exp2` or `tile.where` on
tiles, or 1-D float tiles) and leaves GEMM kernels alone. What it leaves is at the level the
GEMM lowering passes through: nvgpu fragment ops, wgmmas, barriers (the generic lowering
then guards the arrives and adds the loop's `wgmma_wait_group`s).

One consumer warpgroup owns 64 query rows (after `pipeline`'s cooperative split):

* **Slots.** Buffers whose slots have leading unit dims (the 1x128x64 boxes of 3-D
  descriptors) become 2-D (128x64); `tile.reshape` / `tile.extract_slice` / `tile.trans` of a
  slot stay views of it (rows of Q for this warpgroup, K read transposed).
* **S = Q K^T.** `tile.dot` of two slot views: fence, `nvgpu.wgmma_mma_async`, commit, then
  `wgmma_wait_group 0` (the K slot is released right after it, so the MMA must be done).
* **Softmax.** 2-D f32 tiles are `wgmma_acc` fragments, 1-D f32 tiles are `wgmma_row`
  fragments. `tile.reduce` along columns -> `fragment_row_reduce` and two `shuffle_xor`
  steps (lanes 1 and 2 of a quad); `expand_dims` + `broadcast` of a row vector ->
  `fragment_broadcast_rows`; `arith` on float tiles -> `fragment_binary`; `math.exp2` ->
  `fragment_unary exp2` (ex2.approx).
* **Masks.** i32 and i1 tiles are never materialized: `arange`, `splat`, `addi`/`subi`,
  `expand_dims` and `broadcast` build affine index expressions `a*r + b*c + scalars` over
  the fragment's row r and column c, `tile.cmp` and `arith.andi` turn them into conditions,
  and `tile.where(cond, x, splat(fill))` becomes one `nvgpu.fragment_mask` whose bounds are
  computed from the scalars (sequence-end and causal masks alike).
* **O += P V.** `tile.convert` of a tile that feeds a dot's A becomes a `wgmma_operand_a`
  fragment (the accumulator layout of each k16 slice is the A layout: conversion only), and
  the dot a `nvgpu.wgmma_mma_async_rs` with V read N-major (`transpose_b`).
* **Epilogue.** `tile.reshape` of a fragment is the fragment; stores become
  `nvgpu.fragment_store_global` (st.global, clipped to the tensor; any rank whose leading
  block dims are 1), of the output accumulator and of row vectors (the log-sum-exp, a
  `[1, rows]` reshape of one, `math.log2` -> `fragment_unary log2`).
* **MMA overlap** (`overlap_mmas`, in a loop that `pipeline` gave a lookahead QK^T): QK^T(j+1)
  is issued at the top of iteration j and waited for only after P V(j), so it runs under the
  softmax of j:

      if (j+1 < ub) { wait K(j+1) full; QK^T(j+1); commit } else { S(j+1) = undef }
      softmax(j) on S(j)                           -- QK^T(j+1) in flight
      wait V(j) full; [arrive V(j-L) empty]        -- a lagged release (MMA depth > 1)
      O *= alpha; P V(j); commit
      wgmma_wait_group 0                           -- QK^T(j+1) and P V(j) done
      if (j+1 < ub) { arrive K(j+1) empty }; [arrive V(j) empty]

  Nothing is in flight across the back edge and no register of an in-flight wgmma is read
  or written: otherwise ptxas serializes every wgmma of the kernel (C7514 when O was
  rescaled with P V(j-1) still in flight from the previous iteration, C7515 when the
  else-branch wrote zeros into the lookahead's accumulator; hence the undefined fragment,
  which only reaches the loop's unused result). This lowering moves no barrier op:
  `pipeline.place_attention_releases` put the releases there at the aref level, so the
  mbarrier-level protocol `tawa-verify` proves after `lower-aref` is the one the GPU runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import arith, func, math, scf
from xdsl.dialects.builtin import Float32Type, IntegerAttr, IntegerType, TensorType, i32
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import PassFailedException

from tawa_xdsl.dialects import aref, nvgpu, tile
from tawa_xdsl.dialects.nvgpu import BinaryKind, FragmentLayout, FragmentType, squeeze_leading
from tawa_xdsl.dialects.tile import ComparePredicate, ReduceKind

FLOAT_BINARY: dict[type[Operation], BinaryKind] = {
    arith.AddfOp: BinaryKind.ADD,
    arith.SubfOp: BinaryKind.SUB,
    arith.MulfOp: BinaryKind.MUL,
    arith.DivfOp: BinaryKind.DIV,
    arith.MaximumfOp: BinaryKind.MAX,
    arith.MaxnumfOp: BinaryKind.MAX,
    arith.MinimumfOp: BinaryKind.MIN,
    arith.MinnumfOp: BinaryKind.MIN,
}
REDUCE_COMBINE = {ReduceKind.MAX: BinaryKind.MAX, ReduceKind.SUM: BinaryKind.ADD}


def _fail(op: Operation, message: str) -> PassFailedException:
    return PassFailedException(f"lower-to-nvgpu (attention): '{op.name}' {message}")


def _is_tile(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType)


def _is_index_tile(value: SSAValue) -> bool:
    """i32 and i1 tiles: indices and masks, kept symbolic."""
    return _is_tile(value) and isinstance(value.type.get_element_type(), IntegerType)  # type: ignore[union-attr]


def fragment_of(ty: TensorType) -> FragmentType:
    """The fragment of a consumer tile: 1-D -> wgmma_row, 2-D -> wgmma_acc."""
    shape = ty.get_shape()
    if len(shape) == 1:
        return FragmentType(FragmentLayout.WGMMA_ROW, shape, ty.element_type)
    return FragmentType(FragmentLayout.WGMMA_ACC, shape, ty.element_type)


def _const(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None


def _before(anchor: Operation, ops: list[Operation]) -> None:
    Rewriter.insert_op(ops, InsertPoint.before(anchor))


# ------------------------------------------------------------------------ symbolic indices


@dataclass(frozen=True)
class Index:
    """An i32 tile as `row * r + col * c + lane * i + sum(k * v for k, v in terms) + const`:
    r, c are the fragment's coordinates; a 1-D tile keeps its position i until
    `expand_dims` makes it a row (axis 1) or a column (axis 0) index."""

    row: int = 0
    col: int = 0
    lane: int = 0
    terms: tuple[tuple[int, SSAValue], ...] = ()
    const: int = 0

    def __add__(self, other: Index) -> Index:
        return Index(
            self.row + other.row,
            self.col + other.col,
            self.lane + other.lane,
            self.terms + other.terms,
            self.const + other.const,
        )

    def __neg__(self) -> Index:
        return Index(
            -self.row, -self.col, -self.lane, tuple((-k, v) for k, v in self.terms), -self.const
        )


@dataclass(frozen=True)
class Condition:
    """`index < 0` for an `Index` over the fragment's coordinates (no lane term)."""

    index: Index


@dataclass(frozen=True)
class View:
    """A tile that still lives in an smem slot: rows [row, ...) of slot `slot` of `buf`."""

    buf: SSAValue
    slot: SSAValue
    row: SSAValue | None = None
    transposed: bool = False


# ------------------------------------------------------------------------------ the entry


def is_attention_group(group: aref.GroupOp) -> bool:
    """A consumer group that computes a softmax (reductions, exp2, masks or row vectors)."""
    if group.role.data == aref.Role.PRODUCER:
        return False
    for op in group.body.walk():
        if isinstance(op, tile.ReduceOp | tile.WhereOp | math.Exp2Op):
            return True
        if any(_is_tile(r) and len(r.type.get_shape()) == 1 for r in op.results):  # type: ignore[union-attr]
            if not _is_index_tile(op.results[0]):
                return True
    return False


def lower_attention_consumers(kernel: func.FuncOp, pingpong: bool = False) -> bool:
    """Lower the softmax consumer groups of `kernel` (see the module docstring); return
    whether there were any. With `pingpong`, a group of two warpgroups alternates their MMA
    issue (`ping_pong`) in every loop that `overlap_mmas` rewrote."""
    groups = [
        g
        for s in kernel.body.block.ops
        if isinstance(s, aref.WarpSpecializeOp)
        for g in s.groups()
        if is_attention_group(g)
    ]
    if not groups:
        return False
    hoist_allocations(kernel)
    squeeze_slots(kernel)
    for group in groups:
        AttentionLowering().block(group.body.block)
        for loop in [op for op in group.body.walk() if isinstance(op, scf.ForOp)]:
            if overlap_mmas(loop) and pingpong and group.num_warpgroups == 2:
                ping_pong(loop)
    return True


def hoist_allocations(kernel: func.FuncOp) -> None:
    """Move every top-level smem and mbarrier allocation to the kernel's entry, in order.

    Each ring of `lower-aref` is allocated and initialized in turn; the generic lowering
    gathers all inits into one thread-0 block at the first init, which must not read the
    barriers of later rings before they are allocated (three rings here: Q, K, V)."""
    block = kernel.body.block
    allocs = [o for o in block.ops if isinstance(o, nvgpu.SmemAllocOp | nvgpu.MBarrierAllocOp)]
    for op in allocs:
        op.detach()
    first = block.first_op
    assert first is not None
    _before(first, allocs)


def squeeze_slots(kernel: func.FuncOp) -> None:
    """Drop the leading unit dims of smem slots (a 1x128x64 box fills a 128x64 slot)."""
    for op in list(kernel.walk()):
        if not isinstance(op, nvgpu.SmemAllocOp):
            continue
        ty = op.buf.type
        assert isinstance(ty, nvgpu.SmemType)
        slot = squeeze_leading(ty.slot_shape)
        if slot != ty.slot_shape:
            new = nvgpu.SmemType((ty.slot_count, *slot), ty.element_type, ty.swizzle_bytes)
            hint = op.buf.name_hint
            Rewriter.replace_value_with_new_type(op.buf, new).name_hint = hint


# ------------------------------------------------------------------------------ lowering


@dataclass
class AttentionLowering:
    """Tiles -> fragments for one softmax consumer group (one warpgroup's rows)."""

    views: dict[SSAValue, View] = field(default_factory=dict)
    indices: dict[SSAValue, Index] = field(default_factory=dict)
    conditions: dict[SSAValue, list[Condition]] = field(default_factory=dict)
    row_columns: dict[SSAValue, SSAValue] = field(default_factory=dict)  # [rows, 1] of a row vec
    # 1-D slot reads spread over rows (a GEMM bias): the fragment_load_columns they become
    columns: dict[SSAValue, SSAValue] = field(default_factory=dict)
    float_compares: dict[SSAValue, tile.CmpOp] = field(default_factory=dict)  # f32 tile.cmp
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
        self.dead.append(op)

    def op(self, op: Operation) -> None:  # noqa: C901 (one case per tile op)
        match op:
            case nvgpu.SmemLoadOp():
                self.views[op.result] = View(op.buf, op.slot)
                self.symbolic(op)
            case tile.ReshapeOp() if op.source in self.views:
                self.views[op.result] = self.views[op.source]
                self.symbolic(op)
            case tile.ReshapeOp() if isinstance(op.source.type, FragmentType):
                Rewriter.replace_op(op, [], [op.source])
            case tile.ExtractSliceOp() if op.source in self.views:
                self.slice_view(op)
            case tile.TransOp() if op.source in self.views:
                view = self.views[op.source]
                self.views[op.result] = View(view.buf, view.slot, view.row, not view.transposed)
                self.symbolic(op)
            case tile.DotOp():
                self.dot(op)
            case tile.SplatOp() if _is_index_tile(op.result):
                self.indices[op.result] = Index(terms=((1, op.operands[0]),))
                self.symbolic(op)
            case tile.SplatOp():
                ty = op.result.type
                assert isinstance(ty, TensorType)
                Rewriter.replace_op(op, nvgpu.FragmentSplatOp(op.operands[0], fragment_of(ty)))
            case tile.ArangeOp():
                self.indices[op.result] = Index(lane=1, const=op.start.value.data)
                self.symbolic(op)
            case arith.AddiOp() | arith.SubiOp() if _is_index_tile(op.result):
                lhs, rhs = self.index(op, op.lhs), self.index(op, op.rhs)
                self.indices[op.result] = lhs + (rhs if isinstance(op, arith.AddiOp) else -rhs)
                self.symbolic(op)
            case arith.AndIOp() if _is_index_tile(op.result):
                self.conditions[op.result] = self.condition(op, op.lhs) + self.condition(op, op.rhs)
                self.symbolic(op)
            case tile.ExpandDimsOp():
                self.expand_dims(op)
            case tile.BroadcastOp():
                self.broadcast(op)
            case tile.CmpOp():
                self.compare(op)
            case tile.WhereOp():
                self.where(op)
            case tile.ReduceOp():
                self.reduce(op)
            case math.Exp2Op() if _is_tile(op.result):
                Rewriter.replace_op(op, nvgpu.FragmentUnaryOp(nvgpu.UnaryKind.EXP2, op.operand))
            case math.Log2Op() if _is_tile(op.result):
                Rewriter.replace_op(op, nvgpu.FragmentUnaryOp(nvgpu.UnaryKind.LOG2, op.operand))
            case _ if type(op) in FLOAT_BINARY and _is_tile(op.results[0]):
                lhs, rhs = op.operands
                Rewriter.replace_op(op, nvgpu.FragmentBinaryOp(FLOAT_BINARY[type(op)], lhs, rhs))
            case tile.ConvertOp():
                self.convert(op)
            case tile.StoreOp() | tile.StoreSliceOp():
                Rewriter.replace_op(
                    op, nvgpu.FragmentStoreGlobalOp(op.value, op.desc, list(op.offsets))
                )
            case scf.ForOp():
                self.retype([*op.body.block.args[1:], *op.results])
                self.block(op.body.block)
            case scf.IfOp():
                self.retype(list(op.results))
                for region in op.regions:
                    for block in region.blocks:
                        self.block(block)
            case _:
                tiles = [v for v in (*op.operands, *op.results) if _is_tile(v)]
                if tiles and not isinstance(op, scf.YieldOp):
                    raise _fail(op, "on tiles is not lowered to the nvgpu level yet")

    @staticmethod
    def retype(values: list[SSAValue]) -> None:
        for value in values:
            if _is_tile(value):
                if _is_index_tile(value):
                    raise PassFailedException(
                        "lower-to-nvgpu (attention): index or mask tiles cannot be loop-carried"
                    )
                assert isinstance(value.type, TensorType)
                Rewriter.replace_value_with_new_type(value, fragment_of(value.type))

    # ----------------------------------------------------------------- slots and dots

    def slice_view(self, op: tile.ExtractSliceOp) -> None:
        view = self.views[op.source]
        src, dst = op.source.type, op.result.type
        assert isinstance(src, TensorType) and isinstance(dst, TensorType)
        offsets = list(op.offsets)
        others = [o for i, o in enumerate(offsets) if i != len(offsets) - 2]
        if view.transposed or view.row is not None or any(_const(o) != 0 for o in others):
            raise _fail(op, "must take whole rows of an untransposed smem slot")
        if src.get_shape()[-1] != dst.get_shape()[-1]:
            raise _fail(op, "must keep every column of the slot (a row slice)")
        self.views[op.result] = View(view.buf, view.slot, offsets[-2])
        self.symbolic(op)

    def dot(self, op: tile.DotOp) -> None:
        """SS wgmma (Q K^T, then wait: its K slot is released next) or RS wgmma (P V)."""
        b = self.views.get(op.rhs)
        if b is None:
            raise _fail(op, "needs B read from an smem slot")
        acc = self.fresh_acc(op)
        a = self.views.get(op.lhs)
        if a is not None:
            if a.transposed:
                raise _fail(op, "needs a K-major A (an untransposed MxK slot)")
            mma: Operation = nvgpu.WgmmaMmaAsyncOp(
                a.buf, a.slot, b.buf, b.slot, acc, a_row=a.row, transpose_b=not b.transposed
            )
            tail: list[Operation] = [nvgpu.WgmmaCommitGroupOp(), nvgpu.WgmmaWaitGroupOp(0)]
        elif isinstance(op.lhs.type, FragmentType):
            mma = nvgpu.WgmmaMmaAsyncRsOp(op.lhs, b.buf, b.slot, acc, transpose_b=not b.transposed)
            tail = [nvgpu.WgmmaCommitGroupOp()]
        else:
            raise _fail(op, "needs A from an smem slot or a register fragment")
        Rewriter.replace_op(op, [nvgpu.WgmmaFenceOp(), mma, *tail], [mma.results[0]])

    def fresh_acc(self, op: tile.DotOp) -> SSAValue:
        """The accumulator; a splat gets a clone of its own right before the dot, so the
        wgmma accumulates in place into registers nothing else reads (a splat hoisted out of
        the loop would otherwise be overwritten by the first iteration)."""
        acc = op.acc
        owner = acc.owner
        if isinstance(owner, nvgpu.FragmentSplatOp):
            clone = nvgpu.FragmentSplatOp(owner.value, owner.result.type)  # type: ignore[arg-type]
            _before(op, [clone])
            self.dead.append(owner)  # erased with the block's views once unused
            return clone.result
        return acc

    def convert(self, op: tile.ConvertOp) -> None:
        if op.source in self.views:
            return self.load_columns(op)
        ty = op.result.type
        assert isinstance(ty, TensorType)
        feeds_a = any(isinstance(u.operation, tile.DotOp) and u.index == 0 for u in op.result.uses)
        if feeds_a:
            if not all(
                isinstance(u.operation, tile.DotOp) and u.index == 0 for u in op.result.uses
            ):
                raise _fail(op, "feeds a dot's A operand and something else")
            result = FragmentType(FragmentLayout.WGMMA_OPERAND_A, ty.get_shape(), ty.element_type)
        else:
            result = fragment_of(ty)
        Rewriter.replace_op(op, nvgpu.FragmentConvertOp(op.operands[0], result))

    def load_columns(self, op: tile.ConvertOp) -> None:
        """`convert` of a 1-D slot read that `expand_dims` (axis 0) and `broadcast` spread over
        the rows (a GEMM bias): one `fragment_load_columns` here, where the slot is held."""
        spread = [u.operation for u in op.result.uses]
        if not all(isinstance(e, tile.ExpandDimsOp) and e.axis.value.data == 0 for e in spread):
            raise _fail(op, "of a slot read needs a 1-D vector spread over rows (expand_dims 0)")
        shapes = {
            b.result.type
            for e in spread
            for b in (u.operation for u in e.results[0].uses)
            if isinstance(b, tile.BroadcastOp)
        }
        ty = op.result.type
        if len(shapes) != 1 or not isinstance(ty, TensorType) or ty.element_type != Float32Type():
            raise _fail(op, "of a slot read needs one f32 broadcast over rows")
        (shape,) = shapes
        view = self.views[op.source]
        load = nvgpu.FragmentLoadColumnsOp(view.buf, view.slot, fragment_of(shape))  # type: ignore[arg-type]
        _before(op, [load])
        self.columns[op.result] = load.result
        self.symbolic(op)

    # ------------------------------------------------------------------ row vectors

    def reduce(self, op: tile.ReduceOp) -> None:
        """Per-thread partial over its columns, then butterflies over the quad's 4 lanes."""
        src = op.source.type
        if not isinstance(src, FragmentType) or op.axis.value.data != 1:
            raise _fail(op, "must reduce an accumulator tile along its columns (axis 1)")
        combine = REDUCE_COMBINE[op.kind.data]
        partial = nvgpu.FragmentRowReduceOp(op.kind.data, op.source)
        ops: list[Operation] = [partial]
        value = partial.result
        for mask in (1, 2):
            other = nvgpu.ShuffleXorOp(value, mask)
            both = nvgpu.FragmentBinaryOp(combine, value, other)
            ops += [other, both]
            value = both.result
        Rewriter.replace_op(op, ops, [value])

    def expand_dims(self, op: tile.ExpandDimsOp) -> None:
        axis = op.axis.value.data
        if op.source in self.indices:
            index = self.indices[op.source]
            placed = Index(col=index.lane) if axis == 0 else Index(row=index.lane)
            self.indices[op.result] = placed + Index(
                index.row, index.col, 0, index.terms, index.const
            )
            self.symbolic(op)
        elif isinstance(op.source.type, FragmentType) and axis == 1:
            self.row_columns[op.result] = op.source
            self.symbolic(op)
        elif op.source in self.columns and axis == 0:
            self.columns[op.result] = self.columns[op.source]
            self.symbolic(op)
        else:
            raise _fail(op, "must turn a row vector into a column (axis 1) or place an index")

    def broadcast(self, op: tile.BroadcastOp) -> None:
        if op.source in self.indices:
            self.indices[op.result] = self.indices[op.source]
        elif op.source in self.conditions:
            self.conditions[op.result] = self.conditions[op.source]
        elif op.source in self.columns:
            Rewriter.replace_op(op, [], [self.columns[op.source]])
            return
        elif op.source in self.row_columns:
            ty = op.result.type
            assert isinstance(ty, TensorType)
            rows = nvgpu.FragmentBroadcastRowsOp(self.row_columns[op.source], ty.get_shape()[1])
            Rewriter.replace_op(op, rows)
            return
        else:
            raise _fail(op, "must broadcast a row vector along columns, or an index or mask")
        self.symbolic(op)

    # ------------------------------------------------------------------------ masks

    def index(self, op: Operation, value: SSAValue) -> Index:
        if value not in self.indices:
            raise _fail(op, "needs an index tile built from arange, splat, addi and expand_dims")
        return self.indices[value]

    def condition(self, op: Operation, value: SSAValue) -> list[Condition]:
        if value not in self.conditions:
            raise _fail(op, "needs a mask built from tile.cmp and arith.andi")
        return self.conditions[value]

    def compare(self, op: tile.CmpOp) -> None:
        """a < b: a - b < 0; a <= b: a - b - 1 < 0; a > b: b - a < 0; a >= b: b - a - 1 < 0.
        A compare of f32 fragments (a data-dependent mask) waits for its `tile.where`."""
        if isinstance(op.lhs.type, FragmentType):
            self.float_compares[op.result] = op
            self.symbolic(op)
            return
        lhs, rhs = self.index(op, op.lhs), self.index(op, op.rhs)
        predicate = op.predicate.data
        minus_one = Index(const=-1)
        forms = {
            ComparePredicate.LT: lhs + -rhs,
            ComparePredicate.LE: lhs + -rhs + minus_one,
            ComparePredicate.GT: rhs + -lhs,
            ComparePredicate.GE: rhs + -lhs + minus_one,
        }
        if predicate not in forms:
            raise _fail(op, f"with predicate '{predicate}' is not supported (lt, le, gt, ge)")
        index = forms[predicate]
        if index.lane:
            raise _fail(op, "compares 1-D index tiles (expand them to 2-D first)")
        self.conditions[op.result] = [Condition(index)]
        self.symbolic(op)

    def where(self, op: tile.WhereOp) -> None:
        if op.condition in self.float_compares:  # e.g. leaky relu: x < 0 ? x * a : x
            cmp = self.float_compares[op.condition]
            select = nvgpu.FragmentSelectOp(
                cmp.predicate, cmp.lhs, cmp.rhs, op.true_value, op.false_value
            )
            Rewriter.replace_op(op, select)
            return
        fill = op.false_value.owner
        if not isinstance(fill, nvgpu.FragmentSplatOp):
            raise _fail(op, "needs a splat of a scalar as its false value (the fill)")
        if not isinstance(op.true_value.type, FragmentType) or not isinstance(
            op.true_value.type.element_type, Float32Type
        ):
            raise _fail(op, "needs an f32 accumulator tile as its true value")
        ops: list[Operation] = []
        conditions = []
        for cond in self.condition(op, op.condition):
            bound, bound_ops = self.bound(cond.index)
            ops += bound_ops
            conditions.append((cond.index.row, cond.index.col, bound))
        mask = nvgpu.FragmentMaskOp(op.true_value, fill.value, conditions)
        Rewriter.replace_op(op, [*ops, mask])

    @staticmethod
    def bound(index: Index) -> tuple[SSAValue, list[Operation]]:
        """`-(sum of terms + const)`: the right-hand side of `row*r + col*c < bound`."""
        start = arith.ConstantOp(IntegerAttr(-index.const, i32))
        ops: list[Operation] = [start]
        value = start.result
        for k, term in index.terms:
            if k == 1:
                step: Operation = arith.SubiOp(value, term)
            elif k == -1:
                step = arith.AddiOp(value, term)
            else:
                scale = arith.ConstantOp(IntegerAttr(-k, i32))
                product = arith.MuliOp(term, scale)
                ops += [scale, product]
                step = arith.AddiOp(value, product)
            ops.append(step)
            value = step.results[0]
        value.name_hint = "mask_bound"
        return value, ops


# ---------------------------------------------------------------------- MMA overlap


def _lookahead_mma(body: Block) -> tuple[scf.IfOp, nvgpu.WgmmaWaitGroupOp] | None:
    """The lookahead of `body` (the `scf.if` that `software-pipeline` marked stage 0 and that
    yields the next iteration's S) and the `wait_group` its wgmma ends with."""
    for op in body.ops:
        if isinstance(op, scf.IfOp) and aref.stage_of(op) == 0 and op.results:
            then = op.true_region.block
            waits = [o for o in then.ops if isinstance(o, nvgpu.WgmmaWaitGroupOp)]
            if len(waits) == 1:
                return op, waits[0]
    return None


def overlap_mmas(loop: scf.ForOp) -> bool:
    """Keep QK^T(j+1) in flight under softmax(j) (see the module docstring).

    Applies to a loop body with one lookahead `scf.if` (an SS wgmma, `wait_group 0`, then the
    K slot's release) and one RS wgmma (P V) whose result is loop-carried; anything else is
    left as it is. Returns whether the loop was rewritten."""
    body = loop.body.block
    found = _lookahead_mma(body)
    rs = [op for op in body.ops if isinstance(op, nvgpu.WgmmaMmaAsyncRsOp)]
    terminator = body.last_op
    if found is None or len(rs) != 1 or not isinstance(terminator, scf.YieldOp):
        return False
    ahead, wait = found
    pv = rs[0]
    commit = pv.next_op
    if not isinstance(commit, nvgpu.WgmmaCommitGroupOp) or pv.result not in terminator.operands:
        return False
    # A release inside the lookahead needs QK^T(j+1) done there: keep the synchronous form.
    # (`place-releases` puts K(j+1)'s release after P V(j): this lowering
    # moves no release, so the protocol `tawa-verify` proves after `lower-aref` is the one the
    # GPU runs.)
    if any(isinstance(o, nvgpu.MBarrierArriveOp) for o in ahead.true_region.block.walk()):
        return False
    Rewriter.erase_op(wait)
    Rewriter.insert_op(nvgpu.WgmmaWaitGroupOp(0), InsertPoint.after(commit))
    _leave_undefined(ahead, loop)
    return True


def _leave_undefined(ahead: scf.IfOp, loop: scf.ForOp) -> None:
    """The lookahead's else-branch runs in the last iteration only, so the S(j+1) it yields
    reaches nothing but the loop's result: when that is unused, yield an undefined fragment
    instead of zeros. ptxas serializes every wgmma of a kernel that writes a wgmma
    accumulator's registers with other instructions in a branch (C7515)."""
    else_yield = ahead.false_region.block.last_op
    loop_yield = loop.body.block.last_op
    assert isinstance(else_yield, scf.YieldOp) and isinstance(loop_yield, scf.YieldOp)
    operands = list(else_yield.operands)
    for k, (result, value) in enumerate(zip(ahead.results, operands, strict=True)):
        uses = list(result.uses)
        if not isinstance(value.type, FragmentType) or len(uses) != 1:
            continue
        if uses[0].operation is not loop_yield or loop.results[uses[0].index].uses:
            continue
        undef = nvgpu.FragmentUndefOp(value.type)
        Rewriter.insert_op(undef, InsertPoint.before(else_yield))
        operands[k] = undef.result
    zeros = [v.owner for v in else_yield.operands if isinstance(v.owner, nvgpu.FragmentSplatOp)]
    else_yield.operands = operands
    for splat in zeros:
        if not splat.result.uses:
            scalar = splat.value.owner
            Rewriter.erase_op(splat)
            if isinstance(scalar, arith.ConstantOp) and not scalar.result.uses:
                Rewriter.erase_op(scalar)


# ---------------------------------------------------------------------- ping-pong

# The named barrier of consumer warpgroup 0 and 1 (1: lower-aref's producer barrier, 2: the
# TMA epilogue's): a warpgroup waits at its own for its turn and arrives at the other's.
PINGPONG_BARRIERS = (3, 4)
PINGPONG_THREADS = 256  # one warpgroup syncs, the other arrives


def _by_warpgroup(wg: SSAValue, first: list[Operation], second: list[Operation]) -> list[Operation]:
    """`scf.if (wg == 0) { first } else { second }` (warpgroup-uniform), with its condition."""
    zero = arith.ConstantOp(IntegerAttr(0, i32))
    is_first = arith.CmpiOp(wg, zero, "eq")
    branch = scf.IfOp(is_first, [], [*first, scf.YieldOp()], [*second, scf.YieldOp()])
    return [zero, is_first, branch]


def ping_pong(loop: scf.ForOp) -> None:
    """Take turns with the other consumer warpgroup issuing MMAs (FlashAttention-3's
    warpgroup ping-pong), so that one's softmax runs under the other's wgmmas.

    A turn of iteration j runs from P V(j) to QK^T(j+2) (the lookahead at the top of j+1):

        if (wg == 1 && lb < ub) arrive(bar[0])          -- warpgroup 0 goes first
        for j:
          if (j > lb) arrive(bar[1 - wg])               -- end of the turn of j-1
          softmax(j) ...
          sync(bar[wg])                                 -- my turn: the other's turn is over
          P V(j); ...
        if (wg == 0 && lb < ub) arrive(bar[1])          -- end of warpgroup 0's last turn

    Each barrier completes once per turn: 128 threads sync at their own, the other 128
    arrive (n arrivals and n syncs on each for n iterations, none left pending). Both
    warpgroups run the same trip count (the loop bounds are per CTA)."""
    body = loop.body.block
    pv = next(op for op in body.ops if isinstance(op, nvgpu.WgmmaMmaAsyncRsOp))
    fence = pv.prev_op
    anchor = fence if isinstance(fence, nvgpu.WgmmaFenceOp) else pv
    ahead = next(
        op
        for op in body.ops
        if isinstance(op, scf.IfOp)
        and any(isinstance(o, nvgpu.WgmmaMmaAsyncOp) for o in op.true_region.block.ops)
    )
    mine, other = PINGPONG_BARRIERS
    wg = aref.WarpgroupIndexOp()
    runs = arith.CmpiOp(loop.lb, loop.ub, "slt")
    _before(loop, [wg, runs])

    def arrive(barrier: int) -> list[Operation]:
        return [nvgpu.NamedBarrierArriveOp(barrier, PINGPONG_THREADS)]

    def sync(barrier: int) -> list[Operation]:
        return [nvgpu.NamedBarrierSyncOp(barrier, PINGPONG_THREADS)]

    def guarded(cond: SSAValue, ops: list[Operation]) -> scf.IfOp:
        return scf.IfOp(cond, [], [*ops, scf.YieldOp()])

    _before(loop, [guarded(runs.result, _by_warpgroup(wg.result, [], arrive(mine)))])
    after = _by_warpgroup(wg.result, arrive(other), [])
    Rewriter.insert_op(guarded(runs.result, after), InsertPoint.after(loop))
    _before(anchor, _by_warpgroup(wg.result, sync(mine), sync(other)))
    later = arith.CmpiOp(body.args[0], loop.lb, "ne")
    top = guarded(later.result, _by_warpgroup(wg.result, arrive(other), arrive(mine)))
    Rewriter.insert_op([later, top], InsertPoint.after(ahead))
