"""Launch options of `@jit` kernels on the GPU: each launch below sets options that change the
compiled kernel (registers, ping-pong, TMA epilogue, persistence, ring and MMA depth), checks
that the compiled PTX shows them, and compares the result with numpy. numpy arrays behind
`TensorDescriptor`s are copied to the GPU and back by the runtime's launch."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tawa_xdsl

sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))
import attention  # noqa: E402
import gemm  # noqa: E402

GEMM_OPTIONS = [
    {"registers": (24, 240)},
    {"epilogue": "tma", "persistent": True, "num_stages": 3, "mma_depth": 1},
    {"num_consumer_groups": 1, "registers": (40, 232), "num_stages": 2},
]


def gemm_launch(m: int, n: int, k: int, options: dict) -> tuple[np.ndarray, np.ndarray, object]:
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    make = tawa_xdsl.TensorDescriptor.from_tensor
    descs = [make(a, [128, 64]), make(b, [128, 64]), make(c, [128, 128])]
    blocks = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}
    grid = (-(-m // 128) * -(-n // 128),)
    compiled = gemm.gemm[grid](*descs, m, n, k, **blocks, **options, interpret=False)
    expected = a.astype(np.float32) @ b.astype(np.float32).T
    return c, expected, compiled


@pytest.mark.gpu
@pytest.mark.parametrize("options", GEMM_OPTIONS, ids=lambda o: ",".join(map(str, o)))
def test_gemm_launch_options_reach_the_gpu(options: dict) -> None:
    c, expected, compiled = gemm_launch(300, 200, 160, options)
    ptx = compiled.ir["ptx"]
    if "registers" in options:
        producer, consumer = options["registers"]
        assert f"setmaxnreg.dec.sync.aligned.u32 {producer}" in ptx
        assert f"setmaxnreg.inc.sync.aligned.u32 {consumer}" in ptx
    if options.get("epilogue") == "tma":
        assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx  # the TMA store
    np.testing.assert_allclose(c.astype(np.float32), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_attention_pingpong_launch_matches_numpy() -> None:
    rng = np.random.default_rng(7)
    heads, seq, d = 2, 300, 64
    q, k, v = (rng.standard_normal((heads, seq, d)).astype(np.float16) for _ in range(3))
    o = np.full_like(q, np.nan)
    make = tawa_xdsl.TensorDescriptor.from_tensor
    descs = [make(q, [1, 128, d]), make(k, [1, 128, d]), make(v, [1, 128, d]), make(o, [1, 128, d])]
    meta = {"HEAD_DIM": d, "BLOCK_M": 128, "BLOCK_N": 128, "CAUSAL": False}
    grid = (-(-seq // 128), heads)
    scale = 1.0 / np.sqrt(d)
    compiled = attention.attn_fwd[grid](
        *descs, seq, scale, **meta, mma_depth=1, pingpong=True, interpret=False
    )
    assert "bar.arrive" in compiled.ir["ptx"]
    expected = attention.reference(q, k, v, scale, False)
    np.testing.assert_allclose(o.astype(np.float32), expected, rtol=2e-2, atol=2e-2)
