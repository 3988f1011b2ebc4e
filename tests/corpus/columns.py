"""Reductions along axis 0 whose rows the two default consumer warpgroups split, written as a
Triton user writes them: a per-block batch-norm forward with no dot (256 rows, 128 per
warpgroup: two reductions down the columns) and a GEMM whose epilogue also stores each C
tile's column maxima. Every reduction spans both warpgroups (`tile.reduce ... across(2)`:
the partials of their 8 warps through smem, one named barrier over 256 threads)."""

from __future__ import annotations

import numpy as np

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.descriptor import TensorDescriptor
from tests.corpus.case import Case, Launch

ROWS, COLS = 512, 64
M, N, K = 256, 256, 128


@tawa_xdsl.jit
def column_norm(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Each column of a block of rows centred on its mean and scaled by its variance."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0]).to(tl.float32)
    mean = tl.sum(x, axis=0) / BLOCK_M
    centred = x - mean[None, :]
    var = tl.sum(centred * centred, axis=0) / BLOCK_M
    y = centred * tl.rsqrt(var + 1e-5)[None, :]
    y_desc.store([off_m, 0], y.to(y_desc.dtype))


@tawa_xdsl.jit
def gemm_column_max(a_desc, b_desc, c_desc, m_desc, K, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """C = A @ B^T in f16, and the maximum of each column of every C tile (one row of the
    maxima tensor per program row)."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([pid_m * BLOCK_M, k]), b_desc.load([pid_n * BLOCK_N, k]).T, acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))
    m_desc.store([pid_m, pid_n * BLOCK_N], tl.max(acc, axis=0)[None, :])


def _column_norm(rng: np.random.Generator) -> Launch:
    x = (rng.standard_normal((ROWS, COLS)) * 2 + 1).astype(np.float16)
    y = np.zeros((ROWS, COLS), np.float16)
    blocks = x.astype(np.float32).reshape(ROWS // 256, 256, COLS)
    centred = blocks - blocks.mean(axis=1, keepdims=True)
    answer = centred / np.sqrt((centred**2).mean(axis=1, keepdims=True) + 1e-5)
    args = [TensorDescriptor.from_tensor(a, [256, COLS]) for a in (x, y)]
    blocks_kw = {"BLOCK_M": 256, "BLOCK_N": COLS}
    return Launch((ROWS // 256,), args, blocks_kw, [(y, answer.reshape(ROWS, COLS))])


def _gemm_column_max(rng: np.random.Generator) -> Launch:
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    c = np.zeros((M, N), np.float16)
    maxima = np.zeros((M // 128, N), np.float32)
    product = a.astype(np.float32) @ b.astype(np.float32).T
    descs = [TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [128, 64])]
    outs = [
        TensorDescriptor.from_tensor(c, [128, 128]),
        TensorDescriptor.from_tensor(maxima, [1, 128]),
    ]
    expected = [(c, product), (maxima, product.reshape(M // 128, 128, N).max(axis=1))]
    blocks = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}
    return Launch((M // 128, N // 128), [*descs, *outs, K], blocks, expected)


CASES: list[Case] = [
    Case("column_norm_two_consumers", column_norm, _column_norm, ("2", "3")),
    Case("gemm_column_max_two_consumers", gemm_column_max, _gemm_column_max, ("2",)),
]
