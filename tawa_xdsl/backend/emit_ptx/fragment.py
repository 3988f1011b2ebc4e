"""emit-ptx for fragments: register-by-register math, converts, row reductions, shuffles,
masks, selects, and the loads and stores of fragments (§4.4, §6).

Which element a register holds comes from the fragment's layout object: a store or mask
prints the thread's origin once (`KernelPrinter.lane_origin`, the layout's own formula on
`%tid.x`) and adds each value's constant offset (`value_offset`). The branch over an unmasked
tile is the one `legalize-nvgpu` planned (`skip_corners`), and the byte an ld/st.shared
addresses is its address plan's `slot_byte`, printed as the plan states it."""

from __future__ import annotations

from xdsl.dialects.builtin import Float32Type
from xdsl.ir import Attribute, BlockArgument, Operation

from tawa_xdsl.backend.emit_ptx.kernel import (
    Handlers,
    KernelPrinter,
    arg_name,
    fail,
    frag_type,
    half_name,
    packed,
)
from tawa_xdsl.backend.ptx import Reg, f32_hex
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import FP8_TYPES as FP8
from tawa_xdsl.dialects.nvgpu import (
    SWIZZLE_128B_SPAN,
    SWIZZLE_CHUNK_BYTES,
    WGMMA_ACC,
    WGMMA_OPERAND_A8,
    WGMMA_ROW,
    FragmentLayout,
    FragmentType,
    SmemType,
    WgmmaAccLayout,
)
from tawa_xdsl.dialects.nvgpu.hardware import SWIZZLE_ROW_SHIFT
from tawa_xdsl.dialects.tile import ComparePredicate

FP8_NAMES = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}  # PTX's names of the fp8 formats

HANDLERS = Handlers()

FRAGMENT_BINARY = {
    nvgpu.BinaryKind.ADD: "add.f32",
    nvgpu.BinaryKind.SUB: "sub.f32",
    nvgpu.BinaryKind.MUL: "mul.f32",
    nvgpu.BinaryKind.DIV: "div.rn.f32",
    nvgpu.BinaryKind.MAX: "max.f32",
    nvgpu.BinaryKind.MIN: "min.f32",
}
# `ne` is the unordered `neu` (true with a NaN, as numpy's `!=`); the others are ordered.
SETP_F32 = {
    ComparePredicate.EQ: "eq",
    ComparePredicate.NE: "neu",
    ComparePredicate.LT: "lt",
    ComparePredicate.LE: "le",
    ComparePredicate.GT: "gt",
    ComparePredicate.GE: "ge",
}


def fragment_splat(p: KernelPrinter, op: Operation) -> None:
    assert isinstance(op, nvgpu.FragmentSplatOp)
    ty = frag_type(op.result)
    source = p.consts.get(op.value)
    if packed(ty):  # both halves of every register hold the scalar
        if not isinstance(source, float):
            raise fail(op, f"of a run-time 16-bit scalar is not supported ({ty})")
        value = p.b.new("f32")
        p.b.mov("f32", value, f32_hex(source))
        for r in p.frag(op.result):
            p.b.cvt_rn_x2_f32(half_name(ty.element_type), r, value, value)
        return
    src: Reg | str = f32_hex(source) if isinstance(source, float) else p.reg(op.value)
    for r in p.frag(op.result):
        p.b.mov("f32", r, src)


def fragment_undef(p: KernelPrinter, op: Operation) -> None:
    p.frag(op.results[0])  # declared, never written


def fragment_binary(p: KernelPrinter, op: Operation) -> None:
    """Value by value in f32; 16-bit fragments are widened first and rounded after."""
    assert isinstance(op, nvgpu.FragmentBinaryOp)
    ty = frag_type(op.result)
    mnemonic = FRAGMENT_BINARY[op.kind.data]
    lhs, rhs = _f32_values(p, ty, p.frag(op.lhs)), _f32_values(p, ty, p.frag(op.rhs))
    out = [p.b.new("f32") for _ in lhs] if packed(ty) else p.frag(op.result)
    for d, x, y in zip(out, lhs, rhs, strict=True):
        p.b.binary(mnemonic, d, x, y)
    _round_values(p, ty, p.frag(op.result), out)


LOG2_E = 1.4426950408889634
LN_2 = 0.6931471805599453
# erf(x) = sign(x) (1 - t (a1 + t (a2 + ...)) e^(-x^2)), t = 1 / (1 + P |x|) (Abramowitz and
# Stegun 7.1.26, |error| < 1.5e-7); the nvgpu interpreter computes the same formula.
ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def fragment_unary(p: KernelPrinter, op: Operation) -> None:
    """Value by value in f32 (16-bit fragments widened first, rounded after)."""
    assert isinstance(op, nvgpu.FragmentUnaryOp)
    ty = frag_type(op.result)
    source = _f32_values(p, ty, p.frag(op.source))
    out = [p.b.new("f32") for _ in source] if packed(ty) else p.frag(op.result)
    share = op.emulated_share()
    for v, (d, x) in enumerate(zip(out, source, strict=True)):
        if v % nvgpu.EXP2_EMULATION_PERIOD < share:
            _exp2_polynomial(p, d, x)
        else:
            _unary_value(p, op.kind.data, d, x)
    _round_values(p, ty, p.frag(op.result), out)


# 1.5 * 2^23 + 127: t + EXP2_MAGIC rounded down holds floor(t) + 127 in its low mantissa bits,
# so shifting its bits left by 23 gives the f32 2^floor(t) (0 for -127, inf for 128).
EXP2_MAGIC = 12583039.0


