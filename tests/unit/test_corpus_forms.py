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
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.runtime.dispatch import host_descriptor
from tawa_xdsl.verify.check import ProtocolError
from tests.corpus import forms
from tests.corpus.case import Case, check

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")
CASES = {case.name: case for case in forms.CASES}


def compile_options(case: Case, compiled) -> CompileOptions:
    """The launch's options; the proof is skipped only where the verifier cannot model the
    kernel yet (`forms.UNVERIFIED`: sequences of loops over one ring)."""
    return replace(compiled.options, verify=case.name not in forms.UNVERIFIED)


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
    options = compile_options(case, compiled)
    assert_assembles(compile_to_ptx(compiled.module, options).ptx)
    run_nvgpu(case, compiled.module, options, seed=1)


@needs_ptxas
@pytest.mark.parametrize("name", list(CASES))
def test_tma_store_epilogue_compiles_and_matches_numpy(name: str) -> None:
    case = CASES[name]
    compiled = case.compile(np.random.default_rng(0))
    options = replace(compile_options(case, compiled), epilogue="tma", verify=False)
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


@pytest.mark.parametrize("name", sorted(forms.UNVERIFIED))
def test_the_unverified_kernels_are_refused_by_the_proof_in_one_line(name: str) -> None:
    """Sequences of loops over one ring are outside the verifier's model today: the default
    compile refuses them (exit 2 in tawa-verify), never proves them. When the model grows, this
    fails and the kernel leaves `forms.UNVERIFIED`."""
    compiled = CASES[name].compile(np.random.default_rng(0))
    with pytest.raises(ProtocolError) as refused:
        compile_to_ptx(compiled.module, compiled.options)
    assert "cannot be verified" in str(refused.value)
    assert "\n" not in str(refused.value)
