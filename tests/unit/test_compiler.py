"""The compile driver (`tawa_xdsl.compiler`) without a GPU: CompileOptions is the one source of
options, every launch option of a `@jit` kernel reaches the compiled kernel, unknown ones are
refused in one line, `tawa-opt` runs the same pipeline, and rings that do not fit in shared
memory are refused at compile time (what the GPU fuzz run on the H200 found)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

import tawa_xdsl.language as tl
from tawa_xdsl.compiler import (
    LAUNCH_OPTIONS,
    CompileOptions,
    compile_to_ptx,
    options_from_launch,
    pipeline,
    pipeline_text,
)
from tawa_xdsl.diagnostics import TawaError, parse_file
from tawa_xdsl.dialects import make_context
from tawa_xdsl.dialects.nvgpu import SM90_MAX_SMEM_BYTES
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg
from tawa_xdsl.jit import STAGES
from tawa_xdsl.kernels.attention import attn_fwd, compile_attention
from tawa_xdsl.kernels.gemm import gemm
from tawa_xdsl.tools import tawa_opt

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def gemm_args() -> list[Any]:
    """Argument types of the library GEMM (tawa_xdsl.kernels.gemm) (f16, 128x128x64 blocks)."""
    blocks = ((128, 64), (128, 64), (128, 128))
    descs = [DescriptorArg(tl.float16, block) for block in blocks]
    return [*descs, *(ScalarArg(tl.int32) for _ in range(3))]


def compile_gemm(**options: Any) -> Any:
    blocks = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}
    return gemm.compile(*gemm_args(), **blocks, **options)


# ------------------------------------------------------------------------------ options


def test_every_option_has_one_launch_name() -> None:
    """LAUNCH_OPTIONS is derived from the CompileOptions fields: each launch keyword, set to a
    value other than the default, changes exactly its own field."""
    assert sorted(LAUNCH_OPTIONS.values()) == sorted(f.name for f in fields(CompileOptions))
    changed = {
        "stages": 3, "mma_depth": 1, "consumers": 1, "persistent": True, "epilogue": "tma",
        "verify": False, "registers": (24, 240), "pingpong": True, "rotate": False,
        "split_loops": False, "tile_order": "yxz", "exp2_emulation": 2, "ctas_per_sm": 2,
        "peel": False, "fold": True,
    }  # fmt: skip
    default = CompileOptions()
    for launch, name in LAUNCH_OPTIONS.items():
        options = options_from_launch({launch: changed[name]})
        assert getattr(options, name) == changed[name] != getattr(default, name)
        assert [f.name for f in fields(options) if getattr(options, f.name) != getattr(
            default, f.name
        )] == [name]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_stage": 3}, r"^unknown launch option 'num_stage'; launch options: num_stages, "),
        ({"num_warps": 8}, r"^launch option 'num_warps' is Triton's, not tawa's: the warps "),
        ({"maxnreg": 128}, r"^launch option 'maxnreg' is Triton's, not tawa's: use registers="),
        ({"num_stages": "3"}, r"^launch option num_stages: expected an int, got '3'$"),
        ({"registers": 240}, r"^launch option registers: expected None or \(producer, consumer\)"),
        ({"pingpong": 1}, r"^launch option pingpong: expected a bool, got 1$"),
        ({"tile_order": "xy"}, r'^launch option tile_order: expected a permutation of "xyz", '),
    ],
)
def test_bad_launch_options_are_refused_in_one_line(options: dict, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        options_from_launch(options)


def test_a_jit_launch_refuses_unknown_options_naming_the_kernel() -> None:
    with pytest.raises(TypeError, match=r"^gemm: unknown launch option 'num_stage'"):
        compile_gemm(num_stage=3)
    with pytest.raises(TypeError, match=r"^compile option stages: expected an int, got 2.0$"):
        CompileOptions(stages=2.0)  # type: ignore[arg-type]


# ------------------------------------------------------- launch options reach the kernel


def test_launch_options_are_the_specializations_compile_options() -> None:
    compiled = compile_gemm(num_stages=3, mma_depth=1, registers=(24, 240), epilogue="tma")
    assert compiled.options == CompileOptions(
        stages=3, mma_depth=1, registers=(24, 240), epilogue="tma"
    )
    assert compile_gemm(num_stages=None) is compile_gemm()  # the default spelled out: same key


def test_registers_launch_option_changes_the_kernel() -> None:
    """`registers=(24, 240)` at launch gives the producer 24 and the consumers 240 registers
    per thread in the PTX (the groups' defaults are 40 and 232)."""
    default, tuned = compile_gemm(verify=False), compile_gemm(verify=False, registers=(24, 240))
    assert "setmaxnreg.dec.sync.aligned.u32 40" in default.ir["ptx"]
    assert "setmaxnreg.inc.sync.aligned.u32 232" in default.ir["ptx"]
    assert "setmaxnreg.dec.sync.aligned.u32 24" in tuned.ir["ptx"]
    assert "setmaxnreg.inc.sync.aligned.u32 240" in tuned.ir["ptx"]
    assert "registers(24)" in tuned.ir["aref"] and "registers(240)" in tuned.ir["aref"]
    with pytest.raises(TawaError, match=r"error: set-registers: registers \(56, 240\) over 3 "):
        compile_gemm(verify=False, registers=(56, 240)).ir["ptx"]


def test_pingpong_launch_option_changes_the_kernel() -> None:
    """`pingpong=True` at launch makes the two attention consumer warpgroups take turns at
    their MMAs: named-barrier arrives and syncs around the P V wgmma, in the nvgpu IR and
    the PTX; without it there are none."""
    f16, d, bm, bn = tl.float16, 64, 128, 128
    args = [
        DescriptorArg(f16, (1, bm, d)),
        DescriptorArg(f16, (1, bn, d)),
        DescriptorArg(f16, (1, bn, d)),
        DescriptorArg(f16, (1, bm, d)),
        ScalarArg(tl.int32),
        ScalarArg(tl.float32),
    ]
    meta = {"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": False, "verify": False}
    plain = attn_fwd.compile(*args, **meta, mma_depth=1)
    turns = attn_fwd.compile(*args, **meta, mma_depth=1, pingpong=True)
    assert "nvgpu.named_barrier_arrive" not in plain.ir["nvgpu"]
    assert turns.ir["nvgpu"].count("nvgpu.named_barrier_arrive") >= 3
    assert "bar.arrive" not in plain.ir["ptx"] and "bar.arrive" in turns.ir["ptx"]


# ---------------------------------------------------------------------------- pipeline


def test_the_pipeline_goes_through_every_level_in_order() -> None:
    levels = [level for level, _ in pipeline(CompileOptions(registers=(24, 240)))]
    assert sorted(set(levels), key=levels.index) == ["aref", "mbarrier", "nvgpu"]
    assert levels == sorted(levels, key=["aref", "mbarrier", "nvgpu"].index)
    kernel = compile_to_ptx(parse_file(make_context(), EXAMPLES / "gemm.mlir"))
    assert tuple(kernel.ir) == STAGES


def test_tawa_opt_runs_the_same_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`tawa-opt -p <pipeline_text(options)> -t ptx` prints the PTX compile_to_ptx makes."""
    options = CompileOptions(stages=3, mma_depth=2, registers=(24, 240), epilogue="tma")
    text = pipeline_text(options)
    # consumers unset: chosen by cooperative-consumers from the tile rows
    assert text.startswith("tawa-warp-specialize{stages=3 mma_depth=2 consumers persistent=")
    # exp2 emulation unset: chosen per loop by emulate-exp2
    assert (
        "set-registers{producer=24 consumer=240},emulate-exp2{share},lower-aref,"
        'lower-to-nvgpu{epilogue="tma"' in text
    )
    out = tmp_path / "gemm.ptx"
    argv = [str(EXAMPLES / "gemm.mlir"), "-p", text, "-t", "ptx", "-o", str(out)]
    assert tawa_opt.main(argv) == 0, capsys.readouterr().err
    kernel = compile_to_ptx(parse_file(make_context(), EXAMPLES / "gemm.mlir"), options)
    assert out.read_text() == kernel.ptx


# --------------------------------------------------------------------- shared memory


def test_rings_that_do_not_fit_in_shared_memory_are_refused() -> None:
    assert compile_attention(head_dim=128, stages=3).smem_bytes <= SM90_MAX_SMEM_BYTES
    with pytest.raises(
        TawaError,
        match=r"^.*attention\.py:\d+:\d+: error: @attn_fwd: needs 296080 bytes of shared memory "
        r"for rings ring \(4 slots of tensor<1x128x128xf16>, 32768 bytes each\), .*; an sm_90 "
        r"block may use at most 232448",
    ):
        compile_attention(head_dim=128, stages=4)
