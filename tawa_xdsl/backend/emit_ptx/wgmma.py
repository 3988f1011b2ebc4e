"""emit-ptx for wgmma: one printer for the SS and RS forms, fences and groups (§4).

`legalize-nvgpu` wrote each operand's descriptor plan into the op: the constant bits of the
smem descriptor and the encoded offset of every instruction. The printer builds the start
address of the slot once (`((addr >> 4) & 0x3FFF) | bits`) and prints, per 64-row block and
k step, `desc + step` and one `wgmma.mma_async` on the accumulator registers the `wgmma_acc`
layout gives that block (`block_values`); a register A operand is the four registers the
`wgmma_operand_a` layout names for that block and k slice."""

from __future__ import annotations

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr
from xdsl.ir import Operation, SSAValue

from tawa_xdsl.backend.emit_ptx.kernel import Handlers, KernelPrinter, fail, frag_type
from tawa_xdsl.backend.ptx import Reg
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import FP8_TYPES, WGMMA_ACC, SmemType

HANDLERS = Handlers()
DESCRIPTOR_START_MASK = 0x3FFF  # bits 13..0: (address & 0x3FFFF) >> 4 (§4.3)
PTX_INPUT_TYPES = {"f16": "f16", "bf16": "bf16", "f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}

HANDLERS.on(nvgpu.WgmmaFenceOp)(lambda p, op: p.b.wgmma_fence())
HANDLERS.on(nvgpu.WgmmaCommitGroupOp)(lambda p, op: p.b.wgmma_commit_group())


@HANDLERS.on(nvgpu.WgmmaWaitGroupOp)
def wgmma_wait_group(p: KernelPrinter, op: nvgpu.WgmmaWaitGroupOp) -> None:
    p.b.wgmma_wait_group(op.pending.value.data)


def descriptor(
    p: KernelPrinter,
    buf_value: SSAValue,
    slot: SSAValue,
    bits: int,
    row: SSAValue | None = None,
    row_pitch: int = 0,
) -> Reg:
    """The smem descriptor of slot `slot` with constant bits `bits`, its start moved by
    `row * row_pitch` bytes when the op uses the rows of M from `row` on."""
    b = p.b
    start = p.addr_reg(p.slot_addr(buf_value, slot))
    if row is not None:
        b.emit(f"mad.lo.u32 {start}, {p.operand(row)}, {row_pitch}, {start}")
    b.binary("shr.u32", start, start, 4)
    b.binary("and.b32", start, start, DESCRIPTOR_START_MASK)
    desc = b.new("b64", "desc")
    b.cvt("u64", "u32", desc, start)
    b.binary("or.b64", desc, desc, f"0x{bits & (2**64 - 1):016X}")
    return desc


def desc_plus(p: KernelPrinter, desc: Reg, step: int) -> Reg:
    if step == 0:
        return desc
    out = p.b.new("b64", "desc")
    p.b.binary("add.s64", out, desc, step)
    return out


def plan(
    op: Operation, bits: IntegerAttr | None, steps: DenseArrayBase | None
) -> tuple[int, list[int]]:
    if bits is None or steps is None:
        raise fail(op, "has no descriptor plan; run legalize-nvgpu first")
    return bits.value.data, [int(s) for s in steps.get_values()]


@HANDLERS.on(nvgpu.WgmmaMmaAsyncOp, nvgpu.WgmmaMmaAsyncRsOp)
def wgmma_mma_async(p: KernelPrinter, op: nvgpu.WgmmaMmaAsyncOp | nvgpu.WgmmaMmaAsyncRsOp) -> None:
    """M/64 x K/k wgmmas: A from descriptors (SS) or the operand-A registers (RS)."""
    b_buf, acc_ty = op.b_buf.type, frag_type(op.acc)
    assert isinstance(b_buf, SmemType)
    rs = isinstance(op, nvgpu.WgmmaMmaAsyncRsOp)
    a_et = frag_type(op.a).element_type if rs else op.a_buf.type.element_type  # type: ignore
    n = acc_ty.get_shape()[1]
    blocks, k_steps = op.instructions()
    k_step = nvgpu.mma_k(a_et)
    fp8 = isinstance(a_et, FP8_TYPES)
    types = f"f32.{PTX_INPUT_TYPES[str(a_et)]}.{PTX_INPUT_TYPES[str(b_buf.element_type)]}"
    trans_b = 1 if op.transpose_b is not None else 0
    acc_in, acc = p.frag(op.acc), p.frag(op.result)
    if acc is not acc_in:
        # Not coalesced: copy first (the wgmma below must read and write one register set).
        p.copy(acc, acc_in)
    b_bits, b_steps = plan(op, op.b_desc_bits, op.b_desc_steps)
    if isinstance(op, nvgpu.WgmmaMmaAsyncRsOp):
        a_regs, a_shape = p.frag(op.a), tuple(frag_type(op.a).get_shape())
        desc_b = descriptor(p, op.b_buf, op.b_slot, b_bits)
    else:
        a_bits, a_steps = plan(op, op.a_desc_bits, op.a_desc_steps)
        pitch = 0 if op.a_row_pitch is None else op.a_row_pitch.value.data
        desc_a = descriptor(p, op.a_buf, op.a_slot, a_bits, op.a_row, pitch)
        desc_b = descriptor(p, op.b_buf, op.b_slot, b_bits)
    acc_shape = tuple(acc_ty.get_shape())
    for block in range(blocks):
        block_acc = [acc[v] for v in WGMMA_ACC.block_values(acc_shape, block)]
        for kk in range(k_steps):
            if isinstance(op, nvgpu.WgmmaMmaAsyncRsOp):
                regs = frag_type(op.a).layout_object.k_slice_registers(a_shape, block, kk)
                a_operand: Reg | list[Reg] = [a_regs[i] for i in regs]
            else:
                a_operand = desc_plus(p, desc_a, a_steps[block * k_steps + kk])
            p.b.wgmma_mma_async(
                f"m64n{n}k{k_step}",
                types,
                block_acc,
                a_operand,
                desc_plus(p, desc_b, b_steps[kk]),
                scale_d=1,
                trans_a=None if fp8 or rs else int(op.transpose_a is not None),
                trans_b=None if fp8 else trans_b,
            )
