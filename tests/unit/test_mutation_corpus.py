"""The mutation corpus: barrier bugs planted into the lowered GEMM, attention and causal
attention (persistent and not; causal folded too), at the mbarrier level and at the nvgpu
level (the IR emit-ptx prints), by `tawa_xdsl.verify.mutations`.

Every broken mutation must be rejected by the proof (a refusal naming the op, or a
counterexample: never "proved") and by a dynamic oracle (the mbarrier or nvgpu interpreter:
an error, a deadlock, or a result differing from numpy under some schedule), unless the table
says why the oracle cannot observe it (`Mutation.unseen`). Every safe mutation is proved, by
the certificate and by the explicit search alike, and computes the numpy result.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
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
from tawa_xdsl.kernels.gemm import gemm_tile_ir
from tawa_xdsl.transforms.fold_grid import fold_launch
from tawa_xdsl.transforms.persistent import persistent_launch
from tawa_xdsl.verify.check import verify_module, verify_ring
from tawa_xdsl.verify.extract import ExtractionError, extract, shape_key
from tawa_xdsl.verify.mutations import MUTATIONS, Mutation
from tests.corpus import forms
from tests.corpus.case import Launch

LEVELS = ("mbarrier", "nvgpu")


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A kernel to mutate: how to lower it and how to run it against numpy."""

    name: str
    options: CompileOptions
    kind: str  # "gemm" | "attention" | "causal"


KERNELS = {
    k.name: k
    for k in [
        Kernel("gemm", CompileOptions(stages=2, mma_depth=2, consumers=2, verify=False), "gemm"),
        Kernel("gemm1", CompileOptions(stages=2, mma_depth=1, consumers=1, verify=False), "gemm"),
        Kernel(
            "pgemm",
            CompileOptions(stages=2, mma_depth=2, consumers=2, persistent=True, verify=False),
            "gemm",
        ),
        Kernel(
            "attn",
            CompileOptions(stages=2, mma_depth=1, consumers=2, rotate=False, verify=False),
            "attention",
        ),
        Kernel(
            "pattn",
            CompileOptions(
                stages=2, mma_depth=1, consumers=2, persistent=True, rotate=False, verify=False
            ),
            "attention",
        ),
        Kernel(  # 192 rows over three consumer warpgroups: each empty barrier counts 3
            "attn3",
            CompileOptions(stages=2, mma_depth=1, consumers=3, rotate=False, verify=False),
            "attention",
        ),
        Kernel(
            "causal",
            CompileOptions(stages=2, mma_depth=1, consumers=2, rotate=False, verify=False),
            "causal",
        ),
        Kernel(
            "pcausal",
            CompileOptions(
                stages=2, mma_depth=1, consumers=2, persistent=True, rotate=False, verify=False
            ),
            "causal",
        ),
        # the options' defaults: the key loop rotated, MMA depth and registers chosen
        Kernel("rattn", CompileOptions(stages=2, consumers=2, verify=False), "attention"),
        Kernel(
            "rpcausal",
            CompileOptions(stages=2, consumers=2, persistent=True, verify=False),
            "causal",
        ),
        # fold-grid: each program runs a row block and its mirror's (three blocks: one pair
        # loop of two trips, one of one), alone and persistent
        Kernel(
            "fcausal",
            CompileOptions(
                stages=2, mma_depth=1, consumers=2, rotate=False, fold=True, verify=False
            ),  # fmt: skip
            "causal",
        ),
        Kernel(
            "fpcausal",
            CompileOptions(stages=2, consumers=2, persistent=True, fold=True, verify=False),
            "causal",
        ),
    ]
}

