"""The nvgpu dialect: type helpers and every verifier rule, built from Python."""

from __future__ import annotations

import re

import pytest
from xdsl.dialects.arith import ConstantOp
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    IntegerAttr,
    TensorType,
    bf16,
    f16,
    f32,
    i32,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from tawa_xdsl.dialects.nvgpu import (
    BinaryKind,
    FragmentBinaryOp,
    FragmentBroadcastRowsOp,
    FragmentConvertOp,
    FragmentLayout,
    FragmentRowReduceOp,
    FragmentSplatOp,
    FragmentStoreGlobalOp,
    FragmentStoreOp,
    FragmentType,
    FragmentUnaryOp,
    MBarrierArriveExpectTxOp,
    MBarrierArriveOp,
    MBarrierInitOp,
    MBarrierType,
    MBarrierWaitOp,
    NamedBarrierSyncOp,
    RegisterAction,
    SetMaxNRegOp,
    ShuffleXorOp,
    SmemLoadOp,
    SmemStoreOp,
    SmemType,
    TmaLoadOp,
    TmaStoreOp,
    TmaStoreWaitOp,
    UnaryKind,
    WgmmaMmaAsyncOp,
    WgmmaMmaAsyncRsOp,
    WgmmaWaitGroupOp,
)
from tawa_xdsl.dialects.tile import DescType, ReduceKind

ACC = FragmentLayout.WGMMA_ACC
ROW = FragmentLayout.WGMMA_ROW
OPERAND_A = FragmentLayout.WGMMA_OPERAND_A
f8e4m3, f8e5m2 = Float8E4M3FNType(), Float8E5M2Type()


def value(t: Attribute) -> SSAValue:
    return create_ssa_value(t)


def const(n: int) -> SSAValue:
    return ConstantOp(IntegerAttr(n, i32)).result


def fails(message: str):
    """Expect a VerifyException whose message (a type's, or an op's after its printout) is
    exactly `message`."""
    pattern = f"(?m)(^|Operation does not verify: ){re.escape(message)}$"
    return pytest.raises(VerifyException, match=pattern)


def frag(layout: FragmentLayout, shape: list[int], et: Attribute = f32) -> FragmentType:
    return FragmentType(layout, shape, et)


# ------------------------------------------------------------------------------- type helpers


@pytest.mark.parametrize(
    ("fragment", "values", "registers"),
    [
        (frag(ACC, [64, 128]), 64, 64),  # m64n128 f32: N/2 registers
        (frag(ACC, [64, 256]), 128, 128),
        (frag(ACC, [64, 8]), 4, 4),
        (frag(ACC, [128, 64]), 64, 64),  # two 64-row blocks of 32 each
        (frag(ACC, [64, 128], bf16), 64, 32),  # bf16x2 packing
        (frag(ACC, [64, 128], f8e4m3), 64, 16),  # four fp8 per register
        (frag(ROW, [64]), 2, 2),  # rows r and r + 8
        (frag(ROW, [128]), 4, 4),
        (frag(ROW, [64], f16), 2, 1),
        (frag(OPERAND_A, [64, 16], bf16), 8, 4),  # {a0, a1, a2, a3} of one k16 slice
        (frag(OPERAND_A, [64, 64], f16), 32, 16),
    ],
)
def test_fragment_registers_per_thread(fragment: FragmentType, values: int, registers: int):
    assert fragment.values_per_thread() == values
    assert fragment.registers_per_thread() == registers


def test_fragment_values_cover_the_tile():
    # 128 threads x values per thread = elements of the tile (rows for a row vector x 4 lanes).
    for fragment in (frag(ACC, [128, 96]), frag(OPERAND_A, [64, 32], bf16)):
        rows, cols = fragment.get_shape()
        assert 128 * fragment.values_per_thread() == rows * cols
    assert 128 * frag(ROW, [64]).values_per_thread() == 64 * 4


