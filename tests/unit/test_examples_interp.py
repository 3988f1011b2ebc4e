"""The bundled tile kernels (examples/*.mlir, and the log-sum-exp of examples/attention.py) in
the tile interpreter against plain numpy.

Shapes that are multiples of the block shapes and shapes that are not: ragged edges exercise
TMA zero-fill on loads, clipping on stores and the key mask of attention. Launch arguments
that do not fit the kernel signature fail with one message naming the kernel and argument.
"""

from __future__ import annotations

import importlib.util
import math
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from tawa_xdsl.diagnostics import parse_file
from tawa_xdsl.dialects import make_context
from tawa_xdsl.interp.tile import KernelArgumentError, run_kernel

EXAMPLES = Path(__file__).parents[2] / "examples"
HEAD_DIM = 64

# Tolerances for f16 outputs compared with a float32 (GEMM) or float64 (attention) reference of
# the same math on the same f16 inputs. Storing rounds each output to the nearest f16: a relative
# error of at most 2^-11 (half an ulp); the kernel's f32 accumulation adds far less.
# rtol = 2^-10 (one f16 ulp) covers that rounding with a factor-2 margin. atol covers outputs
# near zero, where a relative bound means nothing: there the error is the f32 summation error
# of K unit-size products (about K * 2^-24 * sqrt(K) * 4 < 1e-4 for K <= 128) plus the f16
# spacing near zero, so 2e-3 is generous for GEMM. Attention also rounds P = exp2(S - m) to
# f16 before P @ V, as FlashAttention does: each weight in [0, 1] moves by at most 2^-12, so O,
# a weighted mean of V rows (|V| < 5 for these normal samples), moves by at most ~1e-3 in
# absolute terms; atol = 2e-3. (Measured: 2e-4 non-causal, 1e-3 causal, where early rows
# average few keys.)
GEMM_TOLERANCE = {"rtol": 2**-10, "atol": 2e-3}
ATTENTION_TOLERANCE = {"rtol": 2**-10, "atol": 2e-3}


@cache
def load(name: str) -> ModuleOp:
    return parse_file(make_context(), EXAMPLES / f"{name}.mlir")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------------- GEMM


