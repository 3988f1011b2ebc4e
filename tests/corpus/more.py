"""More kernels written as a Triton user writes them: `tl.where` on f16 and bf16 comparisons
and 16-bit values, kernels with no dot whose rows are split over the default consumer
warpgroups (BLOCK_M 128 and 256), and Triton's EPILOGUE_SUBTILE (`acc.reshape([BM, 2,
BN // 2]).permute(0, 2, 1)`, `tl.split` into two halves stored apart) with its inverse
through `tl.join`."""

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


CASES: list[Case] = [
    Case("leaky_where_f16", leaky_where, _leaky(np.float16), ("1",)),
    Case("leaky_where_bf16", leaky_where, _leaky(_bf16()), ("1",)),
    Case("where_mixed_f16", where_mixed, _where_mixed(np.float16), ("1",)),
    Case("where_mixed_bf16", where_mixed, _where_mixed(_bf16()), ("1",)),
    # no dot, rows split over the two default consumer warpgroups (64 or 128 rows each)
    Case("softmax_rows_split", softmax, _softmax(128), ("3",)),
    Case("softmax_rows_split_256", softmax, _softmax(256), ("3",)),
    Case("row_scale_rows_split", row_scale, _row_scale(128), ("2", "3")),
]