@pytest.mark.parametrize(
    ("smem", "slot_bytes"),
    [
        (SmemType([3, 128, 64], f16, 128), 16384),
        (SmemType([2, 64, 64], BFloat16Type(), 128), 8192),
        (SmemType([2, 128, 128], f8e4m3, 128), 16384),
        (SmemType([1, 128, 128], f32), 65536),
    ],
)
def test_smem_slot_bytes(smem: SmemType, slot_bytes: int):
    assert smem.slot_bytes() == slot_bytes


def test_smem_helpers_and_syntax():
    smem = SmemType([3, 128, 64], f16, 128)
    assert (smem.slot_count, smem.slot_shape, smem.element_type) == (3, (128, 64), f16)
    assert smem.slot_type() == TensorType(f16, [128, 64])
    assert str(smem) == "!nvgpu.smem<3x128x64xf16, swizzle 128>"
    assert str(MBarrierType(3)) == "!nvgpu.mbarrier<3>"
    assert str(frag(ACC, [64, 128])) == "!nvgpu.fragment<wgmma_acc, 64x128xf32>"


# ---------------------------------------------------------------------------------- types


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: MBarrierType(0), "!nvgpu.mbarrier needs at least one barrier, got 0"),
        (
            lambda: SmemType([128], f16),
            "!nvgpu.smem needs a slot count and a tile shape (rank >= 2), got 128",
        ),
        (lambda: SmemType([2, 0, 64], f16), "!nvgpu.smem dims must be positive, got (2, 0, 64)"),
        (
            lambda: SmemType([2, 64, 64], i32),
            "!nvgpu.smem element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, got i32",
        ),
        (
            lambda: SmemType([2, 64, 64], f16, 16),
            "!nvgpu.smem swizzle must be 0, 32, 64 or 128, got 16",
        ),
        (
            lambda: SmemType([2, 64, 32], f16, 128),
            "!nvgpu.smem with swizzle 128 needs rows of a multiple of 128 bytes, got 32 x 2 = 64 "
            "bytes",
        ),
        (
            lambda: frag(ROW, [64, 64]),
            "!nvgpu.fragment<wgmma_row> needs a rank-1 shape, got 64x64",
        ),
        (
            lambda: frag(ACC, [32, 64]),
            "!nvgpu.fragment<wgmma_acc> rows must be a positive multiple of 64, got 32",
        ),
        (
            lambda: frag(ACC, [64, 64], i32),
            "!nvgpu.fragment element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, got i32",
        ),
        (
            lambda: frag(ACC, [64, 264]),
            "!nvgpu.fragment<wgmma_acc> columns must be a multiple of 8 in 8..256 (wgmma N), "
            "got 264",
        ),
        (
            lambda: frag(ACC, [64, 12]),
            "!nvgpu.fragment<wgmma_acc> columns must be a multiple of 8 in 8..256 (wgmma N), "
            "got 12",
        ),
        (
            lambda: frag(OPERAND_A, [64, 16], f8e4m3),
            "!nvgpu.fragment<wgmma_operand_a> element type must be f16 or bf16, got f8E4M3FN",
        ),
        (
            lambda: frag(OPERAND_A, [64, 8], f16),
            "!nvgpu.fragment<wgmma_operand_a> columns must be a positive multiple of 16 "
            "(wgmma K), got 8",
        ),
    ],
)
def test_type_verifiers(build, message: str):
    with fails(message):
        build()


# ------------------------------------------------------------------------------ mbarriers


BARS = MBarrierType(2)


def test_mbarrier_init_count():
    MBarrierInitOp(value(BARS), 1).verify()
    with fails("'nvgpu.mbarrier_init' count must be in 1..1048575, got 0"):
        MBarrierInitOp(value(BARS), 0).verify()


