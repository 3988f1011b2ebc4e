"""The library attention under both key-loop schedules, at every level against the tile level.

The library's one masked key loop is split by the compiler (split-masked-loops, on by default):
the blocks no mask touches in a loop of their own, then the masked ones, the rings' counter
continuing (test_split_masked_loops.py checks the split itself).

`compile_attention(rotate=True)` (the default) rotates the loop (software-pipeline's
rotation: QK^T(j+1) and P V(j) issued back to back, the softmax of j+1 under P V(j), P held
as 16-bit wgmma A registers across the back edge); `rotate=False` keeps the softmax of j
under QK^T(j+1). Both must compute what the tile program computes: at the aref level (warp
groups as coroutines, under several interleavings), the mbarrier level (after lower-aref)
and the nvgpu level (every thread's fragments, wgmma retired by wait_group), with and
without ping-pong; and the protocol proof must accept both (compile_to_ptx proves it).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from xdsl.utils.exceptions import PassFailedException

from tawa_xdsl.compiler import CompileOptions, compile_to_ptx, lower_to_nvgpu_level
from tawa_xdsl.dialects import make_context
from tawa_xdsl.interp.aref import run_warp_specialized
from tawa_xdsl.interp.mbarrier import run_mbarrier_kernel
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.kernels import attention
from tawa_xdsl.tools import tawa_verify
from tawa_xdsl.transforms.lower_aref import LowerArefPass
from tawa_xdsl.transforms.warp_specialize import WarpSpecializePass
from tawa_xdsl.verify.check import check_module

HEADS, HEAD_DIM, SCALE = 2, 64, 0.125
OPTIONS = CompileOptions(stages=3, mma_depth=1, consumers=2, verify=False)


def inputs(seq: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seq)
    return [rng.standard_normal((HEADS, seq, HEAD_DIM)).astype(np.float16) for _ in "qkv"]


def tile_level(module, seq: int) -> np.ndarray:
    q, k, v = inputs(seq)
    o = np.zeros_like(q)
    run_kernel(module, attention.grid(seq, HEADS), [q, k, v, o, seq, SCALE])
    return o


def close(got: np.ndarray, expected: np.ndarray) -> None:
    # exp2 is the GPU's below the tile level: ex2.approx, and at d = 64 emulate-exp2's
    # polynomial for 2 of 8 scores (7.5e-5 relative), which moves a row whose weighted values
    # cancel to near zero by up to 7.5e-5 * 2 * max |v|
    np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float32),
                               rtol=2**-10, atol=2**-10)  # fmt: skip


def aref_module(module, rotate: bool):
    result = module.clone()
    WarpSpecializePass(stages=3, mma_depth=1, consumers=2, rotate=rotate).apply(
        make_context(), result
    )
    return result


# 100: one key block (the loop's only iteration has no lookahead); 300 and 257: a ragged
# last block, causal and not.
@pytest.mark.parametrize("seq", [100, 257, 300])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("rotate", [True, False], ids=["rotated", "straightforward"])
def test_aref_and_mbarrier_levels_match_the_tile_level(rotate: bool, causal: bool, seq: int):
    module = attention.tile_module(HEAD_DIM, "f16", causal)
    expected = tile_level(module, seq)
    ws = aref_module(module, rotate)
    lowered = ws.clone()
    LowerArefPass().apply(make_context(), lowered)
    q, k, v = inputs(seq)
    for schedule in ("random", "producer-first", "consumer-first"):
        o = np.zeros_like(q)
        run_warp_specialized(ws, attention.grid(seq, HEADS), [q, k, v, o, seq, SCALE],
                             schedule=schedule)  # fmt: skip
        close(o, expected)
    o = np.zeros_like(q)
    run_mbarrier_kernel(lowered, attention.grid(seq, HEADS), [q, k, v, o, seq, SCALE])
    close(o, expected)


@pytest.mark.parametrize("pingpong", [False, True], ids=["one-turn", "pingpong"])
# 256: the masked loop runs no iteration; 300 and 257: one (a ragged block, the diagonal)
@pytest.mark.parametrize(("causal", "seq"), [(False, 256), (False, 300), (True, 257), (True, 100)])
@pytest.mark.parametrize("rotate", [True, False], ids=["rotated", "straightforward"])
def test_nvgpu_level_matches_the_tile_level(rotate: bool, causal: bool, seq: int, pingpong):
    module = attention.tile_module(HEAD_DIM, "f16", causal)
    expected = tile_level(module, seq)
    options = dataclasses.replace(OPTIONS, rotate=rotate, pingpong=pingpong)
    nvgpu = lower_to_nvgpu_level(module, options)
    q, k, v = inputs(seq)
    o = np.zeros_like(q)
    run_nvgpu_kernel(nvgpu, attention.grid(seq, HEADS), [q, k, v, o, seq, SCALE])
    close(o, expected)


@pytest.mark.parametrize("pingpong", [False, True], ids=["one-turn", "pingpong"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_proof_accepts_the_rotated_schedule(causal: bool, pingpong: bool) -> None:
    """compile_to_ptx proves the nvgpu IR it prints (a ProtocolError otherwise)."""
    options = dataclasses.replace(OPTIONS, verify=True, rotate=True, pingpong=pingpong)
    kernel = compile_to_ptx(attention.tile_module(128, "bf16", causal), options)
    # one rotated loop over the unmasked key blocks, one over the masked ones
    assert kernel.ptx.count("wgmma.wait_group.sync.aligned 1;") == 2


def test_tawa_verify_proves_the_rotated_pingpong_at_the_nvgpu_level(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rotated loop hands the turn back under `iv + step < ub` (every iteration but the
    last): `tawa-verify` on the printed nvgpu IR proves the rings and the named barriers."""
    options = dataclasses.replace(OPTIONS, rotate=True, pingpong=True)
    ir: dict[str, str] = {}
    lower_to_nvgpu_level(attention.tile_module(HEAD_DIM, "f16"), options, ir)
    path = tmp_path / "attention.nvgpu.mlir"
    path.write_text(ir["nvgpu"])
    assert tawa_verify.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "proved: named barriers: 2 named barrier(s)" in out, out
    assert not [line for line in out.splitlines() if not line.startswith("proved:")], out


