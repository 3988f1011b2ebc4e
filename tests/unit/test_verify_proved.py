"""Kernels the verifier once refused, proved with the default compile (tests/corpus/proved.py,
issue 13 item 5; the persistent form with `persistent=True`): the compile proves every ring
and the slot-read barrier on the nvgpu level, the PTX assembles without a warning, and the
tile and nvgpu interpreters equal numpy. The GPU half is tests/gpu/test_corpus_more_gpu.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import lower_to_nvgpu_level
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.verify.check import check_module
from tests.corpus import proved
from tests.corpus.case import check, nvgpu_launch

CASES = {case.name: case for case in proved.CASES}


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_is_proved_by_the_default_compile_and_assembles(name: str) -> None:
    case = CASES[name]
    run = case.launch(np.random.default_rng(0))
    compiled = case.kernel.compile(*run.args, **run.kwargs)
    assert compiled.options.verify
    assert compiled.gpu_refusal() == ""
    result = assemble(compiled.gpu_kernel().ptx)
    assert result.returncode == 0 and "warning" not in result.log.lower(), result.log


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_proof_names_the_slot_read_barrier_and_is_fast(name: str) -> None:
    case = CASES[name]
    run = case.launch(np.random.default_rng(0))
    compiled = case.kernel.compile(*run.args, **run.kwargs)
    module = lower_to_nvgpu_level(compiled.module, replace(compiled.options, verify=False))
    verdicts = check_module(module)
    assert all(v.proved for v in verdicts)
    (named,) = [v for v in verdicts if v.method == "named"]
    assert "1 named barrier" in named.message, named.message
    assert named.seconds < 1.0  # the rings' proofs are timed by bench/proof_times.py


@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_numpy_in_both_interpreters(name: str) -> None:
    case = CASES[name]
    run = case.launch(np.random.default_rng(1))
    case.kernel[run.grid](*run.args, **run.kwargs, interpret=True)
    check(run)
    run = case.launch(np.random.default_rng(2))
    compiled = case.kernel.compile(*run.args, **run.kwargs)
    module = lower_to_nvgpu_level(compiled.module, replace(compiled.options, verify=False))
    grid, args = nvgpu_launch(run, compiled.options.persistent)  # persistent: 2 tiles each
    run_nvgpu_kernel(module, grid, args, schedule="round-robin")
    check(run)
