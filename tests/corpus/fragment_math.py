"""GEMMs with epilogues of fragment math, written as a Triton user writes them: activations
(SiLU, GELU in its tanh and erf forms, sigmoid), per-token and per-channel scale and bias
vectors of f32, bf16 and f16 (`s[:, None]`, `s[None, :]`), a row-max normalisation, and a
blockwise-scaled fp8 GEMM (one scale per 128-wide K block applied to each partial product,
as DeepSeek's kernels do)."""

from __future__ import annotations

import math

import numpy as np

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.descriptor import TensorDescriptor
from tests.corpus.case import Case, Launch

M, N, K = 256, 128, 128
BLOCKS = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64}
GRID = (M // 128, N // 64)


@tawa_xdsl.jit
def matmul_tile(a_desc, b_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr):  # fmt: skip
    """The f32 accumulator of this program's C tile: A @ B^T over all of K."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
    return acc


@tawa_xdsl.jit
def gemm_silu(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_K: tl.constexpr):  # fmt: skip
    acc = matmul_tile(a_desc, b_desc, K, BLOCK_M, BLOCK_N, BLOCK_K)
    acc = acc / (1 + tl.exp(-acc))
    c_desc.store([tl.program_id(0) * BLOCK_M, tl.program_id(1) * BLOCK_N], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def gemm_gelu_tanh(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr):  # fmt: skip
    acc = matmul_tile(a_desc, b_desc, K, BLOCK_M, BLOCK_N, BLOCK_K)
    inner = 0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)
    acc = 0.5 * acc * (1 + tl.math.tanh(inner))
    c_desc.store([tl.program_id(0) * BLOCK_M, tl.program_id(1) * BLOCK_N], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def gemm_gelu_erf(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):  # fmt: skip
    acc = matmul_tile(a_desc, b_desc, K, BLOCK_M, BLOCK_N, BLOCK_K)
    acc = 0.5 * acc * (1 + tl.erf(acc * 0.7071067811865476))
    c_desc.store([tl.program_id(0) * BLOCK_M, tl.program_id(1) * BLOCK_N], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def gemm_sigmoid(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr):  # fmt: skip
    acc = matmul_tile(a_desc, b_desc, K, BLOCK_M, BLOCK_N, BLOCK_K)
    c_desc.store([tl.program_id(0) * BLOCK_M, tl.program_id(1) * BLOCK_N],
                 tl.sigmoid(acc).to(c_desc.dtype))  # fmt: skip


@tawa_xdsl.jit
def gemm_row_scale(a_desc, b_desc, s_desc, c_desc, K, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """A per-token (per-row) scale vector: `acc * s[:, None]`."""
    acc = matmul_tile(a_desc, b_desc, K, BLOCK_M, BLOCK_N, BLOCK_K)
    off_m = tl.program_id(0) * BLOCK_M
    s = s_desc.load([off_m])
    acc = acc * s[:, None]
    c_desc.store([off_m, tl.program_id(1) * BLOCK_N], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def gemm_col_scale(a_desc, b_desc, s_desc, c_desc, K, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """A per-channel (per-column) scale vector: `acc * s[None, :]`."""
    acc = matmul_tile(a_desc, b_desc, K, BLOCK_M, BLOCK_N, BLOCK_K)
    off_n = tl.program_id(1) * BLOCK_N
    s = s_desc.load([off_n])
    acc = acc * s[None, :]
    c_desc.store([tl.program_id(0) * BLOCK_M, off_n], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def gemm_token_channel_scale(a_desc, b_desc, sa_desc, sb_desc, c_desc, K,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr):  # fmt: skip
    """Both scales at once (an int8/fp8-style dequantisation): `acc * sa[:, None] * sb[None, :]`."""
    acc = matmul_tile(a_desc, b_desc, K, BLOCK_M, BLOCK_N, BLOCK_K)
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = acc * sa_desc.load([off_m])[:, None] * sb_desc.load([off_n])[None, :]
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def gemm_bias_rows(a_desc, b_desc, bias_desc, c_desc, K, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """A bias per output row, added in f32."""
    acc = matmul_tile(a_desc, b_desc, K, BLOCK_M, BLOCK_N, BLOCK_K)
    off_m = tl.program_id(0) * BLOCK_M
    acc = acc + bias_desc.load([off_m]).to(tl.float32)[:, None]
    c_desc.store([off_m, tl.program_id(1) * BLOCK_N], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def gemm_bias_cols_relu(a_desc, b_desc, bias_desc, c_desc, K, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """A bias per output column, then a ReLU."""
    acc = matmul_tile(a_desc, b_desc, K, BLOCK_M, BLOCK_N, BLOCK_K)
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.maximum(acc + bias_desc.load([off_n])[None, :], 0.0)
    c_desc.store([tl.program_id(0) * BLOCK_M, off_n], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def gemm_row_max_norm(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):  # fmt: skip
    """Each row of the tile divided by its largest magnitude (`tl.max` along axis 1)."""
    acc = matmul_tile(a_desc, b_desc, K, BLOCK_M, BLOCK_N, BLOCK_K)
    peak = tl.max(tl.abs(acc), axis=1)
    acc = acc / (peak[:, None] + 1e-6)
    c_desc.store([tl.program_id(0) * BLOCK_M, tl.program_id(1) * BLOCK_N], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def fp8_blockwise_gemm(a_desc, b_desc, sa_desc, sb_desc, c_desc, K, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):  # fmt: skip
    """C = sum over 128-wide K blocks kb of (A_kb @ B_kb^T) * sa[kb, rows] * sb[kb, cols]."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in tl.range(0, tl.cdiv(K, BLOCK_K)):
        partial = tl.dot(a_desc.load([off_m, kb * BLOCK_K]), b_desc.load([off_n, kb * BLOCK_K]).T)
        sa = sa_desc.load([kb, off_m]).reshape(BLOCK_M)
        sb = sb_desc.load([kb, off_n]).reshape(BLOCK_N)
        acc += partial * sa[:, None] * sb[None, :]
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


# ---------------------------------------------------------------------------- the launches


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


def _gemm_inputs(rng: np.random.Generator, dtype=np.float16):
    a = (rng.standard_normal((M, K)) / 4).astype(dtype)
    b = (rng.standard_normal((N, K)) / 4).astype(dtype)
    return a, b, _f32(a) @ _f32(b).T


def _descs(a: np.ndarray, b: np.ndarray):
    return [TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [64, 64])]


