"""Causal attention with its row blocks folded (`attn_fwd`'s FOLD): program i takes row block
(blocks - 1 - i), the longest, then i, the shortest, so every program walks the same number of
key blocks (the middle block of an odd count alone). It computes what the unfolded kernel
computes at the tile, aref, mbarrier and nvgpu levels, one program per pair and persistent,
and the protocol proof accepts it (the pair loop is a loop of one or two trips around the
whole body: the rings' counters run on through it).
"""

from __future__ import annotations

import numpy as np
import pytest

from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
from tawa_xdsl.dialects import make_context
from tawa_xdsl.interp.aref import run_warp_specialized
from tawa_xdsl.interp.mbarrier import run_mbarrier_kernel
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.kernels import attention
from tawa_xdsl.transforms.lower_aref import LowerArefPass
from tawa_xdsl.transforms.persistent import persistent_launch
from tawa_xdsl.transforms.warp_specialize import WarpSpecializePass
from tawa_xdsl.verify.check import check_module
from tests.unit.test_attention_schedules import HEAD_DIM, HEADS, SCALE, close, inputs, tile_level


def launch(seq: int, persistent: bool) -> tuple[tuple[int, int, int], list[int]]:
    """The grid of the folded kernel and its trailing arguments (persistent: 3 programs)."""
    pairs = attention.grid(seq, HEADS, fold=True)
    return persistent_launch(pairs, 3) if persistent else (pairs, [])


def test_the_grid_counts_pairs_of_row_blocks() -> None:
    assert attention.grid(1024, 4, fold=True) == (4, 4, 1)  # 8 row blocks
    assert attention.grid(1100, 4, fold=True) == (5, 4, 1)  # 9: the middle one alone
    assert attention.grid(1100, 4, 192, fold=True) == (3, 4, 1)  # 6 blocks of 192 rows


# 100: one row block (its pair is itself); 300: three (the middle alone); 520: five
@pytest.mark.parametrize("seq", [100, 300, 520])
def test_the_tile_level_matches_the_unfolded_kernel(seq: int) -> None:
    expected = tile_level(attention.tile_module(HEAD_DIM, "f16", True), seq)
    q, k, v = inputs(seq)
    o = np.full_like(q, np.nan)
    run_kernel(attention.tile_module(HEAD_DIM, "f16", True, fold=True),
               attention.grid(seq, HEADS, fold=True), [q, k, v, o, seq, SCALE])  # fmt: skip
    close(o, expected)


@pytest.mark.parametrize("persistent", [False, True], ids=["per_pair", "persistent"])
@pytest.mark.parametrize("seq", [300, 520])
def test_every_level_matches_the_unfolded_kernel(seq: int, persistent: bool) -> None:
    expected = tile_level(attention.tile_module(HEAD_DIM, "f16", True), seq)
    module = attention.tile_module(HEAD_DIM, "f16", True, fold=True)
    options = CompileOptions(stages=3, mma_depth=1, consumers=2, persistent=persistent)
    grid, extra = launch(seq, persistent)
    q, k, v = inputs(seq)
    args = lambda o: [q, k, v, o, seq, SCALE, *extra]  # noqa: E731
    if not persistent:  # the aref and mbarrier levels of the pair loop alone
        ws = module.clone()
        WarpSpecializePass(stages=3, mma_depth=1, consumers=2).apply(make_context(), ws)
        for schedule in ("random", "producer-first", "consumer-first"):
            o = np.full_like(q, np.nan)
            run_warp_specialized(ws, grid, args(o), schedule=schedule)
            close(o, expected)
        LowerArefPass().apply(make_context(), ws)
        o = np.full_like(q, np.nan)
        run_mbarrier_kernel(ws, grid, args(o))
        close(o, expected)
    o = np.full_like(q, np.nan)
    run_nvgpu_kernel(lower_to_nvgpu_level(module, options), grid, args(o))
    close(o, expected)


@pytest.mark.parametrize("persistent", [False, True], ids=["per_pair", "persistent"])
def test_tawa_verify_proves_every_ring(persistent: bool) -> None:
    module = attention.tile_module(128, "bf16", True, fold=True)
    options = CompileOptions(stages=3, mma_depth=1, consumers=2, persistent=persistent)
    verdicts = check_module(lower_to_nvgpu_level(module, options))
    assert verdicts and all(v.proved for v in verdicts), [v.summary() for v in verdicts]


def test_fold_without_a_causal_mask_or_with_the_lse_is_refused() -> None:
    with pytest.raises(ValueError, match="fold pairs causal row blocks"):
        attention.tile_module(HEAD_DIM, "f16", False, fold=True)
    with pytest.raises(ValueError, match="fold pairs causal row blocks"):
        attention.tile_module(HEAD_DIM, "f16", True, return_lse=True, fold=True)


def test_grouped_query_heads_fold_too() -> None:
    """GQA (two query heads on one K/V head) folded, at the nvgpu level, persistent."""
    seq = 300
    q, k, v = inputs(seq)
    k, v = k[:1], v[:1]
    expected = np.zeros_like(q)
    run_kernel(attention.tile_module(HEAD_DIM, "f16", True, group=2),
               attention.grid(seq, HEADS), [q, k, v, expected, seq, SCALE])  # fmt: skip
    module = attention.tile_module(HEAD_DIM, "f16", True, group=2, fold=True)
    options = CompileOptions(stages=3, mma_depth=1, consumers=2, persistent=True)
    grid, extra = launch(seq, persistent=True)
    o = np.full_like(q, np.nan)
    run_nvgpu_kernel(lower_to_nvgpu_level(module, options), grid, [q, k, v, o, seq, SCALE, *extra])
    close(o, expected)