def run_gemm(m: int, n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """C = A @ B^T through examples/gemm.mlir, and the float32 reference."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    grid = (cdiv(m, 128) * cdiv(n, 128), 1, 1)
    written = run_kernel(load("gemm"), grid, [a, b, c, m, n, k])
    assert len(written) == 1 and written[0] is c
    return c, a.astype(np.float32) @ b.astype(np.float32).T


@pytest.mark.parametrize(
    ("m", "n", "k"),
    [(256, 256, 128), (300, 200, 100), (128, 128, 64), (1, 130, 7), (1100, 128, 64)],
)
def test_gemm(m: int, n: int, k: int) -> None:
    # (1100, 128, 64): 9 tile rows, so the grouped ordering has a partial group of 1.
    c, reference = run_gemm(m, n, k)
    assert not np.isnan(c).any(), "some tile of C was never stored"
    np.testing.assert_allclose(c.astype(np.float32), reference, **GEMM_TOLERANCE)


def test_gemm_rounds_output_to_f16() -> None:
    # The stored C is the f16 nearest to the f32 accumulation, not merely close to it.
    c, reference = run_gemm(300, 200, 100, seed=1)
    mismatched = c != reference.astype(np.float16)
    # Only ties or near-ties of the f32 sum (which differs from the exact sum in the last f32
    # bits) can round differently.
    assert mismatched.mean() < 1e-3


# ----------------------------------------------------------------------------- attention


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.transpose(0, 2, 1) * scale
    if causal:
        seq = q.shape[1]
        s = np.where(np.tril(np.ones((seq, seq), bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def run_attention(name: str, heads: int, seq: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((heads, seq, HEAD_DIM)).astype(np.float16) for _ in range(3))
    o = np.full((heads, seq, HEAD_DIM), np.nan, np.float16)
    scale = 1 / math.sqrt(HEAD_DIM)
    written = run_kernel(load(name), (cdiv(seq, 128), heads, 1), [q, k, v, o, seq, scale])
    assert len(written) == 1 and written[0] is o
    return o, attention_reference(q, k, v, scale, causal=name == "attention_causal")


@pytest.mark.parametrize("name", ["attention", "attention_causal"])
@pytest.mark.parametrize("seq", [256, 200, 64, 1])
def test_attention(name: str, seq: int) -> None:
    o, reference = run_attention(name, heads=3, seq=seq)
    assert not np.isnan(o).any(), "some rows of O were never stored (or were NaN)"
    np.testing.assert_allclose(o.astype(np.float64), reference, **ATTENTION_TOLERANCE)


def test_causal_first_row_is_first_value_row() -> None:
    # Row 0 attends only to key 0, so O[:, 0] = V[:, 0] exactly (up to the f16 store).
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 200, HEAD_DIM)).astype(np.float16) for _ in range(3))
    o = np.zeros((2, 200, HEAD_DIM), np.float16)
    run_kernel(load("attention_causal"), (2, 2, 1), [q, k, v, o, 200, 0.125])
    np.testing.assert_array_equal(o[:, 0], v[:, 0])


# ------------------------------------------------------------------------ argument errors


def gemm_args() -> list:
    a = np.zeros((300, 100), np.float16)
    b = np.zeros((200, 100), np.float16)
    c = np.zeros((300, 200), np.float16)
    return [a, b, c, 300, 200, 100]


def with_arg(position: int, value: object) -> list:
    args = gemm_args()
    args[position] = value
    return args


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (gemm_args()[:5], "@gemm takes 6 arguments, got 5"),
        (gemm_args() + [1], "@gemm takes 6 arguments, got 7"),
        (
            with_arg(0, np.zeros((300, 100), np.float32)),
            "@gemm argument 0 (!tile.desc<128x64xf16>): expected a float16 array, got float32",
        ),
        (
            with_arg(2, np.zeros((1, 300, 200), np.float16)),
            "@gemm argument 2 (!tile.desc<128x128xf16>): expected a 2-D array, "
            "got shape (1, 300, 200)",
        ),
        (
            with_arg(3, np.array([300, 301])),
            "@gemm argument 3 (i32): expected a scalar, got an array of shape (2,)",
        ),
        (with_arg(4, 2.5), "@gemm argument 4 (i32): expected an integer, got 2.5"),
        (
            with_arg(1, 7),
            "@gemm argument 1 (!tile.desc<128x64xf16>): expected a numpy array, got int",
        ),
    ],
)
def test_argument_errors(args: list, message: str) -> None:
    with pytest.raises(KernelArgumentError, match=f"^{re.escape(message)}$"):
        run_kernel(load("gemm"), (6, 1, 1), args)


def test_unknown_kernel_name() -> None:
    with pytest.raises(KernelArgumentError, match=r"^no kernel named @matmul in the module$"):
        run_kernel(load("gemm"), 1, gemm_args(), kernel="matmul")


@pytest.mark.parametrize("grid", [(1, 2, 3, 4), (-1,), ()])
def test_bad_grid(grid: tuple[int, ...]) -> None:
    with pytest.raises(KernelArgumentError, match=r"^grid must be 1 to 3 non-negative sizes"):
        run_kernel(load("gemm"), grid, gemm_args())


def test_numpy_scalars_are_accepted() -> None:
    # 0-d arrays and numpy integer scalars bind to i32 parameters like Python ints.
    rng = np.random.default_rng(4)
    a = rng.standard_normal((130, 70)).astype(np.float16)
    b = rng.standard_normal((20, 70)).astype(np.float16)
    c = np.zeros((130, 20), np.float16)
    run_kernel(load("gemm"), (2, 1, 1), [a, b, c, np.array(130), np.int64(20), np.int32(70)])
    reference = a.astype(np.float32) @ b.astype(np.float32).T
    np.testing.assert_allclose(c.astype(np.float32), reference, **GEMM_TOLERANCE)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_language_attention_log_sum_exp(causal: bool) -> None:
    """examples/attention.py's attn_fwd_lse in the tile interpreter: O and the natural-log
    log-sum-exp of every row (seq 150: not a multiple of the 128-row block, rows padded to 152)."""
    spec = importlib.util.spec_from_file_location("attention_py", EXAMPLES / "attention.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 150, 64)).astype(np.float16) for _ in range(3))
    o, lse = example.attention(q, k, v, 0.125, causal, return_lse=True)
    assert lse.shape == (2, 150) and lse.base.shape == (2, 152)
    assert not lse.base[:, 150:].any(), "wrote past the end of a row"
    np.testing.assert_allclose(lse, example.reference_lse(q, k, 0.125, causal), atol=1e-4)
    expected = example.reference(q, k, v, 0.125, causal)
    assert np.max(np.abs(o.astype(np.float32) - expected)) < 2e-2
