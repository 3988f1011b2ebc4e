"""The nvgpu-level interpreter: every example, taken through the whole pipeline to the IR that
`emit-ptx` prints, stores what the tile level stores (bit for bit for GEMM, whose math is the
same; within an f16 ulp for attention, whose exp2 and row sums run in a different order), and
broken lowerings -- an early slot release, a flipped parity, a short expect_tx, a wrong row
offset, a wrong register layout -- are reported as errors or show as wrong results.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, i32, i64
from xdsl.ir import Operation
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context, nvgpu
from tawa_xdsl.interp import fragments
from tawa_xdsl.interp.dtypes import InterpreterError
from tawa_xdsl.interp.nvgpu import NvgpuError, run_nvgpu_kernel
from tawa_xdsl.interp.scheduler import DeadlockError
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.transforms.persistent import persistent_launch

EXAMPLES = Path(__file__).parents[2] / "examples"
# Attention at the nvgpu level sums each row in per-thread chains and quad shuffles and
# flushes subnormal exp2 results (ex2.approx.ftz): the f32 row sums differ from numpy's in
# the last bits, which moves an f16 output by at most one ulp (2^-10 relative) near 1.
ATTENTION_TOLERANCE = {"rtol": 2**-10, "atol": 2**-12}
# With every exp2 on the FMA units (`nvgpu.EXP2_POLY`, 7.5e-5 relative a score), a row whose
# weighted values cancel to near zero moves by up to 7.5e-5 * 2 * max |v| (about 4e-4).
EMULATED_TOLERANCE = {"rtol": 2**-10, "atol": 2**-10}


def tile_module(name: str) -> Any:
    return parse_module(make_context(), (EXAMPLES / f"{name}.mlir").read_text(), f"{name}.mlir")


def nvgpu_module(tile: Any, options: CompileOptions) -> Any:
    return lower_to_nvgpu_level(tile, replace(options, verify=False))


def launch(module: Any, options: CompileOptions, grid: tuple[int, ...], args: list[Any], **kw):
    extra: list[Any] = []
    if options.persistent:
        grid, extra = persistent_launch(grid, 2)
    run_nvgpu_kernel(module, grid, [*args, *extra], **kw)


def gemm_args(m: int, n: int, k: int, seed: int = 0) -> tuple[tuple[int, ...], list[Any]]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    return (-(-m // 128) * -(-n // 128),), [a, b, np.zeros((m, n), np.float16), m, n, k]


def gemm_expected(grid: tuple[int, ...], args: list[Any]) -> np.ndarray:
    reference = [*args[:2], np.zeros_like(args[2]), *args[3:]]
    run_kernel(tile_module("gemm"), grid, reference)
    return reference[2]


GEMM_OPTIONS = [
    CompileOptions(stages=3, mma_depth=2, consumers=2),
    CompileOptions(stages=2, mma_depth=1, consumers=1, persistent=True),
    CompileOptions(stages=2, mma_depth=2, consumers=2, persistent=True, epilogue="tma"),
    CompileOptions(stages=1, mma_depth=1, consumers=1, epilogue="tma"),
]


@pytest.mark.parametrize("options", GEMM_OPTIONS, ids=lambda o: f"{o}"[14:70])
@pytest.mark.parametrize("schedule", ["random", "producer-first"])
def test_gemm_matches_tile_level(options: CompileOptions, schedule: str) -> None:
    grid, args = gemm_args(300, 200, 100)
    expected = gemm_expected(grid, args)
    launch(nvgpu_module(tile_module("gemm"), options), options, grid, args, schedule=schedule)
    np.testing.assert_array_equal(args[2], expected)


@pytest.mark.parametrize("epilogue", ["global", "tma"])
def test_gemm_with_slabbed_slots_matches_tile_level(epilogue: str) -> None:
    """BLOCK_K = 128 halves are 256-byte rows: two TMA boxes per slot, descriptor steps
    that cross into the second column slab."""
    import tawa_xdsl.language as tl
    from tawa_xdsl.kernels.gemm import gemm_tile_ir

    options = CompileOptions(stages=2, mma_depth=1, consumers=2, epilogue=epilogue)
    tile = gemm_tile_ir(128, 128, 128, tl.float16)
    module = nvgpu_module(tile, options)
    assert any(len(op.box_smem_offsets) == 2 for op in ops_of(module, nvgpu.TmaLoadOp))
    grid, args = gemm_args(150, 140, 300, seed=7)
    expected = [*args[:2], np.zeros_like(args[2]), *args[3:]]
    run_kernel(tile, grid, expected)
    launch(module, options, grid, args)
    np.testing.assert_array_equal(args[2], expected[2])


def test_gemm_empty_k_loop_stores_zeros() -> None:
    options = CompileOptions(stages=2, mma_depth=2, consumers=2)
    grid, args = gemm_args(70, 130, 0)
    args[2][...] = np.nan
    launch(nvgpu_module(tile_module("gemm"), options), options, grid, args)
    assert not args[2].any()


def attention_args(heads: int, seq: int) -> tuple[tuple[int, ...], list[Any]]:
    rng = np.random.default_rng(seq)
    q, k, v = (rng.standard_normal((heads, seq, 64)).astype(np.float16) for _ in range(3))
    return (-(-seq // 128), heads, 1), [q, k, v, np.zeros_like(q), seq, 1 / math.sqrt(64)]


@pytest.mark.parametrize("name", ["attention", "attention_causal"])
@pytest.mark.parametrize(
    ("seq", "options"),
    [
        (200, CompileOptions(stages=2, mma_depth=1, consumers=2)),
        (130, CompileOptions(stages=2, mma_depth=1, consumers=2, pingpong=True)),
        (256, CompileOptions(stages=3, mma_depth=1, consumers=1, persistent=True)),
        # every score's exp2 on the FMA units (the chosen share is 2 of 8 at d = 64)
        (200, CompileOptions(stages=2, mma_depth=1, consumers=2, exp2_emulation=8)),
    ],
)
def test_attention_matches_tile_level(name: str, seq: int, options: CompileOptions) -> None:
    grid, args = attention_args(2, seq)
    reference = [*args[:3], np.zeros_like(args[3]), *args[4:]]
    run_kernel(tile_module(name), grid, reference)
    launch(nvgpu_module(tile_module(name), options), options, grid, args)
    tolerance = EMULATED_TOLERANCE if options.exp2_emulation else ATTENTION_TOLERANCE
    np.testing.assert_allclose(args[3].astype(np.float32), reference[3], **tolerance)


def load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"{name}_py", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def test_language_gemm_matches_tile_level() -> None:
    import tawa_xdsl

    example = load_example("gemm")
    grid, (a, b, c, m, n, k) = gemm_args(200, 130, 70, seed=4)
    descs = [
        tawa_xdsl.TensorDescriptor.from_tensor(x, shape)
        for x, shape in ((a, [128, 64]), (b, [128, 64]), (c, [128, 128]))
    ]
    meta = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8)
    compiled = example.gemm.compile(*descs, m, n, k, **meta)
    expected = np.zeros_like(c)
    run_kernel(compiled.module, grid, [a, b, expected, m, n, k])
    options = CompileOptions(stages=2, mma_depth=2, consumers=2)
    launch(nvgpu_module(compiled.module, options), options, grid, [a, b, c, m, n, k])
    np.testing.assert_array_equal(c, expected)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_language_attention_with_log_sum_exp_matches_tile_level(causal: bool) -> None:
    import tawa_xdsl

    example = load_example("attention")
    heads, seq = 2, 150
    grid, (q, k, v, o, _, scale) = attention_args(heads, seq)
    lse = example.lse_buffer(heads, seq)
    blocks = ([1, 128, 64],) * 4 + ([1, 128],)
    descs = [
        tawa_xdsl.TensorDescriptor.from_tensor(x, shape)
        for x, shape in zip((q, k, v, o, lse), blocks, strict=True)
    ]
    meta = dict(HEAD_DIM=64, BLOCK_M=128, BLOCK_N=128, CAUSAL=causal)
    compiled = example.attn_fwd_lse.compile(*descs, seq, scale, **meta)
    expected_o, expected_lse = np.zeros_like(o), example.lse_buffer(heads, seq)
    run_kernel(compiled.module, grid, [q, k, v, expected_o, expected_lse, seq, scale])
    options = CompileOptions(stages=2, mma_depth=1, consumers=2)
    launch(nvgpu_module(compiled.module, options), options, grid, [q, k, v, o, lse, seq, scale])
    np.testing.assert_allclose(o.astype(np.float32), expected_o, **ATTENTION_TOLERANCE)
    np.testing.assert_allclose(lse, expected_lse, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ mutations


def ops_of(module: Any, kind: type[Operation]) -> list[Any]:
    return [op for op in module.walk() if isinstance(op, kind)]


def run_mutant(module: Any, options: CompileOptions, schedule: Any = "producer-first") -> bool:
    """Run a mutated GEMM; True when it stored the tile level's result (the mutant survived)."""
    grid, args = gemm_args(130, 130, 320)
    expected = gemm_expected(grid, args)
    launch(module, options, grid, args, schedule=schedule)
    return np.array_equal(args[2], expected)