def _epilogue_launch(epilogue, out_dtype=np.float16, in_dtype=np.float16):
    """A launch of a GEMM whose only extra argument is C: `epilogue(acc)` is the answer."""

    def launch(rng: np.random.Generator) -> Launch:
        a, b, acc = _gemm_inputs(rng, in_dtype)
        c = np.zeros((M, N), out_dtype)
        args = [*_descs(a, b), TensorDescriptor.from_tensor(c, [128, 64]), K]
        return Launch(GRID, args, dict(BLOCKS), [(c, epilogue(acc).astype(out_dtype))])

    return launch


def _vector_launch(kind: str, vec_dtype, combine, out_dtype=np.float16):
    """A GEMM with one vector argument along the rows (`kind` "rows", length M) or the columns
    ("cols", length N); `combine(acc, v)` is the answer."""

    def launch(rng: np.random.Generator) -> Launch:
        a, b, acc = _gemm_inputs(rng)
        length, block = (M, 128) if kind == "rows" else (N, 64)
        v = rng.uniform(0.5, 2.0, length).astype(vec_dtype)
        c = np.zeros((M, N), out_dtype)
        args = [*_descs(a, b), TensorDescriptor.from_tensor(v, [block]),
                TensorDescriptor.from_tensor(c, [128, 64]), K]  # fmt: skip
        return Launch(GRID, args, dict(BLOCKS), [(c, combine(acc, _f32(v)).astype(out_dtype))])

    return launch


def _two_scales(rng: np.random.Generator) -> Launch:
    a, b, acc = _gemm_inputs(rng)
    sa = rng.uniform(0.5, 2.0, M).astype(np.float32)
    sb = rng.uniform(0.5, 2.0, N).astype(np.float32)
    c = np.zeros((M, N), _bf16())
    vectors = [TensorDescriptor.from_tensor(sa, [128]), TensorDescriptor.from_tensor(sb, [64])]
    args = [*_descs(a, b), *vectors, TensorDescriptor.from_tensor(c, [128, 64]), K]
    answer = acc * sa[:, None] * sb[None, :]
    return Launch(GRID, args, dict(BLOCKS), [(c, answer.astype(c.dtype))])


