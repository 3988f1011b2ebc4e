"""emit-ptx for the attention forward: the instruction forms GEMM kernels never need.

`emit_ptx.KernelPrinter` takes these handlers over its table (`attention_handlers`); each one
hands the forms the GEMM printer already prints back to it, so GEMM PTX is unchanged.

* **Multi-slab slots.** A slot whose rows are wider than the 128-byte swizzle span (head dim
  128 in f16: 256-byte rows) is stored as column slabs of `rows x 128 B` (`!nvgpu.smem`), and
  filled by one TMA box per slab (`tma_load`; the tensor map's box is `rows x 64`).
* **K-major wgmma over slabs** (`wgmma_ss`): the k16 step `kk` of a K-major operand starts at
  byte `32 kk` of its row, i.e. in slab `32 kk // 128` at offset `32 kk mod 128`.
* **RS wgmma** (`wgmma_rs`): A is four `.b32` registers per k16 slice (registers
  `4 kk .. 4 kk + 3` of a `wgmma_operand_a` fragment); B N-major (`transpose_b`, V of P V)
  uses the MN-major 128B-swizzle descriptor of hopper-ptx.md §4.3: SBO = 1024 B (8 K-rows),
  LBO = the slab stride (K rows x 128 B) for N > 64, and k16 step `kk` at `16 kk` rows.
* **Masks** (`fragment_mask`): first a warpgroup-uniform test that every condition holds at
  the fragment's extreme corner (`a*r + b*c < bound` for all r, c: then nothing is masked)
  that branches over the masking: only the sequence-end block and the causal diagonal blocks
  pay for it. Otherwise per condition one per-thread value `a * row0 + b * col0 - bound`,
  then per accumulator value one `setp.lt.s32` against the value's constant offset,
  `and.pred` and `selp.f32`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import BFloat16Type, Float16Type
from xdsl.ir import Operation, SSAValue

from tawa_xdsl.backend.ptx import DESCRIPTOR_LAYOUT_CODE, Reg, f32_hex, wgmma_descriptor_constant
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import FragmentType, SmemType

if TYPE_CHECKING:
    from tawa_xdsl.backend.emit_ptx import KernelPrinter

Handler = Callable[[Operation], None]
K_STEP = 16  # f16/bf16 wgmma K


def _fail(op: Operation, message: str) -> ValueError:
    from tawa_xdsl.backend.emit_ptx import EmitError

    return EmitError(f"emit-ptx: '{op.name}' {message}")


def _smem(value: SSAValue) -> SmemType:
    assert isinstance(value.type, SmemType)
    return value.type


def _frag(value: SSAValue) -> FragmentType:
    assert isinstance(value.type, FragmentType)
    return value.type


def _row_bytes(buf: SmemType) -> int:
    return buf.slot_shape[-1] * nvgpu.element_bytes(buf.element_type)


def _half(op: Operation, et: object) -> str:
    if isinstance(et, BFloat16Type):
        return "bf16"
    if isinstance(et, Float16Type):
        return "f16"
    raise _fail(op, f"of {et} is not supported here (f16 and bf16)")


def mn_major_descriptor_constant(swizzle: int, slab_bytes: int) -> int:
    """The constant bits of an MN-major (`tB = 1`) descriptor: SBO = 8 K-rows of the span,
    LBO = the distance between 64-element MN slabs (hopper-ptx.md §4.3)."""
    return (
        (DESCRIPTOR_LAYOUT_CODE[swizzle] << 62)
        | (((8 * swizzle) >> 4) << 32)
        | (((slab_bytes >> 4) & 0x3FFF) << 16)
    )


def attention_handlers(printer: KernelPrinter, base: dict[type[Operation], Handler]) -> dict:
    """The handlers that replace `base`'s (GEMM) ones; unsupported-by-base forms only."""
    emitter = AttentionEmitter(printer, base)
    return {
        nvgpu.WgmmaMmaAsyncOp: emitter.wgmma_ss,
        nvgpu.WgmmaMmaAsyncRsOp: emitter.wgmma_rs,
        nvgpu.FragmentMaskOp: emitter.fragment_mask,
        nvgpu.TmaLoadOp: emitter.tma_load,
    }


