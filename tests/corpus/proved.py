"""Kernels the default compile once refused because the verifier did not model their barrier
protocol, proved now (issue 13 item 5), written as a Triton user writes them: a GEMM that
also sums the rows of A in its K loop. Its consumers read each A slot into registers (the row
sums) besides the wgmma reading it, so thread 0 releases the slot only after a `bar.sync 5`
of all consumer threads, under the ring's lag guard (the release lags the wgmma by one use).
The same GEMM and a running column maximum over the row blocks of a matrix (axis-0 `tl.max`
carried through the loop on the default two consumer warpgroups: the partials of their 8
warps combined between `bar.sync 6`s) under `if K > 0:` / `if M > 0:`, a condition on a
kernel argument that every warpgroup evaluates alike: the named barriers (and, with the
TMA-store epilogue, the staging barrier and the TMA store) sit under it; the GEMM under
`if K > 0:` persistent too (the conditional inside the loop of tiles carries the ring's use
counter to the next tile). A GEMM launched on more row blocks than A has, whose blocks past M
skip (`if pid_m * BLOCK_M < M:`), persistent: a condition that differs from tile to tile
(a skipped tile uses no slot). And an RMSnorm over rows wider than a block in two loops over
the column blocks (the sums of squares, then x re-read beside the weight vector, scaled and
stored): the ring of x slots runs through both loops, the ring of weight slots through the
second only, and each loop has its slot-read barrier. The row-sums GEMM launched persistent
too: the drain after each tile's K loop releases its last A slot after the slot-read
barrier."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.descriptor import TensorDescriptor
from tests.corpus.case import Case, Launch

M, N, K = 256, 128, 256
ROWS, COLS = 512, 128


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


@tawa_xdsl.jit
def gemm_with_row_sums_if_nonempty(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr,
                                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """`gemm_with_row_sums` computed and stored only when K > 0."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    if K > 0:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        sums = tl.zeros([BLOCK_M], dtype=tl.float32)
        for k in tl.range(0, K, BLOCK_K):
            a = a_desc.load([pid_m * BLOCK_M, k])
            acc = tl.dot(a, b_desc.load([pid_n * BLOCK_N, k]).T, acc)
            sums += tl.sum(a.to(tl.float32), axis=1)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], (acc + sums[:, None]).to(tl.float16))


@tawa_xdsl.jit
def gemm_rows_below(a_desc, b_desc, c_desc, M, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr):  # fmt: skip
    """C = A @ B^T in f16 on a grid with more row blocks than A has (launched for a larger
    batch): a block starting at row M or later does nothing."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    if pid_m * BLOCK_M < M:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k in tl.range(0, K, BLOCK_K):
            a = a_desc.load([pid_m * BLOCK_M, k])
            acc = tl.dot(a, b_desc.load([pid_n * BLOCK_N, k]).T, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.float16))


@tawa_xdsl.jit
def column_max_if_nonempty(x_desc, m_desc, M, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The maximum of each column of the first M rows (M > 0), over blocks of BLOCK_M rows."""
    off_n = tl.program_id(0) * BLOCK_N
    if M > 0:
        best = tl.full([BLOCK_N], float("-inf"), dtype=tl.float32)
        for r in tl.range(0, M, BLOCK_M):
            best = tl.maximum(best, tl.max(x_desc.load([r, off_n]).to(tl.float32), axis=0))
        m_desc.store([0, off_n], best[None, :])


@tawa_xdsl.jit
def rmsnorm_two_loops(x_desc, w_desc, y_desc, N, eps, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr):  # fmt: skip
    """Each row of x divided by its root mean square and scaled by the weights, over column
    blocks of wide rows."""
    off_m = tl.program_id(0) * BLOCK_M
    sumsq = tl.zeros([BLOCK_M], dtype=tl.float32)
    for c in tl.range(0, N, BLOCK_N):
        x = x_desc.load([off_m, c]).to(tl.float32)
        sumsq += tl.sum(x * x, axis=1)
    rstd = tl.rsqrt(sumsq / N + eps)
    for c in tl.range(0, N, BLOCK_N):
        x = x_desc.load([off_m, c]).to(tl.float32)
        w = w_desc.load([c]).to(tl.float32)
        y_desc.store([off_m, c], (x * rstd[:, None] * w[None, :]).to(tl.float16))


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


