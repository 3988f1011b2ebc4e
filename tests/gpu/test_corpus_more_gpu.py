"""The newer corpus files on the H200: `more` (tests/corpus/more.py), `columns` (axis-0
reductions over two consumer warpgroups: their 8 warps' partials meet in smem behind
`bar.sync 6, 256`) and `proved` (kernels the verifier once refused). Each kernel, launched as
its user launches it (`kernel[grid](...)` on numpy-backed descriptors, default compile
options, the rings proved), matches numpy with two seeds, and `more`, `columns` and the GEMMs
of `proved` (their staging barrier and TMA store under `if K > 0:` in one) once more
through the TMA-store epilogue. The CPU halves are tests/unit/test_corpus_more.py,
test_interp_nvgpu_columns.py and test_verify_proved.py."""

from __future__ import annotations

import numpy as np
import pytest

from tests.corpus import columns, more, proved
from tests.corpus.case import check

CASES = {case.name: case for case in (*more.CASES, *columns.CASES, *proved.CASES)}
TMA_STORE_CASES = [
    *(case.name for case in (*more.CASES, *columns.CASES)),
    "gemm_with_row_sums",
    "gemm_with_row_sums_if_nonempty",
]

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_corpus_kernel_matches_numpy_on_the_gpu(name: str, seed: int) -> None:
    run = CASES[name].launch(np.random.default_rng(seed))
    for out, _ in run.expected:
        out[...] = np.nan  # a value the kernel does not write shows
    CASES[name].kernel[run.grid](*run.args, **run.kwargs, interpret=False)
    check(run)


@pytest.mark.parametrize("name", TMA_STORE_CASES)
def test_corpus_kernel_with_the_tma_store_epilogue_matches_numpy(name: str) -> None:
    run = CASES[name].launch(np.random.default_rng(2))
    for out, _ in run.expected:
        out[...] = np.nan
    CASES[name].kernel[run.grid](*run.args, **run.kwargs, interpret=False, epilogue="tma")
    check(run)