def test_mbarrier_constant_slot_in_range():
    MBarrierArriveOp(value(BARS), const(1)).verify()
    MBarrierArriveOp(value(BARS), value(i32)).verify()  # dynamic slots are not checked
    with fails("'nvgpu.mbarrier_arrive' barrier slot 2 is out of range 0..1"):
        MBarrierArriveOp(value(BARS), const(2)).verify()


def test_mbarrier_arrive_expect_tx_bytes():
    MBarrierArriveExpectTxOp(value(BARS), const(0), 32768).verify()
    with fails(
        "'nvgpu.mbarrier_arrive_expect_tx' bytes must be in 1..1048575 (the 20-bit tx-count), got 0"
    ):
        MBarrierArriveExpectTxOp(value(BARS), const(0), 0).verify()


def test_mbarrier_wait_parity():
    MBarrierWaitOp(value(BARS), const(0), const(1)).verify()
    with fails("'nvgpu.mbarrier_wait' parity must be 0 or 1, got 2"):
        MBarrierWaitOp(value(BARS), const(0), const(2)).verify()


# ------------------------------------------------------------------------------------ TMA


def tma_load(desc: DescType, smem: SmemType, offsets: int = 2, slot: SSAValue | None = None):
    return TmaLoadOp(
        value(desc),
        [value(i32)] * offsets,
        value(smem),
        slot or value(i32),
        value(MBarrierType(3)),
        value(i32),
    )


def test_tma_load_accepts_matching_box():
    tma_load(DescType([128, 64], f16), SmemType([3, 128, 64], f16, 128)).verify()


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (
            lambda: tma_load(DescType([128, 64], f16), SmemType([3, 128, 64], f16, 128), 1),
            "'nvgpu.tma_load' needs one offset per descriptor dim: !tile.desc<128x64xf16> has "
            "rank 2, got 1 offsets",
        ),
        (
            lambda: tma_load(DescType([128, 64], f16), SmemType([3, 64, 64], f16, 128)),
            "'nvgpu.tma_load' descriptor block 128x64xf16 must equal the smem slot 64x64xf16",
        ),
        (
            lambda: tma_load(DescType([128, 64], bf16), SmemType([3, 128, 64], f16, 128)),
            "'nvgpu.tma_load' descriptor block 128x64xbf16 must equal the smem slot 128x64xf16",
        ),
        (
            lambda: tma_load(DescType([512, 64], f16), SmemType([1, 512, 64], f16, 128)),
            "'nvgpu.tma_load' box dims must be at most 256, got 512x64",
        ),
        (
            lambda: tma_load(DescType([64, 4], f16), SmemType([1, 64, 4], f16)),
            "'nvgpu.tma_load' innermost box dim must span a multiple of 16 bytes, got 8 bytes",
        ),
        (
            lambda: tma_load(
                DescType([128, 64], f16), SmemType([3, 128, 64], f16, 128), slot=const(3)
            ),
            "'nvgpu.tma_load' buffer slot 3 is out of range 0..2",
        ),
        (
            lambda: TmaStoreOp(
                value(DescType([128, 128], f32)),
                [value(i32)] * 2,
                value(SmemType([1, 128, 128], f16)),
                value(i32),
            ),
            "'nvgpu.tma_store' descriptor block 128x128xf32 must equal the smem slot 128x128xf16",
        ),
        (
            lambda: TmaStoreWaitOp(-1),
            "'nvgpu.tma_store_wait' pending must be >= 0, got -1",
        ),
    ],
)
def test_tma_verifiers(op, message: str):
    with fails(message):
        op().verify()


