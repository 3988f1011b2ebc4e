"""The `more` corpus (tests/corpus/more.py) on the H200: each kernel launched as its user
launches it (`kernel[grid](...)` on numpy-backed descriptors, default compile options, the
rings proved) matches numpy, with two seeds, and once more through the TMA-store epilogue.
The CPU half is tests/unit/test_corpus_more.py."""

from __future__ import annotations

import numpy as np
import pytest

from tests.corpus import more
from tests.corpus.case import check

CASES = {case.name: case for case in more.CASES}

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_corpus_kernel_matches_numpy_on_the_gpu(name: str, seed: int) -> None:
    run = CASES[name].launch(np.random.default_rng(seed))
    for out, _ in run.expected:
        out[...] = np.nan  # a value the kernel does not write shows
    CASES[name].kernel[run.grid](*run.args, **run.kwargs, interpret=False)
    check(run)


@pytest.mark.parametrize("name", list(CASES))
def test_corpus_kernel_with_the_tma_store_epilogue_matches_numpy(name: str) -> None:
    run = CASES[name].launch(np.random.default_rng(2))
    for out, _ in run.expected:
        out[...] = np.nan
    CASES[name].kernel[run.grid](*run.args, **run.kwargs, interpret=False, epilogue="tma")
    check(run)