# mutation -> the kernels it is planted in (at both levels unless it is nvgpu-only)
GEMMS = ["gemm", "gemm1", "pgemm"]
ALL = [*GEMMS, "attn", "pcausal"]
PLAN: dict[str, list[str]] = {
    "lag_guard_on_program_id": ["gemm"],
    "lag_guard_on_warpgroup": ["gemm", "pgemm"],
    "drain_removed": ["pgemm"],
    "drain_wrong_start": ["pgemm"],
    "drain_wrong_slot": ["pgemm"],
    "slot_on_induction_variable": ["pgemm"],
    "counter_restarts_per_tile": ["pgemm", "pcausal", "rpcausal", "fcausal", "fpcausal"],
    "slot_plus_warpgroup": ["gemm"],
    "slot_far_offset": ["gemm1", "pgemm"],
    "parity_one_turn": ["gemm", "pcausal", "fcausal"],
    "parity_flipped": ["gemm1", "attn", "pattn", "attn3", "rattn"],
    "parity_on_other_counter": ["pgemm"],
    "counter_starts_at_one": ["gemm1", "attn", "attn3", "rattn"],
    "counter_not_incremented": ["gemm"],
    "release_out_of_lookahead": ["pcausal"],
    "wait_on_unused_barrier": ["gemm1"],
    "consumer_waits_on_empty": ["gemm"],
    "arrive_at_top_level": ["gemm1"],
    "release_in_extra_loop": ["gemm1"],
    "copy_on_other_barrier": ["gemm1", "attn", "rpcausal"],
    "copy_removed": ["gemm"],
    "second_init_in_consumer": ["gemm1"],
    "second_init_at_top": ["gemm"],
    "init_fence_removed": ["gemm"],
    "ring_attribute_removed": ["gemm", "attn"],
    "buffer_too_few_slots": ["gemm"],
    "trips_depend_on_warpgroup": ["gemm"],
    "loop_repeated": ["gemm1"],
    "consumer_arrives_on_full": ["gemm1", "gemm"],
    "tx_halved": ["gemm", "attn", "pattn", "causal", "attn3"],
    "count_low": ["gemm", "attn3"],
    "release_before_read": ["gemm1"],
    "wgmma_wait_removed": ["gemm", "gemm1"],
    "wgmma_wait_deeper": ["gemm", "pgemm"],
    "wgmma_wait_under_condition": ["gemm", "pgemm"],
    "release_by_every_thread": ["gemm1", "attn3"],
    "wait_duplicated": ["gemm1", "attn"],
    "producer_wait_duplicated": ["pgemm"],
    "copies_swapped": ["gemm", "pgemm"],
    "slot_plus_depth": ["gemm", "attn", "causal"],
    "parity_two_turns": ["pgemm"],
    "extra_constant": ["gemm1"],
    "inner_trip_one_more": ["pgemm"],
}
# Broken cases no interpreter schedule tried shows (the proof still rejects them), and why.
UNOBSERVED = {
    ("release_out_of_lookahead", "pcausal", "mbarrier"): "the extra release at the end of a "
    "tile was not observed under the schedules tried (the nvgpu level shows it)",
    ("arrive_at_top_level", "gemm1", "nvgpu"): "the extra arrivals on empty[0] were not "
    "observed under the schedules tried (the mbarrier level shows them)",
    **{
        (name, "attn3", level): "planted on Q's ring, which a program fills once: no refill "
        "meets the early release"
        for name, level in [
            ("count_low", "mbarrier"),
            ("count_low", "nvgpu"),
            ("release_by_every_thread", "nvgpu"),
        ]
    },
}
NVGPU_ONLY = {
    "wgmma_wait_removed",
    "wgmma_wait_deeper",
    "wgmma_wait_under_condition",
    "release_by_every_thread",
}
CASES = [
    (name, kernel, level)
    for name, kernels in PLAN.items()
    for kernel in kernels
    for level in LEVELS
    if level == "nvgpu" or name not in NVGPU_ONLY
]


def test_corpus_covers_every_class_at_both_levels():
    assert set(PLAN) | set(SEQ_PLAN) == set(MUTATIONS)
    per_level = Counter(level for _, _, level in CASES)
    assert per_level["mbarrier"] >= 30 and per_level["nvgpu"] >= 30, per_level
    kinds = {MUTATIONS[n].kind for n in PLAN}
    for level in LEVELS:
        planted = {MUTATIONS[n].kind for n, _, lv in CASES if lv == level}
        assert planted == kinds - (
            {"wgmma retirement", "elected thread"} if level == "mbarrier" else set()
        )
    assert {KERNELS[k].kind for _, k, _ in CASES} == {"gemm", "attention", "causal"}
    for kind in ("gemm", "attention", "causal"):  # each persistent and not
        planted = {KERNELS[k].options.persistent for _, k, _ in CASES if KERNELS[k].kind == kind}
        assert planted == {False, True}, kind


# ------------------------------------------------------------------------ the kernels


def _tile_module(kernel: Kernel) -> ModuleOp:
    if kernel.kind == "gemm":
        return gemm_tile_ir(128 if kernel.options.consumers == 2 else 64, 64, 64)
    rows = 64 * (kernel.options.consumers or 2)
    return attention.tile_module(64, causal=kernel.kind == "causal", block_n=64, block_m=rows)