def test_smem_load_and_store_types():
    smem = SmemType([2, 128, 64], f16, 128)
    load = SmemLoadOp(value(smem), value(i32))
    load.verify()
    assert load.result.type == TensorType(f16, [128, 64])
    SmemStoreOp(value(TensorType(f16, [128, 64])), value(smem), value(i32)).verify()
    with fails(
        "'nvgpu.smem_store' into a slot of !nvgpu.smem<2x128x64xf16, swizzle 128> needs a "
        "tensor<128x64xf16> value, got tensor<128x64xbf16>"
    ):
        SmemStoreOp(value(TensorType(bf16, [128, 64])), value(smem), value(i32)).verify()
    bad_load = SmemLoadOp.create(
        operands=[value(smem), value(i32)], result_types=[TensorType(f16, [64, 64])]
    )
    with fails(
        "'nvgpu.smem_load' of a slot of !nvgpu.smem<2x128x64xf16, swizzle 128> must produce "
        "tensor<128x64xf16>, got tensor<64x64xf16>"
    ):
        bad_load.verify()


# ---------------------------------------------------------------------------------- wgmma


def ss(
    a: SmemType,
    b: SmemType,
    acc: FragmentType,
    *,
    a_row: bool = False,
    transpose_b: bool = False,
    b_slot: SSAValue | None = None,
) -> WgmmaMmaAsyncOp:
    return WgmmaMmaAsyncOp(
        value(a),
        value(i32),
        value(b),
        b_slot or value(i32),
        value(acc),
        a_row=value(i32) if a_row else None,
        transpose_b=transpose_b,
    )


A64 = SmemType([2, 64, 64], f16, 128)
B64 = SmemType([2, 64, 64], f16, 128)
ACC64 = frag(ACC, [64, 64])


