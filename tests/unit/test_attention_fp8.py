"""fp8 (e4m3) attention on the CPU: the library kernel with V transposed, P rounded to e4m3
and moved into wgmma's fp8 A layout (`wgmma_operand_a8`), through both interpreters.

The nvgpu interpreter places every value by the layouts' `coords`, so the convert into the
fp8 A layout moves values between lanes exactly as the layout objects say; a layout formula
the lowering or the RS wgmma reads wrongly shows as a mismatch with the tile interpreter.
The fragment verifier refuses the layout for a 16-bit element and a 16-bit A for fp8.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects.builtin import Float8E4M3FNType, Float16Type
from xdsl.utils.exceptions import VerifyException

from tawa_xdsl.compiler import lower_to_nvgpu_level
from tawa_xdsl.dialects.nvgpu import FragmentLayout, FragmentType
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.kernels import attention
from tawa_xdsl.transforms.fold_grid import fold_launch
from tawa_xdsl.transforms.persistent import persistent_launch

E4M3 = ml_dtypes.float8_e4m3fn


def inputs(seq: int, head_dim: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seq + head_dim)
    q, k, v = (rng.standard_normal((1, seq, head_dim)).astype(E4M3) for _ in "qkv")
    return q, k, v, attention.fp8_v(v)


def reference(q, k, v, causal: bool) -> np.ndarray:
    s = q.astype(np.float32) @ k.astype(np.float32).transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[1:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float32)


@pytest.mark.parametrize(
    ("head_dim", "causal", "rotate", "seq", "fold"),
    [
        (64, False, False, 128, False),
        (64, False, True, 200, False),
        (64, True, True, 300, False),
        (128, True, True, 200, False),
        (128, True, True, 300, True),  # the library's causal form: folded, persistent
    ],
)
def test_fp8_attention_nvgpu_level_matches_the_tile_level(head_dim, causal, rotate, seq, fold):
    q, k, v, vt = inputs(seq, head_dim)
    module = attention.tile_module(head_dim, "e4m3", causal)
    scale = np.float32(head_dim**-0.5)
    tile_out = np.zeros((1, seq, head_dim), ml_dtypes.bfloat16)
    run_kernel(module.clone(), attention.grid(seq, 1), [q, k, vt, tile_out, seq, scale])
    # every exp2 on the MUFU unit, whose results the interpreter takes from numpy: P rounded to
    # e4m3 then gives the tile level's bits (emulate-exp2's polynomial, chosen for fp8, moves
    # some across a rounding boundary; tests/unit/test_exp2_emulation.py covers it)
    options = attention.compile_options(
        head_dim, rotate=rotate, causal=causal, exp2_emulation=0, fold=fold,
        persistent=True if fold else None,
    )  # fmt: skip
    out = np.zeros_like(tile_out)
    lowered = lower_to_nvgpu_level(module.clone(), dataclasses.replace(options, verify=False))
    grid, extra = attention.grid(seq, 1), []
    if fold:  # row blocks in pairs: the grid's x halved, the unfolded extent its argument
        grid, extra = fold_launch(list(grid))
    if options.persistent:  # two programs walk the row blocks (or their pairs)
        grid, walk = persistent_launch(grid, 2)
        extra = extra + walk
    run_nvgpu_kernel(lowered, grid, [q, k, vt, out, seq, scale, *extra])
    np.testing.assert_array_equal(out.astype(np.float32), tile_out.astype(np.float32))
    expected = reference(q, k, v, causal)
    relative = np.linalg.norm(out.astype(np.float32) - expected) / np.linalg.norm(expected)
    assert relative < 0.05, relative  # P in e4m3: 3 mantissa bits


def test_the_fp8_a_layout_holds_only_fp8_and_fp8_needs_it():
    with pytest.raises(VerifyException, match="wgmma_operand_a8> element type must be"):
        FragmentType(FragmentLayout.WGMMA_OPERAND_A8, [64, 32], Float16Type())
    with pytest.raises(VerifyException, match="wgmma_operand_a> element type must be"):
        FragmentType(FragmentLayout.WGMMA_OPERAND_A, [64, 32], Float8E4M3FNType())


def test_fp8_attention_takes_v_transposed():
    text = str(attention.tile_module(64, "e4m3"))
    assert "!tile.desc<1x64x128xf8E4M3FN>" in text  # V^T's block: [1, d, BLOCK_N]
    assert "!tile.desc<1x128x64xf8E4M3FN>" in text  # K's: [1, BLOCK_N, d]
    assert "!tile.desc<1x128x64xbf16>" in text  # O in bf16
