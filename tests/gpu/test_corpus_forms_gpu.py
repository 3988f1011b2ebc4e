"""The forms corpus (tests/corpus/forms.py) on the H200: each kernel launched as its user
launches it (`kernel[grid](...)` on numpy-backed descriptors, default compile options) matches
numpy. Every launch proves its rings first (loop sequences included)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.corpus import forms
from tests.corpus.case import check

CASES = {case.name: case for case in forms.CASES}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_corpus_kernel_matches_numpy_on_the_gpu(name: str) -> None:
    case = CASES[name]
    run = case.launch(np.random.default_rng(0))
    for out, _ in run.expected:
        out[...] = np.nan  # a store that never happens shows
    case.kernel[run.grid](*run.args, interpret=False, **run.kwargs)
    check(run)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_corpus_kernel_with_the_tma_store_epilogue_matches_numpy(name: str) -> None:
    case = CASES[name]
    run = case.launch(np.random.default_rng(1))
    for out, _ in run.expected:
        out[...] = np.nan
    case.kernel[run.grid](*run.args, interpret=False, **run.kwargs, epilogue="tma", verify=False)
    check(run)