@pytest.mark.parametrize("mma_depth", [2, 3])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_rotated_loop_keeps_its_releases_at_any_mma_depth(causal: bool, mma_depth: int):
    """The rotation decides when P V retires (`tawa.in_flight`, `tawa.mma_wait`); mma-lag
    leaves that loop's releases alone, so MMA depth 2 or 3 (the launch default is 2) compiles,
    is proved, and prints what depth 1 prints. Lagged, the V release freed a slot for a wgmma
    the schedule no longer waited for, and the proof refused the compiler's own output."""
    options = dataclasses.replace(OPTIONS, verify=True, rotate=True)
    module = attention.tile_module(HEAD_DIM, "f16", causal)
    deep = compile_to_ptx(module, dataclasses.replace(options, mma_depth=mma_depth))
    assert deep.ptx == compile_to_ptx(module, dataclasses.replace(options, mma_depth=1)).ptx
    assert "lag(" not in deep.ir["aref"] and "aref.drain" not in deep.ir["aref"]


@pytest.mark.parametrize(("consumers", "rotate"), [(1, True), (3, False)])
def test_pingpong_needs_two_or_three_consumer_warpgroups(consumers: int, rotate: bool) -> None:
    """The turns go round two or three warpgroups of a rotated loop (an unrotated loop's
    alternate between two): any other count is refused in one line naming the kernel (it was
    silently left without turns)."""
    module = attention.tile_module(64, "f16", block_m=64 * consumers)
    options = CompileOptions(
        stages=2, mma_depth=1, consumers=consumers, pingpong=True, rotate=rotate
    )
    with pytest.raises(PassFailedException) as info:
        lower_to_nvgpu_level(module, options)
    message = str(info.value)
    assert len(message.splitlines()) == 1, message
    assert "error: lower-to-nvgpu: " in message and f"has {consumers}" in message, message
    assert "attention.py:" in message


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_three_warpgroups_take_turns_proved_and_computing_the_tile_program(causal: bool) -> None:
    """192 rows over three consumer warpgroups, the rotated loop's issue in turns 0, 1, 2
    (FA3's scheduler barrier): the named barriers and rings are proved, and the nvgpu level
    computes what the tile program computes."""
    module = attention.tile_module(HEAD_DIM, "f16", causal, block_m=192)
    options = CompileOptions(stages=2, consumers=3, pingpong=True)
    lowered = lower_to_nvgpu_level(module, dataclasses.replace(options, verify=False))
    verdicts = check_module(lowered)
    assert all(v.proved for v in verdicts) and any(v.method == "named" for v in verdicts)
    syncs = {
        op.barrier_id.value.data for op in lowered.walk() if op.name == "nvgpu.named_barrier_sync"
    }
    assert len(syncs) == 3, syncs
    for seq in (100, 300):
        q, k, v = inputs(seq)
        o = np.zeros_like(q)
        run_nvgpu_kernel(lowered, attention.grid(seq, HEADS, 192), [q, k, v, o, seq, SCALE])
        close(o, tile_level(module, seq))