def _persistent(launch: Callable[[np.random.Generator], Launch]):
    """The launch `launch` makes, launched persistent: each program walks tiles (the row-sums
    GEMM's drain after a tile's K loop releases its last A slot, after the slot-read
    barrier, while the producer already loads the next tile's)."""

    def persistent(rng: np.random.Generator) -> Launch:
        run = launch(rng)
        run.kwargs["persistent"] = True
        return run

    return persistent


def _gemm_rows_below(rng: np.random.Generator) -> Launch:
    """Two row blocks of A, a grid of four: the last two row blocks skip their tiles."""
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    c = np.zeros((M, N), np.float16)
    answer = a.astype(np.float32) @ b.astype(np.float32).T
    args = [TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [64, 64]),
            TensorDescriptor.from_tensor(c, [128, 64]), M, K]  # fmt: skip
    blocks = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64}
    return Launch((2 * M // 128, N // 64), args, blocks, [(c, answer)])


def _column_max(rng: np.random.Generator) -> Launch:
    x = rng.standard_normal((ROWS, COLS)).astype(np.float16)
    maxima = np.zeros((1, COLS), np.float32)
    args = [TensorDescriptor.from_tensor(x, [128, 64]),
            TensorDescriptor.from_tensor(maxima, [1, 64]), ROWS]  # fmt: skip
    answer = x.astype(np.float32).max(axis=0, keepdims=True)
    return Launch((COLS // 64,), args, {"BLOCK_M": 128, "BLOCK_N": 64}, [(maxima, answer)])


def _rmsnorm(rng: np.random.Generator) -> Launch:
    x = rng.standard_normal((ROWS, 4 * COLS)).astype(np.float16)
    w = rng.standard_normal(4 * COLS).astype(np.float16)
    y = np.zeros_like(x)
    x32 = x.astype(np.float32)
    answer = x32 / np.sqrt((x32**2).mean(axis=1, keepdims=True) + 1e-5) * w.astype(np.float32)
    args = [TensorDescriptor.from_tensor(x, [128, 64]), TensorDescriptor.from_tensor(w, [64]),
            TensorDescriptor.from_tensor(y, [128, 64]), 4 * COLS, 1e-5]  # fmt: skip
    return Launch((ROWS // 128,), args, {"BLOCK_M": 128, "BLOCK_N": 64}, [(y, answer)])


CASES: list[Case] = [
    Case("gemm_with_row_sums", gemm_with_row_sums, _gemm_with_row_sums, ("13.5",)),
    Case(
        "gemm_with_row_sums_if_nonempty",
        gemm_with_row_sums_if_nonempty,
        _gemm_with_row_sums,
        ("13.5",),
    ),
    Case("column_max_if_nonempty", column_max_if_nonempty, _column_max, ("13.5",)),
    Case("rmsnorm_two_loops", rmsnorm_two_loops, _rmsnorm, ("13.5",)),
    Case(
        "gemm_with_row_sums_persistent",
        gemm_with_row_sums,
        _persistent(_gemm_with_row_sums),
        ("13.5",),
    ),
    Case(
        "gemm_with_row_sums_if_nonempty_persistent",
        gemm_with_row_sums_if_nonempty,
        _persistent(_gemm_with_row_sums),
        ("13.5",),
    ),
    Case("gemm_rows_below", gemm_rows_below, _gemm_rows_below, ("13.5",)),
    Case("gemm_rows_below_persistent", gemm_rows_below, _persistent(_gemm_rows_below), ("13.5",)),
]