def _exp2_polynomial(p: KernelPrinter, d: Reg, x: Reg) -> None:
    """2^x on the FMA and ALU pipes (`nvgpu.EXP2_POLY`): ten instructions, no MUFU."""
    b = p.b
    low, high = (f32_hex(bound) for bound in nvgpu.EXP2_CLAMP)
    t, scale, whole, frac, q = (b.new("f32") for _ in range(5))
    b.emit(f"max.NaN.f32 {t}, {x}, {low}")
    b.emit(f"min.NaN.f32 {t}, {t}, {high}")
    b.emit(f"add.rm.f32 {scale}, {t}, {f32_hex(EXP2_MAGIC)}")
    b.emit(f"sub.f32 {whole}, {scale}, {f32_hex(EXP2_MAGIC)}")
    b.emit(f"sub.f32 {frac}, {t}, {whole}")
    c0, c1, c2, c3 = (f32_hex(c) for c in nvgpu.EXP2_POLY)
    b.emit(f"fma.rn.f32 {q}, {frac}, {c3}, {c2}")
    b.emit(f"fma.rn.f32 {q}, {q}, {frac}, {c1}")
    b.emit(f"fma.rn.f32 {q}, {q}, {frac}, {c0}")
    b.emit(f"shl.b32 {scale}, {scale}, 23")
    b.emit(f"mul.ftz.f32 {d}, {q}, {scale}")


def _unary_value(p: KernelPrinter, kind: nvgpu.UnaryKind, d: Reg, x: Reg) -> None:
    b, kinds = p.b, nvgpu.UnaryKind
    simple = {
        kinds.SQRT: "sqrt.rn.f32",
        kinds.RSQRT: "rsqrt.approx.ftz.f32",
        kinds.TANH: "tanh.approx.f32",
        kinds.NEG: "neg.f32",
        kinds.ABS: "abs.f32",
        kinds.RCP: "rcp.rn.f32",
    }
    if kind in simple:
        b.emit(f"{simple[kind]} {d}, {x}")
    elif kind == kinds.EXP2:
        b.ex2_approx_ftz_f32(d, x)
    elif kind == kinds.LOG2:
        b.lg2_approx_ftz_f32(d, x)
    elif kind == kinds.EXP:  # e^x = 2^(x log2 e)
        b.binary("mul.f32", d, x, f32_hex(LOG2_E))
        b.ex2_approx_ftz_f32(d, d)
    elif kind == kinds.LOG:  # ln x = log2(x) ln 2
        b.lg2_approx_ftz_f32(d, x)
        b.binary("mul.f32", d, d, f32_hex(LN_2))
    else:
        _erf_value(p, d, x)


def _erf_value(p: KernelPrinter, d: Reg, x: Reg) -> None:
    b = p.b
    ax, t, poly, gauss = b.new("f32"), b.new("f32"), b.new("f32"), b.new("f32")
    b.emit(f"abs.f32 {ax}, {x}")
    b.emit(f"fma.rn.f32 {t}, {ax}, {f32_hex(ERF_P)}, {f32_hex(1.0)}")
    b.emit(f"rcp.rn.f32 {t}, {t}")
    b.mov("f32", poly, f32_hex(ERF_A[-1]))
    for a in reversed(ERF_A[:-1]):
        b.emit(f"fma.rn.f32 {poly}, {poly}, {t}, {f32_hex(a)}")
    b.binary("mul.f32", poly, poly, t)
    b.binary("mul.f32", gauss, ax, ax)
    b.binary("mul.f32", gauss, gauss, f32_hex(-LOG2_E))
    b.ex2_approx_ftz_f32(gauss, gauss)
    b.emit(f"neg.f32 {poly}, {poly}")
    b.emit(f"fma.rn.f32 {gauss}, {poly}, {gauss}, {f32_hex(1.0)}")
    b.emit(f"copysign.f32 {d}, {x}, {gauss}")


def _f32_values(p: KernelPrinter, ty: FragmentType, regs: list[Reg]) -> list[Reg]:
    """One f32 register per value: the registers themselves, or the halves widened."""
    if not packed(ty):
        return regs
    values = [p.b.new("f32") for _ in range(2 * len(regs))]
    _unpack_halves(p, half_name(ty.element_type), values, regs)
    return values


def _round_values(p: KernelPrinter, ty: FragmentType, dst: list[Reg], values: list[Reg]) -> None:
    """Pack f32 `values` into the 16-bit pairs of `dst` (nothing to do for f32)."""
    if packed(ty):
        for k, d in enumerate(dst):
            p.b.cvt_rn_x2_f32(half_name(ty.element_type), d, values[2 * k + 1], values[2 * k])


def fragment_convert(p: KernelPrinter, op: Operation) -> None:
    """Any pair of f32, f16, bf16, e4m3 and e5m2: the source widened to f32 (exact), then
    rounded once to the result type (`cvt.rn`; fp8 with saturation to the largest finite
    value). 16-bit register k packs values 2k (low) and 2k + 1 (high), fp8 register k values
    4k..4k + 3 from its lowest byte up."""
    assert isinstance(op, nvgpu.FragmentConvertOp)
    src_ty, dst_ty = frag_type(op.source), frag_type(op.result)
    src, dst = p.frag(op.source), p.frag(op.result)
    if src_ty.element_type == dst_ty.element_type:
        p.copy(dst, src)
        return
    values = src_ty.values_per_thread()
    wide = dst if isinstance(dst_ty.element_type, Float32Type) else None
    wide = _widened(p, src_ty.element_type, src, values, wide)
    element = dst_ty.element_type
    if dst_ty.kind == FragmentLayout.WGMMA_OPERAND_A8 and op.columns is not None:
        _pack_fp8(p, FP8_NAMES[str(element)], dst, [wide[v] for v in op.register_plan()])
    elif dst_ty.kind == FragmentLayout.WGMMA_OPERAND_A8:
        _quad_exchange_fp8(p, FP8_NAMES[str(element)], dst_ty, dst, wide)
    elif isinstance(element, FP8):
        _pack_fp8(p, FP8_NAMES[str(element)], dst, wide)
    elif packed(dst_ty):
        for k, d in enumerate(dst):
            p.b.cvt_rn_x2_f32(half_name(element), d, wide[2 * k + 1], wide[2 * k])


