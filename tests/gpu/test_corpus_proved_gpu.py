"""Kernels the verifier once refused (tests/corpus/proved.py) on the H200: each, launched as
its user launches it (default options, the proof on), matches numpy with two seeds. The CPU
half is tests/unit/test_verify_proved.py."""

from __future__ import annotations

import numpy as np
import pytest

from tests.corpus import proved
from tests.corpus.case import check

CASES = {case.name: case for case in proved.CASES}

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_proved_kernel_matches_numpy_on_the_gpu(name: str, seed: int) -> None:
    run = CASES[name].launch(np.random.default_rng(seed))
    for out, _ in run.expected:
        out[...] = np.nan  # a value the kernel does not write shows
    CASES[name].kernel[run.grid](*run.args, **run.kwargs, interpret=False)
    check(run)