MUTATION_OPTIONS = CompileOptions(stages=2, mma_depth=2, consumers=2)


def test_unmutated_gemm_survives() -> None:
    # The mutants below run under "producer-first", the order that refills slots soonest.
    assert run_mutant(nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS), MUTATION_OPTIONS)


EARLY_RELEASE = (
    r"'nvgpu.mbarrier_arrive': releases slot \d of a_b_ring_buf\d \(a_b_ring_empty\[\d\]\) "
    r"while the wgmma at \S+ still reads it"
)


def test_wait_group_too_shallow_is_an_early_release() -> None:
    """wait_group 2 after each commit: the consumer releases the slot of the MMA one step
    back while that MMA may still read it; the release itself is the error, under any
    schedule (the producer need not refill the slot first)."""
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    (in_loop, *_) = [op for op in ops_of(module, nvgpu.WgmmaWaitGroupOp) if op.pending.value.data]
    in_loop.pending = IntegerAttr(2, i32)
    for schedule in ("producer-first", "consumer-first"):
        with pytest.raises(NvgpuError, match=EARLY_RELEASE):
            run_mutant(module, MUTATION_OPTIONS, schedule)


def test_dropped_wait_group_is_an_early_release() -> None:
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    for op in ops_of(module, nvgpu.WgmmaWaitGroupOp):
        op.detach()
        op.erase()
    with pytest.raises(NvgpuError, match=EARLY_RELEASE):
        run_mutant(module, MUTATION_OPTIONS)


