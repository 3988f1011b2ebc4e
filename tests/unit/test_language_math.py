"""The math builtins added for Triton parity (`tl.sigmoid`, `tl.erf`, `tl.math.tanh`, `tl.fma`,
`tl.clamp`): the tile IR they become and their values in the tile interpreter against numpy,
with Triton's broadcasting and promotion (scalars, f16 and f32 operands, integer inputs)."""

from __future__ import annotations

import math

import numpy as np

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.descriptor import TensorDescriptor


@tawa_xdsl.jit
def activations(x_desc, y_desc, BLOCK: tl.constexpr):
    x = x_desc.load([0])
    y = tl.sigmoid(x) + tl.erf(x) + tl.math.tanh(x) + tl.clamp(x, -0.5, 0.25)
    y_desc.store([0], y)


@tawa_xdsl.jit
def fused(x_desc, h_desc, y_desc, BLOCK: tl.constexpr):
    """x (f32) * h (f16, promoted) + 1 (a literal), and fma of an integer tile."""
    x = x_desc.load([0])
    h = h_desc.load([0])
    y = tl.fma(x, h, 1.0) + tl.math.fma(tl.arange(0, BLOCK), 2, 3)
    y_desc.store([0], y)


def desc(a: np.ndarray) -> TensorDescriptor:
    return TensorDescriptor.from_tensor(a, [a.shape[0]])


def test_activations_match_numpy_in_the_interpreter():
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    y = np.zeros_like(x)
    activations[(1,)](desc(x), desc(y), BLOCK=64, interpret=True)
    erf = np.vectorize(math.erf)(x)
    expected = 1 / (1 + np.exp(-x)) + erf + np.tanh(x) + np.clip(x, -0.5, 0.25)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


def test_fma_promotes_and_broadcasts_its_three_operands():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(32).astype(np.float32)
    h = rng.standard_normal(32).astype(np.float16)
    y = np.zeros_like(x)
    fused[(1,)](desc(x), desc(h), desc(y), BLOCK=32, interpret=True)
    expected = x * h.astype(np.float32) + 1 + (np.arange(32) * 2 + 3)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_the_builtins_are_tile_ops():
    x = np.zeros(64, np.float32)
    text = activations.compile(desc(x), desc(x), BLOCK=64).ir["tile"]
    sigmoid = ["arith.negf", "math.exp", "arith.addf", "arith.divf"]  # 1 / (1 + exp(-x))
    for op in [*sigmoid, "math.erf", "math.tanh", "arith.maximumf", "arith.minimumf"]:
        assert f" {op} " in text, (op, text)
    h = np.zeros(64, np.float16)
    assert " math.fma " in fused.compile(desc(x), desc(h), desc(x), BLOCK=64).ir["tile"]
