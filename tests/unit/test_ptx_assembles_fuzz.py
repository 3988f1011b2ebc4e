"""The GPU backend compiles what `tawa fuzz --gpu` draws (it used to refuse, and the fuzzer
skipped, about a quarter of the programs): GEMM epilogues, and only ring depths that fit.

* f16/bf16 round trips (`round_f16`, `round_bf16`): `fragment_convert` widens 16-bit pairs;
* `scale`, `bias_scalar`, `relu` alone: `arith` on tiles in the GEMM consumer lowering;
* `leaky` (`tile.cmp` of f32 tiles + `tile.where`): `nvgpu.fragment_select`;
* `bias` (a vector read from a slot, spread over rows): `nvgpu.fragment_load_columns`;
* attention with rings too deep for 227 KB: the GPU strategies do not draw them
  (`strategies.fitting_stages`, measured by `compiler.shared_memory_need`).

Each program is a fuzzer program (`fuzz.programs`) with options the 10-minute H200 run
skipped; the PTX must assemble with `ptxas -arch=sm_90a` with no forbidden warning and no
spill. Skipped only when ptxas is absent. The GPU runs: tests/gpu/test_fuzz_epilogues_gpu.py.
"""

from __future__ import annotations

import pytest

from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import (
    CompileOptions,
    compile_to_ptx,
    shared_memory_need,
)
from tawa_xdsl.diagnostics import TawaError, parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.dialects.nvgpu import SM90_MAX_SMEM_BYTES
from tawa_xdsl.fuzz.programs import AttentionProgram, GemmProgram, Program
from tawa_xdsl.fuzz.strategies import epilogue_chain

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")


def gemm(dtype: str, out: str, bm: int, bn: int, bk: int, *kinds: str) -> GemmProgram:
    """A fuzzer GEMM with the epilogue `kinds` (scalar arguments numbered in order)."""
    return GemmProgram(dtype, out, bm, bn, bk, epilogue=epilogue_chain(list(kinds)))


# (program, options, the nvgpu op its epilogue must lower to)
PROGRAMS: list[tuple[Program, CompileOptions, str]] = [
    (gemm("bf16", "f16", 128, 128, 32, "round_f16"), CompileOptions(2, 1, 1), "fragment_convert"),
    (
        gemm("f16", "f32", 64, 64, 64, "round_bf16", "exp2"),
        CompileOptions(4, 2, 1, True),
        "fragment_convert",
    ),
    (gemm("bf16", "bf16", 64, 64, 64, "bias_scalar"), CompileOptions(3, 1, 1), "fragment_binary"),
    (
        gemm("f16", "f16", 128, 128, 64, "scale", "relu"),
        CompileOptions(5, 1, 2, True),
        "fragment_binary",
    ),
    (gemm("f16", "f32", 128, 64, 32, "leaky"), CompileOptions(3, 2, 1), "fragment_select"),
    (gemm("bf16", "f32", 64, 64, 64, "bias"), CompileOptions(1, 1, 1), "fragment_load_columns"),
    (
        gemm("bf16", "bf16", 128, 128, 64, "bias", "leaky", "round_bf16"),
        CompileOptions(3, 2, 2, True),
        "fragment_load_columns",
    ),
]


def _module(program: Program):
    return parse_module(make_context(), program.tile_ir(), "fuzz.mlir")


def _id(entry: tuple[Program, CompileOptions, str]) -> str:
    program, o, _ = entry
    return f"{program.describe()} D{o.stages}P{o.mma_depth}C{o.consumers}{'p' * o.persistent}"


@pytest.mark.parametrize("entry", PROGRAMS, ids=[_id(e) for e in PROGRAMS])
def test_epilogue_lowers_to_fragments(entry: tuple[Program, CompileOptions, str]) -> None:
    program, options, expected = entry
    kernel = compile_to_ptx(_module(program), options)
    nvgpu_ir = kernel.ir["nvgpu"]
    assert f"nvgpu.{expected}" in nvgpu_ir
    assert "tile.cmp" not in nvgpu_ir and "tile.where" not in nvgpu_ir


