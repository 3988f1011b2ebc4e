"""The forms corpus (tests/corpus/forms.py) on the CPU, with default launch options: each
kernel compiles to PTX that ptxas assembles without a warning, and the tile interpreter and
the nvgpu-level interpreter (the IR emit-ptx prints, thread by thread) match numpy. Every
case also goes through the TMA-store epilogue (ptxas and the nvgpu interpreter).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import CompileOptions, compile_to_ptx, lower_to_nvgpu_level
from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.runtime.dispatch import host_descriptor
from tawa_xdsl.verify.check import verify_module
from tests.corpus import forms
from tests.corpus.case import Case, check

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")
CASES = {case.name: case for case in forms.CASES}


def assert_assembles(ptx: str) -> None:
    result = assemble(ptx)
    assert result.returncode == 0, result.log
    assert "warning" not in result.log.lower(), result.log


def run_nvgpu(case: Case, module, options: CompileOptions, seed: int) -> None:
    lowered = lower_to_nvgpu_level(module, replace(options, verify=False))
    run = case.launch(np.random.default_rng(seed))
    run_nvgpu_kernel(lowered, run.grid, [host_descriptor(a) for a in run.args])
    check(run)


@pytest.mark.parametrize("name", list(CASES))
def test_tile_interpreter_matches_numpy(name: str) -> None:
    case = CASES[name]
    run = case.launch(np.random.default_rng(0))
    case.kernel[run.grid](*run.args, interpret=True, **run.kwargs)
    check(run)


@needs_ptxas
@pytest.mark.parametrize("name", list(CASES))
def test_default_options_compile_and_match_numpy_at_the_nvgpu_level(name: str) -> None:
    case = CASES[name]
    compiled = case.compile(np.random.default_rng(0))
    options = compiled.options
    assert_assembles(compile_to_ptx(compiled.module, options).ptx)
    run_nvgpu(case, compiled.module, options, seed=1)


@needs_ptxas
@pytest.mark.parametrize("name", list(CASES))
def test_tma_store_epilogue_compiles_and_matches_numpy(name: str) -> None:
    case = CASES[name]
    compiled = case.compile(np.random.default_rng(0))
    options = replace(compiled.options, epilogue="tma", verify=False)
    assert_assembles(compile_to_ptx(compiled.module, options).ptx)
    run_nvgpu(case, compiled.module, options, seed=2)


def test_defaults_adapt_to_the_tile() -> None:
    """64-row tiles get one consumer warpgroup and 128-row tiles two; a 128x128x128 f16 GEMM
    gets the deepest ring that fits shared memory (3), and with the TMA-store staging of its
    output tile still 3 -- both decisions are in the IR."""

    def aref_ir(name: str, **options) -> str:
        compiled = CASES[name].compile(np.random.default_rng(0))
        opts = replace(compiled.options, verify=False, **options)
        return compile_to_ptx(compiled.module, opts).ir["aref"]

    assert "consumer warpgroups(1)" in aref_ir("gemm_block_m64")
    assert "consumer warpgroups(2)" in aref_ir("gemm_block_k32")
    assert "tensor<128x128xf16>, tensor<128x128xf16>], 3>" in aref_ir("gemm_block_k128")
    assert "tensor<128x32xf16>, tensor<128x32xf16>], 4>" in aref_ir("gemm_block_k32")
    tma = aref_ir("gemm_block_n256", epilogue="tma")
    assert "tensor<128x64xbf16>, tensor<256x64xbf16>], 3>" in tma


SEQUENCES = [
    "two_loop_gemm",
    "gemm_loops_same_rings_if_taken",
    "gemm_loops_same_rings_if_not_taken",
    "attention_two_stage_causal",
]


@pytest.mark.parametrize("name", SEQUENCES)
def test_loop_sequences_are_proved(name: str) -> None:
    """Loops in sequence over one ring (the counter continuing from one loop into the next),
    one under a uniform `if`, are proved at the nvgpu level by the default compile, every
    ring alone and the rings together."""
    compiled = CASES[name].compile(np.random.default_rng(0))
    ir: dict[str, str] = {}
    lower_to_nvgpu_level(compiled.module, compiled.options, ir)
    verdicts = verify_module(parse_module(make_context(), ir["nvgpu"]))
    assert verdicts and all(v.proved for v in verdicts), [v.summary() for v in verdicts]
