"""The attention forward compiles to PTX that ptxas accepts cleanly, for every configuration.

The library kernel `tawa_xdsl.kernels.attention` (through `compile_attention`) and the
hand-written `examples/attention*.mlir` -> tawa-warp-specialize (two consumer warpgroups,
attention pipelining) -> lower-aref -> lower-to-nvgpu -> emit-ptx -> `ptxas -arch=sm_90a -v`,
for head dim 64 and 128, causal and not, f16 and bf16, and ring depths 2 and 3. A test fails
when ptxas rejects the PTX, warns that it serialized wgmma (any reason, C7509-C7520) or ignored
setmaxnreg (C7508), or spills. Skipped only when ptxas is absent.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from xdsl.parser import Parser

from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import CompileOptions, compile_to_ptx
from tawa_xdsl.dialects import make_context
from tawa_xdsl.kernels.attention import compile_attention

EXAMPLES = Path(__file__).parents[2] / "examples"

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not on PATH")


def check(ptx: str) -> None:
    result = assemble(ptx)
    assert result.returncode == 0, result.log[-3000:]
    assert not result.forbidden(), result.forbidden()
    assert "0 bytes spill stores" in result.log, result.log


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_language_kernel_assembles(head_dim: int, causal: bool, dtype: str, stages: int) -> None:
    kernel = compile_attention(head_dim, dtype, causal, stages=stages)
    check(kernel.ptx)
    assert kernel.threads == 384  # producer + two consumer warpgroups
    assert "wgmma.mma_async.sync.aligned.m64n" in kernel.ptx
    assert f".{dtype}.{dtype} " in kernel.ptx
    assert "ex2.approx.ftz.f32" in kernel.ptx and "shfl.sync.bfly.b32" in kernel.ptx


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_three_consumer_warpgroups_assemble_clean(causal: bool) -> None:
    """192 rows at d = 64 (three consumer warpgroups at 160 registers): the masked key loop
    fits once the lookahead's undefined scores are zeroed in front of their branch (they
    were live around the loop's back edge beside the masked copy: 592 bytes spilled)."""
    kernel = compile_attention(64, "f16", causal, block_m=192)
    check(kernel.ptx)
    assert kernel.threads == 512  # producer + three consumer warpgroups


@pytest.mark.parametrize("name", ["attention.mlir", "attention_causal.mlir"])
def test_handwritten_examples_assemble(name: str) -> None:
    module = Parser(make_context(), (EXAMPLES / name).read_text()).parse_module()
    check(compile_to_ptx(module, CompileOptions(stages=2, mma_depth=2, consumers=2)).ptx)


def test_register_a_operand_feeds_pv() -> None:
    """P V reads P from registers: the RS form (four .b32 A registers, tB = 1 for V)."""
    ptx = compile_attention(64, "f16", False).ptx
    rs = [line for line in ptx.splitlines() if "wgmma.mma_async" in line and "{%" in line]
    assert any(line.count("{") == 2 and line.rstrip(";").endswith("1, 1, 1, 1") for line in rs)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_straightforward_schedule_assembles(head_dim: int, causal: bool) -> None:
    """The unrotated schedule (softmax(j) under QK^T(j+1), P V(j) waited in its iteration)
    stays available for the bench: it assembles as cleanly."""
    ptx = compile_attention(head_dim, "f16", causal, rotate=False).ptx
    check(ptx)
    loop = loop_body(ptx)
    commits = [i for i, line in enumerate(loop) if "wgmma.commit_group" in line]
    assert len(commits) == 2 and "wait_group.sync.aligned 0" in loop[commits[1] + 1]


def loop_body(ptx: str) -> list[str]:
    """The lines of the consumer's key loop: the last `$L_for` label to its back branch."""
    lines = ptx.splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("$L_for_"))
    label = lines[start].rstrip(":")
    end = next(i for i in range(start, len(lines)) if f"bra.uni {label};" in lines[i])
    return lines[start:end]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_rotated_loop_issues_both_mmas_before_waiting(head_dim: int, causal: bool) -> None:
    """The rotated loop: QK^T(j+1) and P V(j) committed back to back with no wait between,
    then `wait_group 1` (QK^T(j+1) done, P V(j) in flight) before any ex2 of the softmax,
    `wait_group 0` after it; nothing in flight at the back edge."""
    loop = loop_body(compile_attention(head_dim, "f16", causal).ptx)
    commits = [i for i, line in enumerate(loop) if "wgmma.commit_group" in line]
    waits = [i for i, line in enumerate(loop) if "wgmma.wait_group" in line]
    ex2 = [i for i, line in enumerate(loop) if "ex2.approx" in line]
    assert len(commits) == 2 and not any(commits[0] < w < commits[1] for w in waits)
    first = min(w for w in waits if w > commits[1])
    assert loop[first].strip() == "wgmma.wait_group.sync.aligned 1;"
    assert first < min(ex2)
    assert loop[max(waits)].strip() == "wgmma.wait_group.sync.aligned 0;" and max(waits) > max(ex2)