def test_wgmma_accepts_valid_shapes():
    ss(A64, SmemType([2, 128, 64], f16, 128), frag(ACC, [64, 128])).verify()  # B is NxK
    ss(A64, SmemType([2, 64, 128], f16, 128), frag(ACC, [64, 128]), transpose_b=True).verify()
    ss(SmemType([2, 128, 64], f16, 128), B64, ACC64, a_row=True).verify()  # cooperative slice
    fp8_a, fp8_b = SmemType([2, 64, 64], f8e4m3, 64), SmemType([2, 256, 64], f8e5m2, 64)
    ss(fp8_a, fp8_b, frag(ACC, [64, 256])).verify()
    rs = WgmmaMmaAsyncRsOp(
        value(frag(OPERAND_A, [64, 64], bf16)),
        value(SmemType([2, 64, 64], bf16, 128)),
        value(i32),
        value(ACC64),
        transpose_b=True,
    )
    rs.verify()
    assert rs.result.type == ACC64


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (
            lambda: WgmmaWaitGroupOp(-1),
            "'nvgpu.wgmma_wait_group' pending must be >= 0, got -1",
        ),
        (
            lambda: ss(A64, B64, frag(ACC, [64, 64], f16)),
            "'nvgpu.wgmma_mma_async' accumulator must be a wgmma_acc fragment of f32, got "
            "!nvgpu.fragment<wgmma_acc, 64x64xf16>",
        ),
        (
            lambda: ss(A64, SmemType([2, 64, 64], bf16, 128), ACC64),
            "'nvgpu.wgmma_mma_async' inputs must both be f16, both bf16, or both fp8, got f16 "
            "and bf16",
        ),
        (
            lambda: ss(SmemType([2, 64, 64], f32), SmemType([2, 64, 64], f32), ACC64),
            "'nvgpu.wgmma_mma_async' inputs must both be f16, both bf16, or both fp8, got f32 "
            "and f32",
        ),
        (
            lambda: ss(
                SmemType([2, 64, 64], f8e4m3, 64),
                SmemType([2, 64, 64], f8e4m3, 64),
                ACC64,
                transpose_b=True,
            ),
            "'nvgpu.wgmma_mma_async' transpose_b is not available for fp8 inputs (both must be "
            "K-major)",
        ),
        (
            lambda: ss(A64, SmemType([2, 2, 64, 64], f16, 128), ACC64),
            "'nvgpu.wgmma_mma_async' B slots must be 2-D, got !nvgpu.smem<2x2x64x64xf16, "
            "swizzle 128>",
        ),
        (
            lambda: ss(SmemType([2, 2, 64, 64], f16, 128), B64, ACC64),
            "'nvgpu.wgmma_mma_async' A slots must be 2-D, got !nvgpu.smem<2x2x64x64xf16, "
            "swizzle 128>",
        ),
        (
            lambda: ss(A64, SmemType([2, 128, 64], f16, 128), ACC64),
            "'nvgpu.wgmma_mma_async' shape mismatch: A 64x64, B 128x64, acc 64x64 (needs A MxK, "
            "B NxK, acc MxN)",
        ),
        (
            lambda: ss(
                A64, SmemType([2, 128, 64], f16, 128), frag(ACC, [64, 128]), transpose_b=True
            ),
            "'nvgpu.wgmma_mma_async' shape mismatch: A 64x64, B 128x64, acc 64x128 (needs A "
            "MxK, B KxN (transpose_b), acc MxN)",
        ),
        (
            lambda: ss(SmemType([2, 64, 8], f16), SmemType([2, 64, 8], f16), ACC64),
            "'nvgpu.wgmma_mma_async' K = 8 must be a multiple of the instruction K 16 for f16",
        ),
        (
            lambda: ss(SmemType([2, 64, 16], f8e5m2), SmemType([2, 64, 16], f8e5m2), ACC64),
            "'nvgpu.wgmma_mma_async' K = 16 must be a multiple of the instruction K 32 for f8E5M2",
        ),
        (
            lambda: ss(SmemType([2, 128, 64], f16, 128), B64, ACC64),
            "'nvgpu.wgmma_mma_async' A slot has 128 rows but acc has 64: pass a row offset to "
            "use a slice of the slot",
        ),
        (
            lambda: ss(SmemType([2, 96, 64], f16, 128), B64, ACC64, a_row=True),
            "'nvgpu.wgmma_mma_async' A slot rows 96 must be a multiple of acc rows 64",
        ),
        (
            lambda: ss(A64, B64, ACC64, b_slot=const(2)),
            "'nvgpu.wgmma_mma_async' B slot 2 is out of range 0..1",
        ),
        (
            lambda: WgmmaMmaAsyncRsOp(
                value(frag(ACC, [64, 64], f16)), value(B64), value(i32), value(ACC64)
            ),
            "'nvgpu.wgmma_mma_async_rs' A of f16 must be a wgmma_operand_a fragment, got "
            "!nvgpu.fragment<wgmma_acc, 64x64xf16>",
        ),
        (
            lambda: WgmmaMmaAsyncRsOp(
                value(frag(OPERAND_A, [64, 32], f16)), value(B64), value(i32), value(ACC64)
            ),
            "'nvgpu.wgmma_mma_async_rs' shape mismatch: A 64x32, B 64x64, acc 64x64 (needs A "
            "MxK, B NxK, acc MxN)",
        ),
    ],
)
def test_wgmma_verifiers(op, message: str):
    with fails(message):
        op().verify()


# ------------------------------------------------------------------- threads and registers


@pytest.mark.parametrize("registers", [24, 40, 232, 256])
def test_setmaxnreg_accepts(registers: int):
    SetMaxNRegOp(RegisterAction.INCREASE, registers).verify()


@pytest.mark.parametrize("registers", [16, 20, 44, 260])
def test_setmaxnreg_rejects(registers: int):
    with fails(f"'nvgpu.setmaxnreg' registers must be a multiple of 8 in 24..256, got {registers}"):
        SetMaxNRegOp(RegisterAction.DECREASE, registers).verify()


@pytest.mark.parametrize(
    ("barrier_id", "threads", "message"),
    [
        (
            0,
            128,
            "'nvgpu.named_barrier_sync' id 0 is reserved for the CTA-wide barrier (use "
            "nvgpu.cta_barrier)",
        ),
        (16, 128, "'nvgpu.named_barrier_sync' id must be in 1..15, got 16"),
        (
            1,
            48,
            "'nvgpu.named_barrier_sync' threads must be a multiple of 32 in 32..1024, got 48",
        ),
        (
            1,
            0,
            "'nvgpu.named_barrier_sync' threads must be a multiple of 32 in 32..1024, got 0",
        ),
    ],
)
def test_named_barrier_rules(barrier_id: int, threads: int, message: str):
    NamedBarrierSyncOp(1, 256).verify()
    with fails(message):
        NamedBarrierSyncOp(barrier_id, threads).verify()