@pytest.fixture(scope="module")
def lowered() -> dict[tuple[str, str], str]:
    """The IR text of every kernel at both levels (lowered once for the whole file)."""
    out = {}
    for kernel in KERNELS.values():
        ir: dict[str, str] = {}
        # the single masked key loop the audit mutated (split_loops=False); the split into two
        # loops is a sequence of loops over the rings (the sequence cases below)
        options = dataclasses.replace(kernel.options, split_loops=False)
        lower_to_nvgpu_level(_tile_module(kernel), options, ir)
        for level in LEVELS:
            out[(kernel.name, level)] = ir[level]
    return out


def _inputs(kernel: Kernel) -> tuple[Any, list[Any], np.ndarray, int]:
    """(grid, arguments, numpy answer, index of the output argument)."""
    rng = np.random.default_rng(0)
    if kernel.kind == "gemm":
        m, n, k = (256 if kernel.options.persistent else 128), 128, 320
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((n, k)).astype(np.float16)
        rows = 128 if kernel.options.consumers == 2 else 64
        grid: Any = (-(-m // rows) * (n // 64),)
        expected = a.astype(np.float32) @ b.astype(np.float32).T
        args = [a, b, np.zeros((m, n), np.float16), m, n, k]
        out = 2
    else:
        heads, dim = (2 if kernel.options.persistent else 1), 64
        # three warpgroups: 6 key blocks, so that an early release meets a refill; folded:
        # three row blocks, a pair and the middle one
        seq = 384 if kernel.options.consumers == 3 or kernel.options.fold else 128
        q, k_, v = (rng.standard_normal((heads, seq, dim)).astype(np.float16) for _ in range(3))
        scores = q.astype(np.float32) @ k_.astype(np.float32).transpose(0, 2, 1) / 8
        if kernel.kind == "causal":
            scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        expected = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float32)
        grid = attention.grid(seq, heads, 64 * (kernel.options.consumers or 2))
        args = [q, k_, v, np.zeros((heads, seq, dim), np.float16), seq, np.float32(0.125)]
        out = 3
    if kernel.options.fold:
        grid, extra = fold_launch(list(grid))
        args += extra
    if kernel.options.persistent:
        grid, extra = persistent_launch(grid, 1 if kernel.kind != "gemm" else 2)
        args += extra
    return grid, args, expected, out


def _oracle(module: ModuleOp, kernel: Kernel, level: str, schedules: list[Any]) -> str:
    """What the interpreter shows under the first schedule that goes wrong, "" if none."""
    run = run_mbarrier_kernel if level == "mbarrier" else run_nvgpu_kernel
    for schedule in schedules:
        grid, args, expected, out = _inputs(kernel)
        try:
            run(module, grid, args, schedule=schedule)
        except InterpreterError as error:
            return f"{type(error).__name__}: {str(error).splitlines()[0]}"
        if not np.allclose(args[out].astype(np.float32), expected, rtol=2e-2, atol=2e-2):
            return f"wrong result under schedule {schedule!r}"
    return ""


def _mutant(lowered: dict, mutation: Mutation, kernel: str, level: str) -> ModuleOp:
    module = parse_module(make_context(), lowered[(kernel, level)], f"{kernel}.{level}.mlir")
    mutation.apply(module)
    return module


def _proof(module: ModuleOp) -> str:
    """'refused: ...', 'counterexample: ...' or 'proved'."""
    try:
        verdicts = verify_module(module)
    except ExtractionError as error:
        return f"refused: {error}"
    failed = [v for v in verdicts if not v.proved]
    if failed:
        return f"counterexample: {failed[0].summary()}"
    return "proved" if verdicts else "refused: no rings"


# The explicit search's verdict per ring, by protocol shape (`extract.shape_key`: equal keys,
# equal models and verdicts): a kernel's mbarrier and nvgpu levels and its safe mutations
# mostly share shapes, and a two-loop GEMM's search takes half a minute.
EXPLICIT: dict[tuple, str] = {}


def _explicit_verdicts(module: ModuleOp) -> list[str]:
    """The explicit search's verdict on every ring of `module`, one line each."""
    verdicts = []
    for ring in extract(module):
        key = shape_key(ring)
        if key not in EXPLICIT:
            EXPLICIT[key] = verify_ring(ring, method="explicit").summary()
        verdicts.append(EXPLICIT[key])
    return verdicts


@pytest.mark.parametrize(("name", "kernel", "level"), CASES, ids=lambda x: str(x))
def test_mutation(lowered, name: str, kernel: str, level: str) -> None:
    mutation = MUTATIONS[name]
    module = _mutant(lowered, mutation, kernel, level)
    proof = _proof(module)
    if not mutation.broken:
        assert proof == "proved", proof
        explicit = _explicit_verdicts(module)
        assert all(line.startswith("proved") for line in explicit), explicit
        shown = _oracle(module, KERNELS[kernel], level, ["random", "producer-first"])
        assert not shown, shown
        return
    assert proof != "proved", f"{name} ({kernel}, {level}) was proved"
    if proof.startswith("refused"):
        assert ".mlir:" in proof, f"the refusal names no place: {proof}"
    if mutation.unseen or (name, kernel, level) in UNOBSERVED:
        return  # the tables say why no interpreter shows it
    schedules = ["producer-first", "consumer-first", 0, 1, 2]
    shown = _oracle(module, KERNELS[kernel], level, schedules)
    assert shown, f"{name} ({kernel}, {level}): no schedule made the interpreter fail"


def test_unmutated_kernels_are_proved_and_run(lowered) -> None:
    for kernel in KERNELS.values():
        for level in LEVELS:
            module = parse_module(make_context(), lowered[(kernel.name, level)])
            assert _proof(module) == "proved", (kernel.name, level)
            assert not _oracle(module, kernel, level, ["random"]), (kernel.name, level)


# ------------------------------------------- sequences of loops and uniform conditionals
# The forms corpus's kernels whose rings are used by loops in sequence (the counter continuing
# from one loop into the next), one of them under a uniform `if` (issue 13 item 5). The
# oracle runs them with more trips than the corpus launch, so that a slot released early is
# refilled while still held.

SEQ_KERNELS = [
    "two_loop_gemm",
    "gemm_loops_same_rings_if_taken",
    "attention_two_stage_causal",
    "persistent_two_loop_gemm",  # two_loop_gemm's loops inside a loop of tiles
]
SEQ_PLAN: dict[str, list[str]] = {
    "seq_next_tile_from_first_loop": ["persistent_two_loop_gemm"],
    "seq_producer_next_tile_from_first_loop": ["persistent_two_loop_gemm"],
    "seq_counter_restarts": [
        "two_loop_gemm",
        "gemm_loops_same_rings_if_taken",
        "attention_two_stage_causal",
    ],  # fmt: skip
    "seq_counter_skips_one": ["two_loop_gemm", "attention_two_stage_causal"],
    "seq_producer_counter_restarts": ["two_loop_gemm", "attention_two_stage_causal"],
    "seq_second_trips_fewer": ["two_loop_gemm", "gemm_loops_same_rings_if_taken"],
    "seq_producer_loop_dropped": ["two_loop_gemm", "attention_two_stage_causal"],
    "seq_condition_negated": ["gemm_loops_same_rings_if_taken"],
    "seq_condition_on_warpgroup": ["gemm_loops_same_rings_if_taken"],
    "seq_drain_takes_next": ["two_loop_gemm", "gemm_loops_same_rings_if_taken"],
    "seq_release_moved_to_first": ["two_loop_gemm"],
    "loop_repeated": ["two_loop_gemm"],
    "wait_duplicated": ["two_loop_gemm", "attention_two_stage_causal"],
    "producer_wait_duplicated": ["gemm_loops_same_rings_if_taken"],
    "extra_constant": ["gemm_loops_same_rings_if_taken"],
}
SEQ_CASES = [
    (name, kernel, level)
    for name, kernels in SEQ_PLAN.items()
    for kernel in kernels
    for level in LEVELS
]


@pytest.fixture(scope="module")
def seq_lowered() -> dict[tuple[str, str], str]:
    """The IR text of the sequence kernels at both levels, compiled as the corpus does."""
    cases = {case.name: case for case in forms.CASES}
    out = {}
    for name in SEQ_KERNELS:
        persistent = name.startswith("persistent_")
        compiled = cases[name.removeprefix("persistent_")].compile(np.random.default_rng(0))
        options = dataclasses.replace(
            compiled.options, verify=False, persistent=persistent, split_loops=False
        )
        ir: dict[str, str] = {}
        lower_to_nvgpu_level(compiled.module, options, ir)
        for level in LEVELS:
            out[(name, level)] = ir[level]
    return out


def _seq_launch(name: str) -> Launch:
    """A launch of the sequence kernel `name` with more loop trips than the corpus's."""
    rng = np.random.default_rng(3)
    desc = forms.D
    if name == "attention_two_stage_causal":
        seq, dim = 384, 64
        q, k, v = (forms.normal(rng, (1, seq, dim), forms.F16) for _ in range(3))
        o = np.zeros_like(q)
        answer = forms.attention_reference(q, k, v, 1 / 8, True, 1).astype(forms.F16)
        args = [desc(q, [1, 128, dim]), desc(k, [1, 64, dim]), desc(v, [1, 64, dim]),
                desc(o, [1, 128, dim]), seq, 1 / 8]  # fmt: skip
        return Launch((3, 1), args, {}, [(o, answer)])
    a, b = (forms.normal(rng, (128, 640), forms.F16) for _ in range(2))
    c = np.zeros((128, 128), forms.F16)
    if name == "persistent_two_loop_gemm":  # two tiles in one CTA: the counter crosses tiles
        a, b = forms.normal(rng, (256, 128), forms.F16), forms.normal(rng, (128, 128), forms.F16)
        d, e = forms.normal(rng, (256, 192), forms.F16), forms.normal(rng, (128, 192), forms.F16)
        c = np.zeros((256, 128), forms.F16)
        answer = forms.wide(a) @ forms.wide(b).T + forms.wide(d) @ forms.wide(e).T
        grid, extra = persistent_launch((2, 1), 1)
        args = [*(desc(x, [128, 64]) for x in (a, b, d, e)), desc(c, [128, 128]), 128, 192]
        return Launch(grid, [*args, *extra], {}, [(c, answer.astype(forms.F16))])
    if name == "two_loop_gemm":
        d, e = (forms.normal(rng, (128, 448), forms.F16) for _ in range(2))
        a, b = a[:, :128].copy(), b[:, :128].copy()
        answer = forms.wide(a) @ forms.wide(b).T + forms.wide(d) @ forms.wide(e).T
        args = [*(desc(x, [128, 64]) for x in (a, b, d, e)), desc(c, [128, 128]), 128, 448]
    else:
        answer = forms.wide(a) @ forms.wide(b).T
        args = [desc(a, [128, 64]), desc(b, [128, 64]), desc(c, [128, 128]), 640, 1]
    return Launch((1, 1), args, {}, [(c, answer.astype(forms.F16))])


def _seq_oracle(module: ModuleOp, name: str, level: str, schedules: list[Any]) -> str:
    """What the interpreter shows under the first schedule that goes wrong, "" if none."""
    run = run_mbarrier_kernel if level == "mbarrier" else run_nvgpu_kernel
    for schedule in schedules:
        launch = _seq_launch(name)
        try:
            run(module, launch.grid, launch.args, schedule=schedule)
        except InterpreterError as error:
            return f"{type(error).__name__}: {str(error).splitlines()[0]}"
        out, answer = launch.expected[0]
        if not np.allclose(out.astype(np.float32), answer.astype(np.float32), 2e-2, 2e-2):
            return f"wrong result under schedule {schedule!r}"
    return ""


@pytest.mark.parametrize(("name", "kernel", "level"), SEQ_CASES, ids=lambda x: str(x))
def test_sequence_mutation(seq_lowered, name: str, kernel: str, level: str) -> None:
    mutation = MUTATIONS[name]
    module = _mutant(seq_lowered, mutation, kernel, level)
    proof = _proof(module)
    if not mutation.broken:
        assert proof == "proved", proof
        explicit = _explicit_verdicts(module)
        assert all(line.startswith("proved") for line in explicit), explicit
        shown = _seq_oracle(module, kernel, level, ["random", "producer-first"])
        assert not shown, shown
        return
    assert proof != "proved", f"{name} ({kernel}, {level}) was proved"
    if proof.startswith("refused"):
        assert ".mlir:" in proof, f"the refusal names no place: {proof}"
        assert "\n" not in proof, proof
    shown = _seq_oracle(module, kernel, level, ["producer-first", "consumer-first", 0, 1, 2])
    assert shown, f"{name} ({kernel}, {level}): no schedule made the interpreter fail"


@pytest.mark.parametrize("kernel", SEQ_KERNELS)
@pytest.mark.parametrize("level", LEVELS)
def test_unmutated_sequences_are_proved_and_run(seq_lowered, kernel: str, level: str) -> None:
    module = parse_module(make_context(), seq_lowered[(kernel, level)])
    assert _proof(module) == "proved", (kernel, level)
    explicit = _explicit_verdicts(module)
    assert all(line.startswith("proved") for line in explicit), explicit
    assert not _seq_oracle(module, kernel, level, ["random", "consumer-first"]), (kernel, level)
