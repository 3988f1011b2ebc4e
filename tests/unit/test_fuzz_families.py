"""The fuzzer's program families (issue 14's language; one example each in
`fuzz.families`): each runs through every CPU level (tile, compile, verify, aref, mbarrier,
nvgpu interpreters) and compiles to PTX that ptxas accepts, each numpy reference catches a
kernel that computes something else, and a failure of a new family shrinks, is written as a
reproducer and replays through `tawa repro`."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.fuzz.check import CPU_LEVELS, Case, FuzzFailure, check_case, gpu_kernel
from tawa_xdsl.fuzz.families import (
    B_N_MAJOR,
    BLOCK_M_64,
    COPY,
    F16_TO_BF16,
    FAMILIES,
    FP8,
    FP8_F32,
    LAYERNORM,
    REDUCTIONS,
    RMSNORM,
    SOFTMAX,
    SPLIT_K,
    TWO_LOOPS,
    VECTORS,
)
from tawa_xdsl.fuzz.programs import Bounds, EpilogueOp, GemmProgram, RowProgram, round_interval
from tawa_xdsl.fuzz.repro import load_reproducer
from tawa_xdsl.fuzz.runner import Summary, run_round
from tawa_xdsl.tools.tawa import main as tawa_main

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")


@pytest.mark.parametrize("name", FAMILIES)
def test_family_runs_on_every_cpu_level(name: str) -> None:
    outcome = check_case(FAMILIES[name])
    assert set(CPU_LEVELS) <= set(outcome.ran), outcome


@needs_ptxas
@pytest.mark.parametrize("name", FAMILIES)
def test_family_compiles_for_the_gpu(name: str) -> None:
    """What `tawa fuzz --gpu` launches (tests/gpu/test_fuzz_families_gpu.py): PTX that ptxas
    assembles for sm_90a with no forbidden warning and no spill."""
    case = FAMILIES[name]
    kernel = gpu_kernel(case.ir(), case.options)
    assert not isinstance(kernel, str), kernel
    result = assemble(kernel.ptx)
    assert result.returncode == 0 and not result.forbidden(), result.log
    assert "0 bytes spill stores, 0 bytes spill loads" in result.log, result.log


# ------------------------------------------------------------ the references catch bugs


def empty_second_loop(text: str) -> str:
    """The second K loop made to run no trip (`kernels.fuzz_gemm` starts it at `middle`)."""
    mutated, count = re.subn(
        r"scf\.for (%\S+) = %middle to (%\S+) ", r"scf.for \1 = \2 to \2 ", text
    )
    assert count == 1
    return mutated


def mutate(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def swap_op(program: GemmProgram, old: str, new: str) -> str:
    """The IR of `program` with its epilogue op `old` replaced by `new` (same argument)."""
    ops = tuple(replace(op, kind=new) if op.kind == old else op for op in program.epilogue)
    return replace(program, epilogue=ops).tile_ir()


# name -> the IR of a kernel that computes something other than the family's description
WRONG_KERNELS = {
    "vectors": lambda: swap_op(VECTORS, "row_bias", "row_scale"),
    "reductions": lambda: swap_op(REDUCTIONS, "sub_row_min", "sub_row_max"),
    "b-k-by-n": lambda: replace(B_N_MAJOR, b_major="k").tile_ir(),  # reads B as N x K
    "f16-to-bf16": lambda: swap_op(F16_TO_BF16, "round_f16_bf16", "exp2"),
    "fp8-e4m3-out": lambda: swap_op(FP8, "col_scale", "bias"),
    "fp8-f32-out": lambda: swap_op(FP8_F32, "row_scale", "row_bias"),
    "split-k": lambda: replace(SPLIT_K, split_k=2).tile_ir(),  # shares K out for 2 splits
    "two-loops": lambda: empty_second_loop(TWO_LOOPS.tile_ir()),
    "block-m-64": lambda: replace(BLOCK_M_64, grid_2d=False).tile_ir(),  # other tile order
    "copy": lambda: replace(COPY, op="softmax").tile_ir(),
    "softmax": lambda: replace(SOFTMAX, op="copy").tile_ir(),
    "layernorm": lambda: mutate(LAYERNORM.tile_ir(), "math.rsqrt", "math.sqrt"),
    "rmsnorm": lambda: mutate(RMSNORM.tile_ir(), "math.rsqrt", "math.sqrt"),
}


@pytest.mark.parametrize("name", FAMILIES)
def test_reference_catches_a_wrong_kernel(name: str) -> None:
    wrong = FAMILIES[name].with_ir(WRONG_KERNELS[name]())
    with pytest.raises(FuzzFailure) as caught:
        check_case(replace(wrong, levels=("tile",)))
    assert caught.value.level == "tile"
    assert "outside the numpy bounds" in caught.value.message


def test_fp8_bounds_are_one_value_either_side() -> None:
    """fp8 rounds as cvt.rn.satfinite (past 448 is 448) and the bounds step one fp8 value."""
    e4m3 = np.dtype(ml_dtypes.float8_e4m3fn)
    lo, hi = round_interval(np.array([1.0, 1e6, -1e6]), np.array([1.0, 1e6, -1e6]), e4m3)
    assert lo.tolist() == [0.9375, 416.0, -448.0] and hi.tolist() == [1.125, 448.0, -416.0]


def test_free_elements_are_the_nan_endpoints_only() -> None:
    bounds = Bounds.from_interval(np.array([0.0, np.nan]), np.array([1.0, 2.0]))
    assert bounds.violations(np.array([np.nan, np.nan])).tolist() == [True, False]
    assert bounds.violations(np.array([2.0, 5.0])).tolist() == [True, False]


def test_inf_minus_inf_leaves_the_element_unbounded() -> None:
    """A row whose f16 round trip overflows to inf: x - max(x) may be inf - inf = NaN there,
    so those elements are free; the others keep their bounds."""
    chain = (EpilogueOp("round_f16"), EpilogueOp("sub_row_max"))
    program = GemmProgram("f16", "f32", 64, 64, 32, epilogue=chain)
    args = program.make_inputs({"m": 2, "n": 64, "k": 32}, 0, "normal", [])
    args[0][0, :] = 60000.0  # row 0: 60000 * (32 terms >= 1) overflows f16
    args[1][:] = np.abs(args[1]) + np.float16(1)
    bounds = program.expected({"m": 2, "n": 64, "k": 32}, args)
    assert bounds.free is not None and bounds.free[0].all() and not bounds.free[1].any()


# ------------------------------------------------------------------ the strategies


def test_two_loop_programs_are_drawn_and_proved() -> None:
    """The GEMM strategy draws two K loops in sequence as well as one, and every program's
    options keep the barrier-protocol proof on (the sequence proof covers them)."""
    from hypothesis import given, settings

    from tawa_xdsl.fuzz.strategies import cases

    loops: set[int] = set()

    @settings(max_examples=40, deadline=None, derandomize=True, database=None)
    @given(case=cases(kind="gemm"))
    def prop(case) -> None:
        assert case.options.verify
        loops.add(case.program.loops)

    prop()
    assert loops == {1, 2}


# ----------------------------------------------------------------- shrink and replay


def test_a_new_family_failure_shrinks_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Norm kernels whose rsqrt is a sqrt: a round of row programs finds it, shrinks it to a
    norm program, and the reproducer (holding the wrong kernel's IR) fails again on replay."""
    right = RowProgram.tile_ir

    def wrong(self: RowProgram) -> str:
        text = right(self)
        return text.replace("math.rsqrt", "math.sqrt") if self.weights else text

    import tawa_xdsl.fuzz.runner as runner

    def tile_only(case: Case, outcome: object = None) -> object:
        return check_case(replace(case, levels=("tile",)), outcome)  # type: ignore[arg-type]

    monkeypatch.setattr(RowProgram, "tile_ir", wrong)
    monkeypatch.setattr(runner, "check_case", tile_only)  # the wrong kernel fails at tile
    summary = Summary()
    failure = run_round(summary, 0, tmp_path, max_examples=20, derandomize=True, kind="rows")
    assert failure is not None and failure.level == "tile", failure
    assert failure.case.program.op in ("layernorm", "rmsnorm")  # type: ignore[union-attr]
    assert failure.case.shape["m"] == 1  # shrunk
    path = summary.failures[0].path
    loaded, data = load_reproducer(path)
    assert loaded.program == failure.case.program and "math.sqrt" in (loaded.tile_ir or "")
    monkeypatch.setattr(RowProgram, "tile_ir", right)
    assert loaded.levels == ("tile",)
    assert tawa_main(["repro", str(path)]) == 1
    assert "REPRODUCED at tile" in capsys.readouterr().out
