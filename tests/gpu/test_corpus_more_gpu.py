"""The newer corpus files on the H200: `more` (tests/corpus/more.py), `columns` (axis-0
reductions over two consumer warpgroups: their 8 warps' partials meet in smem behind
`bar.sync 6, 256`) and `proved` (kernels the verifier once refused). Each kernel, launched as
its user launches it (`kernel[grid](...)` on numpy-backed descriptors, default compile
options but the case's own `persistent=True`, the rings proved), matches numpy with two seeds,
and `more`, `columns` and the GEMMs of `proved` (their staging barrier and TMA store under
`if K > 0:` in one, persistent too, and the GEMM whose row blocks past M skip) once more
through the TMA-store epilogue; the persistent GEMMs (with row sums, with them under
`if K > 0:`, with the row blocks past M skipping) once more on more tiles than SMs. The CPU
halves are tests/unit/test_corpus_more.py, test_interp_nvgpu_columns.py and
test_verify_proved.py."""

from __future__ import annotations

import numpy as np
import pytest

from tawa_xdsl.descriptor import TensorDescriptor
from tests.corpus import columns, more, proved
from tests.corpus.case import check

CASES = {case.name: case for case in (*more.CASES, *columns.CASES, *proved.CASES)}
TMA_STORE_CASES = [
    *(case.name for case in (*more.CASES, *columns.CASES)),
    "gemm_with_row_sums",
    "gemm_with_row_sums_if_nonempty",
    "gemm_with_row_sums_if_nonempty_persistent",
    "gemm_rows_below",
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


def test_persistent_row_sums_walk_several_tiles_per_program() -> None:
    """The persistent GEMM with row sums of A on 288 tiles: every program of the 132 runs two
    or three, so each tile's drain releases its last A slot (after the slot-read barrier)
    while the producer already loads the next tile's into it."""
    rng = np.random.default_rng(3)
    m, n, k = 2048, 1152, 256
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    a32 = a.astype(np.float32)
    answer = a32 @ b.astype(np.float32).T + a32.sum(axis=1, keepdims=True)
    boxes = ((a, [128, 64]), (b, [64, 64]), (c, [128, 64]))
    descs = [TensorDescriptor.from_tensor(x, box) for x, box in boxes]
    proved.gemm_with_row_sums[(m // 128, n // 64)](
        *descs, k, BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, persistent=True, interpret=False
    )
    np.testing.assert_allclose(c.astype(np.float32), answer, rtol=2e-2, atol=2e-2)


def test_persistent_kernels_under_a_condition_walk_several_tiles_per_program() -> None:
    """On 576 tiles over the 132 programs: the persistent row-sums GEMM under `if K > 0:`
    (every tile's K loop runs, the counter continues through the conditional) and the GEMM
    launched with twice the row blocks A has (`if pid_m * BLOCK_M < M:`: each program skips
    every other tile, its counter staying at the tile's start, and computes the next)."""
    rng = np.random.default_rng(4)
    m, n, k = 2048, 1152, 256
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    a32 = a.astype(np.float32)
    product = a32 @ b.astype(np.float32).T
    blocks = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64}
    for kernel, grid, extra, answer in [
        (proved.gemm_with_row_sums_if_nonempty, (m // 128, n // 64), [k],
         product + a32.sum(axis=1, keepdims=True)),
        (proved.gemm_rows_below, (2 * m // 128, n // 64), [m, k], product),
    ]:  # fmt: skip
        c = np.full((m, n), np.nan, np.float16)
        boxes = ((a, [128, 64]), (b, [64, 64]), (c, [128, 64]))
        descs = [TensorDescriptor.from_tensor(x, box) for x, box in boxes]
        kernel[grid](*descs, *extra, **blocks, persistent=True, interpret=False)
        np.testing.assert_allclose(c.astype(np.float32), answer, rtol=2e-2, atol=2e-2)
