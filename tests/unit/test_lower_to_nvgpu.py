"""`lower-to-nvgpu` is one lowering: what a kernel computes never picks a code path.

A GEMM whose epilogue has a bias vector, a leaky relu (`tile.where`) or an exp2 used to be
lowered by a separate attention lowering that ignored `epilogue="tma"` (st.global) and the
MMA depth (`wait_group 0` after every wgmma). Now every 2-D output ends in the TMA store with
`epilogue="tma"`, the attention's output too (rank-3 descriptor), and every K loop keeps
MMA depth - 1 wgmma groups in flight. ptxas must accept the PTX without warnings or spills
(skipped without ptxas). The same kernels run against numpy on the H200 in
tests/gpu/test_tma_store_epilogues_gpu.py.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import CompileOptions, compile_to_ptx
from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.fuzz.programs import GemmProgram
from tawa_xdsl.fuzz.strategies import epilogue_chain
from tawa_xdsl.kernels.attention import tile_module

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "tests" / "gpu"))
from test_tma_store_epilogues_gpu import gemm_softmax_module  # noqa: E402

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")
TMA_STORE = re.compile(r"cp\.async\.bulk\.tensor\.(\d)d\.global\.shared::cta")


def gemm(dtype: str, out: str, bm: int, bn: int, bk: int, *kinds: str) -> GemmProgram:
    return GemmProgram(dtype, out, bm, bn, bk, epilogue=epilogue_chain(list(kinds)))


def compile_program(program: GemmProgram, options: CompileOptions):
    return compile_to_ptx(parse_module(make_context(), program.tile_ir(), "k.mlir"), options)


# epilogues that the attention lowering used to take, with the nvgpu op each one needs
EPILOGUES = [
    (
        gemm("f16", "f32", 64, 128, 64, "bias"),
        CompileOptions(2, 1, 1, False, "tma"),
        "load_columns",
    ),
    (
        gemm("bf16", "bf16", 128, 128, 64, "bias", "leaky", "round_bf16"),
        CompileOptions(3, 2, 2, True, "tma"),
        "fragment_select",
    ),
    (
        gemm("f16", "f16", 128, 128, 64, "bias", "relu", "exp2"),
        CompileOptions(3, 2, 2, False, "tma"),
        "fragment_unary exp2",
    ),
    (gemm("f16", "f32", 128, 64, 32, "leaky"), CompileOptions(3, 2, 1, False, "tma"), "select"),
]


@pytest.mark.parametrize("entry", EPILOGUES, ids=[e[0].describe() for e in EPILOGUES])
def test_any_gemm_epilogue_ends_in_the_tma_store(entry) -> None:
    program, options, op = entry
    kernel = compile_program(program, options)
    nvgpu_ir = kernel.ir["nvgpu"]
    assert op in nvgpu_ir
    assert "nvgpu.tma_store %c_desc" in nvgpu_ir and "fragment_store_global" not in nvgpu_ir
    assert TMA_STORE.findall(kernel.ptx) and "st.global" not in kernel.ptx
    # the output's tensor map is the 128-byte-swizzled box `rows x span`
    c = kernel.tensor_maps[2]
    rows = program.block_m // options.consumers
    assert (
        c.swizzle == 128
        and c.box[0] == rows
        and c.box[1] * (4 if program.out_dtype == "f32" else 2) == 128
    )


@needs_ptxas
@pytest.mark.parametrize("entry", EPILOGUES, ids=[e[0].describe() for e in EPILOGUES])
def test_tma_store_epilogues_assemble_without_warnings(entry) -> None:
    program, options, _ = entry
    result = assemble(compile_program(program, options).ptx)
    assert result.returncode == 0, result.log
    assert not result.forbidden(), result.forbidden()
    assert "0 bytes spill stores, 0 bytes spill loads" in result.log, result.log


def test_mma_depth_holds_whatever_the_epilogue() -> None:
    """MMA depth 2: the K loop waits for all but the last wgmma group, with or without a bias
    (the attention lowering used to wait for every group)."""
    for kinds in [(), ("bias",), ("leaky",), ("round_bf16", "exp2")]:
        kernel = compile_program(gemm("f16", "f32", 128, 128, 64, *kinds), CompileOptions(3, 2, 1))
        waits = re.findall(r"wgmma\.wait_group\.sync\.aligned (\d)", kernel.ptx)
        assert waits == ["1", "0"], (kinds, waits)


@pytest.mark.parametrize("lse", [False, True], ids=["o", "o+lse"])
def test_attention_output_ends_in_the_tma_store(lse: bool) -> None:
    """O through the rank-3 descriptor (box 1 x 64 x 64); a row vector (the log-sum-exp)
    keeps its st.global (one lane per row)."""
    options = CompileOptions(3, 1, 2, epilogue="tma")
    kernel = compile_to_ptx(tile_module(64, "f16", True, 128, lse), options)
    assert TMA_STORE.findall(kernel.ptx) == ["3"]
    assert kernel.tensor_maps[3].box == (1, 64, 64)
    assert kernel.ptx.count("st.global") == (2 if lse else 0)
    if find_ptxas() is not None:
        result = assemble(kernel.ptx)
        assert result.returncode == 0 and not result.forbidden(), result.log
        assert "0 bytes spill stores" in result.log, result.log


@pytest.mark.parametrize("epilogue", ["global", "tma"])
def test_gemm_with_a_softmax_epilogue(epilogue: str) -> None:
    """A row softmax of the accumulator (column mask, row max, exp2, row sum, division) in a
    GEMM: the same fragment ops as an attention's, after an SS wgmma K loop of MMA depth 2,
    stored in either form. The division by the row sum is one reciprocal a row and a
    multiply a value, no per-value `div.rn.f32`."""
    kernel = compile_to_ptx(gemm_softmax_module(), CompileOptions(3, 2, 2, False, epilogue))
    nvgpu_ir = kernel.ir["nvgpu"]
    for op in (
        "fragment_mask",
        "fragment_row_reduce max",
        "shuffle_xor",
        "fragment_broadcast_rows",
        "fragment_unary rcp",
    ):
        assert f"nvgpu.{op}" in nvgpu_ir, op
    assert "fragment_binary div" not in nvgpu_ir
    assert "div.rn.f32" not in kernel.ptx and "rcp.rn.f32" in kernel.ptx
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned (\d)", kernel.ptx) == ["1", "0"]
    assert bool(TMA_STORE.findall(kernel.ptx)) == (epilogue == "tma")
    assert ("st.global" in kernel.ptx) == (epilogue == "global")
    if find_ptxas() is not None:
        result = assemble(kernel.ptx)
        assert result.returncode == 0 and not result.forbidden(), result.log
        assert "0 bytes spill stores" in result.log, result.log


def test_no_lowering_module_is_named_after_a_kernel_kind() -> None:
    transforms = ROOT / "tawa_xdsl" / "transforms"
    names = [p.stem for p in transforms.rglob("*.py")]
    kinds = ("attention", "gemm", "matmul", "softmax")
    assert not [n for n in names if any(k in n for k in kinds)], names