def test_flipped_parity_is_caught() -> None:
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    waits = ops_of(module, nvgpu.MBarrierWaitOp)
    consumer_wait = next(op for op in waits if "full" in (op.bars.name_hint or ""))
    one = arith.ConstantOp(IntegerAttr(1, i32))
    flipped = arith.XOrIOp(consumer_wait.parity, one.result)
    Rewriter.insert_op([one, flipped], InsertPoint.before(consumer_wait))
    consumer_wait.operands = [consumer_wait.bars, consumer_wait.slot, flipped.result]
    with pytest.raises(NvgpuError, match="reads slot 0 of a_b_ring_buf0 while a TMA copy"):
        run_mutant(module, MUTATION_OPTIONS)


def test_halved_expect_tx_is_caught() -> None:
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    for op in ops_of(module, nvgpu.MBarrierArriveExpectTxOp):
        op.tx_bytes = IntegerAttr(op.tx_bytes.value.data // 2, i32)
    # The phase completes when the first of the two copies lands: B is read half written.
    with pytest.raises(NvgpuError, match="reads slot 0 of a_b_ring_buf1 while a TMA copy"):
        run_mutant(module, MUTATION_OPTIONS)


def test_wrong_consumer_row_offset_is_a_wrong_result() -> None:
    """Both consumer warpgroups multiply the first 64 rows of A (row0 = wg * 0)."""
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    (mma,) = ops_of(module, nvgpu.WgmmaMmaAsyncOp)
    row_offset = mma.a_row.owner  # row0 = (wg - 1) * 64
    zero = arith.ConstantOp(IntegerAttr(0, i32))
    Rewriter.insert_op(zero, InsertPoint.before(row_offset))
    row_offset.operands = [row_offset.operands[0], zero.result]
    assert not run_mutant(module, MUTATION_OPTIONS, "random")


def test_every_thread_arriving_is_caught() -> None:
    """The consumer's release taken out of its thread-0 guard: 128 arrivals per warpgroup,
    which run the empty barrier through 64 phases at once."""
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    for arrive in ops_of(module, nvgpu.MBarrierArriveOp):
        guard = arrive.parent_op()
        arrive.detach()
        Rewriter.insert_op(arrive, InsertPoint.before(guard))
    with pytest.raises(DeadlockError, match="try_wait.parity"):
        run_mutant(module, MUTATION_OPTIONS)


def test_missing_expect_tx_deadlocks() -> None:
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    for op in ops_of(module, nvgpu.TmaLoadOp):
        op.detach()
        op.erase()
    with pytest.raises(DeadlockError, match="try_wait.parity"):
        run_mutant(module, MUTATION_OPTIONS)


# ------------------------------------------------- mutations of the legalize-nvgpu plan


def test_overlapping_smem_placement_is_caught() -> None:
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    b_buf = next(op for op in ops_of(module, nvgpu.SmemAllocOp) if op.buf.name_hint.endswith("1"))
    b_buf.offset = IntegerAttr(16384, i32)  # inside A's slot 0
    with pytest.raises(NvgpuError, match=r"placed at smem bytes \[16384, 49152\) overlaps a_b_"):
        run_mutant(module, MUTATION_OPTIONS)


def test_barriers_placed_on_a_buffer_are_caught() -> None:
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    empty = next(op for op in ops_of(module, nvgpu.MBarrierAllocOp) if "empty" in op.bars.name_hint)
    empty.offset = IntegerAttr(65544, i32)  # the full barriers' second barrier
    with pytest.raises(NvgpuError, match="overlaps a_b_ring_full"):
        run_mutant(module, MUTATION_OPTIONS)


def test_wrong_descriptor_step_is_a_wrong_result() -> None:
    """B's second k step reads the third 16-column slice again: the plan, not the op's
    operands, says where each instruction reads."""
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    (mma,) = ops_of(module, nvgpu.WgmmaMmaAsyncOp)
    assert list(mma.b_desc_steps.get_values()) == [0, 2, 4, 6]
    mma.b_desc_steps = DenseArrayBase.from_list(i64, [0, 4, 4, 6])
    assert not run_mutant(module, MUTATION_OPTIONS)


def test_descriptor_step_outside_the_slot_is_caught() -> None:
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    (mma,) = ops_of(module, nvgpu.WgmmaMmaAsyncOp)
    mma.a_desc_steps = DenseArrayBase.from_list(i64, [0, 2, 4, 7])
    with pytest.raises(NvgpuError, match="descriptor step 3 points at byte 112 of a slot"):
        run_mutant(module, MUTATION_OPTIONS)


def refused(op: Operation, message: str) -> None:
    """The op's verifier refuses the mutated plan (the mutants run unverified)."""
    with pytest.raises(VerifyException, match=message):
        op.verify()


def test_wrong_descriptor_stride_is_refused_and_a_wrong_result() -> None:
    """SBO (bits 32..45, 16-byte units) of 4 rows instead of 8 rows of 128 bytes: the wgmma
    reads rows 8.. of every core group from the bytes of rows 4.."""
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    (mma,) = ops_of(module, nvgpu.WgmmaMmaAsyncOp)
    bits = mma.b_desc_bits.value.data
    mma.b_desc_bits = IntegerAttr(bits & ~(0x3FFF << 32) | (32 << 32), i64)
    refused(mma, "b_desc_bits 0x4000002000010000 do not describe a slot of")
    assert not run_mutant(module, MUTATION_OPTIONS)


def test_wrong_descriptor_swizzle_is_refused_and_a_wrong_result() -> None:
    """A's descriptor says 64-byte swizzle (layout code 2) over 128-byte swizzled slots: TMA
    wrote the chunks XORed with three row bits, the wgmma undoes two."""
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    (mma,) = ops_of(module, nvgpu.WgmmaMmaAsyncOp)
    bits = mma.a_desc_bits.value.data & (2**64 - 1)
    assert bits >> 62 == 1
    mma.a_desc_bits = IntegerAttr(bits & (2**62 - 1) | 2 << 62, i64)
    refused(mma, "expected 0x4000004000010000")
    assert not run_mutant(module, MUTATION_OPTIONS)


def test_wrong_box_column_offset_is_a_wrong_result() -> None:
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    load = ops_of(module, nvgpu.TmaLoadOp)[0]
    load.box_col_offsets = DenseArrayBase.from_list(i32, [8])
    assert not run_mutant(module, MUTATION_OPTIONS)


def test_box_off_its_slab_is_caught() -> None:
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    load = ops_of(module, nvgpu.TmaLoadOp)[1]
    load.box_smem_offsets = DenseArrayBase.from_list(i32, [64])
    with pytest.raises(NvgpuError, match=r"box plan \(slot bytes \[64\]\) does not write each"):
        run_mutant(module, MUTATION_OPTIONS)


def test_wrong_store_row_offset_is_a_wrong_result() -> None:
    """The second st.global of each thread lands 8 rows too low (the layout says +8)."""
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    (store,) = ops_of(module, nvgpu.FragmentStoreGlobalOp)
    rows = list(store.store_rows.get_values())
    assert rows[:2] == [0, 8]
    store.store_rows = DenseArrayBase.from_list(i32, [0, 16, *rows[2:]])
    assert not run_mutant(module, MUTATION_OPTIONS)


def test_store_not_clipped_at_the_last_row_is_caught() -> None:
    """A clip plan that tests only the columns writes the rows below a 130-row tensor."""
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    (store,) = ops_of(module, nvgpu.FragmentStoreGlobalOp)
    assert list(store.clip_dims.get_values()) == [0, 1]
    store.clip_dims = DenseArrayBase.from_list(i32, [1])
    with pytest.raises(NvgpuError, match=r"outside the \[130, 130\] tensor: the clip plan \(dims"):
        run_mutant(module, MUTATION_OPTIONS)


def test_wrong_staging_store_column_is_a_wrong_result() -> None:
    """The TMA-store epilogue stages the tile in smem: one st.shared pair 8 columns off."""
    options = CompileOptions(stages=2, mma_depth=2, consumers=2, epilogue="tma")
    module = nvgpu_module(tile_module("gemm"), options)
    (store,) = ops_of(module, nvgpu.FragmentStoreOp)
    cols = list(store.store_cols.get_values())
    store.store_cols = DenseArrayBase.from_list(i32, [8, *cols[1:]])
    assert run_mutant(nvgpu_module(tile_module("gemm"), options), options)
    assert not run_mutant(module, options)


# A wrong address plan or slot stride is a static fact the op's verifier refuses, and the
# bytes the interpreter reads and writes show it too: each mutant below is run unverified.

TMA_OPTIONS = replace(MUTATION_OPTIONS, epilogue="tma")


def test_wrong_staging_swizzle_is_refused_and_a_wrong_result() -> None:
    """The epilogue's st.shared XOR the chunks with two row bits instead of three: the TMA
    store reads them back through the 128-byte swizzle, a permuted tile."""
    module = nvgpu_module(tile_module("gemm"), TMA_OPTIONS)
    (store,) = ops_of(module, nvgpu.FragmentStoreOp)
    assert store.swizzle.value.data == 128
    store.swizzle = IntegerAttr(64, i32)
    refused(store, r"address plan \(row_pitch, slab_pitch, swizzle\) = \(128, 8192, 64\)")
    assert not run_mutant(module, TMA_OPTIONS)


def test_unswizzled_staging_store_is_a_wrong_result() -> None:
    """No XOR at all on st.shared (the swizzle of the staging slot forgotten)."""
    module = nvgpu_module(tile_module("gemm"), TMA_OPTIONS)
    (store,) = ops_of(module, nvgpu.FragmentStoreOp)
    store.swizzle = IntegerAttr(0, i32)
    refused(store, "its swizzle 128 bytes")
    assert not run_mutant(module, TMA_OPTIONS)


def test_wrong_staging_row_pitch_is_refused_and_caught() -> None:
    """Rows (and slabs) 64 bytes wide in a slot of 128-byte rows: the columns past the
    first 32 are sent a slab on per 64 bytes, past the slots of the staging buffer."""
    module = nvgpu_module(tile_module("gemm"), TMA_OPTIONS)
    (store,) = ops_of(module, nvgpu.FragmentStoreOp)
    store.row_pitch = IntegerAttr(64, i32)
    refused(store, "its rows are 128 bytes apart")
    with pytest.raises(NvgpuError, match="reaches bytes outside the 4 slots of c_stage"):
        run_mutant(module, TMA_OPTIONS)


def test_wrong_slot_stride_is_refused_and_a_wrong_result() -> None:
    """A's ring slots half a slot apart: the producer's copy into slot 1 overwrites the
    second half of slot 0 while its wgmmas still have to read it."""
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    alloc = next(op for op in ops_of(module, nvgpu.SmemAllocOp) if op.buf.name_hint.endswith("0"))
    assert alloc.slot_stride.value.data == 16384
    alloc.slot_stride = IntegerAttr(8192, i32)
    refused(alloc, "slot_stride must be the 16384 bytes of a slot")
    assert not run_mutant(module, MUTATION_OPTIONS)


def test_slot_stride_past_the_buffer_is_caught() -> None:
    """B's slots a slot and a half apart: the last one runs into the next allocation."""
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    alloc = next(op for op in ops_of(module, nvgpu.SmemAllocOp) if op.buf.name_hint.endswith("1"))
    alloc.slot_stride = IntegerAttr(3 * 8192, i32)
    with pytest.raises(NvgpuError, match="overlaps a_b_ring_full"):
        run_mutant(module, MUTATION_OPTIONS)


def test_wrong_consumer_row_pitch_is_refused_and_a_wrong_result() -> None:
    """The second consumer's A descriptor starts 64 half-rows (not rows) in: the wgmma reads
    rows 32..95 of the slot."""
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    (mma,) = ops_of(module, nvgpu.WgmmaMmaAsyncOp)
    assert mma.a_row_pitch.value.data == 128
    mma.a_row_pitch = IntegerAttr(64, i32)
    refused(mma, "a_row_pitch must be 128 bytes per row of M")
    assert not run_mutant(module, MUTATION_OPTIONS, "random")


def test_unlegalized_module_is_refused() -> None:
    module = nvgpu_module(tile_module("gemm"), MUTATION_OPTIONS)
    for op in ops_of(module, nvgpu.SmemAllocOp):
        op.offset = None
    with pytest.raises(NvgpuError, match="has no smem offset; run legalize-nvgpu first"):
        run_mutant(module, MUTATION_OPTIONS)


class TransposedOperandA:
    """A wrong register A layout: each thread's k-pairs swapped with the row halves."""

    def values_per_thread(self, shape: tuple[int, ...]) -> int:
        return fragments.FRAGMENT_LAYOUTS[nvgpu.FragmentLayout.WGMMA_ACC].values_per_thread(shape)

    def coords(self, shape: tuple[int, ...], thread: int, value: int) -> tuple[int, int]:
        acc = fragments.FRAGMENT_LAYOUTS[nvgpu.FragmentLayout.WGMMA_ACC]
        swapped = value ^ 0b11 if value & 0b11 in (1, 2) else value
        return acc.coords(shape, thread, swapped)


def test_wrong_register_a_layout_is_a_wrong_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attention's P @ V reads P from registers (RS wgmma): a layout that disagrees with the
    accumulator's moves probabilities to the wrong keys."""
    options = CompileOptions(stages=2, mma_depth=1, consumers=2)
    module = nvgpu_module(tile_module("attention"), options)
    assert ops_of(module, nvgpu.WgmmaMmaAsyncRsOp)
    layouts = dict(fragments.FRAGMENT_LAYOUTS)
    layouts[nvgpu.FragmentLayout.WGMMA_OPERAND_A] = TransposedOperandA()
    monkeypatch.setattr(fragments, "FRAGMENT_LAYOUTS", layouts)
    fragments.coordinates.cache_clear()
    try:
        grid, args = attention_args(1, 128)
        reference = [*args[:3], np.zeros_like(args[3]), *args[4:]]
        run_kernel(tile_module("attention"), grid, reference)
        launch(module, options, grid, args)
    finally:
        fragments.coordinates.cache_clear()
    assert np.abs(args[3].astype(np.float32) - reference[3]).max() > 1e-2


def test_not_an_nvgpu_module_is_refused() -> None:
    grid, args = gemm_args(10, 10, 10)
    with pytest.raises(InterpreterError, match="is not at the nvgpu level"):
        run_nvgpu_kernel(tile_module("gemm"), grid, args)
