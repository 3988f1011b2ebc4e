"""The library kernels of `tawa_xdsl.kernels` in the tile interpreter against numpy, for every
element type they take, plus what their helpers refuse.

The GEMM runs on small blocks (ragged shapes: TMA zero-fill and clipped stores) for f16, bf16
and fp8 (e4m3, e5m2) inputs into bf16 and f16 outputs; attention for f16 and bf16, causal and
not, with and without the log-sum-exp, and with K/V heads shared by query heads (GQA); the
GEMM's fused epilogue (bias vector, activation). The stored values are checked against the output
type's rounding of a float64 reference.
"""

from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest

import tawa_xdsl.language as tl
from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import (
    CompileOptions,
    compile_to_ptx,
    lower_to_nvgpu_level,
    options_from_launch,
)
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.kernels import attention, gemm
from tawa_xdsl.transforms.persistent import persistent_launch

NUMPY = {
    tl.float16: np.dtype(np.float16),
    tl.bfloat16: np.dtype(ml_dtypes.bfloat16),
    tl.float8e4nv: np.dtype(ml_dtypes.float8_e4m3fn),
    tl.float8e5: np.dtype(ml_dtypes.float8_e5m2),
}
# Half an ulp of the output type (the one rounding of the f32 accumulator), doubled.
RTOL = {tl.float16: 2**-10, tl.bfloat16: 2**-7}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@pytest.mark.parametrize(
    ("dtype", "out_dtype"),
    [
        (tl.float16, None),
        (tl.bfloat16, None),
        (tl.float8e4nv, None),
        (tl.float8e4nv, tl.float16),
        (tl.float8e5, tl.bfloat16),
    ],
    ids=str,
)
def test_gemm_matches_numpy_for_every_element_type(dtype: tl.dtype, out_dtype) -> None:
    m, n, k, block = 70, 40, 100, (32, 16, 32)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(NUMPY[dtype])
    b = rng.standard_normal((n, k)).astype(NUMPY[dtype])
    out = out_dtype or gemm.default_out_dtype(dtype)
    c = np.full((m, n), np.nan, NUMPY[out])
    module = gemm.gemm_tile_ir(*block, dtype, group_m=2, out_dtype=out_dtype)
    run_kernel(module, (cdiv(m, block[0]) * cdiv(n, block[1]),), [a, b, c, m, n, k])
    expected = a.astype(np.float64) @ b.astype(np.float64).T
    np.testing.assert_allclose(c.astype(np.float64), expected, rtol=RTOL[out], atol=1e-3)


def test_gemm_output_type_follows_the_input_type() -> None:
    assert gemm.default_out_dtype(tl.float16) == tl.float16
    assert gemm.default_out_dtype(tl.float8e4nv) == tl.bfloat16
    text = str(gemm.gemm_tile_ir(128, 256, 128, tl.float8e4nv))
    assert "%c_desc: !tile.desc<128x256xbf16>" in text
    assert "tensor<128x128xf8E4M3FN>, tensor<128x256xf8E4M3FN> -> tensor<128x256xf32>" in text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtype": tl.float32}, "gemm: dtype must be float16, bfloat16 or fp8, got tl.float32"),
        (
            {"dtype": tl.float8e4nv, "out_dtype": tl.float32},
            "gemm: out_dtype must be float16 or bfloat16, got tl.float32",
        ),
    ],
)
def test_gemm_refuses_other_element_types(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        gemm.gemm_tile_ir(**kwargs)


def test_configs_are_what_the_kernel_compiles() -> None:
    """Every tuned config names the kernel's block sizes and fits its type: BLOCK_K = 128 for
    fp8 (one 128-byte swizzled row), 64 for f16/bf16."""
    assert gemm.configs_for(tl.bfloat16) is gemm.GEMM_CONFIGS
    assert gemm.configs_for(tl.float8e4nv) is gemm.FP8_GEMM_CONFIGS
    for dtype, block_k in ((tl.float16, 64), (tl.float8e4nv, 128)):
        for config in gemm.configs_for(dtype):
            assert config.kwargs["BLOCK_K"] == block_k
            module = gemm.config_tile_ir(config, dtype)
            assert f"arith.constant {config.kwargs.get('GROUP_M', 8)} : i32" in str(module)
    assert gemm.grid(300, 200, gemm.GEMM_CONFIGS[2]) == (3, 1, 1)  # 128x256 tiles


def attention_reference(q, k, v, scale: float, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """O and the natural-log log-sum-exp of the scaled scores, in float64."""
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float64), k.astype(np.float64)) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[1:], bool)), s, -np.inf)
    top = s.max(-1, keepdims=True)
    p = np.exp(s - top)
    lse = (top + np.log(p.sum(-1, keepdims=True)))[..., 0]
    return np.einsum("hqk,hkd->hqd", p / p.sum(-1, keepdims=True), v.astype(np.float64)), lse