# ------------------------------------------------------------------------------ fragments


ROW64 = frag(ROW, [64])


def test_fragment_ops_build_their_result_types():
    s = value(ACC64)
    reduce = FragmentRowReduceOp(ReduceKind.MAX, s)
    reduce.verify()
    assert reduce.result.type == ROW64
    broadcast = FragmentBroadcastRowsOp(reduce.result, 128)
    broadcast.verify()
    assert broadcast.result.type == frag(ACC, [64, 128])
    FragmentBinaryOp(BinaryKind.MAX, s, s).verify()
    FragmentUnaryOp(UnaryKind.NEG, value(frag(ACC, [64, 64], bf16))).verify()
    FragmentUnaryOp(UnaryKind.EXP2, value(frag(ACC, [64, 64], bf16))).verify()  # in f32
    ShuffleXorOp(reduce.result, 2).verify()
    FragmentConvertOp(s, frag(OPERAND_A, [64, 64], bf16)).verify()
    FragmentSplatOp(value(f32), ACC64).verify()


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (
            lambda: FragmentSplatOp(value(f16), ACC64),
            "'nvgpu.fragment_splat' scalar type f16 must equal the element type of "
            "!nvgpu.fragment<wgmma_acc, 64x64xf32>",
        ),
        (
            lambda: FragmentUnaryOp(UnaryKind.EXP2, value(frag(ACC, [64, 64], f8e4m3))),
            "'nvgpu.fragment_unary' computes on f32, f16 or bf16 elements, got f8E4M3FN",
        ),
        (
            lambda: FragmentConvertOp(value(ACC64), frag(ACC, [64, 128], bf16)),
            "'nvgpu.fragment_convert' must keep the shape and layout (or turn wgmma_acc into "
            "wgmma_operand_a or wgmma_operand_a8), got !nvgpu.fragment<wgmma_acc, 64x64xf32> -> "
            "!nvgpu.fragment<wgmma_acc, 64x128xbf16>",
        ),
        (
            lambda: FragmentConvertOp(value(frag(OPERAND_A, [64, 64], bf16)), ACC64),
            "'nvgpu.fragment_convert' must keep the shape and layout (or turn wgmma_acc into "
            "wgmma_operand_a or wgmma_operand_a8), got "
            "!nvgpu.fragment<wgmma_operand_a, 64x64xbf16> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>",
        ),
        (
            lambda: FragmentRowReduceOp.create(
                operands=[value(frag(ACC, [128, 64]))],
                properties=FragmentRowReduceOp(ReduceKind.SUM, value(ACC64)).properties,
                result_types=[ROW64],
            ),
            "'nvgpu.fragment_row_reduce' reduces a wgmma_acc fragment to its wgmma_row "
            "fragment, got !nvgpu.fragment<wgmma_acc, 128x64xf32> -> "
            "!nvgpu.fragment<wgmma_row, 64xf32>",
        ),
        (
            lambda: ShuffleXorOp(value(ACC64), 1),
            "'nvgpu.shuffle_xor' needs a wgmma_row fragment, got "
            "!nvgpu.fragment<wgmma_acc, 64x64xf32>",
        ),
        (
            lambda: ShuffleXorOp(value(ROW64), 4),
            "'nvgpu.shuffle_xor' mask must be 1 or 2 (the lanes of a quad), got 4",
        ),
        (
            lambda: FragmentBroadcastRowsOp.create(
                operands=[value(ROW64)], result_types=[frag(ACC, [128, 64])]
            ),
            "'nvgpu.fragment_broadcast_rows' turns a wgmma_row fragment into a wgmma_acc "
            "fragment of the same rows and element type, got !nvgpu.fragment<wgmma_row, 64xf32> "
            "-> !nvgpu.fragment<wgmma_acc, 128x64xf32>",
        ),
    ],
)
def test_fragment_verifiers(op, message: str):
    with fails(message):
        op().verify()


