"""Kernels the verifier once refused, proved with the default compile (tests/corpus/proved.py,
issue 13 item 5; the persistent form with `persistent=True`): the compile proves every ring
and the named barriers on the nvgpu level (the slot-read barrier, the column partials'
barrier, under a uniform condition or not), the PTX assembles without a warning, and the tile
and nvgpu interpreters equal numpy; so with the TMA-store epilogue (its staging barrier and
store under the condition too). The GPU half is tests/gpu/test_corpus_more_gpu.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import compile_to_ptx, lower_to_nvgpu_level
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.verify.check import check_module
from tawa_xdsl.verify.compose import PremiseError, check_composition
from tawa_xdsl.verify.extract import extract
from tests.corpus import proved
from tests.corpus.case import check, nvgpu_launch

CASES = {case.name: case for case in proved.CASES}
NAMED = {  # named barriers of each kernel (else 1: the slot read)
    "column_max_if_nonempty": 2,
    "gemm_rows_below": 0,
    "gemm_rows_below_persistent": 0,
}
TILE_STORES = [  # TMA-store epilogues
    "gemm_with_row_sums",
    "gemm_with_row_sums_if_nonempty",
    "gemm_with_row_sums_if_nonempty_persistent",
    "gemm_rows_below",
]
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")


@needs_ptxas
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
def test_kernel_proof_counts_its_named_barriers_and_is_fast(name: str) -> None:
    case = CASES[name]
    run = case.launch(np.random.default_rng(0))
    compiled = case.kernel.compile(*run.args, **run.kwargs)
    module = lower_to_nvgpu_level(compiled.module, replace(compiled.options, verify=False))
    verdicts = check_module(module)
    assert verdicts and all(v.proved for v in verdicts)
    named = [v for v in verdicts if v.method == "named"]
    if NAMED.get(name, 1) == 0:
        assert not named, [v.summary() for v in named]
        return
    assert f"{NAMED.get(name, 1)} named barrier" in named[0].message, named[0].message
    # a guard, not a measurement (the rings' proofs are timed by bench/proof_times.py): alone
    # this takes ~0.1 s; 2 s leaves room for a loaded machine
    assert named[0].seconds < 2.0


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


@needs_ptxas
@pytest.mark.parametrize("name", TILE_STORES)
def test_kernel_with_the_tma_store_epilogue_is_proved_and_matches_numpy(name: str) -> None:
    case = CASES[name]
    compiled = case.compile(np.random.default_rng(0))
    options = replace(compiled.options, epilogue="tma")
    result = assemble(compile_to_ptx(compiled.module, options).ptx)  # proves, then prints
    assert result.returncode == 0 and "warning" not in result.log.lower(), result.log
    module = lower_to_nvgpu_level(compiled.module, replace(options, verify=False))
    assert any(op.name == "nvgpu.tma_store" for op in module.walk())
    run = case.launch(np.random.default_rng(3))
    grid, args = nvgpu_launch(run, options.persistent)
    run_nvgpu_kernel(module, grid, args, schedule="random")
    check(run)


def test_a_ring_used_by_another_loop_in_the_consumers_is_refused() -> None:
    """The RMSnorm's weight ring is used by the second loop only; the cross-ring proof
    numbers the loops of each group's sequence and relies on every ring using the same
    ones in the producer and the consumers (P3): moved to the consumers' first loop (whose
    bounds equal the second's), the weight ring would be waited for before the producer
    puts it, behind the first loop's x uses. The premise check refuses it."""
    compiled = CASES["rmsnorm_two_loops"].compile(np.random.default_rng(0))
    module = lower_to_nvgpu_level(compiled.module, replace(compiled.options, verify=False))
    rings = extract(module)
    (x,) = [r for r in rings if len(r.producer.segments) == 2]
    (w,) = [r for r in rings if len(r.producer.segments) == 1]
    assert check_composition(rings).proved
    for consumer, first in zip(w.consumers, x.consumers, strict=True):
        consumer.segments[0] = replace(consumer.segments[0], loop=first.segments[0].loop)
    with pytest.raises(PremiseError, match="uses loops 0 of the sequence in a consumer but 1"):
        check_composition(rings)
