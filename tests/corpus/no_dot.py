"""Kernels with no `tl.dot`, written as a Triton user writes them: a TMA producer feeds the
consumers tiles that they read into registers, compute on and store (copies, elementwise
math, `where` on float and index comparisons, row softmax, layernorm and RMSnorm forward)."""

from __future__ import annotations

import math

import numpy as np

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.descriptor import TensorDescriptor
from tests.corpus.case import Case, Launch

ROWS, COLS = 256, 64
BLOCKS = {"BLOCK_M": 128, "BLOCK_N": 64}
GRID = (ROWS // 128,)


@tawa_xdsl.jit
def copy(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    off_m = tl.program_id(0) * BLOCK_M
    y_desc.store([off_m, 0], x_desc.load([off_m, 0]))


@tawa_xdsl.jit
def add_mul(x_desc, y_desc, z_desc, alpha, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """z = (x + y) * alpha, in the inputs' type (f16 math rounds every result)."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0])
    y = y_desc.load([off_m, 0])
    z_desc.store([off_m, 0], ((x + y) * alpha).to(z_desc.dtype))


@tawa_xdsl.jit
def clamp_where(x_desc, y_desc, z_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """z = clamp(x, -1, 1) where x > y, else y / 2; columns past 48 are zeroed."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0]).to(tl.float32)
    y = y_desc.load([off_m, 0]).to(tl.float32)
    z = tl.where(x > y, tl.clamp(x, -1.0, 1.0), y / 2)
    cols = tl.arange(0, BLOCK_N)
    z = tl.where(cols[None, :] < 48, z, 0.0)
    z_desc.store([off_m, 0], z.to(z_desc.dtype))


@tawa_xdsl.jit
def unary_math(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """abs, neg, sqrt, rsqrt, log, exp2 and log2 of one tile, summed."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0]).to(tl.float32)
    ax = tl.abs(x) + 0.25
    y = -tl.sqrt(ax) + tl.rsqrt(ax) + tl.log(ax) + tl.math.exp2(-ax) + tl.log2(ax)
    y_desc.store([off_m, 0], y)


@tawa_xdsl.jit
def erf_fma(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """erf(x) * 0.5 + x, through tl.fma, in bf16."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0]).to(tl.float32)
    y = tl.fma(tl.erf(x), 0.5, x)
    y_desc.store([off_m, 0], y.to(y_desc.dtype))


@tawa_xdsl.jit
def half_math(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """exp, max and division on f16 tiles as they are loaded (no conversion to f32)."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0])
    y = tl.maximum(tl.exp(x), x) / 2
    y_desc.store([off_m, 0], y)


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
def layernorm(x_desc, w_desc, b_desc, y_desc, eps, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr):  # fmt: skip
    """LayerNorm forward over rows of BLOCK_N, with a weight and a bias per column."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0]).to(tl.float32)
    mean = tl.sum(x, axis=1) / BLOCK_N
    xc = x - mean[:, None]
    var = tl.sum(xc * xc, axis=1) / BLOCK_N
    y = xc * tl.rsqrt(var + eps)[:, None]
    y = y * w_desc.load([0])[None, :] + b_desc.load([0])[None, :]
    y_desc.store([off_m, 0], y.to(y_desc.dtype))


@tawa_xdsl.jit
def rmsnorm(x_desc, w_desc, y_desc, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """RMSNorm forward over rows of BLOCK_N, with a bf16 weight per column."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0]).to(tl.float32)
    rms = tl.sqrt(tl.sum(x * x, axis=1) / BLOCK_N + eps)
    y = x / rms[:, None] * w_desc.load([0]).to(tl.float32)[None, :]
    y_desc.store([off_m, 0], y.to(y_desc.dtype))


@tawa_xdsl.jit
def row_min_shift(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Each row minus its minimum (`tl.min` along axis 1)."""
    off_m = tl.program_id(0) * BLOCK_M
    x = x_desc.load([off_m, 0])
    y_desc.store([off_m, 0], x - tl.min(x, axis=1)[:, None])


# ---------------------------------------------------------------------------- the launches


def _bf16():
    import ml_dtypes

    return ml_dtypes.bfloat16


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


def _desc(x: np.ndarray) -> TensorDescriptor:
    return TensorDescriptor.from_tensor(x, [128, COLS])


def _unary_launch(function, in_dtype=np.float16, out_dtype=np.float16):
    """A launch of `kernel(x_desc, y_desc)`: `function(x in f32)` is the answer."""

    def launch(rng: np.random.Generator) -> Launch:
        x = rng.standard_normal((ROWS, COLS)).astype(in_dtype)
        y = np.zeros((ROWS, COLS), out_dtype)
        return Launch(GRID, [_desc(x), _desc(y)], dict(BLOCKS), [(y, function(_f32(x)))])

    return launch


def _add_mul(rng: np.random.Generator) -> Launch:
    x, y = (rng.standard_normal((ROWS, COLS)).astype(np.float16) for _ in range(2))
    z = np.zeros((ROWS, COLS), np.float32)
    answer = (_f32(x) + _f32(y)) * 1.5
    return Launch(GRID, [_desc(x), _desc(y), _desc(z), 1.5], dict(BLOCKS), [(z, answer)])


def _clamp_where(rng: np.random.Generator) -> Launch:
    x, y = (rng.standard_normal((ROWS, COLS)).astype(np.float16) for _ in range(2))
    z = np.zeros((ROWS, COLS), np.float16)
    xf, yf = _f32(x), _f32(y)
    answer = np.where(xf > yf, np.clip(xf, -1, 1), yf / 2)
    answer[:, 48:] = 0
    return Launch(GRID, [_desc(x), _desc(y), _desc(z)], dict(BLOCKS), [(z, answer)])


def _unary_answer(x: np.ndarray) -> np.ndarray:
    ax = np.abs(x) + 0.25
    return -np.sqrt(ax) + 1 / np.sqrt(ax) + np.log(ax) + np.exp2(-ax) + np.log2(ax)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _norm_launch(layer: bool):
    def launch(rng: np.random.Generator) -> Launch:
        x = rng.standard_normal((ROWS, COLS)).astype(np.float16)
        y = np.zeros((ROWS, COLS), np.float16)
        xf, eps = _f32(x), 1e-5
        if layer:
            w = rng.uniform(0.5, 1.5, COLS).astype(np.float32)
            b = rng.standard_normal(COLS).astype(np.float32)
            centred = xf - xf.mean(axis=1, keepdims=True)
            answer = centred / np.sqrt((centred**2).mean(axis=1, keepdims=True) + eps) * w + b
            vectors = [TensorDescriptor.from_tensor(v, [COLS]) for v in (w, b)]
        else:
            w = rng.uniform(0.5, 1.5, COLS).astype(_bf16())
            answer = xf / np.sqrt((xf**2).mean(axis=1, keepdims=True) + eps) * _f32(w)
            vectors = [TensorDescriptor.from_tensor(w, [COLS])]
        args = [_desc(x), *vectors, _desc(y), eps]
        return Launch(GRID, args, dict(BLOCKS), [(y, answer)])

    return launch


def _erf_fma(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float32])(x) * 0.5 + x


CASES: list[Case] = [
    Case("copy_f16", copy, _unary_launch(lambda x: x), ("3",)),
    Case("copy_bf16", copy, _unary_launch(lambda x: x, _bf16(), _bf16()), ("3",)),
    Case("add_mul_f16_to_f32", add_mul, _add_mul, ("1", "3")),
    Case("clamp_where", clamp_where, _clamp_where, ("1", "3")),
    Case(
        "unary_math",
        unary_math,
        _unary_launch(_unary_answer, np.float16, np.float32),
        ("1", "3"),
    ),
    Case("erf_fma_bf16", erf_fma, _unary_launch(_erf_fma, _bf16(), _bf16()), ("1", "3")),
    Case("half_math", half_math, _unary_launch(lambda x: np.maximum(np.exp(x), x) / 2), ("1", "3")),
    Case("softmax", softmax, _unary_launch(_softmax), ("2", "3")),
    # f32 rows of 256 bytes: the slot holds two 128-byte swizzled column slabs
    Case("softmax_f32", softmax, _unary_launch(_softmax, np.float32, np.float32), ("2", "3")),
    Case("layernorm", layernorm, _norm_launch(layer=True), ("2", "3")),
    Case("rmsnorm", rmsnorm, _norm_launch(layer=False), ("2", "3")),
    Case(
        "row_min_shift",
        row_min_shift,
        _unary_launch(lambda x: x - x.min(axis=1, keepdims=True)),
        ("2", "3"),
    ),
]