@pytest.mark.parametrize("rotate", [True, False], ids=["rotated", "straightforward"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_pingpong_assembles(head_dim: int, causal: bool, rotate: bool) -> None:
    """Ping-pong: each consumer warpgroup syncs at its own named barrier (3 or 4) once per
    iteration. Rotated: the turn is the issue of QK^T(j+1) and P V(j) (sync before the first,
    arrives after the second; warpgroup 1's first arrive before the loop: 3 arrives).
    Straightforward: from P V(j) to QK^T(j+2), plus the start and end arrives (4). Each for
    both key loops (the unmasked blocks', the masked ones')."""
    ptx = compile_attention(head_dim, "f16", causal, pingpong=True, rotate=rotate).ptx
    check(ptx)
    lines = loop_body(ptx)
    syncs = [
        i for i, line in enumerate(lines) if "bar.sync 3, 256" in line or "bar.sync 4, 256" in line
    ]
    arrives = [i for i, line in enumerate(ptx.splitlines()) if "bar.arrive" in line]
    in_loop = [i for i, line in enumerate(lines) if "bar.arrive" in line]
    rs = [i for i, line in enumerate(lines) if "wgmma.mma_async" in line and "}, {%" in line]
    ss = [i for i, line in enumerate(lines) if "wgmma.mma_async" in line and "}, {%" not in line]
    assert len(syncs) == 2 and len(arrives) == 2 * (3 if rotate else 4)
    assert max(syncs) < min(rs)
    if rotate:
        assert max(syncs) < min(ss) and min(in_loop) > max(rs)


def test_block_n_128_d128_fits_240_registers() -> None:
    """d = 128 with 128 keys per step: setmaxnreg 24/240 (chosen by set-registers from the
    tiles the rotated loop keeps), no spills."""
    ptx = compile_attention(128, "f16", False, 128).ptx
    check(ptx)
    assert "setmaxnreg.inc.sync.aligned.u32 240" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 24" in ptx


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_log_sum_exp_kernel_assembles(head_dim: int, causal: bool) -> None:
    """attn_fwd_lse: lg2.approx of the row sum, and the row vector stored by the first lane of
    each quad (two f32 stores per thread, rows r and r + 8)."""
    kernel = compile_attention(head_dim, "f16", causal, return_lse=True)
    check(kernel.ptx)
    assert "lg2.approx.ftz.f32" in kernel.ptx
    assert kernel.ptx.count("st.global.f32") == 2
    user = [p.name for p in kernel.params if not p.name.startswith("grid_")]  # persistent's
    assert user[-2:] == ["seq", "sm_scale"]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_persistent_kernel_assembles(head_dim: int, causal: bool) -> None:
    """Persistent, with the key loop split in two inside the tile loop: no spill and no
    serialized wgmma. The lookahead's undefined S gets its registers zeroed in front of each
    key loop (else ptxas keeps them live across the tile loop's back edge: C7512, ~600
    bytes spilled), and Q's ring, used once per tile, is 2 deep at d = 64 and 1 at d = 128
    (two Q tiles beside 3-deep K and V rings exceed shared memory)."""
    kernel = compile_attention(head_dim, "f16", causal, persistent=True)
    check(kernel.ptx)
    loops = [line for line in kernel.ptx.splitlines() if line.startswith("$L_for_")]
    assert len(loops) >= 3  # the tile loop and the two key loops of each warpgroup kind
    assert kernel.smem_bytes <= 232448


def test_the_lookahead_scores_are_defined_in_front_of_their_branch() -> None:
    """The guarded rotation (peel=False, as ping-pong takes it): the lookahead's else (no
    QK^T(j+1) in the last iteration) yields undefined scores: the printer zeroes their 64
    registers in front of the branch, not in it, so ptxas never sees them live around the
    loop's back edge, and nothing writes them in the else."""
    lines = compile_attention(64, "f16", False, peel=False).ptx.splitlines()
    zero = re.compile(r"\s+mov\.f32 (%acc_f32_\d+), 0f00000000;")
    found = 0
    for i, line in enumerate(lines):
        branch = re.match(r"\s+@!%p\d+ bra (\$L_else_\d+);", line)
        if not branch:
            continue
        before = []
        for previous in reversed(lines[:i]):
            if not (m := zero.match(previous)):
                break
            before.append(m.group(1))
        if len(before) < 64:
            continue
        found += 1
        start = lines.index(f"{branch.group(1)}:")
        end = next(j for j in range(start, len(lines)) if lines[j].startswith("$L_end_if_"))
        assert not any(reg in text for reg in before for text in lines[start:end])
    assert found >= 2  # the lookahead of each key loop (the split's two)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim, block_m", [(64, 192), (128, 128)])
def test_tma_epilogue_assembles_clean(head_dim: int, block_m: int, causal: bool) -> None:
    """O staged in shared memory and written by TMA stores (`epilogue="tma"`, 2-deep rings:
    d = 128 has no room for the staging beside 3-deep ones), not by st.global."""
    ptx = compile_attention(head_dim, "f16", causal, block_m=block_m, stages=2, epilogue="tma").ptx
    check(ptx)
    stores = [line for line in ptx.splitlines() if "cp.async.bulk.tensor" in line]
    assert any("global.shared::cta" in line for line in stores)
    assert not any(line.strip().startswith("st.global") for line in ptx.splitlines())