@pytest.mark.parametrize("return_lse", [False, True], ids=["o", "o+lse"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_attention_matches_numpy(dtype: str, causal: bool, return_lse: bool) -> None:
    heads, seq, head_dim, block_m = 2, 90, 32, 64
    element = NUMPY[attention.DTYPES[dtype]]
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((heads, seq, head_dim)).astype(element) for _ in range(3))
    o = np.full_like(q, np.nan)
    lse = np.full((heads, 92), np.nan, np.float32)[:, :seq]  # rows 16-byte aligned
    scale = 1 / math.sqrt(head_dim)
    module = attention.tile_module(head_dim, dtype, causal, 32, return_lse, block_m=block_m)
    args = [q, k, v, o, *([lse] if return_lse else []), seq, scale]
    run_kernel(module, (cdiv(seq, block_m), heads), args)
    expected_o, expected_lse = attention_reference(q, k, v, scale, causal)
    # P is rounded to the element type before P V: up to half an ulp of each weight
    atol = {"f16": 2e-3, "bf16": 2e-2}[dtype]
    np.testing.assert_allclose(o.astype(np.float64), expected_o, atol=atol)
    if return_lse:
        np.testing.assert_allclose(lse, expected_lse, atol=1e-4)


def test_attention_refuses_other_element_types() -> None:
    with pytest.raises(ValueError, match="^attention: dtype must be f16, bf16 or e4m3, got f32$"):
        attention.tile_module(64, "f32")


def test_attention_defaults_are_the_benchmarked_configuration() -> None:
    assert attention.default_block_n(64) == attention.default_block_n(128) == 128
    # setmaxnreg: chosen by set-registers (24/240 at d = 128, the groups' defaults at d = 64)
    assert attention.compile_options(128).registers is None
    assert attention.grid(300, 48) == (3, 48, 1)


def activation_reference(x: np.ndarray, activation: str | None) -> np.ndarray:
    """The activations in float64 (gelu in its tanh form)."""
    if activation == "relu":
        return np.maximum(x, 0.0)
    if activation == "silu":
        return x / (1.0 + np.exp(-x))
    if activation == "gelu":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return x


@pytest.mark.parametrize(
    ("with_bias", "activation"),
    [(True, None), (True, "relu"), (True, "gelu"), (True, "silu"), (False, "gelu")],
    ids=str,
)
def test_gemm_epilogue_bias_and_activation(with_bias: bool, activation: str | None) -> None:
    """C = act(A @ B^T + bias) in the interpreter: the bias vector read in the epilogue (its
    last block ragged), the activation in f32 before the one rounding to C's type."""
    m, n, k, block = 70, 40, 64, (32, 16, 32)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    bias_dtype = tl.float16 if with_bias else None
    module = gemm.gemm_tile_ir(*block, tl.float16, group_m=2, bias_dtype=bias_dtype,
                               activation=activation)  # fmt: skip
    args = [a, b, c, m, n, k, *([bias] if with_bias else [])]
    run_kernel(module, (cdiv(m, block[0]) * cdiv(n, block[1]),), args)
    x = a.astype(np.float64) @ b.astype(np.float64).T + (bias if with_bias else 0.0)
    expected = activation_reference(x, activation)
    np.testing.assert_allclose(c.astype(np.float64), expected, rtol=RTOL[tl.float16], atol=1e-3)


def test_gemm_refuses_an_unknown_activation() -> None:
    with pytest.raises(ValueError, match="^gemm: activation must be one of .*got 'tanh'$"):
        gemm.gemm_tile_ir(activation="tanh")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_gqa_reads_the_shared_kv_head(causal: bool) -> None:
    """GROUP = 2: query row-heads 2j and 2j + 1 read K/V row-head j, no repeated copies."""
    heads, kv_heads, seq, head_dim, block_m = 4, 2, 70, 32, 64
    rng = np.random.default_rng(4)
    q = rng.standard_normal((heads, seq, head_dim)).astype(np.float16)
    k, v = (rng.standard_normal((kv_heads, seq, head_dim)).astype(np.float16) for _ in "kv")
    o = np.full_like(q, np.nan)
    scale = 1 / math.sqrt(head_dim)
    module = attention.tile_module(head_dim, "f16", causal, 32, block_m=block_m, group=2)
    run_kernel(module, (cdiv(seq, block_m), heads), [q, k, v, o, seq, scale])
    expected, _ = attention_reference(q, np.repeat(k, 2, 0), np.repeat(v, 2, 0), scale, causal)
    np.testing.assert_allclose(o.astype(np.float64), expected, atol=2e-3)


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")
@pytest.mark.parametrize(("config", "activation"), [(0, "relu"), (2, "gelu"), (3, "silu")], ids=str)
def test_the_fused_epilogues_assemble(config: int, activation: str) -> None:
    """The bias + activation GEMMs as ops.matmul compiles them (persistent, TMA-store
    epilogue, 128x128 and 128x256 tiles) pass ptxas without a forbidden warning."""
    kernel = gemm.compile_gemm(gemm.GEMM_CONFIGS[config], tl.bfloat16, verify=False,
                               bias_dtype=tl.bfloat16, activation=activation)  # fmt: skip
    result = assemble(kernel.ptx)
    assert result.ok, result.log[-2000:]


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")
def test_the_gqa_attention_assembles() -> None:
    module = attention.tile_module(128, "bf16", True, group=4)
    options = CompileOptions(stages=3, mma_depth=1, consumers=2, registers=(24, 240),
                             verify=False)  # fmt: skip
    result = assemble(compile_to_ptx(module, options).ptx)
    assert result.ok, result.log[-2000:]


def nvgpu_launch(module, options: CompileOptions, grid: tuple[int, ...], args: list) -> None:
    """Run a tile module at the nvgpu level (every thread, the layouts' fragments)."""
    nvgpu = lower_to_nvgpu_level(module, dataclasses.replace(options, verify=False))
    extra: list = []
    if options.persistent:
        grid, extra = persistent_launch(grid, 2)
    run_nvgpu_kernel(nvgpu, grid, [*args, *extra])


@pytest.mark.parametrize("activation", ["relu", "gelu", "silu"])
def test_fused_epilogue_at_the_nvgpu_level_matches_the_tile_level(activation: str) -> None:
    """The bias vector read into each thread's columns, the activation on the fragments:
    the same values as the tile program (persistent, TMA-store epilogue, as ops compiles it)."""
    m, n, k = 200, 136, 64
    rng = np.random.default_rng(6)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    bias = rng.standard_normal(n).astype(np.float16)
    module = gemm.gemm_tile_ir(128, 128, 64, tl.float16, bias_dtype=tl.float16,
                               activation=activation)  # fmt: skip
    grid = (cdiv(m, 128) * cdiv(n, 128),)
    expected, c = (np.zeros((m, n), np.float16) for _ in range(2))
    run_kernel(module, grid, [a, b, expected, m, n, k, bias])
    options = options_from_launch(gemm.GEMM_CONFIGS[0].options())
    nvgpu_launch(module, options, grid, [a, b, c, m, n, k, bias])
    # exp2 is the GPU's ex2.approx at this level: within an f16 ulp of the tile level's
    np.testing.assert_allclose(c.astype(np.float32), expected.astype(np.float32),
                               rtol=2**-10, atol=2**-12)  # fmt: skip


def test_gqa_attention_at_the_nvgpu_level_matches_the_tile_level() -> None:
    heads, seq, head_dim = 4, 130, 64
    rng = np.random.default_rng(7)
    q = rng.standard_normal((heads, seq, head_dim)).astype(np.float16)
    k, v = (rng.standard_normal((heads // 2, seq, head_dim)).astype(np.float16) for _ in "kv")
    module = attention.tile_module(head_dim, "f16", True, group=2)
    expected, o = (np.zeros_like(q) for _ in range(2))
    grid = attention.grid(seq, heads)
    run_kernel(module, grid, [q, k, v, expected, seq, 0.125])
    nvgpu_launch(module, CompileOptions(stages=3, mma_depth=1, consumers=2), grid,
                 [q, k, v, o, seq, 0.125])  # fmt: skip
    np.testing.assert_allclose(o.astype(np.float32), expected.astype(np.float32),
                               rtol=2**-10, atol=2**-12)  # fmt: skip
