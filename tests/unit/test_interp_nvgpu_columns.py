"""The partials plan of a reduction along the rows (`legalize-nvgpu` on
`nvgpu.fragment_column_stage` / `_combine`): the plan is what the printer prints and the nvgpu
interpreter runs, so a corrupted row pitch, column term, staging predicate or row count is
refused by the op's verifier and, run unverified, shows as a wrong result or an error. Then
reductions whose rows two consumer warpgroups split (tests/corpus/columns.py, default
options): ptxas-clean PTX, the tile and nvgpu interpreters equal numpy, and a warpgroup that
stages its partials over the other's is a wrong result."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, i32
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import lower_to_nvgpu_level
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.interp.nvgpu import NvgpuError, run_nvgpu_kernel
from tawa_xdsl.runtime.dispatch import host_descriptor, is_descriptor
from tests.corpus import columns, more
from tests.corpus.case import Case, check

CASE = next(case for case in more.CASES if case.name == "column_stats")  # 64 columns


def nvgpu_level(case: Case) -> Any:
    run = case.launch(np.random.default_rng(0))
    compiled = case.kernel.compile(*run.args, **run.kwargs)
    return lower_to_nvgpu_level(compiled.module, replace(compiled.options, verify=False))


@pytest.fixture(scope="module")
def lowered() -> Any:
    return nvgpu_level(CASE)


def survives(module: Any, case: Case = CASE) -> bool:
    """Run the (possibly mutated) kernel; True when every output matches numpy."""
    run = case.launch(np.random.default_rng(1))
    args = [host_descriptor(a) if is_descriptor(a) else a for a in run.args]
    run_nvgpu_kernel(module, run.grid, args)
    return all(
        np.allclose(out.astype(np.float32), answer, rtol=run.rtol, atol=run.atol)
        for out, answer in run.expected
    )


def mutant(lowered: Any, kind: type) -> tuple[Any, Any]:
    """A copy of the module and its first op of `kind` (the sum's)."""
    module = lowered.clone()
    return module, next(op for op in module.walk() if isinstance(op, kind))


def refused(op: Any, message: str) -> None:
    with pytest.raises(VerifyException, match=message):
        op.verify()


def test_unmutated_kernel_survives(lowered: Any) -> None:
    stage = next(op for op in lowered.walk() if isinstance(op, nvgpu.FragmentColumnStageOp))
    assert (stage.row_pitch.value.data, stage.warp_rows.value.data) == (256, 16)
    assert survives(lowered.clone())


def test_stage_row_pitch_of_half_a_row_is_refused_and_a_wrong_result(lowered: Any) -> None:
    """Warp w stages at 128 w bytes: the warps overwrite each other's columns 32.., and the
    combine reads rows 2 and 3 where nothing was staged."""
    module, stage = mutant(lowered, nvgpu.FragmentColumnStageOp)
    stage.row_pitch = IntegerAttr(128, i32)
    refused(stage, r"partials plan \(row_pitch, value_cols, warp_rows\) = \(128, ")
    assert not survives(module)


def test_combine_row_pitch_past_the_slot_is_refused_and_caught(lowered: Any) -> None:
    module, combine = mutant(lowered, nvgpu.FragmentColumnCombineOp)
    combine.row_pitch = IntegerAttr(512, i32)
    refused(combine, r"partials plan \(row_pitch, value_cols, partial_rows\) = \(512, ")
    with pytest.raises(NvgpuError, match="reaches bytes outside the 1 slots of column_partials"):
        survives(module)


def test_wrong_column_term_is_refused_and_a_wrong_result(lowered: Any) -> None:
    """Values 0 and 1 staged at each other's columns: the sums of column pairs swap."""
    module, stage = mutant(lowered, nvgpu.FragmentColumnStageOp)
    cols = [int(c) for c in stage.value_cols.get_values()]
    stage.value_cols = DenseArrayBase.from_list(i32, [cols[1], cols[0], *cols[2:]])
    refused(stage, "expected")
    assert not survives(module)


def test_staging_predicate_of_two_warps_is_refused_and_a_wrong_result(lowered: Any) -> None:
    """`warp_rows` 32: only warps 0 and 2 stage (as rows 0 and 1); rows 2 and 3 are never
    written and the sums read their unwritten (NaN) bytes."""
    module, stage = mutant(lowered, nvgpu.FragmentColumnStageOp)
    stage.warp_rows = IntegerAttr(32, i32)
    refused(stage, r"expected \(256, \[.*\], 16\)")
    assert not survives(module)


def test_combine_of_three_warps_is_refused_and_a_wrong_result(lowered: Any) -> None:
    module, combine = mutant(lowered, nvgpu.FragmentColumnCombineOp)
    combine.partial_rows = IntegerAttr(3, i32)
    refused(combine, r"expected \(256, \[.*\], 8\)")  # two consumers: 2 x 4 warps
    assert not survives(module)


def test_half_a_plan_is_refused_and_no_plan_is_an_error(lowered: Any) -> None:
    module, stage = mutant(lowered, nvgpu.FragmentColumnStageOp)
    stage.warp_rows = None
    refused(stage, r"partials plan needs all of \(row_pitch, value_cols, warp_rows\)")
    with pytest.raises(NvgpuError, match="has no partials plan; run legalize-nvgpu first"):
        survives(module)


# ------------------------------------------------ rows split over two consumer warpgroups

TWO = {case.name: case for case in columns.CASES}


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")
@pytest.mark.parametrize("name", list(TWO))
def test_two_consumer_column_kernel_matches_numpy_in_both_interpreters(name: str) -> None:
    case = TWO[name]
    run = case.launch(np.random.default_rng(0))
    compiled = case.kernel.compile(*run.args, **run.kwargs)
    result = assemble(compiled.gpu_kernel().ptx)
    assert result.returncode == 0 and "warning" not in result.log.lower(), result.log
    case.kernel[run.grid](*run.args, **run.kwargs, interpret=True)
    check(run)
    module = lower_to_nvgpu_level(compiled.module, replace(compiled.options, verify=False))
    combines = [op for op in module.walk() if isinstance(op, nvgpu.FragmentColumnCombineOp)]
    assert combines and all(op.partial_rows.value.data == 8 for op in combines)  # 2 x 4 warps
    syncs = [op for op in module.walk() if isinstance(op, nvgpu.NamedBarrierSyncOp)]
    assert {op.threads.value.data for op in syncs if op.barrier_id.value.data == 6} == {256}
    assert survives(module, case)


def test_warpgroups_staging_over_each_other_is_a_wrong_result() -> None:
    """Both warpgroups stage at rows 0..3 (the warpgroup's first row term 0): rows 4..7 of
    the partials are never written, and the column maxima read their NaN bytes."""
    case = TWO["gemm_column_max_two_consumers"]
    module = nvgpu_level(case)
    assert survives(module.clone(), case)
    (stage,) = [op for op in module.walk() if isinstance(op, nvgpu.FragmentColumnStageOp)]
    zero = arith.ConstantOp.from_int_and_width(0, 32)
    Rewriter.insert_op(zero, InsertPoint.before(stage))
    stage.operands = [stage.value, stage.buf, stage.slot, zero.result]
    assert not survives(module, case)


def test_combine_of_one_warpgroups_rows_is_refused() -> None:
    module = nvgpu_level(TWO["gemm_column_max_two_consumers"])
    (combine,) = [op for op in module.walk() if isinstance(op, nvgpu.FragmentColumnCombineOp)]
    combine.partial_rows = IntegerAttr(4, i32)
    refused(combine, r"expected \(512, \[.*\], 8\)")
