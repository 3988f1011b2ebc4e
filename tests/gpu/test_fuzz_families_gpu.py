"""Every program family the fuzzer draws (`fuzz.families`: no-dot kernels, row and column
vectors, row reductions, B stored K x N, fp8 in and out, split-K, two K loops, BLOCK_M 64)
on the GPU: compile_to_ptx with the case's options, launch, and the output within the
family's numpy bounds. The CPU side (every interpreter level, ptxas):
tests/unit/test_fuzz_families.py. A few seconds in all."""

from __future__ import annotations

import pytest

from tawa_xdsl.fuzz.check import Outcome, check_case
from tawa_xdsl.fuzz.families import FAMILIES, on_gpu


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_runs_on_the_gpu(name: str) -> None:
    outcome = check_case(on_gpu(FAMILIES[name]), Outcome())
    assert "gpu" in outcome.ran, outcome.skipped.get("gpu")