def _widened(
    p: KernelPrinter, element: Attribute, regs: list[Reg], values: int, out: list[Reg] | None
) -> list[Reg]:
    """The `values` values held in `regs` as f32 registers (into `out` when given)."""
    if isinstance(element, Float32Type):
        if out is not None:
            p.copy(out, regs)
        return regs
    out = [p.b.new("f32") for _ in range(values)] if out is None else out
    if isinstance(element, FP8):
        _unpack_fp8(p, FP8_NAMES[str(element)], out, regs)
    else:
        _unpack_halves(p, half_name(element), out, regs)
    return out


def _pack_fp8(p: KernelPrinter, name: str, dst: list[Reg], src: list[Reg]) -> None:
    """f32 -> fp8, saturating to the largest finite value: register k packs values 4k..4k+3
    (in an accumulator two column pairs, rows r and r + 8), each pair one 16-bit half, low
    value first; a register holding one pair (a 64-row row vector) has zero upper bytes."""
    for k, d in enumerate(dst):
        halves = []
        for first in range(4 * k, min(4 * k + 4, len(src)), 2):
            half = p.b.new("b16")
            p.b.emit(f"cvt.rn.satfinite.{name}x2.f32 {half}, {src[first + 1]}, {src[first]}")
            halves.append(half)
        if len(halves) == 2:
            p.b.emit(f"mov.b32 {d}, {{{halves[0]}, {halves[1]}}}")
        else:
            p.b.cvt("u32", "u16", d, halves[0])


def _quad_exchange_fp8(
    p: KernelPrinter, name: str, ty: FragmentType, dst: list[Reg], src: list[Reg]
) -> None:
    """An f32 accumulator into wgmma's fp8 A registers (WGMMA_OPERAND_A8). Per row (r or
    r + 8) and 16 columns, quad lane t holds columns 2t, 2t + 1 and 8 + 2t, 9 + 2t; it packs
    them as one register (low half the first pair). Lane c needs columns 4c..4c + 3: the low
    halves of lanes 2c and 2c + 1 for c < 2, else the high halves of lanes 2c - 4 and
    2c - 3 (two shuffles and a byte permute per register)."""
    b, shape = p.b, tuple(ty.get_shape())
    lane = b.new("b32")
    b.special(lane, "%laneid")
    quad_lane, first = b.new("b32"), b.new("b32")
    b.binary("and.b32", quad_lane, lane, 3)
    b.binary("shl.b32", first, quad_lane, 1)
    b.binary("and.b32", first, first, 3)  # 2c mod 4: 0 or 2
    base = b.new("b32")
    b.binary("and.b32", base, lane, 0x1C)
    b.binary("or.b32", first, first, base)
    second = b.new("b32")
    b.binary("add.u32", second, first, 1)
    high = b.new("pred")
    b.setp("gt", "u32", high, quad_lane, 1)
    selector = b.new("b32")
    b.emit(f"selp.b32 {selector}, 0x7632, 0x5410, {high}")

    def value(row: int, col: int) -> Reg:  # the accumulator value thread 0's pattern names
        return src[WGMMA_ACC.owner(shape, row, col)[1]]

    for index, reg in enumerate(dst):
        row, col = WGMMA_OPERAND_A8.value_offset(shape, 4 * index)  # lane 0's first k
        lo, hi = b.new("b16"), b.new("b16")
        b.emit(f"cvt.rn.satfinite.{name}x2.f32 {lo}, {value(row, col + 1)}, {value(row, col)}")
        b.emit(f"cvt.rn.satfinite.{name}x2.f32 {hi}, {value(row, col + 9)}, {value(row, col + 8)}")
        own, got0, got1 = b.new("b32"), b.new("b32"), b.new("b32")
        b.emit(f"mov.b32 {own}, {{{lo}, {hi}}}")
        b.emit(f"shfl.sync.idx.b32 {got0}, {own}, {first}, 31, 0xffffffff")
        b.emit(f"shfl.sync.idx.b32 {got1}, {own}, {second}, 31, 0xffffffff")
        b.emit(f"prmt.b32 {reg}, {got0}, {got1}, {selector}")


