"""Every corpus kernel (`tests/corpus/*.py`), launched on the GPU with default launch options
on numpy inputs (copied in and back), matches its numpy answer. The CPU half (PTX, ptxas,
tile and nvgpu interpreters) is tests/unit/test_corpus_compiles.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]  # `tests.corpus` is imported from the root
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.corpus.case import Case, check  # noqa: E402
from tests.unit.test_corpus_compiles import CASES  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("seed", [0, 1])
def test_corpus_kernel_matches_numpy_on_the_gpu(case: Case, seed: int):
    run = case.launch(np.random.default_rng(seed))
    for out, _ in run.expected:
        out[...] = np.nan  # a value the kernel does not write shows
    case.kernel[run.grid](*run.args, **run.kwargs, interpret=False)
    check(run)