class AttentionEmitter:
    """Prints the attention forms into `printer`'s PTX builder."""

    def __init__(self, printer: KernelPrinter, base: dict[type[Operation], Handler]):
        self.p = printer
        self.base = base

    # ----------------------------------------------------------------------- TMA

    def tma_load(self, op: Operation) -> None:
        """One TMA box per 128-byte column slab of the slot."""
        assert isinstance(op, nvgpu.TmaLoadOp)
        buf = _smem(op.buf)
        span = buf.swizzle_bytes
        if not span or _row_bytes(buf) <= span:
            return self.base[nvgpu.TmaLoadOp](op)
        p, b = self.p, self.p.b
        eb = nvgpu.element_bytes(buf.element_type)
        rows = buf.slot_bytes() // _row_bytes(buf)
        coords = [p.reg(o) for o in reversed(op.offsets)]  # innermost first
        dst = p.addr_reg(p._slot_addr(op.buf, op.slot, buf.slot_bytes()))
        mbar = p._slot_addr(op.bars, op.bar_slot, 8)
        for slab in range(_row_bytes(buf) // span):
            inner = coords[0]
            if slab:
                inner = b.new("b32")
                b.binary("add.s32", inner, coords[0], slab * span // eb)
            target = f"{dst}+{slab * rows * span}" if slab else str(dst)
            b.cp_async_bulk_tensor(target, p.tmaps[op.desc], [inner, *coords[1:]], mbar)

    # --------------------------------------------------------------------- wgmma

    def _start(self, buf_value: SSAValue, slot: SSAValue, row: SSAValue | None) -> Reg:
        """The smem address of row `row` (or 0) of slot `slot`, in a register of its own."""
        p, buf = self.p, _smem(buf_value)
        start = p.addr_reg(p._slot_addr(buf_value, slot, buf.slot_bytes()))
        if row is not None:
            p.b.emit(f"mad.lo.u32 {start}, {p.operand(row)}, {buf.swizzle_bytes}, {start}")
        return start

    def _descriptor(self, start: Reg, constant: int) -> Reg:
        b = self.p.b
        enc = b.new("b32")
        b.binary("shr.u32", enc, start, 4)
        b.binary("and.b32", enc, enc, 0x3FFF)
        desc = b.new("b64", "desc")
        b.cvt("u64", "u32", desc, enc)
        b.binary("or.b64", desc, desc, f"0x{constant:016X}")
        return desc

    def _k_major_offset(self, buf: SmemType, kk: int) -> int:
        """Byte offset of k16 step `kk` in a K-major slot stored as 128-byte column slabs."""
        slab, within = divmod(
            kk * K_STEP * nvgpu.element_bytes(buf.element_type), buf.swizzle_bytes
        )
        rows = buf.slot_bytes() // _row_bytes(buf)
        return slab * rows * buf.swizzle_bytes + within

    def _b_descriptors(self, op: Operation, k: int) -> list[Reg]:
        """One B descriptor per k16 step (K-major slabs, or MN-major with transpose_b)."""
        b_buf = _smem(op.b_buf)  # type: ignore[attr-defined]
        span = b_buf.swizzle_bytes
        if span != 128:
            raise _fail(op, f"needs 128B-swizzled B slots, got {b_buf}")
        start = self._start(op.b_buf, op.b_slot, None)  # type: ignore[attr-defined]
        if op.transpose_b is not None:  # type: ignore[attr-defined]
            k_rows = b_buf.slot_shape[0]
            base = self._descriptor(start, mn_major_descriptor_constant(span, k_rows * span))
            offsets = [kk * K_STEP * span for kk in range(k // K_STEP)]
        else:
            base = self._descriptor(start, wgmma_descriptor_constant(span))
            offsets = [self._k_major_offset(b_buf, kk) for kk in range(k // K_STEP)]
        return [self.p._desc_plus(base, off >> 4) for off in offsets]

    def _accumulator(self, op: Operation) -> list[Reg]:
        p = self.p
        acc_in, acc = p.frag(op.acc), p.frag(op.results[0])  # type: ignore[attr-defined]
        if acc is not acc_in:
            p.copy(acc, acc_in)
        return acc

    def wgmma_ss(self, op: Operation) -> None:
        """SS wgmma on 128-byte column slabs (rows wider than the span), else the GEMM form."""
        assert isinstance(op, nvgpu.WgmmaMmaAsyncOp)
        a_buf, b_buf = _smem(op.a_buf), _smem(op.b_buf)
        simple = _row_bytes(a_buf) == a_buf.swizzle_bytes and (
            op.transpose_b is None and _row_bytes(b_buf) == b_buf.swizzle_bytes
        )
        if simple:
            return self.base[nvgpu.WgmmaMmaAsyncOp](op)
        et = _half(op, a_buf.element_type)
        if a_buf.swizzle_bytes != 128:
            raise _fail(op, f"needs 128B-swizzled A slots, got {a_buf}")
        rows, n = _frag(op.acc).get_shape()
        k = a_buf.slot_shape[-1]
        acc = self._accumulator(op)
        a_start = self._start(op.a_buf, op.a_slot, op.a_row)
        desc_a = self._descriptor(a_start, wgmma_descriptor_constant(128))
        descs_b = self._b_descriptors(op, k)
        per_block = n // 2
        for block in range(rows // 64):
            for kk in range(k // K_STEP):
                off = block * 64 * 128 + self._k_major_offset(a_buf, kk)
                self.p.b.wgmma_mma_async(
                    f"m64n{n}k{K_STEP}",
                    f"f32.{et}.{et}",
                    acc[block * per_block : (block + 1) * per_block],
                    self.p._desc_plus(desc_a, off >> 4),
                    descs_b[kk],
                    scale_d=1,
                    trans_a=0,
                    trans_b=0 if op.transpose_b is None else 1,
                )

    def wgmma_rs(self, op: Operation) -> None:
        """RS wgmma: A's k16 slice kk is registers 4kk..4kk+3 of each 64-row block."""
        assert isinstance(op, nvgpu.WgmmaMmaAsyncRsOp)
        a_ty = _frag(op.a)
        et = _half(op, a_ty.element_type)
        rows, k = a_ty.get_shape()
        n = _frag(op.acc).get_shape()[1]
        acc = self._accumulator(op)
        a_regs = self.p.frag(op.a)
        descs_b = self._b_descriptors(op, k)
        per_block, a_per_block = n // 2, k // 4
        for block in range(rows // 64):
            for kk in range(k // K_STEP):
                first = block * a_per_block + 4 * kk
                self.p.b.wgmma_mma_async(
                    f"m64n{n}k{K_STEP}",
                    f"f32.{et}.{et}",
                    acc[block * per_block : (block + 1) * per_block],
                    a_regs[first : first + 4],
                    descs_b[kk],
                    scale_d=1,
                    trans_a=None,
                    trans_b=0 if op.transpose_b is None else 1,
                )

    # ---------------------------------------------------------------------- masks

    def fragment_mask(self, op: Operation) -> None:
        """d = (all conditions hold at (row, col)) ? s : fill, value by value."""
        assert isinstance(op, nvgpu.FragmentMaskOp)
        p, b = self.p, self.p.b
        ty = _frag(op.source)
        rows, cols = ty.get_shape()
        src, dst = p.frag(op.source), p.frag(op.result)
        const_fill = p.consts.get(op.fill)
        fill = f32_hex(const_fill) if isinstance(const_fill, float) else p.reg(op.fill)
        conditions = op.conditions()
        # Uniform skip: when every condition holds at the fragment's extreme corner, no value
        # is masked (every key block but the last one, and the causal diagonal blocks).
        everywhere = b.new("pred")
        for k, (row_k, col_k, bound) in enumerate(conditions):
            corner = max(row_k, 0) * (rows - 1) + max(col_k, 0) * (cols - 1)
            holds_k = everywhere if k == 0 else b.new("pred")
            b.setp("gt", "s32", holds_k, p.operand(bound), corner)
            if k:
                b.binary("and.pred", everywhere, everywhere, holds_k)
        p.copy(dst, src)
        skip = b.new_label("unmasked")
        b.bra(skip, pred=str(everywhere))
        row0, col0 = p._lane_coords()
        thread_terms: list[Reg] = []
        for row_k, col_k, bound in conditions:
            t = b.new("b32")
            b.binary("mul.lo.s32", t, row0, row_k)
            b.emit(f"mad.lo.s32 {t}, {col0}, {col_k}, {t}")
            b.binary("sub.s32", t, t, p.operand(bound))
            thread_terms.append(t)
        cached: dict[tuple[int, int], Reg] = {}

        def holds(k: int, offset: int) -> Reg:
            if (k, offset) not in cached:
                pred = cached[k, offset] = b.new("pred")
                b.setp("lt", "s32", pred, thread_terms[k], -offset)
            return cached[k, offset]

        per_block = cols // 2
        for index, (d, s) in enumerate(zip(dst, src, strict=True)):
            block, i = divmod(index, per_block)
            row_off = 64 * block + 8 * ((i >> 1) & 1)
            col_off = 8 * (i >> 2) + (i & 1)
            preds = [
                holds(k, row_k * row_off + col_k * col_off)
                for k, (row_k, col_k, _) in enumerate(conditions)
            ]
            keep = preds[0]
            if len(preds) > 1:
                key = (-1 - index, 0)  # not shared: one combined predicate per value
                keep = cached[key] = b.new("pred")
                b.binary("and.pred", keep, preds[0], preds[1])
                for other in preds[2:]:
                    b.binary("and.pred", keep, keep, other)
            b.selp("f32", d, s, fill, keep)
        b.label(skip)
