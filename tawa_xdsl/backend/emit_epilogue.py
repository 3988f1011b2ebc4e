"""emit-ptx for GEMM epilogue forms: data-dependent selects and per-column vectors.

`emit_ptx.KernelPrinter` adds these handlers to its table (`epilogue_handlers`):

* `fragment_select` (`where(x < 0, x * a, x)`, a leaky relu): per value one
  `setp.<predicate>.f32` and one `selp.f32`. `ne` is the unordered `neu` (true with a NaN, as
  numpy's `!=`); the other predicates are ordered (false with a NaN, as numpy's).
* `fragment_load_columns` (a bias vector broadcast over the rows): the thread's columns are
  `8 g + 2 (l & 3) + {0, 1}` for every 8-column group g, the same in every row it holds, so
  one `ld.shared.b32` (16-bit elements, unpacked) or `ld.shared.v2.f32` per group, then
  register moves into each row's values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from xdsl.dialects.builtin import Float32Type
from xdsl.ir import Operation

from tawa_xdsl.backend.ptx import Reg
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import FragmentType, SmemType
from tawa_xdsl.dialects.tile import ComparePredicate

if TYPE_CHECKING:
    from tawa_xdsl.backend.emit_ptx import KernelPrinter

Handler = Callable[[Operation], None]

SETP_F32 = {
    ComparePredicate.EQ: "eq",
    ComparePredicate.NE: "neu",
    ComparePredicate.LT: "lt",
    ComparePredicate.LE: "le",
    ComparePredicate.GT: "gt",
    ComparePredicate.GE: "ge",
}


def epilogue_handlers(printer: KernelPrinter) -> dict[type[Operation], Handler]:
    """The handlers of the ops this module prints."""
    emitter = EpilogueEmitter(printer)
    return {
        nvgpu.FragmentSelectOp: emitter.fragment_select,
        nvgpu.FragmentLoadColumnsOp: emitter.fragment_load_columns,
    }


class EpilogueEmitter:
    """Prints the epilogue forms into `printer`'s PTX builder."""

    def __init__(self, printer: KernelPrinter):
        self.p = printer

    def fragment_select(self, op: Operation) -> None:
        """d = (lhs <predicate> rhs) ? on_true : on_false, value by value."""
        assert isinstance(op, nvgpu.FragmentSelectOp)
        p, b = self.p, self.p.b
        cmp = SETP_F32[op.predicate.data]
        values = zip(
            p.frag(op.result), p.frag(op.lhs), p.frag(op.rhs), p.frag(op.on_true),
            p.frag(op.on_false), strict=True,
        )  # fmt: skip
        for d, x, y, t, f in values:
            pred = b.new("pred")
            b.setp(cmp, "f32", pred, x, y)
            b.selp("f32", d, t, f, pred)

    def fragment_load_columns(self, op: Operation) -> None:
        """Every row's values of column group g are the two elements at column
        `8 g + 2 (l & 3)` of the slot, widened to f32."""
        assert isinstance(op, nvgpu.FragmentLoadColumnsOp)
        p, b = self.p, self.p.b
        buf, ty = op.buf.type, op.result.type
        assert isinstance(buf, SmemType) and isinstance(ty, FragmentType)
        eb = nvgpu.element_bytes(buf.element_type)
        _, col0 = p._lane_coords()
        addr = b.new("b32")
        slot = p._slot_addr(op.buf, op.slot, buf.slot_bytes())
        base = p.addr_reg(slot)
        b.emit(f"mad.lo.u32 {addr}, {col0}, {eb}, {base}")
        dst = p.frag(op.result)
        cols = ty.get_shape()[1]
        per_block = cols // 2
        for g in range(cols // 8):
            pair = self._load_pair(buf, addr, 8 * g * eb)
            for block in range(len(dst) // per_block):
                for j in range(4):  # values 4g .. 4g + 3: rows r and r + 8, columns +0, +1
                    b.mov("f32", dst[block * per_block + 4 * g + j], pair[j & 1])

    def _load_pair(self, buf: SmemType, addr: Reg, offset: int) -> list[Reg]:
        """The two adjacent elements at `addr + offset`, as f32 registers."""
        b = self.p.b
        pair = [b.new("f32"), b.new("f32")]
        if isinstance(buf.element_type, Float32Type):
            b.emit(f"ld.shared.v2.f32 {{{pair[0]}, {pair[1]}}}, [{addr}+{offset}]")
            return pair
        from tawa_xdsl.backend.emit_ptx import _half_name

        packed, lo, hi = b.new("b32"), b.new("b16"), b.new("b16")
        b.emit(f"ld.shared.b32 {packed}, [{addr}+{offset}]")
        b.emit(f"mov.b32 {{{lo}, {hi}}}, {packed}")
        half = _half_name(buf.element_type)
        b.cvt("f32", half, pair[0], lo)
        b.cvt("f32", half, pair[1], hi)
        return pair