def _unpack_fp8(p: KernelPrinter, name: str, dst: list[Reg], src: list[Reg]) -> None:
    """dst[4k..4k + 3] = the bytes of src[k], lowest first, widened to f32 (exact, through
    an f16 pair: `cvt.rn.f16x2.{name}x2`)."""
    for k, reg in enumerate(src):
        lo, hi = p.b.new("b16"), p.b.new("b16")
        p.b.emit(f"mov.b32 {{{lo}, {hi}}}, {reg}")
        for j, half in enumerate((lo, hi)[: (len(dst) - 4 * k) // 2]):
            pair = p.b.new("b32")
            p.b.emit(f"cvt.rn.f16x2.{name}x2 {pair}, {half}")
            _unpack_halves(p, "f16", dst[4 * k + 2 * j : 4 * k + 2 * j + 2], [pair])


def _unpack_halves(p: KernelPrinter, half: str, dst: list[Reg], src: list[Reg]) -> None:
    """dst[2k], dst[2k + 1] = the low and high half of src[k], widened to f32."""
    for k, pair in enumerate(src):
        lo, hi = p.b.new("b16"), p.b.new("b16")
        p.b.emit(f"mov.b32 {{{lo}, {hi}}}, {pair}")
        p.b.cvt("f32", half, dst[2 * k], lo)
        p.b.cvt("f32", half, dst[2 * k + 1], hi)


# A row's values are folded in this many independent chains, then the chains pairwise: a
# chain of dependent max.f32 / add.f32 is as long as its values, so one chain of a 128-key
# row (32 values a thread) is 32 ALU latencies on the softmax's critical path; four are 8 + 2.
ROW_REDUCE_CHAINS = 4


def fragment_row_reduce(p: KernelPrinter, op: Operation) -> None:
    """In f32: 16-bit values are widened first and the row results rounded after. Each row
    folds its values in `ROW_REDUCE_CHAINS` interleaved chains (value n of a row into chain
    n mod 4), combined pairwise into the row's register."""
    assert isinstance(op, nvgpu.FragmentRowReduceOp)
    src_ty, dst_ty = frag_type(op.source), frag_type(op.result)
    mnemonic = "max.f32" if str(op.kind.data) == "max" else "add.f32"
    src = _f32_values(p, src_ty, p.frag(op.source))
    rows = p.frag(op.result)
    dst = [p.b.new("f32") for _ in range(2 * len(rows))] if packed(dst_ty) else rows
    cols = src_ty.get_shape()[1]
    chains: dict[int, list[Reg]] = {}
    seen: dict[int, int] = {}
    for i, r in enumerate(src):
        j = WGMMA_ROW.acc_value_row(i, cols)
        n = seen.get(j, 0)
        seen[j] = n + 1
        row_chains = chains.setdefault(j, [])
        if n < ROW_REDUCE_CHAINS:
            chain = dst[j] if n == 0 else p.b.new("f32")
            p.b.mov("f32", chain, r)
            row_chains.append(chain)
        else:
            chain = row_chains[n % ROW_REDUCE_CHAINS]
            p.b.binary(mnemonic, chain, chain, r)
    for row_chains in chains.values():
        while len(row_chains) > 1:  # pairwise; chain 0 is the row's register
            half = (len(row_chains) + 1) // 2
            for k in range(len(row_chains) - half):
                p.b.binary(mnemonic, row_chains[k], row_chains[k], row_chains[k + half])
            del row_chains[half:]
    _round_values(p, dst_ty, rows, dst)


def shuffle_xor(p: KernelPrinter, op: Operation) -> None:
    assert isinstance(op, nvgpu.ShuffleXorOp)
    for d, s in zip(p.frag(op.result), p.frag(op.source), strict=True):
        tmp = p.b.new("b32")
        p.b.mov("b32", tmp, s)
        p.b.shfl_sync_bfly(tmp, tmp, op.mask.value.data)
        p.b.mov("b32", d, tmp)


def fragment_broadcast_rows(p: KernelPrinter, op: Operation) -> None:
    """Each value takes its row's value; 16-bit pairs (two columns of one row) take the
    row's half twice."""
    assert isinstance(op, nvgpu.FragmentBroadcastRowsOp)
    src, dst = p.frag(op.source), p.frag(op.result)
    cols = frag_type(op.result).get_shape()[1]
    if not packed(frag_type(op.result)):
        for i, d in enumerate(dst):
            p.b.mov("f32", d, src[WGMMA_ROW.acc_value_row(i, cols)])
        return
    halves = []
    for pair in src:  # row values 2k (low) and 2k + 1 (high)
        lo, hi = p.b.new("b16"), p.b.new("b16")
        p.b.emit(f"mov.b32 {{{lo}, {hi}}}, {pair}")
        halves += [lo, hi]
    for k, d in enumerate(dst):
        half = halves[WGMMA_ROW.acc_value_row(2 * k, cols)]
        p.b.emit(f"mov.b32 {d}, {{{half}, {half}}}")


def _pair(ty: FragmentType, regs: list[Reg], first: int) -> list[Reg]:
    """The registers of the adjacent-column pair of values `first`, `first + 1`."""
    return [regs[first // 2]] if packed(ty) else regs[first : first + 2]


def _stored_pair(
    p: KernelPrinter, ty: FragmentType, regs: list[Reg], first: int, halves: dict[int, tuple]
) -> list[Reg]:
    """What a store of the column pair `first`, `first + 1` writes: `_pair`'s registers, or
    for an fp8 fragment (four values per register, `_pack_fp8`) one 16-bit half of a register,
    unpacked once per register into `halves`."""
    if not isinstance(ty.element_type, FP8):
        return _pair(ty, regs, first)
    k = first // 4
    if k not in halves:
        lo, hi = p.b.new("b16"), p.b.new("b16")
        p.b.emit(f"mov.b32 {{{lo}, {hi}}}, {regs[k]}")
        halves[k] = (lo, hi)
    return [halves[k][(first // 2) % 2]]


def fragment_store_global(p: KernelPrinter, op: Operation) -> None:
    """st.global of each column pair as the store plan says (`legalize-nvgpu`): one address
    per planned row offset, one column predicate per planned column offset. Through a rank > 2
    descriptor the leading offsets select the 2-D plane (the base pointer moves by
    offset_d * stride_d).

    Pairs never straddle the last column: a TMA-describable tensor has rows of a multiple
    of 16 bytes, hence an even column count (and pair columns are even)."""
    assert isinstance(op, nvgpu.FragmentStoreGlobalOp)
    ty = frag_type(op.value)
    if ty.kind not in (FragmentLayout.WGMMA_ACC, FragmentLayout.WGMMA_ROW):
        raise fail(op, f"needs a wgmma_acc or wgmma_row fragment, got {ty}")
    if not isinstance(op.desc, BlockArgument) or op.desc.owner is not p.kernel.body.block:
        raise fail(op, "needs a descriptor that is a kernel argument")
    plan = op.plan()
    if plan is None or op.clip_dims is None:
        raise fail(op, "has no store plan; run legalize-nvgpu first")
    lead = len(op.offsets) - 2
    clip_rows, clip_cols = (d in op.clip_dims.get_values() for d in (lead, lead + 1))
    if ty.kind == FragmentLayout.WGMMA_ROW:
        _store_rows(p, op, ty, plan, clip_rows, clip_cols)
        return
    b, name = p.b, arg_name(op.desc)
    eb = nvgpu.element_bytes(ty.element_type)
    rows, cols = ty.get_shape()
    b.comment(f"store the {rows}x{cols} fragment to %{name}, clipped to its extent")
    dim0, dim1, stride, ptr = _plane(p, op, eb)
    row, col = p.lane_origin(ty)
    b.binary("add.s32", row, row, p.operand(op.offsets[lead]))
    b.binary("add.s32", col, col, p.operand(op.offsets[lead + 1]))
    col_ok: dict[int, Reg] = {}
    for dcol in sorted({dcol for _, _, dcol in plan} if clip_cols else ()):
        col_ok[dcol] = b.new("pred")
        b.setp("lt", "s32", col_ok[dcol], col, _minus(p, dim1, dcol) if dcol else dim1)
    ptx_ty = {4: "f32", 2: "b32", 1: "b16"}[eb]  # one column pair per store
    regs = p.frag(op.value)
    halves: dict[int, tuple] = {}
    for drow in sorted({drow for _, drow, _ in plan}):
        r = b.new("b32")
        b.binary("add.s32", r, row, drow)
        row_ok = None
        if clip_rows:
            row_ok = b.new("pred")
            b.setp("lt", "s32", row_ok, r, dim0)
        addr = b.new("b64")
        lin = b.new("b32")
        b.emit(f"mad.lo.s32 {lin}, {r}, {stride}, {col}")
        b.emit(f"mul.wide.s32 {addr}, {lin}, {eb}")
        b.binary("add.s64", addr, addr, ptr)
        for first, store_row, dcol in plan:
            if store_row != drow:
                continue
            pair = _stored_pair(p, ty, regs, first, halves)
            ok = _both(p, row_ok, col_ok.get(dcol))
            b.st_global(ptx_ty, addr, pair, offset=dcol * eb, pred=ok)


def _both(p: KernelPrinter, first: Reg | None, second: Reg | None) -> str | None:
    """The predicate `first and second` of the clip tests that exist (None: no test)."""
    if first is None or second is None:
        return None if first is None and second is None else str(first or second)
    ok = p.b.new("pred")
    p.b.binary("and.pred", ok, first, second)
    return str(ok)


def _plane(p: KernelPrinter, op: nvgpu.FragmentStoreGlobalOp, eb: int) -> tuple[Reg, Reg, Reg, Reg]:
    """(rows, columns, row stride, base pointer) of the 2-D plane of the descriptor's
    tensor that the leading offsets select (the pointer moves by offset_d * stride_d)."""
    b, name, lead = p.b, arg_name(op.desc), len(op.offsets) - 2  # type: ignore[arg-type]
    dim0, dim1, stride, ptr = b.new("b32"), b.new("b32"), b.new("b32"), b.new("b64")
    b.emit(f"ld.param.u32 {dim0}, [{name}_dim{lead}]")
    b.emit(f"ld.param.u32 {dim1}, [{name}_dim{lead + 1}]")
    b.emit(f"ld.param.u32 {stride}, [{name}_stride{lead}]")
    b.emit(f"ld.param.u64 {ptr}, [{name}_ptr]")
    b.emit(f"cvta.to.global.u64 {ptr}, {ptr}")
    for d in range(lead):  # ptr += offset_d * stride_d * eb
        lead_stride, wide = b.new("b32"), b.new("b64")
        b.emit(f"ld.param.u32 {lead_stride}, [{name}_stride{d}]")
        b.emit(f"mul.lo.s32 {lead_stride}, {lead_stride}, {p.operand(op.offsets[d])}")
        b.emit(f"mul.wide.s32 {wide}, {lead_stride}, {eb}")
        b.binary("add.s64", ptr, ptr, wide)
    return dim0, dim1, stride, ptr


def _store_rows(
    p: KernelPrinter,
    op: nvgpu.FragmentStoreGlobalOp,
    ty: FragmentType,
    plan: list[tuple[int, int, int]],
    clip_rows: bool,
    clip_cols: bool,
) -> None:
    """A row vector along the plane's row `offsets[-2] + store_rows[k]`, value k at column
    `offsets[-1] + origin row + store_cols[k]` (through a rank-1 descriptor, at element
    `offsets[0] + origin row + store_cols[k]`); the threads holding one copy of every row
    store (those whose origin is 0 on the layout's `copy_axis`)."""
    b, eb = p.b, nvgpu.element_bytes(ty.element_type)
    b.comment(f"store the {ty.get_shape()[0]}-row vector to %{arg_name(op.desc)}")
    if len(op.offsets) == 1:
        dim0 = stride = None
        dim1, ptr = b.new("b32"), b.new("b64")
        b.emit(f"ld.param.u32 {dim1}, [{arg_name(op.desc)}_dim0]")
        b.emit(f"ld.param.u64 {ptr}, [{arg_name(op.desc)}_ptr]")
        b.emit(f"cvta.to.global.u64 {ptr}, {ptr}")
    else:
        dim0, dim1, stride, ptr = _plane(p, op, eb)
    origin = p.lane_origin(ty)
    row, copy = origin[0], origin[WGMMA_ROW.copy_axis]
    regs = p.frag(op.value)
    halves: dict[int, tuple] = {}
    for drow in sorted({drow for _, drow, _ in plan}):
        if stride is None:  # a rank-1 descriptor: no plane row
            lead_ok = _first_lane_ok(p, copy, None, None)
            base = b.new("b32")
            b.emit(f"mov.b32 {base}, {p.operand(op.offsets[0])}")
        else:
            plane_row = _row_vector_plane_row(p, op, drow)
            lead_ok = _first_lane_ok(p, copy, plane_row, dim0 if clip_rows else None)
            base = b.new("b32")
            b.emit(f"mad.lo.s32 {base}, {plane_row}, {stride}, {p.operand(op.offsets[-1])}")
        for value, store_row, dcol in plan:
            if store_row != drow:
                continue
            ok = lead_ok
            if clip_cols:
                target = b.new("b32")
                b.binary("add.s32", target, row, p.operand(op.offsets[-1]))
                b.binary("add.s32", target, target, dcol)
                ok = b.new("pred")
                b.setp("lt", "s32", ok, target, dim1)
                b.binary("and.pred", ok, ok, lead_ok)
            lin, addr = b.new("b32"), b.new("b64")
            b.binary("add.s32", lin, base, row)
            b.binary("add.s32", lin, lin, dcol)
            b.emit(f"mul.wide.s32 {addr}, {lin}, {eb}")
            b.binary("add.s64", addr, addr, ptr)
            ptx_ty, element = _row_element(p, ty, regs, value, halves)
            b.st_global(ptx_ty, addr, [element], pred=str(ok))


def _row_vector_plane_row(p: KernelPrinter, op: nvgpu.FragmentStoreGlobalOp, drow: int) -> Reg:
    """The plane row `offsets[-2] + drow` a row vector's store writes."""
    plane_row = p.operand(op.offsets[-2])
    if drow:
        shifted = p.b.new("b32")
        p.b.binary("add.s32", shifted, plane_row, drow)
        plane_row = shifted
    return plane_row


def _first_lane_ok(p: KernelPrinter, copy: Reg, plane_row: Reg | None, dim0: Reg | None) -> Reg:
    """A predicate: this thread holds the stored copy (origin 0 on the copy axis) and, with
    `dim0`, the plane row lies inside the tensor."""
    b = p.b
    ok = b.new("pred")
    if dim0 is None:
        b.setp("eq", "s32", ok, copy, 0)
        return ok
    first_lane = b.new("pred")
    b.setp("lt", "s32", ok, plane_row, dim0)
    b.setp("eq", "s32", first_lane, copy, 0)
    b.binary("and.pred", ok, ok, first_lane)
    return ok


def _row_element(
    p: KernelPrinter, ty: FragmentType, regs: list[Reg], value: int, halves: dict[int, tuple]
) -> tuple[str, Reg]:
    """(PTX type, register) of one row-vector value to store: an f32 register, a 16-bit
    half (each packed register unpacked once into `halves`) or an fp8 byte (its register
    shifted down; st.b8 stores a register's low byte)."""
    eb = nvgpu.element_bytes(ty.element_type)
    if eb == 4:
        return "f32", regs[value]
    per = 4 // eb
    k = value // per
    if eb == 1:
        byte = p.b.new("b32")
        p.b.emit(f"shr.b32 {byte}, {regs[k]}, {8 * (value % per)}")
        return "b8", byte
    if k not in halves:
        lo, hi = p.b.new("b16"), p.b.new("b16")
        p.b.emit(f"mov.b32 {{{lo}, {hi}}}, {regs[k]}")
        halves[k] = (lo, hi)
    return "b16", halves[k][value % 2]


def _minus(p: KernelPrinter, reg: Reg, amount: int) -> Reg:
    out = p.b.new("b32")
    p.b.binary("sub.s32", out, reg, amount)
    return out


def address_plan(op: nvgpu.FragmentStoreOp | nvgpu.FragmentLoadOp) -> tuple[int, int, int]:
    """(row pitch, slab pitch, swizzle) of an ld/st.shared, as `legalize-nvgpu` planned it."""
    if op.row_pitch is None or op.slab_pitch is None or op.swizzle is None:
        raise fail(op, "has no address plan; run legalize-nvgpu first")
    return op.row_pitch.value.data, op.slab_pitch.value.data, op.swizzle.value.data


def swizzle_phase(p: KernelPrinter, row: Reg, row_pitch: int, swizzle: int) -> Reg:
    """`(row * row_pitch >> 7) mod swizzle/16`, the XOR of a row's 16-byte chunks (`slot_byte`);
    with 128-byte rows the product and shift cancel."""
    phase = p.b.new("b32")
    if row_pitch == SWIZZLE_128B_SPAN:
        p.b.binary("and.b32", phase, row, swizzle // SWIZZLE_CHUNK_BYTES - 1)
        return phase
    p.b.binary("mul.lo.u32", phase, row, row_pitch)
    p.b.binary("shr.u32", phase, phase, SWIZZLE_ROW_SHIFT)
    p.b.binary("and.b32", phase, phase, swizzle // SWIZZLE_CHUNK_BYTES - 1)
    return phase


def slot_byte_regs(
    p: KernelPrinter, r: Reg, x: Reg, row_pitch: int, slab_pitch: int, swizzle: int
) -> Reg:
    """`slot_byte(r, x)` of the address plan, in registers (x, the byte of row r, is reused)."""
    b = p.b
    addr = b.new("b32")
    if swizzle:
        slab, chunk = b.new("b32"), b.new("b32")
        b.binary("div.u32", slab, x, row_pitch)
        b.binary("rem.u32", x, x, row_pitch)
        b.binary("shr.u32", chunk, x, 4)
        phase = swizzle_phase(p, r, row_pitch, swizzle)
        b.binary("xor.b32", chunk, chunk, phase)
        b.binary("and.b32", x, x, SWIZZLE_CHUNK_BYTES - 1)
        b.emit(f"mad.lo.u32 {x}, {chunk}, {SWIZZLE_CHUNK_BYTES}, {x}")
        b.emit(f"mad.lo.u32 {x}, {slab}, {slab_pitch}, {x}")
    b.emit(f"mad.lo.u32 {addr}, {r}, {row_pitch}, {x}")
    return addr


def fragment_store(p: KernelPrinter, op: Operation) -> None:
    """st.shared of each column pair of the store plan (`legalize-nvgpu`) into a slot, from
    row `row` on, at the byte the address plan gives it (`slot_byte`)."""
    assert isinstance(op, nvgpu.FragmentStoreOp)
    ty = frag_type(op.value)
    plan = op.plan()
    if plan is None:
        raise fail(op, "has no store plan; run legalize-nvgpu first")
    row_pitch, slab_pitch, swizzle = address_plan(op)
    b = p.b
    eb = nvgpu.element_bytes(ty.element_type)
    base_reg = p.addr_reg(p.slot_addr(op.buf, op.slot))
    row, col = p.lane_origin(ty)
    if op.row is not None:
        b.binary("add.s32", row, row, p.operand(op.row))
    if op.uniform_phase is not None:
        _fragment_store_uniform_phase(p, op, plan, base_reg, row, col)
        return
    col_bytes = b.new("b32")
    b.binary("mul.lo.u32", col_bytes, col, eb)  # byte of the first pair in an 8-col group
    ptx_ty = {4: "f32", 2: "b32", 1: "b16"}[eb]  # one column pair per store
    halves: dict[int, tuple] = {}
    for first, drow, dcol in plan:
        pair = _stored_pair(p, ty, p.frag(op.value), first, halves)
        r = b.new("b32")
        b.binary("add.u32", r, row, drow)
        x = b.new("b32")  # byte within the row
        b.binary("add.u32", x, col_bytes, dcol * eb)
        addr = slot_byte_regs(p, r, x, row_pitch, slab_pitch, swizzle)
        b.binary("add.u32", addr, addr, base_reg)
        b.st_shared(ptx_ty, addr, pair)


def _fragment_store_uniform_phase(
    p: KernelPrinter,
    op: nvgpu.FragmentStoreOp,
    plan: list[tuple[int, int, int]],
    base: Reg,
    row: Reg,
    col: Reg,
):
    """`fragment_store` planned `uniform_phase` (every pair at the XOR phase of the origin
    row, inside one 16-byte chunk), with the address arithmetic hoisted: each chunk gets one
    address register, `base + row * row_pitch + col * eb + ((c * 16) ^ phase * 16)`, and
    every st.shared is that register plus an immediate."""
    ty = frag_type(op.value)
    row_pitch, slab_pitch, swizzle = address_plan(op)
    b = p.b
    eb = nvgpu.element_bytes(ty.element_type)
    lane = b.new("b32")
    b.emit(f"mad.lo.u32 {lane}, {row}, {row_pitch}, {base}")
    b.emit(f"mad.lo.u32 {lane}, {col}, {eb}, {lane}")
    phase = swizzle_phase(p, row, row_pitch, swizzle)
    b.binary("shl.b32", phase, phase, 4)
    chunks: dict[int, Reg] = {}
    halves: dict[int, tuple] = {}
    for first, drow, dcol in plan:
        pair = _stored_pair(p, ty, p.frag(op.value), first, halves)
        x0 = dcol * eb
        slab, within = divmod(x0, row_pitch)
        chunk, byte = divmod(within, SWIZZLE_CHUNK_BYTES)
        if chunk not in chunks:
            reg = chunks[chunk] = b.new("b32")
            b.binary("xor.b32", reg, phase, chunk * SWIZZLE_CHUNK_BYTES)
            b.binary("add.u32", reg, reg, lane)
        offset = drow * row_pitch + slab * slab_pitch + byte
        b.st_shared("b32", chunks[chunk], pair, offset=offset)


def fragment_mask(p: KernelPrinter, op: Operation) -> None:
    """d = (all conditions hold at (row, col)) ? s : fill, value by value."""
    assert isinstance(op, nvgpu.FragmentMaskOp)
    b = p.b
    ty = frag_type(op.source)
    src, dst = p.frag(op.source), p.frag(op.result)
    const_fill = p.consts.get(op.fill)
    fill = f32_hex(const_fill) if isinstance(const_fill, float) else p.reg(op.fill)
    conditions = op.conditions()
    # Uniform skip: when every condition holds at the fragment's extreme corner, no value
    # is masked (every key block but the last one, and the causal diagonal blocks).
    if op.skip_corners is None:
        raise fail(op, "has no branch plan; run legalize-nvgpu first")
    corners = op.skip_corners.get_values()
    everywhere = b.new("pred")
    for k, (_, _, bound) in enumerate(conditions):
        corner = corners[k]
        holds_k = everywhere if k == 0 else b.new("pred")
        b.setp("gt", "s32", holds_k, p.operand(bound), corner)
        if k:
            b.binary("and.pred", everywhere, everywhere, holds_k)
    p.copy(dst, src)
    skip = b.new_label("unmasked")
    b.bra(skip, pred=str(everywhere))
    row0, col0 = p.lane_origin(ty)
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

    layout = ty.layout_object
    for index, (d, s) in enumerate(zip(dst, src, strict=True)):
        row_off, col_off = layout.value_offset(ty.get_shape(), index)
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


def fragment_select(p: KernelPrinter, op: Operation) -> None:
    """d = (lhs <predicate> rhs) ? on_true : on_false, value by value."""
    assert isinstance(op, nvgpu.FragmentSelectOp)
    b = p.b
    cmp = SETP_F32[op.predicate.data]
    values = zip(
        p.frag(op.result), p.frag(op.lhs), p.frag(op.rhs), p.frag(op.on_true),
        p.frag(op.on_false), strict=True,
    )  # fmt: skip
    for d, x, y, t, f in values:
        pred = b.new("pred")
        b.setp(cmp, "f32", pred, x, y)
        b.selp("f32", d, t, f, pred)


def fragment_load_columns(p: KernelPrinter, op: Operation) -> None:
    """Each pair of adjacent columns the thread holds (the layout's `values_by_column_pair`)
    is one read of two elements of the slot from the thread's origin column, widened to f32
    and copied into every value of the pair's columns."""
    assert isinstance(op, nvgpu.FragmentLoadColumnsOp)
    b = p.b
    buf, ty = op.buf.type, op.result.type
    assert isinstance(buf, SmemType) and isinstance(ty, FragmentType)
    eb = nvgpu.element_bytes(buf.element_type)
    _, col0 = p.lane_origin(ty)
    addr = b.new("b32")
    slot = p.slot_addr(op.buf, op.slot)
    base = p.addr_reg(slot)
    b.emit(f"mad.lo.u32 {addr}, {col0}, {eb}, {base}")
    dst, shape, layout = p.frag(op.result), ty.get_shape(), ty.layout_object
    assert isinstance(layout, WgmmaAccLayout)  # the op's verifier: a wgmma_acc result
    for first_col, values in sorted(layout.values_by_column_pair(shape).items()):
        pair = _load_pair(p, buf, addr, first_col * eb)
        for value in values:
            b.mov("f32", dst[value], pair[layout.value_offset(shape, value)[1] - first_col])


def _load_pair(p: KernelPrinter, buf: SmemType, addr: Reg, offset: int) -> list[Reg]:
    """The two adjacent elements at `addr + offset`, as f32 registers."""
    b = p.b
    pair = [b.new("f32"), b.new("f32")]
    if isinstance(buf.element_type, Float32Type):
        b.emit(f"ld.shared.v2.f32 {{{pair[0]}, {pair[1]}}}, [{addr}+{offset}]")
        return pair

    packed, lo, hi = b.new("b32"), b.new("b16"), b.new("b16")
    b.emit(f"ld.shared.b32 {packed}, [{addr}+{offset}]")
    b.emit(f"mov.b32 {{{lo}, {hi}}}, {packed}")
    half = half_name(buf.element_type)
    b.cvt("f32", half, pair[0], lo)
    b.cvt("f32", half, pair[1], hi)
    return pair


def fragment_load(p: KernelPrinter, op: Operation) -> None:
    """ld.shared of each column pair the thread owns (the layout object says where), from
    row `row` of a slot on, at the byte the address plan gives it (`slot_byte`)."""
    assert isinstance(op, nvgpu.FragmentLoadOp)
    ty = frag_type(op.result)
    row_pitch, slab_pitch, swizzle = address_plan(op)
    b = p.b
    eb = nvgpu.element_bytes(ty.element_type)
    rows, cols = ty.get_shape()
    base = p.addr_reg(p.slot_addr(op.buf, op.slot))
    row, col = p.lane_origin(ty)
    if op.row is not None:
        b.binary("add.s32", row, row, p.operand(op.row))
    col_bytes = b.new("b32")
    b.binary("mul.lo.u32", col_bytes, col, eb)
    regs = p.frag(op.result)
    for first in range(0, len(regs) * (2 if packed(ty) else 1), 2):
        pair = _pair(ty, regs, first)
        drow, dcol = ty.layout_object.value_offset((rows, cols), first)
        r, x = b.new("b32"), b.new("b32")
        b.binary("add.u32", r, row, drow)
        b.binary("add.u32", x, col_bytes, dcol * eb)
        addr = slot_byte_regs(p, r, x, row_pitch, slab_pitch, swizzle)
        b.binary("add.u32", addr, addr, base)
        if packed(ty):
            b.emit(f"ld.shared.b32 {pair[0]}, [{addr}]")
        else:
            b.emit(f"ld.shared.v2.f32 {{{pair[0]}, {pair[1]}}}, [{addr}]")


def fragment_load_rows(p: KernelPrinter, op: Operation) -> None:
    """ld.shared of each row value of the thread (rows r + 64 block + 8 half, from element
    `row` of the 1-D slot on); 16-bit values are packed in pairs."""
    assert isinstance(op, nvgpu.FragmentLoadRowsOp)
    ty, buf = frag_type(op.result), op.buf.type
    assert isinstance(buf, SmemType)
    b = p.b
    eb = nvgpu.element_bytes(ty.element_type)
    row, _ = p.lane_origin(ty)
    if op.row is not None:
        b.binary("add.s32", row, row, p.operand(op.row))
    addr = b.new("b32")
    base = p.addr_reg(p.slot_addr(op.buf, op.slot))
    b.emit(f"mad.lo.u32 {addr}, {row}, {eb}, {base}")
    layout = ty.layout_object
    count = layout.values_per_thread(ty.get_shape())
    offsets = [layout.value_offset(ty.get_shape(), v) * eb for v in range(count)]
    regs = p.frag(op.result)
    if not packed(ty):
        for reg, offset in zip(regs, offsets, strict=True):
            b.emit(f"ld.shared.f32 {reg}, [{addr}+{offset}]")
        return
    for k, reg in enumerate(regs):
        lo, hi = b.new("b16"), b.new("b16")
        b.emit(f"ld.shared.b16 {lo}, [{addr}+{offsets[2 * k]}]")
        b.emit(f"ld.shared.b16 {hi}, [{addr}+{offsets[2 * k + 1]}]")
        b.emit(f"mov.b32 {reg}, {{{lo}, {hi}}}")


HANDLERS.on(nvgpu.FragmentSplatOp)(fragment_splat)
HANDLERS.on(nvgpu.FragmentLoadOp)(fragment_load)
HANDLERS.on(nvgpu.FragmentLoadRowsOp)(fragment_load_rows)
HANDLERS.on(nvgpu.FragmentUndefOp)(fragment_undef)
HANDLERS.on(nvgpu.FragmentBinaryOp)(fragment_binary)
HANDLERS.on(nvgpu.FragmentUnaryOp)(fragment_unary)
HANDLERS.on(nvgpu.FragmentConvertOp)(fragment_convert)
HANDLERS.on(nvgpu.FragmentRowReduceOp)(fragment_row_reduce)
HANDLERS.on(nvgpu.ShuffleXorOp)(shuffle_xor)
HANDLERS.on(nvgpu.FragmentBroadcastRowsOp)(fragment_broadcast_rows)
HANDLERS.on(nvgpu.FragmentStoreOp)(fragment_store)
HANDLERS.on(nvgpu.FragmentStoreGlobalOp)(fragment_store_global)
HANDLERS.on(nvgpu.FragmentMaskOp)(fragment_mask)
HANDLERS.on(nvgpu.FragmentSelectOp)(fragment_select)
HANDLERS.on(nvgpu.FragmentLoadColumnsOp)(fragment_load_columns)
