"""emit-ptx for reshapes of fragments and column vectors: `nvgpu.fragment_gather` as
register moves (`mov.f32` per value, `mov.b32` per packed pair of 16-bit values) in the order
the op's plan gives; reductions along the rows (per-thread chains, lane butterflies, the
warps' partials through smem at the bytes of the op's partials plan), their broadcast over the
rows and their stores. Which value sits where comes from the layout objects and the plans
`legalize-nvgpu` wrote; nothing is decided here."""

from __future__ import annotations

from xdsl.ir import BlockArgument, Operation, SSAValue

from tawa_xdsl.backend.emit_ptx.kernel import (
    Handlers,
    KernelPrinter,
    arg_name,
    fail,
    frag_type,
    packed,
)
from tawa_xdsl.backend.ptx import Reg
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import WGMMA_COL, FragmentType, element_bytes, smem_type
from tawa_xdsl.dialects.tile import ReduceKind

HANDLERS = Handlers()


@HANDLERS.on(nvgpu.FragmentGatherOp)
def fragment_gather(p: KernelPrinter, op: Operation) -> None:
    assert isinstance(op, nvgpu.FragmentGatherOp)
    sources = [p.frag(s) for s in op.sources]
    out = p.frag(op.result)
    plan = op.register_plan()
    if packed(frag_type(op.result)):  # the verifier checked that pairs stay whole
        for reg, (source, value) in zip(out, plan[0::2], strict=True):
            p.b.mov("b32", reg, sources[source][value // 2])
        return
    for reg, (source, value) in zip(out, plan, strict=True):
        p.b.mov("f32", reg, sources[source][value])


# ------------------------------------------------- column vectors (reductions along axis 0)

COMBINE = {ReduceKind.MAX: "max.f32", ReduceKind.SUM: "add.f32"}


@HANDLERS.on(nvgpu.FragmentColumnReduceOp)
def fragment_column_reduce(p: KernelPrinter, op: Operation) -> None:
    """Each column value combines the thread's accumulator values of that column (the
    layout's `acc_value_column`), then the lanes holding the same columns (a butterfly over
    the layout's `copy_lane_masks`: the warp's lane rows)."""
    assert isinstance(op, nvgpu.FragmentColumnReduceOp)
    mnemonic, b = COMBINE[op.kind.data], p.b
    cols = frag_type(op.source).get_shape()[1]
    out = p.frag(op.result)
    started: set[int] = set()
    for i, reg in enumerate(p.frag(op.source)):
        j = WGMMA_COL.acc_value_column(i, cols)
        if j in started:
            b.binary(mnemonic, out[j], out[j], reg)
        else:
            b.mov("f32", out[j], reg)
            started.add(j)
    for mask in WGMMA_COL.copy_lane_masks():
        for reg in out:
            other = b.new("f32")
            b.shfl_sync_bfly(other, reg, mask)
            b.binary(mnemonic, reg, reg, other)


def partials_plan(op: nvgpu.FragmentColumnStageOp | nvgpu.FragmentColumnCombineOp):
    """(row pitch, value columns, rows) of a column-partials op's plan (`legalize-nvgpu`)."""
    rows = op.warp_rows if isinstance(op, nvgpu.FragmentColumnStageOp) else op.partial_rows
    if op.row_pitch is None or op.value_cols is None or rows is None:
        raise fail(op, "has no partials plan; run legalize-nvgpu first")
    cols = [int(c) for c in op.value_cols.get_values()]
    return op.row_pitch.value.data, cols, rows.value.data


def column_origin(p: KernelPrinter, ty: FragmentType, buf: SSAValue, slot: SSAValue):
    """(the thread's origin row, the slot byte of its origin column) of a partials slot."""
    row0, col0 = p.lane_origin(ty)
    base = p.addr_reg(p.slot_addr(buf, slot))
    eb = element_bytes(smem_type(buf).element_type)
    addr = p.b.new("b32")
    p.b.emit(f"mad.lo.u32 {addr}, {col0}, {eb}, {base}")
    return row0, addr, eb


@HANDLERS.on(nvgpu.FragmentColumnStageOp)
def fragment_column_stage(p: KernelPrinter, op: Operation) -> None:
    """The threads whose origin row r is a multiple of `warp_rows` store value v at partials
    row `row + r / warp_rows`, column `origin + value_cols[v]`."""
    assert isinstance(op, nvgpu.FragmentColumnStageOp)
    pitch, cols, warp_rows = partials_plan(op)
    b = p.b
    row0, addr, eb = column_origin(p, frag_type(op.value), op.buf, op.slot)
    # warp_rows is the layout's 16 (the verifier's check): a shift and a mask
    warp, lane_row, first_row = b.new("b32"), b.new("b32"), b.new("pred")
    b.binary("shr.u32", warp, row0, warp_rows.bit_length() - 1)
    b.binary("and.b32", lane_row, row0, warp_rows - 1)
    b.setp("eq", "u32", first_row, lane_row, 0)
    if op.row is not None:
        b.binary("add.u32", warp, warp, p.operand(op.row))
    b.emit(f"mad.lo.u32 {addr}, {warp}, {pitch}, {addr}")
    for col, reg in zip(cols, p.frag(op.value), strict=True):
        b.emit(f"st.shared.f32 [{addr}+{eb * col}], {reg}", str(first_row))


@HANDLERS.on(nvgpu.FragmentColumnCombineOp)
def fragment_column_combine(p: KernelPrinter, op: Operation) -> None:
    """Every thread reads partials rows 0 .. partial_rows - 1 of its columns and combines
    them in order."""
    assert isinstance(op, nvgpu.FragmentColumnCombineOp)
    pitch, cols, rows = partials_plan(op)
    b = p.b
    _, addr, eb = column_origin(p, frag_type(op.result), op.buf, op.slot)
    for col, reg in zip(cols, p.frag(op.result), strict=True):
        b.emit(f"ld.shared.f32 {reg}, [{addr}+{eb * col}]")
        for row in range(1, rows):
            other = b.new("f32")
            b.emit(f"ld.shared.f32 {other}, [{addr}+{eb * col + row * pitch}]")
            b.binary(COMBINE[op.kind.data], reg, reg, other)


@HANDLERS.on(nvgpu.FragmentBroadcastColumnsOp)
def fragment_broadcast_columns(p: KernelPrinter, op: Operation) -> None:
    """Each accumulator value takes its column's value (the layout's `acc_value_column`);
    16-bit pairs (two adjacent columns) take one packed register."""
    assert isinstance(op, nvgpu.FragmentBroadcastColumnsOp)
    ty = frag_type(op.result)
    cols, src = ty.get_shape()[1], p.frag(op.source)
    if packed(ty):
        for k, reg in enumerate(p.frag(op.result)):
            p.b.mov("b32", reg, src[WGMMA_COL.acc_value_column(2 * k, cols) // 2])
        return
    for i, reg in enumerate(p.frag(op.result)):
        p.b.mov("f32", reg, src[WGMMA_COL.acc_value_column(i, cols)])


@HANDLERS.on(nvgpu.FragmentStoreColumnsOp)
def fragment_store_columns(p: KernelPrinter, op: Operation) -> None:
    """The threads holding one copy of every column (origin 0 on the layout's `copy_axis`:
    warp 0's first lane row) store their values at
    `[..., offsets[-1] + origin + value_offset(v)]`, each clipped to the last extent and the
    leading offsets to theirs."""
    assert isinstance(op, nvgpu.FragmentStoreColumnsOp)
    if not isinstance(op.desc, BlockArgument) or op.desc.owner is not p.kernel.body.block:
        raise fail(op, "needs a descriptor that is a kernel argument")
    ty, b, name = frag_type(op.value), p.b, arg_name(op.desc)
    eb = nvgpu.element_bytes(ty.element_type)
    origin = p.lane_origin(ty)
    col0 = origin[1]
    ok, lin, ptr = b.new("pred"), b.new("b32"), b.new("b64")
    b.setp("eq", "u32", ok, origin[WGMMA_COL.copy_axis], 0)
    b.binary("add.s32", lin, col0, p.operand(op.offsets[-1]))
    b.emit(f"ld.param.u64 {ptr}, [{name}_ptr]")
    b.emit(f"cvta.to.global.u64 {ptr}, {ptr}")
    last = len(op.offsets) - 1
    for d in range(last):  # the leading offsets: inside their extent, and into the pointer
        extent, stride, wide, inside = b.new("b32"), b.new("b32"), b.new("b64"), b.new("pred")
        b.emit(f"ld.param.u32 {extent}, [{name}_dim{d}]")
        b.setp("lt", "s32", inside, p.operand(op.offsets[d]), extent)
        b.binary("and.pred", ok, ok, inside)
        b.emit(f"ld.param.u32 {stride}, [{name}_stride{d}]")
        b.emit(f"mul.lo.s32 {stride}, {stride}, {p.operand(op.offsets[d])}")
        b.emit(f"mul.wide.s32 {wide}, {stride}, {eb}")
        b.binary("add.s64", ptr, ptr, wide)
    extent = b.new("b32")
    b.emit(f"ld.param.u32 {extent}, [{name}_dim{last}]")
    values = _unpacked(p, ty, p.frag(op.value))
    for v, value in enumerate(values):
        col, inside, addr = b.new("b32"), b.new("pred"), b.new("b64")
        b.binary("add.s32", col, lin, WGMMA_COL.value_offset(ty.get_shape(), v))
        b.setp("lt", "s32", inside, col, extent)
        b.binary("and.pred", inside, inside, ok)
        b.emit(f"mul.wide.s32 {addr}, {col}, {eb}")
        b.binary("add.s64", addr, addr, ptr)
        b.st_global("f32" if eb == 4 else "b16", addr, [value], pred=str(inside))


def _unpacked(p: KernelPrinter, ty: FragmentType, regs: list[Reg]) -> list[Reg]:
    """One register per value: f32 registers as they are, packed 16-bit halves split."""
    if not packed(ty):
        return regs
    values: list[Reg] = []
    for reg in regs:
        lo, hi = p.b.new("b16"), p.b.new("b16")
        p.b.emit(f"mov.b32 {{{lo}, {hi}}}, {reg}")
        values += [lo, hi]
    return values