def test_fragment_binary_needs_one_type():
    op = FragmentBinaryOp(BinaryKind.ADD, value(ACC64), value(frag(ACC, [64, 128])))
    with pytest.raises(VerifyException, match="expected from variable 'T'"):
        op.verify()


def test_fragment_store_rules():
    smem = SmemType([1, 128, 64], f16)
    FragmentStoreOp(value(frag(ACC, [128, 64], f16)), value(smem), value(i32)).verify()
    FragmentStoreOp(
        value(frag(ACC, [64, 64], f16)), value(smem), value(i32), value(i32)
    ).verify()  # one warpgroup's rows of a shared slot
    with fails(
        "'nvgpu.fragment_store' needs a wgmma_acc fragment, got "
        "!nvgpu.fragment<wgmma_operand_a, 64x64xf16>"
    ):
        FragmentStoreOp(
            value(frag(OPERAND_A, [64, 64], f16)), value(smem), value(i32), value(i32)
        ).verify()
    with fails("'nvgpu.fragment_store' element types differ: f32 into f16 (convert first)"):
        FragmentStoreOp(value(frag(ACC, [128, 64])), value(smem), value(i32)).verify()
    with fails(
        "'nvgpu.fragment_store' of 64x64 into a 128x64 slot: the slot must have the same "
        "shape, or, with a row offset, a multiple of the rows"
    ):
        FragmentStoreOp(value(frag(ACC, [64, 64], f16)), value(smem), value(i32)).verify()


def test_fragment_store_global_rules():
    def store(fragment: FragmentType, desc: DescType, offsets: int = 2) -> FragmentStoreGlobalOp:
        return FragmentStoreGlobalOp(value(fragment), value(desc), [value(i32)] * offsets)

    store(ACC64, DescType([128, 64], f32)).verify()
    store(ROW64, DescType([1, 64], f32)).verify()  # a row vector along the last dim (an LSE)
    store(ROW64, DescType([64], f32), offsets=1).verify()  # or through a rank-1 descriptor
    with fails(
        "'nvgpu.fragment_store_global' needs a rank-2 descriptor, or one whose leading block "
        "dims are 1 (a row vector also a rank-1 one), got !tile.desc<64xf32>"
    ):
        store(ACC64, DescType([64], f32), 1).verify()  # an accumulator never rank-1
    with fails(
        "'nvgpu.fragment_store_global' needs a wgmma_acc or wgmma_row fragment, got "
        "!nvgpu.fragment<wgmma_operand_a, 64x64xf16>"
    ):
        store(frag(OPERAND_A, [64, 64], f16), DescType([64, 64], f16)).verify()
    store(ACC64, DescType([1, 64, 64], f32), offsets=3).verify()  # a 2-D block of a 3-D tensor
    with fails(
        "'nvgpu.fragment_store_global' needs a rank-2 descriptor, or one whose leading block "
        "dims are 1 (a row vector also a rank-1 one), got !tile.desc<2x64x64xf32>"
    ):
        store(ACC64, DescType([2, 64, 64], f32), 3).verify()
    with fails(
        "'nvgpu.fragment_store_global' needs one offset per descriptor dim: "
        "!tile.desc<64x64xf32> has rank 2, got 1 offsets"
    ):
        store(ACC64, DescType([64, 64], f32), 1).verify()
    with fails("'nvgpu.fragment_store_global' element types differ: f32 into bf16 (convert first)"):
        store(ACC64, DescType([64, 64], bf16)).verify()
