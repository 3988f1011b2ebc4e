"""software-pipeline{rotate peel}: the rotated key loop with its last iteration's P V peeled
after the loop (`rotate_peeled`). It computes what the tile program computes at the aref,
mbarrier and nvgpu levels, and tawa-verify proves its rings, alone and together (the
extractor reads the loop to `ub - step` and the stage after it as the loop to `ub`).
"""

from __future__ import annotations

import numpy as np
import pytest

from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level, pipeline
from tawa_xdsl.diagnostics import TawaError, verify_module
from tawa_xdsl.dialects import aref, make_context
from tawa_xdsl.interp.aref import run_warp_specialized
from tawa_xdsl.interp.mbarrier import run_mbarrier_kernel
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.kernels import attention
from tawa_xdsl.transforms.lower_aref import LowerArefPass
from tawa_xdsl.transforms.warp_specialize import WarpSpecializePass
from tawa_xdsl.verify.check import check_module
from tests.unit.test_attention_schedules import HEAD_DIM, HEADS, SCALE, close, inputs, tile_level

OPTIONS = CompileOptions(stages=3, mma_depth=1, consumers=2, verify=False)


def peeled(module):
    """The tile module warp-specialized with the peeled rotation."""
    result = module.clone()
    WarpSpecializePass(stages=3, mma_depth=1, consumers=2, rotate=True, peel=True).apply(
        make_context(), result
    )
    return result


def nvgpu_level(module):
    """`pipeline(OPTIONS)` with the peeled rotation, on a copy of `module`."""
    lowered = peeled(module)
    ctx = make_context()
    for _, step in pipeline(OPTIONS)[1:]:
        step.apply(ctx, lowered)
        verify_module(lowered)
    return lowered


def test_the_loop_runs_to_ub_minus_step_with_no_guard_and_p_v_after_it() -> None:
    ws = peeled(attention.tile_module(HEAD_DIM, "f16", False))
    loops = [op for op in ws.walk() if op.name == "scf.for" and "tawa.in_flight" in str(op)]
    assert loops
    for loop in loops:
        assert loop.ub.owner.name == "arith.subi" and loop.ub.owner.rhs is loop.step
        assert not any(op.name == "scf.if" for op in loop.body.block.ops)
        tail = loop.next_op
        assert tail.name == "scf.if" and aref.is_peeled_last(tail)
        dots = [op for op in tail.walk() if op.name == "tile.dot"]
        assert len(dots) == 1 and aref.IN_FLIGHT_ATTR not in dots[0].attributes


# 100: one key block (the loop runs no iteration, the epilogue the only P V); 257 and 300:
# a ragged last block, causal and not.
@pytest.mark.parametrize("seq", [100, 257, 300])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_every_level_matches_the_tile_level(causal: bool, seq: int) -> None:
    module = attention.tile_module(HEAD_DIM, "f16", causal)
    expected = tile_level(module, seq)
    ws = peeled(module)
    q, k, v = inputs(seq)
    args = lambda o: [q, k, v, o, seq, SCALE]  # noqa: E731
    for schedule in ("random", "producer-first", "consumer-first"):
        o = np.zeros_like(q)
        run_warp_specialized(ws, attention.grid(seq, HEADS), args(o), schedule=schedule)
        close(o, expected)
    lowered = ws.clone()
    LowerArefPass().apply(make_context(), lowered)
    o = np.zeros_like(q)
    run_mbarrier_kernel(lowered, attention.grid(seq, HEADS), args(o))
    close(o, expected)
    o = np.zeros_like(q)
    run_nvgpu_kernel(nvgpu_level(module), attention.grid(seq, HEADS), args(o))
    close(o, expected)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tawa_verify_proves_every_ring_and_the_rings_together(causal: bool) -> None:
    verdicts = check_module(nvgpu_level(attention.tile_module(128, "bf16", causal)))
    assert verdicts and all(v.proved for v in verdicts), [v.summary() for v in verdicts]
    assert any(v.method == "composition" for v in verdicts)


def test_peel_with_pingpong_is_refused_in_one_line() -> None:
    """Ping-pong's turns take the guarded rotation (the named-barrier proof does not model a
    loop to `ub - step`): asked for both, the compiler says so, naming the kernel."""
    module = attention.tile_module(HEAD_DIM, "f16", False)
    with pytest.raises(TawaError) as error:
        lower_to_nvgpu_level(module, CompileOptions(consumers=2, pingpong=True, peel=True))
    message = str(error.value)
    assert "\n" not in message and "attention.py:" in message
    assert "peel and pingpong together" in message


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_tma_epilogue_matches_the_tile_level(causal: bool) -> None:
    """The peeled loop with O written by TMA stores (`epilogue="tma"`) at the nvgpu level."""
    module = attention.tile_module(HEAD_DIM, "f16", causal)
    seq = 300
    expected = tile_level(module, seq)
    q, k, v = inputs(seq)
    options = CompileOptions(stages=2, mma_depth=1, consumers=2, epilogue="tma")
    o = np.zeros_like(q)
    run_nvgpu_kernel(lower_to_nvgpu_level(module, options), attention.grid(seq, HEADS),
                     [q, k, v, o, seq, SCALE])  # fmt: skip
    close(o, expected)
