"""Kernels the default compile once refused because the verifier did not model their barrier
protocol, proved now (issue 13 item 5), written as a Triton user writes them: a GEMM that
also sums the rows of A in its K loop. Its consumers read each A slot into registers (the row
sums) besides the wgmma reading it, so thread 0 releases the slot only after a `bar.sync 5`
of all consumer threads, under the ring's lag guard (the release lags the wgmma by one use)."""

from __future__ import annotations

import numpy as np

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.descriptor import TensorDescriptor
from tests.corpus.case import Case, Launch

M, N, K = 256, 128, 256


@tawa_xdsl.jit
def gemm_with_row_sums(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):  # fmt: skip
    """C = A @ B^T + the sum of each row of A, in f16."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    sums = tl.zeros([BLOCK_M], dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        acc = tl.dot(a, b_desc.load([pid_n * BLOCK_N, k]).T, acc)
        sums += tl.sum(a.to(tl.float32), axis=1)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], (acc + sums[:, None]).to(tl.float16))


def _gemm_with_row_sums(rng: np.random.Generator) -> Launch:
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    c = np.zeros((M, N), np.float16)
    a32 = a.astype(np.float32)
    answer = a32 @ b.astype(np.float32).T + a32.sum(axis=1, keepdims=True)
    args = [TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [64, 64]),
            TensorDescriptor.from_tensor(c, [128, 64]), K]  # fmt: skip
    blocks = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64}
    return Launch((M // 128, N // 64), args, blocks, [(c, answer)])


def _gemm_with_row_sums_persistent(rng: np.random.Generator) -> Launch:
    """Launched persistent: each program walks tiles, and the drain after a tile's K loop
    releases its last A slot (after the slot-read barrier) while the producer already loads
    the next tile's."""
    run = _gemm_with_row_sums(rng)
    run.kwargs["persistent"] = True
    return run


CASES: list[Case] = [
    Case("gemm_with_row_sums", gemm_with_row_sums, _gemm_with_row_sums, ("13.5",)),
    Case(
        "gemm_with_row_sums_persistent",
        gemm_with_row_sums,
        _gemm_with_row_sums_persistent,
        ("13.5",),
    ),
]