@needs_ptxas
@pytest.mark.parametrize("entry", PROGRAMS, ids=[_id(e) for e in PROGRAMS])
def test_epilogue_ptx_assembles_without_spills(entry: tuple[Program, CompileOptions, str]) -> None:
    program, options, _ = entry
    result = assemble(compile_to_ptx(_module(program), options).ptx)
    assert result.returncode == 0, result.log
    assert not result.forbidden(), result.forbidden()
    assert "0 bytes spill stores, 0 bytes spill loads" in result.log, result.log


def test_widening_convert_unpacks_pairs() -> None:
    """f16 -> f32: each packed register splits into its low (value 2k) and high half."""
    ptx = compile_to_ptx(_module(PROGRAMS[0][0]), PROGRAMS[0][1]).ptx
    assert "cvt.f32.f16" in ptx and "mov.b32 {%h" in ptx


def test_float_select_predicates_follow_numpy_on_nan() -> None:
    """NaN: every numpy comparison is false except `!=`, so `ne` is the unordered `neu`."""
    from tawa_xdsl.backend.emit_ptx.fragment import SETP_F32
    from tawa_xdsl.dialects.tile import ComparePredicate

    assert SETP_F32[ComparePredicate.NE] == "neu"
    assert all(SETP_F32[p] == p.value for p in ComparePredicate if p != ComparePredicate.NE)


def test_bias_vector_slot_is_not_swizzled() -> None:
    """A rank-1 slot gets no swizzle: TMA would permute the 16-byte chunks of a row in a
    slot that is not 1024-byte aligned (slot 1 of a ring of 256-byte slots)."""
    program = gemm("f16", "f32", 64, 128, 64, "bias")
    kernel = compile_to_ptx(_module(program), CompileOptions(2, 1, 1, True))
    assert kernel.tensor_maps[6].swizzle == 0  # the bias: after a, b, c, m, n, k
    assert "!nvgpu.smem<2x128xf16, swizzle 0>" in kernel.ir["nvgpu"]


# ------------------------------------------------------------ shared memory (class 1)


def test_fitting_stages_follow_the_backend_refusal() -> None:
    """The deepest ring the strategy draws compiles; one deeper is refused."""
    from tawa_xdsl.fuzz.strategies import fitting_stages

    program = AttentionProgram("f16", 128, 128, causal=True)
    depths = fitting_stages(program, 1, 1, True)
    assert depths == (1, 2, 3)  # persistent: Q's ring, once per tile, drops to one slot
    deepest = CompileOptions(depths[-1], 1, 1, True)
    need = shared_memory_need(_module(program), deepest)
    assert need <= SM90_MAX_SMEM_BYTES
    assert compile_to_ptx(_module(program), deepest).smem_bytes == need
    with pytest.raises(TawaError, match="bytes of shared memory"):
        compile_to_ptx(_module(program), CompileOptions(depths[-1] + 1, 1, 1, True))
    assert fitting_stages(AttentionProgram("f16", 64, 64), 3, 2, True) == tuple(range(1, 7))


def test_gpu_strategy_draws_only_fitting_depths() -> None:
    from hypothesis import HealthCheck, given, settings

    from tawa_xdsl.fuzz.check import Case
    from tawa_xdsl.fuzz.strategies import cases, fitting_stages

    drawn: list[int] = []

    # drawing measures shared memory (a compile per program): slow on a loaded machine
    @settings(
        max_examples=8,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(case=cases(gpu=True, kind="attention"))
    def prop(case: Case) -> None:
        o = case.options
        assert o.stages in fitting_stages(case.program, o.mma_depth, o.consumers, o.persistent)
        drawn.append(o.stages)

    prop()
    assert drawn
