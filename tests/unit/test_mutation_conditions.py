"""Rings under a uniform condition inside a loop of tiles and rings used by some loops of a
sequence, at the nvgpu level: mutations planted into the persistent kernels of
tests/corpus/proved.py whose K loop sits under `if K > 0:` (the GEMM with row sums: the same
value in every tile) or `if pid_m * BLOCK_M < M:` (a GEMM on a grid with more row blocks than
A: per tile, each program skipping a tile between two it computes), by
`tawa_xdsl.verify.mutations.TILE_CONDITION_MUTATIONS` (among them a counter of the tile
index times the trip count, which counts the uses of the tiles the condition skips: proved
before the extraction refused it), and into the two-loop RMSnorm (its x
ring through both loops, its weight ring through the second: moved into the first loop in one
role only, each ring alone stays correct and the rings together deadlock), by
`SOME_LOOPS_MUTATIONS`.

Every broken mutation is rejected by the proof (a refusal naming the op in one line, or a
counterexample: never "proved") and shown by the nvgpu interpreter (an error, a deadlock or a
result differing from numpy under some schedule; a persistent kernel on two programs of
several tiles each); the safe one (the weight ring's wait moved before the x ring's) is
proved, by the certificate and the explicit search, and computes the numpy result.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from tawa_xdsl.compiler import lower_to_nvgpu_level
from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.interp.dtypes import InterpreterError
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.verify.check import verify_module
from tawa_xdsl.verify.extract import ExtractionError
from tawa_xdsl.verify.mutations import SOME_LOOPS_MUTATIONS, TILE_CONDITION_MUTATIONS
from tests.corpus import proved
from tests.corpus.case import nvgpu_launch

ROW_SUMS_IF = "gemm_with_row_sums_if_nonempty_persistent"  # `if K > 0:` in every tile
ROWS_BELOW = "gemm_rows_below_persistent"  # `if pid_m * BLOCK_M < M:`, per tile
RMSNORM = "rmsnorm_two_loops"  # x ring in both loops, weight ring in the second
UNLAGGED = "rows_below_unlagged"  # ROWS_BELOW with MMA depth 1: releases without lag guards
KERNELS = {  # kernel: (its case in tests/corpus/proved.py, compile options besides its own)
    ROW_SUMS_IF: (ROW_SUMS_IF, {}),
    ROWS_BELOW: (ROWS_BELOW, {}),
    RMSNORM: (RMSNORM, {}),
    UNLAGGED: (ROWS_BELOW, {"mma_depth": 1}),
}
CORPUS = {case.name: case for case in proved.CASES}
MUTATIONS = {**TILE_CONDITION_MUTATIONS, **SOME_LOOPS_MUTATIONS}
PLAN: dict[str, list[str]] = {
    "tile_if_taken_keeps_start": [ROW_SUMS_IF, ROWS_BELOW],
    "tile_if_untaken_advances": [ROWS_BELOW],  # with `K > 0` no tile after a skipped one runs
    "tile_if_differs_between_tiles": [ROW_SUMS_IF, ROWS_BELOW],
    "tile_if_producer_on_tile": [ROW_SUMS_IF, ROWS_BELOW],
    "tile_if_counter_by_tile_index": [UNLAGGED],
    "ring_put_in_first_loop": [RMSNORM],
    "ring_taken_in_first_loop": [RMSNORM],
    "ring_wait_before_other_rings": [RMSNORM],
}
CASES = [(name, kernel) for name, kernels in PLAN.items() for kernel in kernels]


def test_plan_covers_every_mutation() -> None:
    assert set(PLAN) == set(MUTATIONS)


@pytest.fixture(scope="module")
def lowered() -> dict[str, str]:
    out = {}
    for name, (case, changes) in KERNELS.items():
        compiled = CORPUS[case].compile(np.random.default_rng(0))
        ir: dict[str, str] = {}
        options = replace(compiled.options, verify=False, **changes)
        lower_to_nvgpu_level(compiled.module, options, ir)
        out[name] = ir["nvgpu"]
    return out


def _proof(module: ModuleOp) -> str:
    """'refused: ...', 'counterexample: ...' or 'proved'."""
    try:
        verdicts = verify_module(module)
    except ExtractionError as error:
        return f"refused: {error}"
    failed = [v for v in verdicts if not v.proved]
    return f"counterexample: {failed[0].summary()}" if failed else "proved"


def _oracle(module: ModuleOp, name: str, schedules: list) -> str:
    """What the nvgpu interpreter shows under the first schedule that goes wrong, "" if none."""
    for schedule in schedules:
        run = CORPUS[KERNELS[name][0]].launch(np.random.default_rng(1))
        grid, args = nvgpu_launch(run, run.kwargs.get("persistent", False))
        try:
            run_nvgpu_kernel(module, grid, args, schedule=schedule)
        except InterpreterError as error:
            return f"{type(error).__name__}: {str(error).splitlines()[0]}"
        for out, answer in run.expected:
            if not np.allclose(out.astype(np.float32), answer, rtol=2e-2, atol=2e-2):
                return f"wrong result under schedule {schedule!r}"
    return ""


def _parse(lowered: dict[str, str], kernel: str) -> ModuleOp:
    return parse_module(make_context(), lowered[kernel], f"{kernel}.nvgpu.mlir")


@pytest.mark.parametrize(("name", "kernel"), CASES, ids=lambda x: str(x))
def test_mutation(lowered, name: str, kernel: str) -> None:
    module = _parse(lowered, kernel)
    mutation = MUTATIONS[name]
    mutation.apply(module)
    proof = _proof(module)
    if not mutation.broken:
        assert proof == "proved", proof
        explicit = [v.summary() for v in verify_module(module, method="explicit")]
        assert all(line.startswith("proved") for line in explicit), explicit
        shown = _oracle(module, kernel, ["random", "producer-first", "consumer-first"])
        assert not shown, shown
        return
    assert proof != "proved", f"{name} ({kernel}) was proved"
    if proof.startswith("refused"):
        assert ".mlir:" in proof and "\n" not in proof, proof
    shown = _oracle(module, kernel, ["producer-first", "consumer-first", "round-robin", 0, 1])
    assert shown, f"{name} ({kernel}): no schedule made the interpreter fail"


@pytest.mark.parametrize("kernel", KERNELS)
def test_unmutated_kernels_are_proved_and_run(lowered, kernel: str) -> None:
    module = _parse(lowered, kernel)
    assert _proof(module) == "proved", kernel
    if not CORPUS[KERNELS[kernel][0]].launch(np.random.default_rng(0)).kwargs.get("persistent"):
        # (the explicit search of a persistent ring with lagged releases over two consumer
        # warpgroups takes 40 s; test_verify_crosscheck compares both on persistent rings)
        explicit = [v.summary() for v in verify_module(module, method="explicit")]
        assert all(line.startswith("proved") for line in explicit), explicit
    assert not _oracle(module, kernel, ["random"]), kernel
