"""Reductions along axis 0 over two consumer warpgroups (tests/corpus/columns.py) on the H200:
each kernel, launched as its user launches it (default options: the two warpgroups split the
rows, their 8 warps' partials meet in smem behind `bar.sync 6, 256`), matches numpy with two
seeds, and once more through the TMA-store epilogue. The CPU half is
tests/unit/test_interp_nvgpu_columns.py."""

from __future__ import annotations

import numpy as np
import pytest

from tests.corpus import columns
from tests.corpus.case import check

CASES = {case.name: case for case in columns.CASES}

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_two_consumer_column_kernel_matches_numpy_on_the_gpu(name: str, seed: int) -> None:
    run = CASES[name].launch(np.random.default_rng(seed))
    for out, _ in run.expected:
        out[...] = np.nan  # a value the kernel does not write shows
    CASES[name].kernel[run.grid](*run.args, **run.kwargs, interpret=False)
    check(run)


@pytest.mark.parametrize("name", list(CASES))
def test_two_consumer_column_kernel_with_the_tma_store_epilogue(name: str) -> None:
    run = CASES[name].launch(np.random.default_rng(2))
    for out, _ in run.expected:
        out[...] = np.nan
    CASES[name].kernel[run.grid](*run.args, **run.kwargs, interpret=False, epilogue="tma")
    check(run)
