"""Kernels written as a Triton user writes them for what the GPU path refused until now:
conversions between 16-bit float types and through fp8 (a fake-quantization round trip),
column vectors carried through loops (running column maxima and sums over row blocks, as
Triton's layernorm backward accumulates dw and db), row vectors accumulated across the
column blocks of wide rows (an RMSnorm's rstd, stored as one row of a 2-D tensor or through
a rank-1 descriptor), and 16-bit row and column vectors broadcast
in a 16-bit epilogue as loaded."""

from __future__ import annotations

import numpy as np

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.descriptor import TensorDescriptor
from tests.corpus.case import Case, Launch

ROWS, COLS = 256, 64


@tawa_xdsl.jit
def cast(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A tile converted to the output's type (f16 <-> bf16)."""
    off_m = tl.program_id(0) * BLOCK_M
    y_desc.store([off_m, 0], x_desc.load([off_m, 0]).to(y_desc.dtype))


@tawa_xdsl.jit
def fake_quantize(x_desc, y_desc, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Quantize-dequantize through e4m3 (saturating), as fp8 training simulates it."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0])
    q = (x.to(tl.float32) / scale).to(tl.float8e4nv)
    y_desc.store([off_m, 0], (q.to(tl.float32) * scale).to(y_desc.dtype))


@tawa_xdsl.jit
def bf16_exp_to_f16(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """bf16 math on the loaded tile, converted to f16 before a last f16 step."""
    off_m = tl.program_id(0) * BLOCK_M
    x = tl.exp(x_desc.load([off_m, 0]) * 0.5)
    y = x.to(tl.float16)
    y_desc.store([off_m, 0], y - tl.max(y, axis=1)[:, None].to(tl.float16))


@tawa_xdsl.jit
def column_max_loop(x_desc, y_desc, M, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Each program's column strip: the running maximum of every column over all rows."""
    off_n = tl.program_id(0) * BLOCK_N
    m = tl.full([BLOCK_N], float("-inf"), tl.float32)
    for r in tl.range(0, M, BLOCK_M):
        x = x_desc.load([r, off_n]).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    y_desc.store([0, off_n], m[None, :])


@tawa_xdsl.jit
def layernorm_dwdb(dy_desc, x_desc, dw_desc, db_desc, M,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    """Triton's layernorm backward dw/db reduction: `dw += sum(dy * x)`, `db += sum(dy)`
    over row blocks, two column vectors carried through the loop, stored in f16."""
    off_n = tl.program_id(0) * BLOCK_N
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    db = tl.zeros([BLOCK_N], dtype=tl.float32)
    for r in tl.range(0, M, BLOCK_M):
        dy = dy_desc.load([r, off_n]).to(tl.float32)
        x = x_desc.load([r, off_n]).to(tl.float32)
        dw += tl.sum(dy * x, axis=0)
        db += tl.sum(dy, axis=0)
    dw_desc.store([0, off_n], dw.to(dw_desc.dtype)[None, :])
    db_desc.store([0, off_n], db.to(db_desc.dtype)[None, :])


@tawa_xdsl.jit
def column_mean_centered(x_desc, y_desc, M, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A column vector started from the first block's sums (not a splat), then the column
    means subtracted from the first block."""
    off_n = tl.program_id(0) * BLOCK_N
    first = x_desc.load([0, off_n]).to(tl.float32)
    s = tl.sum(first, axis=0)
    for r in tl.range(BLOCK_M, M, BLOCK_M):
        s = s + tl.sum(x_desc.load([r, off_n]).to(tl.float32), axis=0)
    y_desc.store([0, off_n], (first - (s / M)[None, :]).to(y_desc.dtype))


@tawa_xdsl.jit
def gemm_bf16_epilogue(a_desc, b_desc, bias_desc, scale_desc, c_desc, K, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """A GEMM whose epilogue computes in bf16: a per-token scale `s[:, None]` and a
    per-channel bias `bias[None, :]`, both bf16 vectors used as loaded."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
    c = acc.to(tl.bfloat16)
    c = c * scale_desc.load([off_m])[:, None] + bias_desc.load([off_n])[None, :]
    c_desc.store([off_m, off_n], c)


@tawa_xdsl.jit
def row_rstd_wide(x_desc, rstd_desc, N, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The 1 / RMS of rows wider than a block (an RMSnorm's rstd output): the row sums of
    squares accumulated over the column blocks, a row vector carried through the loop,
    stored as one row of the f32 [1, M] output."""
    off_m = tl.program_id(0) * BLOCK_M
    sumsq = tl.zeros([BLOCK_M], dtype=tl.float32)
    for c in tl.range(0, N, BLOCK_N):
        x = x_desc.load([off_m, c]).to(tl.float32)
        sumsq += tl.sum(x * x, axis=1)
    rstd = tl.rsqrt(sumsq / N + eps)
    rstd_desc.store([0, off_m], rstd.reshape(1, BLOCK_M))


@tawa_xdsl.jit
def row_rstd_rank1(x_desc, rstd_desc, N, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """row_rstd_wide with its output a vector of M rows, stored through a rank-1 descriptor
    (as an RMSnorm forward writes its rstd for the backward)."""
    off_m = tl.program_id(0) * BLOCK_M
    sumsq = tl.zeros([BLOCK_M], dtype=tl.float32)
    for c in tl.range(0, N, BLOCK_N):
        x = x_desc.load([off_m, c]).to(tl.float32)
        sumsq += tl.sum(x * x, axis=1)
    rstd_desc.store([off_m], tl.rsqrt(sumsq / N + eps))


# ---------------------------------------------------------------------------- the launches


def _bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


def _desc(x: np.ndarray, rows: int, cols: int = COLS) -> TensorDescriptor:
    return TensorDescriptor.from_tensor(x, [rows, cols])


def _blocks(rows: int, cols: int = COLS) -> dict[str, int]:
    return {"BLOCK_M": rows, "BLOCK_N": cols}


def _cast(source, result):
    def launch(rng: np.random.Generator) -> Launch:
        x = rng.standard_normal((ROWS, COLS)).astype(source())
        y = np.zeros((ROWS, COLS), result())
        answer = _f32(x).astype(result())
        args = [_desc(x, 128), _desc(y, 128)]
        return Launch((ROWS // 128,), args, _blocks(128), [(y, answer)], rtol=0, atol=0)

    return launch


def _fake_quantize(rng: np.random.Generator) -> Launch:
    import ml_dtypes

    x = (rng.standard_normal((ROWS, COLS)) * 100).astype(np.float16)
    y = np.zeros((ROWS, COLS), np.float16)
    scale = 0.5
    q = np.clip(_f32(x) / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    answer = _f32(q) * scale
    args = [_desc(x, 128), _desc(y, 128), scale]
    return Launch((ROWS // 128,), args, _blocks(128), [(y, answer)], rtol=0, atol=0)


def _bf16_exp(rng: np.random.Generator) -> Launch:
    bf16 = _bf16()
    x = rng.standard_normal((ROWS, COLS)).astype(bf16)
    y = np.zeros((ROWS, COLS), np.float16)
    e = _f32((_f32(x) * 0.5).astype(bf16))
    e = _f32(np.exp(e).astype(bf16)).astype(np.float16)
    answer = _f32(e) - _f32(e).max(axis=1, keepdims=True)
    return Launch((ROWS // 128,), [_desc(x, 128), _desc(y, 128)], _blocks(128), [(y, answer)])


def _column_max(rng: np.random.Generator) -> Launch:
    x = rng.standard_normal((ROWS, 2 * COLS)).astype(np.float16)
    y = np.zeros((1, 2 * COLS), np.float32)
    answer = _f32(x).max(axis=0, keepdims=True)
    args = [_desc(x, 64), _desc(y, 1), ROWS]
    return Launch((2,), args, _blocks(64), [(y, answer)])


def _layernorm_dwdb(rng: np.random.Generator) -> Launch:
    dy, x = (rng.standard_normal((ROWS, 2 * COLS)).astype(np.float16) for _ in range(2))
    dw, db = (np.zeros((1, 2 * COLS), np.float16) for _ in range(2))
    answers = [(dw, (_f32(dy) * _f32(x)).sum(axis=0, keepdims=True))]
    answers.append((db, _f32(dy).sum(axis=0, keepdims=True)))
    args = [_desc(dy, 64), _desc(x, 64), _desc(dw, 1), _desc(db, 1), ROWS]
    return Launch((2,), args, _blocks(64), answers, rtol=2e-2, atol=5e-2)


def _column_mean_centered(rng: np.random.Generator) -> Launch:
    x = rng.standard_normal((ROWS, COLS)).astype(np.float16)
    y = np.zeros((64, COLS), np.float16)
    answer = _f32(x)[:64] - _f32(x).mean(axis=0, keepdims=True)
    return Launch((1,), [_desc(x, 64), _desc(y, 64), ROWS], _blocks(64), [(y, answer)])


def _gemm_bf16_epilogue(rng: np.random.Generator) -> Launch:
    bf16 = _bf16()
    m, n, k = 256, 128, 128
    a = rng.standard_normal((m, k)).astype(bf16)
    b = rng.standard_normal((n, k)).astype(bf16)
    bias = rng.standard_normal(n).astype(bf16)
    scale = rng.uniform(0.5, 2.0, m).astype(bf16)
    c = np.zeros((m, n), bf16)
    product = (_f32(a) @ _f32(b).T).astype(bf16)
    scaled = (_f32(product) * _f32(scale)[:, None]).astype(bf16)
    answer = _f32(scaled) + _f32(bias)[None, :]
    args = [TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [128, 64])]
    args += [TensorDescriptor.from_tensor(bias, [128]), TensorDescriptor.from_tensor(scale, [128])]
    args += [TensorDescriptor.from_tensor(c, [128, 128]), k]
    blocks = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}
    return Launch((m // 128, n // 128), args, blocks, [(c, answer)], atol=5e-2)


def _row_rstd_wide(rng: np.random.Generator) -> Launch:
    cols = 4 * COLS
    x = rng.standard_normal((ROWS, cols)).astype(np.float16)
    rstd = np.zeros((1, ROWS), np.float32)
    eps = 1e-5
    answer = 1 / np.sqrt((_f32(x) ** 2).mean(axis=1) + eps)[None, :]
    args = [_desc(x, 128), TensorDescriptor.from_tensor(rstd, [1, 128]), cols, eps]
    return Launch((ROWS // 128,), args, _blocks(128), [(rstd, answer)])


def _row_rstd_rank1(rng: np.random.Generator) -> Launch:
    rows, cols = ROWS + 64, 4 * COLS  # a partial last block: the store is clipped
    x = rng.standard_normal((rows, cols)).astype(np.float16)
    rstd = np.zeros((rows,), np.float32)
    eps = 1e-5
    answer = 1 / np.sqrt((_f32(x) ** 2).mean(axis=1) + eps)
    args = [_desc(x, 128), TensorDescriptor.from_tensor(rstd, [128]), cols, eps]
    return Launch((-(-rows // 128),), args, _blocks(128), [(rstd, answer)])


CASES: list[Case] = [
    Case("cast_f16_to_bf16", cast, _cast(lambda: np.float16, _bf16), ("1",)),
    Case("cast_bf16_to_f16", cast, _cast(_bf16, lambda: np.float16), ("1",)),
    Case("fake_quantize_e4m3", fake_quantize, _fake_quantize, ("1", "4")),
    Case("bf16_exp_to_f16", bf16_exp_to_f16, _bf16_exp, ("1", "2")),
    # column vectors carried through loops over row blocks
    Case("column_max_loop", column_max_loop, _column_max, ("2", "3")),
    Case("layernorm_dwdb", layernorm_dwdb, _layernorm_dwdb, ("2", "3")),
    Case("column_mean_centered", column_mean_centered, _column_mean_centered, ("2", "3")),
    # 16-bit vectors broadcast along either axis, used as loaded
    Case("gemm_bf16_epilogue", gemm_bf16_epilogue, _gemm_bf16_epilogue, ("2",)),
    # a row vector accumulated over column blocks
    Case("row_rstd_wide", row_rstd_wide, _row_rstd_wide, ("2", "3")),
    Case("row_rstd_rank1", row_rstd_rank1, _row_rstd_rank1, ("2",)),
]
