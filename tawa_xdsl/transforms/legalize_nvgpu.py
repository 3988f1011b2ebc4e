"""legalize-nvgpu: write into nvgpu-level IR what emit-ptx would otherwise have to decide.

Input and output: nvgpu-level IR (after `lower-to-nvgpu`); no op is added or removed, each op
that needs a plan gets it as properties, checked by the op's verifier:

* `nvgpu.smem_alloc` / `nvgpu.mbarrier_alloc`: the placement, `offset` = the first byte in
  the dynamic smem window, and a buffer's `slot_stride` (its slot bytes: slot k starts at
  `offset + k * slot_stride`, the address every op on a slot prints). Buffers come first, in
  program order, each 1024-byte aligned (every swizzle pattern starts on its repeat
  boundary); the 8-byte mbarriers follow them.
* `nvgpu.wgmma_mma_async` / `_rs`: the descriptor plan of every smem operand, `x_desc_bits`
  (the constant bits: swizzle code, SBO, LBO) and `x_desc_steps` (the encoded offset of each
  instruction's operand). A K-major operand advances `k * elem` bytes per k step inside its
  row; a slot wider than the 128-byte span is stored as column slabs, so step `kk` lands in
  slab `(kk * k * elem) // 128` at `rows * 128` bytes per slab. A advances 64 rows
  (`64 * span` bytes) per block. An MN-major operand (B with `transpose_b`, A with
  `transpose_a`) advances `k` rows per step; an MN-major A advances one 64-element column
  slab (`K * span` bytes) per block. A slice of A (`a_row`) gets `a_row_pitch`, the bytes
  its start moves per row of M.
* `nvgpu.tma_load`: the box plan, one box per 128-byte column slab of the slot (the tensor
  map's box is `rows x span`): its smem offset and its innermost-coordinate offset.
* `nvgpu.fragment_mask`: the branch plan, the largest value of each condition's left side over
  the tile; the printer skips the selects when every bound exceeds its corner.
* `nvgpu.fragment_store_global` / `nvgpu.fragment_store`: the store plan, one entry per
  `st.global` / `st.shared` (its first value and that value's offset from the thread's
  origin, from the fragment's layout object); a global store also the dims it is clipped
  against (the plane's rows and columns).
* `nvgpu.fragment_store` / `nvgpu.fragment_load`: the address plan of every `st.shared` /
  `ld.shared`: `row_pitch` (bytes between rows of a column slab), `slab_pitch` (between
  slabs) and `swizzle` (the XOR of 16-byte chunks by row, TMA's and wgmma's), so byte x of
  row r is at `slot_byte(r, x)` (`dialects/nvgpu/fragment.py`). A `fragment_store` whose
  every store keeps the swizzle phase of the thread's origin row and one 16-byte chunk
  (`phase_is_uniform`: 16-bit pairs, row offsets of whole swizzle repeats) also gets
  `uniform_phase`: the printer then computes the phase once per thread.
* `nvgpu.fragment_column_stage` / `nvgpu.fragment_column_combine` (a reduction along the
  rows, its warps' partials exchanged through smem): the partials plan, `row_pitch` (bytes
  of one partials row), `value_cols` (each value's column from the thread's origin column,
  the `wgmma_col` layout's) and, for a stage, `warp_rows` (a thread whose origin row r is a
  multiple of it stores, at partials row r / warp_rows: one lane row per warp), for a
  combine, `partial_rows` (the rows it combines, in order).

Each plan is a static fact of the buffer type, so the op's verifier checks it (a stride, pitch
or swizzle that is not the buffer's is refused); the nvgpu interpreter runs it on shared memory
modelled as bytes, where TMA and wgmma swizzle by address as the hardware does, so a plan the
verifier was not asked about shows as a wrong result or an error on the CPU.

Running it twice writes the same plans. It rejects, naming the op, smem operands a wgmma
descriptor cannot describe (no swizzle; slabs or MN-major with a swizzle other than 128 B)
and TMA stores whose slot rows are not exactly the swizzle span (one box per slot).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, UnitAttr, i32, i64
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import (
    DESCRIPTOR_UNIT,
    MBARRIER_BYTES,
    SMEM_ALIGN,
    SWIZZLE_128B_SPAN,
    WARPGROUP_ROWS,
    SmemType,
    element_bytes,
    fragment_type,
    instruction_count,
    smem_type,
)
from tawa_xdsl.dialects.nvgpu.fragment import phase_is_uniform
from tawa_xdsl.dialects.nvgpu.wgmma import descriptor_bits

PASS = "legalize-nvgpu"


def _fail(op: Operation, message: str) -> PassFailedException:
    return PassFailedException(f"{PASS}: '{op.name}' {message}")


def row_bytes(buf: SmemType) -> int:
    return buf.slot_shape[-1] * element_bytes(buf.element_type)


def k_major_offset(buf: SmemType, k_bytes: int) -> int:
    """Byte offset of column byte `k_bytes` of a K-major slot stored as span-wide slabs."""
    span = buf.swizzle_bytes
    if row_bytes(buf) == span:
        return k_bytes
    slab, within = divmod(k_bytes, span)
    return slab * buf.slot_shape[0] * span + within


def check_descriptor_slot(op: Operation, buf: SmemType, mn_major: bool) -> None:
    span = buf.swizzle_bytes
    if span == 0:
        raise _fail(op, f"needs swizzled slots for its smem descriptors, got {buf}")
    if (mn_major or row_bytes(buf) != span) and span != SWIZZLE_128B_SPAN:
        raise _fail(
            op,
            f"needs 128B-swizzled slots when rows are wider than the span or B is "
            f"transposed, got {buf}",
        )


def descriptor_plan(
    op: Operation, buf: SmemType, k: int, k_steps: int, blocks: int, mn_major: bool
) -> tuple[int, list[int]]:
    """(constant bits, encoded offset per instruction, block-major) of one smem operand."""
    check_descriptor_slot(op, buf, mn_major)
    span, step_k = buf.swizzle_bytes, k // k_steps
    bits = descriptor_bits(buf, mn_major)
    if mn_major:
        offsets = [kk * step_k * span for kk in range(k_steps)]
    else:
        eb = element_bytes(buf.element_type)
        offsets = [k_major_offset(buf, kk * step_k * eb) for kk in range(k_steps)]
    # the next 64 rows of M: 64 slot rows (K-major), the next column slab (MN-major)
    block_bytes = buf.slot_shape[0] * span if mn_major else WARPGROUP_ROWS * span
    steps = [(b * block_bytes + off) // DESCRIPTOR_UNIT for b in range(blocks) for off in offsets]
    return bits, steps


def plan_attrs(bits: int, steps: list[int]) -> tuple[IntegerAttr, DenseArrayBase]:
    return IntegerAttr(bits, i64), DenseArrayBase.from_list(i64, steps)


def legalize_wgmma(op: nvgpu.WgmmaMmaAsyncOp | nvgpu.WgmmaMmaAsyncRsOp) -> None:
    rows = fragment_type(op.acc).get_shape()[0]
    b = smem_type(op.b_buf)
    transposed = op.transpose_b is not None
    k = b.slot_shape[0] if transposed else b.slot_shape[1]
    blocks, k_steps = instruction_count(rows, k, b.element_type)
    bits, steps = descriptor_plan(op, b, k, k_steps, 1, transposed)
    op.b_desc_bits, op.b_desc_steps = plan_attrs(bits, steps)
    if isinstance(op, nvgpu.WgmmaMmaAsyncOp):
        a = smem_type(op.a_buf)
        bits, steps = descriptor_plan(op, a, k, k_steps, blocks, op.transpose_a is not None)
        op.a_desc_bits, op.a_desc_steps = plan_attrs(bits, steps)
        if op.a_row is not None:
            op.a_row_pitch = IntegerAttr(op.expected_row_pitch(), i32)


def legalize_tma_load(op: nvgpu.TmaLoadOp) -> None:
    buf = smem_type(op.buf)
    span, width = buf.swizzle_bytes, row_bytes(buf)
    slabs = width // span if span and width > span else 1
    rows = buf.slot_bytes() // width
    eb = element_bytes(buf.element_type)
    op.box_smem_offsets = DenseArrayBase.from_list(i32, [s * rows * span for s in range(slabs)])
    op.box_col_offsets = DenseArrayBase.from_list(i32, [s * span // eb for s in range(slabs)])


def legalize_tma_store(op: nvgpu.TmaStoreOp) -> None:
    buf = smem_type(op.buf)
    if buf.swizzle_bytes and row_bytes(buf) != buf.swizzle_bytes:
        raise _fail(
            op,
            f"needs slot rows of exactly the swizzle span ({buf.swizzle_bytes} bytes), got "
            f"{row_bytes(buf)}: one TMA box per slot",
        )


def place_smem(kernel: func.FuncOp) -> None:
    """Write every buffer's and barrier array's offset in the dynamic smem window, and every
    buffer's slot stride (its slot bytes)."""
    end = 0
    allocs = [op for op in kernel.walk() if isinstance(op, nvgpu.SmemAllocOp)]
    allocs += [op for op in kernel.walk() if isinstance(op, nvgpu.MBarrierAllocOp)]
    for op in allocs:
        align = SMEM_ALIGN if isinstance(op, nvgpu.SmemAllocOp) else MBARRIER_BYTES
        end = -(-end // align) * align
        op.offset = IntegerAttr(end, i32)
        if isinstance(op, nvgpu.SmemAllocOp):
            op.slot_stride = IntegerAttr(smem_type(op.buf).slot_bytes(), i32)
        end += op.placed_bytes()


def plan_addresses(op: nvgpu.FragmentStoreOp | nvgpu.FragmentLoadOp) -> None:
    """The address plan of an ld/st.shared of a fragment: the slot's row and slab pitches and
    the swizzle TMA and wgmma use on it (`slot_byte`)."""
    buf = smem_type(op.buf)
    op.row_pitch = IntegerAttr(buf.row_pitch(), i32)
    op.slab_pitch = IntegerAttr(buf.slab_pitch(), i32)
    op.swizzle = IntegerAttr(buf.swizzle_bytes, i32)


def plan_partials(op: nvgpu.FragmentColumnStageOp | nvgpu.FragmentColumnCombineOp) -> None:
    """The partials plan of a column reduction's smem exchange: the bytes of one partials
    row, each value's column from the thread's origin column (the `wgmma_col` layout's), and
    the accumulator rows per staging warp (a stage) or the rows to combine (a combine)."""
    buf = smem_type(op.buf)
    frag = fragment_type(op.value if isinstance(op, nvgpu.FragmentColumnStageOp) else op.result)
    shape, layout = frag.get_shape(), frag.layout_object
    op.row_pitch = IntegerAttr(buf.slot_shape[-1] * element_bytes(buf.element_type), i32)
    cols = [layout.value_offset(shape, v) for v in range(frag.values_per_thread())]
    op.value_cols = DenseArrayBase.from_list(i32, cols)
    rows = IntegerAttr(op.expected_rows(), i32)
    if isinstance(op, nvgpu.FragmentColumnStageOp):
        op.warp_rows = rows
    else:
        op.partial_rows = rows


def legalize_fragment_mask(op: nvgpu.FragmentMaskOp) -> None:
    rows, cols = fragment_type(op.source).get_shape()
    corners = [
        max(row_k, 0) * (rows - 1) + max(col_k, 0) * (cols - 1)
        for row_k, col_k, _ in op.conditions()
    ]
    op.skip_corners = DenseArrayBase.from_list(i32, corners)


def plan_stores(op: nvgpu.FragmentStoreOp | nvgpu.FragmentStoreGlobalOp, width: int) -> None:
    """The store plan: each store's first value and its (row, col) offset from the thread's
    origin, as the fragment's layout object places them (a row vector's rows count along
    the plane's columns)."""
    ty = fragment_type(op.value)
    shape, layout = ty.get_shape(), ty.layout_object
    values = list(range(0, ty.values_per_thread(), width))
    if ty.kind == nvgpu.FragmentLayout.WGMMA_ROW:
        rows, cols = [0] * len(values), [layout.value_offset(shape, v) for v in values]
    else:
        rows, cols = zip(*(layout.value_offset(shape, v) for v in values), strict=True)
    op.store_values = DenseArrayBase.from_list(i32, values)
    op.store_rows = DenseArrayBase.from_list(i32, list(rows))
    op.store_cols = DenseArrayBase.from_list(i32, list(cols))


def legalize_store_global(op: nvgpu.FragmentStoreGlobalOp) -> None:
    """The store plan, clipped against the plane's rows and columns."""
    plan_stores(op, op.store_width())
    rank = len(op.offsets)
    op.clip_dims = DenseArrayBase.from_list(i32, [rank - 2, rank - 1] if rank > 1 else [0])


@dataclass(frozen=True)
class LegalizeNvgpuPass(ModulePass):
    """Write the smem placement and the descriptor, box, branch, store, address and
    partials plans emit-ptx prints (see the module docstring)."""

    name = "legalize-nvgpu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in op.ops:
            if isinstance(kernel, func.FuncOp):
                place_smem(kernel)
        for inner in op.walk():
            if isinstance(inner, nvgpu.WgmmaMmaAsyncOp | nvgpu.WgmmaMmaAsyncRsOp):
                legalize_wgmma(inner)
            elif isinstance(inner, nvgpu.TmaLoadOp):
                legalize_tma_load(inner)
            elif isinstance(inner, nvgpu.TmaStoreOp):
                legalize_tma_store(inner)
            elif isinstance(inner, nvgpu.FragmentMaskOp):
                legalize_fragment_mask(inner)
            elif isinstance(inner, nvgpu.FragmentStoreGlobalOp):
                legalize_store_global(inner)
            elif isinstance(inner, nvgpu.FragmentStoreOp):
                plan_stores(inner, 2)
                plan_addresses(inner)
                if phase_is_uniform(inner):
                    inner.uniform_phase = UnitAttr()
            elif isinstance(inner, nvgpu.FragmentLoadOp):
                plan_addresses(inner)
            elif isinstance(inner, nvgpu.FragmentColumnStageOp | nvgpu.FragmentColumnCombineOp):
                plan_partials(inner)
