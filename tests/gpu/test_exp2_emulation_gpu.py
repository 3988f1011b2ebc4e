"""exp2 on the FMA units on the H200: a tile of f32 values through `tl.exp2` with every value
emulated (`exp2_emulation=8`) gives what the nvgpu interpreter's `exp2_polynomial` gives (to an
ulp: the GPU fuses nothing the interpreter rounds twice) and is within the polynomial's bound
of numpy's exp2, edges included (NaN, +-inf, past 128, subnormal results flushed); with no share
the same kernel keeps ex2.approx."""

from __future__ import annotations

import numpy as np
import pytest

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.interp.fragments import exp2_polynomial


@tawa_xdsl.jit
def exp2_tile(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    off_m = tl.program_id(0) * BLOCK_M
    y_desc.store([off_m, 0], tl.exp2(x_desc.load([off_m, 0])))


def values() -> np.ndarray:
    x = np.linspace(-140.0, 140.0, 256 * 64, dtype=np.float32)
    x[:11] = [np.nan, np.inf, -np.inf, 128.0, 127.99, -126.0, -126.5, -127.0, 0.0, 1.0, -1.0]
    return x.reshape(256, 64)


@pytest.mark.gpu
@pytest.mark.parametrize("share", [8, None])
def test_emulated_exp2_matches_the_interpreter(share: int | None) -> None:
    x = values()
    y = np.full_like(x, 7.0)
    make = tawa_xdsl.TensorDescriptor.from_tensor
    compiled = exp2_tile[(2,)](make(x, [128, 64]), make(y, [128, 64]), BLOCK_M=128, BLOCK_N=64,
                               exp2_emulation=share, interpret=False)  # fmt: skip
    ptx = compiled.ir["ptx"]
    assert ("max.NaN.f32" in ptx) == (share is not None)
    if share is None:  # an exp2 outside any loop with dots: chosen to stay on the MUFU unit
        exact = np.exp2(x)
        flushed = np.where(exact < np.finfo(np.float32).tiny, np.float32(0), exact)  # .ftz
        np.testing.assert_allclose(y, flushed, rtol=2e-6)
        return
    expected = exp2_polynomial(x)
    assert np.array_equal(np.isnan(y), np.isnan(expected))
    finite = np.isfinite(expected) & (expected > 0)
    assert np.array_equal(y[~finite & ~np.isnan(y)], expected[~finite & ~np.isnan(expected)])
    ulps = np.abs(y[finite].view(np.int32) - expected[finite].view(np.int32))
    assert ulps.max() <= 1, f"{ulps.max()} ulps from the interpreter"
    exact = np.exp2(x[finite].astype(np.float64))
    assert np.max(np.abs(y[finite] - exact) / exact) < 7.6e-5
