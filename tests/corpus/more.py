"""More kernels written as a Triton user writes them: `tl.where` on f16 and bf16 comparisons
and 16-bit values, kernels with no dot whose rows are split over the default consumer
warpgroups (BLOCK_M 128 and 256), reductions along axis 0 (`tl.sum`/`tl.max` of columns,
stored as rows of partials or broadcast back over the rows), and Triton's EPILOGUE_SUBTILE
(`acc.reshape([BM, 2, BN // 2]).permute(0, 2, 1)`, `tl.split` into two halves stored apart)
with its inverse through `tl.join`."""

from __future__ import annotations

import numpy as np

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.descriptor import TensorDescriptor
from tests.corpus.case import Case, Launch

ROWS, COLS = 256, 64


@tawa_xdsl.jit
def leaky_where(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A leaky ReLU computed in the tile's own 16-bit type: `where(x < 0, x * 0.125, x)`."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0])
    y_desc.store([off_m, 0], tl.where(x < 0, x * 0.125, x))


@tawa_xdsl.jit
def where_mixed(x_desc, y_desc, z_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A 16-bit comparison choosing between f32 values, and an index mask of a 16-bit tile."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0])
    y = y_desc.load([off_m, 0])
    z = tl.where(x >= y, x.to(tl.float32) * 2, y.to(tl.float32))
    cols = tl.arange(0, BLOCK_N)
    kept = tl.where(cols[None, :] < 40, x, 0.0)
    z_desc.store([off_m, 0], z + kept.to(tl.float32))


@tawa_xdsl.jit
def row_scale(x_desc, s_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Each row scaled by its entry of a per-row vector and shifted by its own maximum."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0]).to(tl.float32)
    s = s_desc.load([off_m])
    y = x * s[:, None]
    y = y - tl.max(y, axis=1)[:, None]
    y_desc.store([off_m, 0], y.to(y_desc.dtype))


@tawa_xdsl.jit
def softmax(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A row softmax of BLOCK_N-wide rows."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0]).to(tl.float32)
    x = x - tl.max(x, axis=1)[:, None]
    num = tl.exp(x)
    y = num / tl.sum(num, axis=1)[:, None]
    y_desc.store([off_m, 0], y.to(y_desc.dtype))


@tawa_xdsl.jit
def column_stats(x_desc, sum_desc, max_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Per-program column sums and maxima (`tl.sum` / `tl.max` along axis 0), one row of the
    partial-results tensors per program (a layernorm backward's dw/db partials)."""
    pid = tl.program_id(0)
    x = x_desc.load([pid * BLOCK_M, 0]).to(tl.float32)
    sum_desc.store([pid, 0], tl.sum(x, axis=0)[None, :])
    max_desc.store([pid, 0], tl.max(x, axis=0).to(max_desc.dtype)[None, :])


@tawa_xdsl.jit
def column_softmax(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A softmax down each column: the axis-0 reductions broadcast back over the rows."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0]).to(tl.float32)
    num = tl.exp(x - tl.max(x, axis=0)[None, :])
    y = num / tl.sum(num, axis=0)[None, :]
    y_desc.store([off_m, 0], y.to(y_desc.dtype))


@tawa_xdsl.jit
def gemm_column_sums(a_desc, b_desc, s_desc, N, K, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """The column means of each C tile (A @ B^T) in f32, into a 1-D tensor of N per program
    row (BLOCK_N elements per program)."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
    s_desc.store([tl.program_id(0) * N + off_n], tl.sum(acc, axis=0) / BLOCK_M)


M, N, K = 256, 128, 128
GEMM_BLOCKS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}


@tawa_xdsl.jit
def gemm_epilogue_subtile(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """Triton's EPILOGUE_SUBTILE: the accumulator split into two column halves, each
    converted and stored through a descriptor of half the block width."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
    acc = tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2))
    acc = tl.permute(acc, (0, 2, 1))
    acc0, acc1 = tl.split(acc)
    c_desc.store([off_m, off_n], acc0.to(c_desc.dtype))
    c_desc.store([off_m, off_n + BLOCK_N // 2], acc1.to(c_desc.dtype))


@tawa_xdsl.jit
def gemm_subtile_methods(a_desc, b_desc, c_desc, d_desc, K, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """The same through tensor methods, the halves scaled apart and joined back: c is the
    left half minus the right, d the whole tile with its halves swapped (`tl.join`)."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
    left, right = acc.reshape([BLOCK_M, 2, BLOCK_N // 2]).permute(0, 2, 1).split()
    c_desc.store([off_m, tl.program_id(1) * (BLOCK_N // 2)], (left - right).to(c_desc.dtype))
    swapped = tl.join(right, left).permute(0, 2, 1).reshape(BLOCK_M, BLOCK_N)
    d_desc.store([off_m, off_n], swapped.to(d_desc.dtype))


@tawa_xdsl.jit
def halves_product(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """No dot: a 16-bit tile split into its column halves, multiplied together."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0]).reshape(BLOCK_M, 2, BLOCK_N // 2)
    lo, hi = tl.split(tl.permute(x, 0, 2, 1))
    y_desc.store([off_m, 0], lo * hi)


# ---------------------------------------------------------------------------- the launches


def _bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


def _desc(x: np.ndarray, rows: int) -> TensorDescriptor:
    return TensorDescriptor.from_tensor(x, [rows, x.shape[1]])


def _blocks(rows: int) -> dict[str, int]:
    return {"BLOCK_M": rows, "BLOCK_N": COLS}


def _leaky(dtype):
    def launch(rng: np.random.Generator) -> Launch:
        x = rng.standard_normal((ROWS, COLS)).astype(dtype)
        y = np.zeros((ROWS, COLS), dtype)
        xf = _f32(x)
        answer = np.where(xf < 0, xf * 0.125, xf)
        args = [_desc(x, 128), _desc(y, 128)]
        return Launch((ROWS // 128,), args, _blocks(128), [(y, answer)])

    return launch


def _where_mixed(dtype):
    def launch(rng: np.random.Generator) -> Launch:
        x, y = (rng.standard_normal((ROWS, COLS)).astype(dtype) for _ in range(2))
        z = np.zeros((ROWS, COLS), np.float32)
        xf, yf = _f32(x), _f32(y)
        answer = np.where(xf >= yf, xf * 2, yf)
        answer[:, :40] += xf[:, :40]
        args = [_desc(x, 128), _desc(y, 128), _desc(z, 128)]
        return Launch((ROWS // 128,), args, _blocks(128), [(z, answer)])

    return launch


def _row_scale(rows: int):
    def launch(rng: np.random.Generator) -> Launch:
        x = rng.standard_normal((ROWS, COLS)).astype(np.float16)
        s = rng.uniform(0.5, 2.0, ROWS).astype(np.float32)
        y = np.zeros((ROWS, COLS), np.float16)
        scaled = _f32(x) * s[:, None]
        answer = scaled - scaled.max(axis=1, keepdims=True)
        args = [_desc(x, rows), TensorDescriptor.from_tensor(s, [rows]), _desc(y, rows)]
        return Launch((ROWS // rows,), args, _blocks(rows), [(y, answer)])

    return launch


def _softmax(rows: int):
    def launch(rng: np.random.Generator) -> Launch:
        x = rng.standard_normal((ROWS, COLS)).astype(np.float16)
        y = np.zeros((ROWS, COLS), np.float16)
        e = np.exp(_f32(x) - _f32(x).max(axis=1, keepdims=True))
        answer = e / e.sum(axis=1, keepdims=True)
        args = [_desc(x, rows), _desc(y, rows)]
        return Launch((ROWS // rows,), args, _blocks(rows), [(y, answer)])

    return launch


def _gemm_operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    return a, b, _f32(a) @ _f32(b).T


def _subtile(rng: np.random.Generator) -> Launch:
    a, b, answer = _gemm_operands(rng)
    c = np.zeros((M, N), np.float16)
    descs = [TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [128, 64])]
    args = [*descs, TensorDescriptor.from_tensor(c, [128, 64]), K]
    return Launch((M // 128, N // 128), args, dict(GEMM_BLOCKS), [(c, answer)])


def _subtile_methods(rng: np.random.Generator) -> Launch:
    a, b, answer = _gemm_operands(rng)
    c = np.zeros((M, N // 2), np.float32)
    d = np.zeros((M, N), np.float16)
    descs = [TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [128, 64])]
    outs = [TensorDescriptor.from_tensor(c, [128, 64]), TensorDescriptor.from_tensor(d, [128, 128])]
    tiles = answer.reshape(M, N // 128, 2, 64)
    difference = (tiles[:, :, 0] - tiles[:, :, 1]).reshape(M, N // 2)
    swapped = tiles[:, :, ::-1].reshape(M, N)
    expected = [(c, difference), (d, swapped)]
    return Launch((M // 128, N // 128), [*descs, *outs, K], dict(GEMM_BLOCKS), expected)


def _halves_product(rng: np.random.Generator) -> Launch:
    x = rng.standard_normal((ROWS, COLS)).astype(np.float16)
    y = np.zeros((ROWS, COLS // 2), np.float16)
    xf = _f32(x)
    answer = xf[:, : COLS // 2] * xf[:, COLS // 2 :]
    args = [_desc(x, 128), TensorDescriptor.from_tensor(y, [128, COLS // 2])]
    return Launch((ROWS // 128,), args, _blocks(128), [(y, answer)])


def _column_stats(dtype):
    def launch(rng: np.random.Generator) -> Launch:
        x = rng.standard_normal((ROWS, COLS)).astype(np.float16)
        sums = np.zeros((ROWS // 128, COLS), np.float32)
        maxima = np.zeros((ROWS // 128, COLS), dtype)
        blocks = _f32(x).reshape(ROWS // 128, 128, COLS)
        outs = [TensorDescriptor.from_tensor(v, [1, COLS]) for v in (sums, maxima)]
        expected = [(sums, blocks.sum(axis=1)), (maxima, blocks.max(axis=1))]
        return Launch((ROWS // 128,), [_desc(x, 128), *outs], _blocks(128), expected)

    return launch


def _column_softmax(rng: np.random.Generator) -> Launch:
    x = rng.standard_normal((ROWS, COLS)).astype(np.float16)
    y = np.zeros((ROWS, COLS), np.float16)
    blocks = _f32(x).reshape(ROWS // 128, 128, COLS)
    e = np.exp(blocks - blocks.max(axis=1, keepdims=True))
    answer = (e / e.sum(axis=1, keepdims=True)).reshape(ROWS, COLS)
    return Launch((ROWS // 128,), [_desc(x, 128), _desc(y, 128)], _blocks(128), [(y, answer)])


def _gemm_column_sums(rng: np.random.Generator) -> Launch:
    a, b, product = _gemm_operands(rng)
    s = np.zeros(M // 128 * N, np.float32)
    descs = [TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [64, 64])]
    args = [*descs, TensorDescriptor.from_tensor(s, [64]), N, K]
    answer = product.reshape(M // 128, 128, N).mean(axis=1).reshape(-1)
    blocks = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64}
    return Launch((M // 128, N // 64), args, blocks, [(s, answer)])


CASES: list[Case] = [
    Case("leaky_where_f16", leaky_where, _leaky(np.float16), ("1",)),
    Case("leaky_where_bf16", leaky_where, _leaky(_bf16()), ("1",)),
    Case("where_mixed_f16", where_mixed, _where_mixed(np.float16), ("1",)),
    Case("where_mixed_bf16", where_mixed, _where_mixed(_bf16()), ("1",)),
    # no dot, rows split over the two default consumer warpgroups (64 or 128 rows each)
    Case("softmax_rows_split", softmax, _softmax(128), ("3",)),
    Case("softmax_rows_split_256", softmax, _softmax(256), ("3",)),
    Case("row_scale_rows_split", row_scale, _row_scale(128), ("2", "3")),
    # EPILOGUE_SUBTILE and its inverse: reshape, permute, split and join of fragments
    Case("gemm_epilogue_subtile", gemm_epilogue_subtile, _subtile, ("6",)),
    Case("gemm_subtile_methods", gemm_subtile_methods, _subtile_methods, ("6",)),
    Case("halves_product", halves_product, _halves_product, ("3", "6")),
    # reductions along axis 0: stored as rows of partials, or broadcast back over the rows
    Case("column_stats", column_stats, _column_stats(np.float32), ("2", "3")),
    Case("column_stats_bf16_max", column_stats, _column_stats(_bf16()), ("2", "3")),
    Case("column_softmax", column_softmax, _column_softmax, ("2", "3")),
    Case("gemm_column_sums", gemm_column_sums, _gemm_column_sums, ("2",)),
]