def _fp8_blockwise(rng: np.random.Generator) -> Launch:
    import ml_dtypes

    k = 256
    e4m3 = ml_dtypes.float8_e4m3fn
    a = (rng.standard_normal((M, k))).astype(e4m3)
    b = (rng.standard_normal((N, k))).astype(e4m3)
    blocks = k // 128
    sa = rng.uniform(0.01, 0.05, (blocks, M)).astype(np.float32)
    sb = rng.uniform(0.5, 2.0, (blocks, N)).astype(np.float32)
    c = np.zeros((M, N), ml_dtypes.bfloat16)
    args = [
        TensorDescriptor.from_tensor(a, [128, 128]),
        TensorDescriptor.from_tensor(b, [64, 128]),
        TensorDescriptor.from_tensor(sa, [1, 128]),
        TensorDescriptor.from_tensor(sb, [1, 64]),
        TensorDescriptor.from_tensor(c, [128, 64]),
        k,
    ]
    answer = np.zeros((M, N), np.float32)
    for kb in range(blocks):
        cols = slice(128 * kb, 128 * (kb + 1))
        partial = _f32(a[:, cols]) @ _f32(b[:, cols]).T
        answer += partial * sa[kb][:, None] * sb[kb][None, :]
    kwargs = {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 128}
    return Launch(GRID, args, kwargs, [(c, answer.astype(c.dtype))])


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float32])(x)


def _bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


def _row_max_norm(acc: np.ndarray) -> np.ndarray:
    """Each row of each BLOCK_N-wide tile over its own largest magnitude."""
    tiles = acc.reshape(M, N // 64, 64)
    return (tiles / (np.abs(tiles).max(axis=2, keepdims=True) + 1e-6)).reshape(M, N)


CASES: list[Case] = [
    Case("gemm_silu", gemm_silu, _epilogue_launch(lambda x: x / (1 + np.exp(-x))), ("1",)),
    Case(
        "gemm_gelu_tanh",
        gemm_gelu_tanh,
        _epilogue_launch(
            lambda x: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))
        ),
        ("1",),
    ),
    Case(
        "gemm_gelu_erf_bf16",
        gemm_gelu_erf,
        _epilogue_launch(lambda x: 0.5 * x * (1 + _erf(x * 0.7071067811865476)), _bf16()),
        ("1",),
    ),
    Case(
        "gemm_sigmoid_bf16_in",
        gemm_sigmoid,
        _epilogue_launch(lambda x: 1 / (1 + np.exp(-x)), np.float16, _bf16()),
        ("1",),
    ),
    Case(
        "gemm_row_scale_f32",
        gemm_row_scale,
        _vector_launch("rows", np.float32, lambda acc, s: acc * s[:, None]),
        ("2",),
    ),
    Case(
        "gemm_row_scale_bf16",
        gemm_row_scale,
        _vector_launch("rows", _bf16(), lambda acc, s: acc * s[:, None]),
        ("2",),
    ),
    Case(
        "gemm_col_scale_bf16",
        gemm_col_scale,
        _vector_launch("cols", _bf16(), lambda acc, s: acc * s[None, :]),
        ("2",),
    ),
    Case(
        "gemm_col_scale_f32",
        gemm_col_scale,
        _vector_launch("cols", np.float32, lambda acc, s: acc * s[None, :]),
        ("2",),
    ),
    Case("gemm_token_channel_scale", gemm_token_channel_scale, _two_scales, ("2",)),
    Case(
        "gemm_bias_rows_f16",
        gemm_bias_rows,
        _vector_launch("rows", np.float16, lambda acc, v: acc + v[:, None]),
        ("2",),
    ),
    Case(
        "gemm_bias_cols_relu_f32",
        gemm_bias_cols_relu,
        _vector_launch("cols", np.float32, lambda acc, v: np.maximum(acc + v[None, :], 0)),
        ("1", "2"),
    ),
    Case("gemm_row_max_norm", gemm_row_max_norm, _epilogue_launch(_row_max_norm), ("1", "2")),
    Case("fp8_blockwise_gemm", fp8_blockwise_gemm, _fp8_blockwise, ("2",)),
]
