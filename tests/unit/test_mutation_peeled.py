"""The peeled last iteration (`software-pipeline{rotate peel}`): the rotated key loop runs to
`ub - step`, and the last iteration's stage 1 (get V, P V(last), release V) follows it in an
`scf.if (lb < ub)` marked `tawa.stage = 1, tawa.peeled`. Mutations of that form
(`tawa_xdsl.verify.mutations.PEELED_MUTATIONS`) planted into attention (two key loops, each
with its peeled stages) and persistent causal attention (the counters continue from tile to
tile through them), at the mbarrier and nvgpu levels.

Every mutation is rejected by the proof (a refusal naming the op, or a counterexample: never
"proved") and shown by the interpreter of its level (an error, a deadlock, or a result
differing from numpy under some schedule, at sequence lengths whose loops run no, one and
several iterations), unless the table says why it cannot be; the unmutated kernels are
proved and compute the numpy result.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.interp.dtypes import InterpreterError
from tawa_xdsl.interp.mbarrier import run_mbarrier_kernel
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.kernels import attention
from tawa_xdsl.transforms.persistent import persistent_launch
from tawa_xdsl.verify import extract
from tawa_xdsl.verify.extract import ExtractionError, peeled_last
from tawa_xdsl.verify.mutations import PEELED_MUTATIONS
from tests.unit.test_mutation_corpus import _proof

LEVELS = ("mbarrier", "nvgpu")
OPTIONS = CompileOptions(stages=2, consumers=2, peel=True, verify=False)
KERNELS = {  # name: (causal, persistent)
    "attn": (False, False),
    "pcausal": (True, True),
}
NVGPU_ONLY = {"peel_epilogue_release_before_mma_wait", "peel_prologue_release_before_mma_wait"}
# Sequence lengths (key blocks of 64): 40 (the unmasked loop empty, the masked one a single
# block: its loop runs no iteration, its peeled stages are its only uses), 64 (one unmasked
# block, the masked loop empty) and 300 (four unmasked blocks and a ragged one).
SEQS = (40, 64, 300)
UNOBSERVED = {
    ("peel_epilogue_release_dropped", "attn"): "a program's last use of a V slot is never "
    "followed by a copy into it (the masked loop holds one key block)",
    ("peel_ring_wait_between", "pcausal"): "a causal program's masked loop always holds its "
    "diagonal blocks: the wait after it is for a use the loop took",
}
CASES = [
    (name, kernel, level)
    for name in PEELED_MUTATIONS
    for kernel in KERNELS
    for level in LEVELS
    if level == "nvgpu" or name not in NVGPU_ONLY
]


@pytest.fixture(scope="module")
def lowered() -> dict[tuple[str, str], str]:
    out = {}
    for name, (causal, persistent) in KERNELS.items():
        ir: dict[str, str] = {}
        options = dataclasses.replace(OPTIONS, persistent=persistent)
        module = attention.tile_module(64, causal=causal, block_n=64, block_m=128)
        lower_to_nvgpu_level(module, options, ir)
        for level in LEVELS:
            out[(name, level)] = ir[level]
    return out


def _inputs(kernel: str, seq: int) -> tuple[Any, list[Any], np.ndarray]:
    causal, persistent = KERNELS[kernel]
    rng = np.random.default_rng(seq)
    heads, dim = (2 if persistent else 1), 64
    q, k, v = (rng.standard_normal((heads, seq, dim)).astype(np.float16) for _ in range(3))
    scores = q.astype(np.float32) @ k.astype(np.float32).transpose(0, 2, 1) / 8
    if causal:
        scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    expected = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float32)
    grid: Any = attention.grid(seq, heads, 128)
    args = [q, k, v, np.zeros((heads, seq, dim), np.float16), seq, np.float32(0.125)]
    if persistent:
        grid, extra = persistent_launch(grid, 1)
        args += extra
    return grid, args, expected


def _oracle(module: ModuleOp, kernel: str, level: str, schedules: list[Any]) -> str:
    """What the interpreter shows under the first schedule and length that goes wrong."""
    run = run_mbarrier_kernel if level == "mbarrier" else run_nvgpu_kernel
    for seq in SEQS:
        for schedule in schedules:
            grid, args, expected = _inputs(kernel, seq)
            try:
                run(module, grid, args, schedule=schedule)
            except InterpreterError as error:
                return f"{type(error).__name__}: {str(error).splitlines()[0]}"
            if not np.allclose(args[3].astype(np.float32), expected, rtol=2e-2, atol=2e-2):
                return f"wrong result at seq {seq} under schedule {schedule!r}"
    return ""


def test_the_unmutated_kernels_are_proved_and_compute_the_answer(lowered) -> None:
    for kernel in KERNELS:
        for level in LEVELS:
            module = parse_module(make_context(), lowered[(kernel, level)])
            assert _proof(module) == "proved", (kernel, level, _proof(module))
            assert not _oracle(module, kernel, level, ["random"]), (kernel, level)


@pytest.mark.parametrize(("name", "kernel", "level"), CASES, ids=lambda x: str(x))
def test_mutation(lowered, name: str, kernel: str, level: str) -> None:
    mutation = PEELED_MUTATIONS[name]
    module = parse_module(make_context(), lowered[(kernel, level)], f"{kernel}.{level}.mlir")
    mutation.apply(module)
    proof = _proof(module)
    assert proof != "proved", f"{name} ({kernel}, {level}) was proved"
    if proof.startswith("refused"):
        assert ".mlir:" in proof and "\n" not in proof, f"not one line naming a place: {proof}"
    if mutation.unseen or (name, kernel) in UNOBSERVED:
        return
    shown = _oracle(module, kernel, level, ["producer-first", "consumer-first", 0, 1])
    assert shown, f"{name} ({kernel}, {level}): no schedule made the interpreter fail"


def test_a_release_before_the_peeled_first_stage_retires_its_wgmma_is_refused() -> None:
    """The guarded rotation's peeled first stage too (its reads went unchecked before)."""
    ir: dict[str, str] = {}
    module = attention.tile_module(64, causal=False, block_n=64, block_m=128)
    lower_to_nvgpu_level(module, dataclasses.replace(OPTIONS, peel=False), ir)
    mutant = parse_module(make_context(), ir["nvgpu"], "guarded.nvgpu.mlir")
    PEELED_MUTATIONS["peel_prologue_release_before_mma_wait"].apply(mutant)
    assert "releases a slot a wgmma may still read" in _proof(mutant)


def test_a_peeled_last_stage_out_of_its_loops_cross_ring_order_is_refused(lowered) -> None:
    """The stage is the model's last iteration of every ring at once: its steps must come in
    the body's order across rings (attention's stage holds one ring's, so the records are
    swapped by hand here, on the kernel's own loop)."""
    module = parse_module(make_context(), lowered[("attn", "nvgpu")], "attn.nvgpu.mlir")
    loop = next(op for op in module.walk() if op.name == "scf.for" and peeled_last(op))
    first, second = ("wait", "full"), ("arrive", "empty")
    body = [(1, 0, first), (2, 1, second)]
    extract._check_last_order({id(loop): (loop, body, [(3, 0, first), (4, 1, second)])})
    with pytest.raises(ExtractionError, match="not in its loop's order") as error:
        extract._check_last_order({id(loop): (loop, body, [(3, 1, second), (4, 0, first)])})
    assert "attn.nvgpu.mlir:" in str(error.value)
