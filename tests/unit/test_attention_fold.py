"""fold-grid on causal attention (`CompileOptions.fold`): each program runs the kernel for its
row block and its mirror's, so the longest row block pairs with the shortest and every program
walks the same number of key blocks (the middle block of an odd count alone). The folded kernel
computes what the tile program computes at the aref, mbarrier and nvgpu levels, launched per
pair and persistent, GQA too, and the protocol proof accepts it (the pair loop is a loop of one
or two trips around the whole body: the rings' counters run on through it).
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
from tawa_xdsl.transforms.fold_grid import fold_launch
from tawa_xdsl.transforms.lower_aref import LowerArefPass
from tawa_xdsl.transforms.persistent import persistent_launch
from tawa_xdsl.transforms.warp_specialize import WarpSpecializePass
from tawa_xdsl.verify.check import check_module
from tests.unit.test_attention_schedules import HEAD_DIM, HEADS, SCALE, close, inputs, tile_level


def launch(seq: int, persistent: bool) -> tuple[tuple[int, ...], list[int]]:
    """The launch grid of the folded kernel and its trailing arguments (as
    `CompiledKernel.grid` maps them; persistent over 3 programs)."""
    pairs, extra = fold_launch(list(attention.grid(seq, HEADS)))
    if persistent:
        grid, walk = persistent_launch(pairs, 3)
        return grid, extra + walk
    return tuple(pairs), extra


def test_the_launch_halves_the_row_blocks() -> None:
    assert fold_launch([8, 4, 1]) == ([4, 4, 1], [8])
    assert fold_launch([9, 4, 1]) == ([5, 4, 1], [9])  # the middle block alone
    assert fold_launch([1, 4, 1]) == ([1, 4, 1], [1])


# 100: one row block (its mirror is itself); 300: three (the middle alone); 520: five
@pytest.mark.parametrize("persistent", [False, True], ids=["per_pair", "persistent"])
@pytest.mark.parametrize("seq", [100, 300, 520])
def test_every_level_matches_the_tile_level(seq: int, persistent: bool) -> None:
    module = attention.tile_module(HEAD_DIM, "f16", True)
    expected = tile_level(module, seq)
    grid, extra = launch(seq, persistent)
    q, k, v = inputs(seq)
    args = lambda o: [q, k, v, o, seq, SCALE, *extra]  # noqa: E731
    ws = module.clone()
    WarpSpecializePass(stages=3, mma_depth=1, consumers=2, fold=True,
                       persistent=persistent).apply(make_context(), ws)  # fmt: skip
    for schedule in ("random", "producer-first", "consumer-first"):
        o = np.full_like(q, np.nan)
        run_warp_specialized(ws, grid, args(o), schedule=schedule)
        close(o, expected)
    LowerArefPass().apply(make_context(), ws)
    o = np.full_like(q, np.nan)
    run_mbarrier_kernel(ws, grid, args(o))
    close(o, expected)
    options = CompileOptions(stages=3, mma_depth=1, consumers=2, fold=True, persistent=persistent)
    o = np.full_like(q, np.nan)
    run_nvgpu_kernel(lower_to_nvgpu_level(module, options), grid, args(o))
    close(o, expected)


@pytest.mark.parametrize("persistent", [False, True], ids=["per_pair", "persistent"])
def test_tawa_verify_proves_every_ring(persistent: bool) -> None:
    module = attention.tile_module(128, "bf16", True)
    options = CompileOptions(stages=3, mma_depth=1, consumers=2, fold=True, persistent=persistent)
    verdicts = check_module(lower_to_nvgpu_level(module, options))
    assert verdicts and all(v.proved for v in verdicts), [v.summary() for v in verdicts]


def test_grouped_query_heads_fold_too() -> None:
    """GQA (two query heads on one K/V head) folded, at the nvgpu level, persistent."""
    seq = 300
    q, k, v = inputs(seq)
    k, v = k[:1], v[:1]
    module = attention.tile_module(HEAD_DIM, "f16", True, group=2)
    expected = np.zeros_like(q)
    run_kernel(module, attention.grid(seq, HEADS), [q, k, v, expected, seq, SCALE])
    options = CompileOptions(stages=3, mma_depth=1, consumers=2, fold=True, persistent=True)
    grid, extra = launch(seq, persistent=True)
    o = np.full_like(q, np.nan)
    run_nvgpu_kernel(lower_to_nvgpu_level(module, options), grid, [q, k, v, o, seq, SCALE, *extra])
    close(o, expected)


def test_a_kernel_that_returns_values_is_refused_in_one_line() -> None:
    from xdsl.parser import Parser

    from tawa_xdsl.diagnostics import TawaError
    from tawa_xdsl.transforms.fold_grid import FoldGridPass

    text = """
    func.func @k(%n: i32) -> i32 {
      func.return %n : i32
    }
    """
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(TawaError, match="fold-grid: @k must return nothing to be folded"):
        FoldGridPass().apply(make_context(), module)
