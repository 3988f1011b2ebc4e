"""Named barriers and TMA-store staging at the nvgpu level: mutations planted into the GEMM
with a TMA-store epilogue and two consumers (persistent: the staging buffer is reused tile
after tile), into the ping-pong attention (two consumer warpgroups taking MMA turns), into
the GEMM that also sums the rows of A (tests/corpus/proved.py: every consumer thread reads
each A slot into registers, so thread 0 releases it after the slot-read barrier) and into
the kernels of proved.py whose named barriers, staging and TMA store sit under a uniform
condition (`if K > 0:`, `if M > 0:`) or in the second loop of a ring's sequence (a two-loop
RMSnorm), by `tawa_xdsl.verify.mutations.NAMED_BARRIER_MUTATIONS`.

Every broken mutation is rejected by the proof (`verify/named_barriers.py`: a refusal naming
the op or a counterexample, never "proved") and by the nvgpu interpreter (an error, a
deadlock or a wrong result under some schedule), unless `Mutation.unseen` says why no
interpreter can observe it. Every safe mutation is proved and computes the numpy result.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.interp.dtypes import InterpreterError
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.interp.scheduler import PriorityPolicy
from tawa_xdsl.kernels import attention
from tawa_xdsl.kernels.gemm import gemm_tile_ir
from tawa_xdsl.runtime.dispatch import host_descriptor, is_descriptor
from tawa_xdsl.transforms.legalize_nvgpu import LegalizeNvgpuPass
from tawa_xdsl.transforms.lower_aref import LowerArefPass
from tawa_xdsl.transforms.lower_to_nvgpu import LowerToNvgpuPass
from tawa_xdsl.transforms.persistent import persistent_launch
from tawa_xdsl.transforms.warp_specialize import WarpSpecializePass
from tawa_xdsl.verify.check import verify_module
from tawa_xdsl.verify.extract import ExtractionError
from tawa_xdsl.verify.mutations import NAMED_BARRIER_MUTATIONS
from tests.corpus import proved

KERNELS = {
    "tma_pgemm": CompileOptions(
        stages=2, mma_depth=2, consumers=2, persistent=True, epilogue="tma", verify=False
    ),
    "tma_gemm": CompileOptions(stages=3, mma_depth=1, consumers=2, epilogue="tma", verify=False),
    "pingpong": CompileOptions(stages=2, mma_depth=1, consumers=2, pingpong=True, verify=False),
    "pingpong_causal": CompileOptions(
        stages=2, mma_depth=1, consumers=2, pingpong=True, persistent=True, verify=False
    ),
    # the rotated loop: the second consumer hands the turn back under `iv + step < ub`
    "rotated_pingpong": CompileOptions(
        stages=2, mma_depth=1, consumers=2, pingpong=True, rotate=True, verify=False
    ),
    # 192 rows: the turns go round three warpgroups, the third hands the turn back to the first
    "rotated_pingpong3": CompileOptions(
        stages=2, mma_depth=1, consumers=3, pingpong=True, rotate=True, verify=False
    ),
}
TURNS = ["pingpong", "pingpong_causal", "rotated_pingpong", "rotated_pingpong3"]
HAND_OFF = ["rotated_pingpong", "rotated_pingpong3"]
STAGING = ["tma_pgemm", "tma_gemm"]
ROW_SUMS = "row_sums"  # tests/corpus/proved.py, default options
ROW_SUMS_IF, TMA_ROW_SUMS_IF, COLUMN_MAX_IF = "row_sums_if", "tma_row_sums_if", "column_max_if"
RMSNORM = "rmsnorm"  # two loops over one ring, a slot-read barrier in each
DEEP_ROW_SUMS = "deep_row_sums"  # releases lagged by 3: the slot-read barrier from iteration 3 on
PROVED = {  # kernel: (its case in tests/corpus/proved.py, compile options besides the defaults)
    ROW_SUMS: ("gemm_with_row_sums", {}),
    ROW_SUMS_IF: ("gemm_with_row_sums_if_nonempty", {}),
    TMA_ROW_SUMS_IF: ("gemm_with_row_sums_if_nonempty", {"epilogue": "tma"}),
    COLUMN_MAX_IF: ("column_max_if_nonempty", {}),
    RMSNORM: ("rmsnorm_two_loops", {}),
    DEEP_ROW_SUMS: ("gemm_with_row_sums", {"mma_depth": 4, "stages": 5}),
}
SLOT_READS = [ROW_SUMS, ROW_SUMS_IF]
PLAN: dict[str, list[str]] = {
    "turn_arrive_dropped": TURNS,
    "turn_sync_dropped": TURNS,
    "turn_first_arrive_renumbered": TURNS,
    "turn_order_swapped": TURNS,
    "turn_threads_wrong": TURNS,
    "staging_threads_wrong": [*STAGING, TMA_ROW_SUMS_IF],
    "staging_sync_dropped": ["tma_pgemm"],
    "staging_written_before_wait": ["tma_pgemm"],
    "staging_store_sync_dropped": [*STAGING, TMA_ROW_SUMS_IF],
    "staging_fence_dropped": [*STAGING],
    "store_wait_dropped": ["tma_pgemm"],
    "store_wait_at_exit_dropped": [*STAGING, TMA_ROW_SUMS_IF],
    "store_wait_pending_one": ["tma_pgemm"],
    "staging_slots_shared": [*STAGING],
    "staging_barriers_merged": [*STAGING],
    "staging_barrier_renumbered": [*STAGING, TMA_ROW_SUMS_IF],
    "hand_off_guard_dropped": HAND_OFF,
    "turn_after_lookahead": HAND_OFF,
    "hand_off_arrive_dropped": HAND_OFF,
    "hand_off_bound_changed": HAND_OFF,
    "hand_off_guard_by_warpgroup": HAND_OFF,
    "hand_off_guard_not_first": HAND_OFF,
    "slot_read_sync_dropped": SLOT_READS,
    "slot_read_sync_after_release": SLOT_READS,
    "slot_read_sync_one_warpgroup": SLOT_READS,
    "slot_read_sync_threads_wrong": SLOT_READS,
    "slot_read_sync_hoisted": SLOT_READS,
    "uniform_condition_on_warpgroup": [ROW_SUMS_IF, TMA_ROW_SUMS_IF],
    "uniform_condition_differs_from_producer": [ROW_SUMS_IF, COLUMN_MAX_IF],
    "uniform_sync_threads_doubled": [ROW_SUMS_IF, COLUMN_MAX_IF],
    "staging_sync_one_warpgroup": ["tma_pgemm"],
    "exit_wait_under_negated_condition": [TMA_ROW_SUMS_IF],
    "exit_wait_inside_condition": [TMA_ROW_SUMS_IF],
    "second_loop_sync_dropped": [RMSNORM],
    "second_loop_sync_one_warpgroup": [RMSNORM],
    "second_loop_extra_sync_one_warpgroup": [RMSNORM],
    "second_loop_sync_threads_wrong": [RMSNORM],
    "second_loop_sync_after_loop": [RMSNORM],
    "second_loop_sync_renumbered": [RMSNORM],
    "lagged_turn_given_twice": [DEEP_ROW_SUMS],
}
CASES = [(name, kernel) for name, kernels in PLAN.items() for kernel in kernels]


def test_plan_covers_every_mutation() -> None:
    assert set(PLAN) == set(NAMED_BARRIER_MUTATIONS)


def _tile_module(name: str) -> ModuleOp:
    if name in STAGING:
        return gemm_tile_ir(128, 64, 64)
    rows = 192 if name == "rotated_pingpong3" else 128
    return attention.tile_module(64, causal=name == "pingpong_causal", block_n=64, block_m=rows)


@pytest.fixture(scope="module")
def lowered() -> dict[str, str]:
    out = {}
    for name, options in KERNELS.items():
        ir: dict[str, str] = {}
        # the single masked key loop the audit mutated: not split (split_loops=False)
        lower_to_nvgpu_level(_tile_module(name), replace(options, split_loops=False), ir)
        out[name] = ir["nvgpu"]
    for name, (case, changes) in PROVED.items():
        compiled = CORPUS[case].compile(np.random.default_rng(0))
        ir = {}
        options = replace(compiled.options, verify=False, **changes)
        lower_to_nvgpu_level(compiled.module, options, ir)
        out[name] = ir["nvgpu"]
    return out


CORPUS = {case.name: case for case in proved.CASES}


def _inputs(name: str) -> tuple[Any, list[Any], np.ndarray, int]:
    """(grid, arguments, numpy answer, index of the output argument)."""
    rng = np.random.default_rng(0)
    if name in PROVED:
        run = CORPUS[PROVED[name][0]].launch(rng)
        result, answer = run.expected[0]
        out = next(k for k, a in enumerate(run.args) if is_descriptor(a) and a.base is result)
        args = [host_descriptor(a) if is_descriptor(a) else a for a in run.args]
        return run.grid, args, answer, out
    options = KERNELS[name]
    if name in STAGING:
        m, n, k = (256 if options.persistent else 128), 128, 192
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((n, k)).astype(np.float16)
        grid: Any = ((m // 128) * (n // 64),)
        expected = a.astype(np.float32) @ b.astype(np.float32).T
        args = [a, b, np.zeros((m, n), np.float16), m, n, k]
        out, per_sm = 2, 2
    else:
        heads, seq, dim = (2 if options.persistent else 1), 128, 64
        q, k_, v = (rng.standard_normal((heads, seq, dim)).astype(np.float16) for _ in range(3))
        scores = q.astype(np.float32) @ k_.astype(np.float32).transpose(0, 2, 1) / 8
        if name == "pingpong_causal":
            scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        expected = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float32)
        grid = attention.grid(seq, heads, 192 if name == "rotated_pingpong3" else 128)
        args = [q, k_, v, np.zeros((heads, seq, dim), np.float16), seq, np.float32(0.125)]
        out, per_sm = 3, 1
    if options.persistent:
        grid, extra = persistent_launch(grid, per_sm)
        args += extra
    return grid, args, expected, out


def stores_last() -> PriorityPolicy:
    """A schedule that lets a TMA store read its slot only when nothing else can move."""
    return PriorityPolicy(lambda task: not task.name.startswith("TMA store"))


def _oracle(module: ModuleOp, name: str, schedules: list[Any]) -> str:
    """What the nvgpu interpreter shows under the first schedule that goes wrong, "" if none."""
    for schedule in schedules:
        grid, args, expected, out = _inputs(name)
        try:
            run_nvgpu_kernel(module, grid, args, schedule=schedule)
        except InterpreterError as error:
            return f"{type(error).__name__}: {str(error).splitlines()[0]}"
        result = args[out].base if is_descriptor(args[out]) else args[out]
        if not np.allclose(result.astype(np.float32), expected, rtol=2e-2, atol=2e-2):
            return f"wrong result under schedule {schedule!r}"
    return ""


def _proof(module: ModuleOp) -> str:
    """'refused: ...', 'counterexample: ...' or 'proved'."""
    try:
        verdicts = verify_module(module)
    except ExtractionError as error:
        return f"refused: {error}"
    failed = [v for v in verdicts if not v.proved]
    return f"counterexample: {failed[0].summary()}" if failed else "proved"


def _mutant(lowered: dict[str, str], name: str, kernel: str) -> ModuleOp:
    module = parse_module(make_context(), lowered[kernel], f"{kernel}.nvgpu.mlir")
    NAMED_BARRIER_MUTATIONS[name].apply(module)
    return module


@pytest.mark.parametrize(("name", "kernel"), CASES, ids=lambda x: str(x))
def test_named_barrier_mutation(lowered, name: str, kernel: str) -> None:
    mutation = NAMED_BARRIER_MUTATIONS[name]
    module = _mutant(lowered, name, kernel)
    proof = _proof(module)
    if not mutation.broken:
        assert proof == "proved", proof
        shown = _oracle(module, kernel, ["random", "producer-first"])
        assert not shown, shown
        return
    assert proof != "proved", f"{name} ({kernel}) was proved"
    if proof.startswith("refused"):
        assert ".mlir:" in proof, f"the refusal names no place: {proof}"
    if mutation.unseen:
        return  # the mutation says why no interpreter shows it
    shown = _oracle(module, kernel, [stores_last(), "round-robin", 0, 1, 2])
    assert shown, f"{name} ({kernel}): no schedule made the interpreter fail"


def test_unmutated_kernels_are_proved_and_run(lowered) -> None:
    for name in [*KERNELS, *PROVED]:
        module = parse_module(make_context(), lowered[name], f"{name}.nvgpu.mlir")
        assert _proof(module) == "proved", name
        assert not _oracle(module, name, ["random"]), name


def test_turns_with_a_one_slot_ring_deadlock() -> None:
    """With one slot per ring the ping-pong turns close a cycle with the rings: the second
    consumer waits for the next K/V use before it hands the turn back, and the producer
    can put that use only after the first consumer, waiting for its turn, releases the
    current one. The proof finds it (three uses); the interpreter deadlocks at seq = 192.
    (ring-depth refuses `stages=1` with ping-pong, so the kernel is built by lowering
    one-slot rings with ping-pong turns behind its back.)"""
    module = attention.tile_module(64, block_n=64, block_m=128)
    ctx = make_context()
    for step in [
        WarpSpecializePass(stages=1, mma_depth=1, consumers=2),
        LowerArefPass(),
        LowerToNvgpuPass(pingpong=True),
        LegalizeNvgpuPass(),
    ]:
        step.apply(ctx, module)
    proof = _proof(module)
    assert proof.startswith("counterexample") and "with the rings" in proof, proof
    assert "deadlock" in proof, proof
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 192, 64)).astype(np.float16) for _ in range(3))
    args = [q, k, v, np.zeros((1, 192, 64), np.float16), 192, np.float32(0.125)]
    with pytest.raises(InterpreterError, match="deadlock"):
        run_nvgpu_kernel(module, attention.grid(192, 1), args, schedule="round-robin")
