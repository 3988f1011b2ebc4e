"""The named-barrier turns are proved for every trip count (`verify/named_barriers.py`): a
turn that goes wrong only from iteration L on, L the lag of the releases (deeper than any
fixed bound), is found, and the trip-count records answer exactly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from tawa_xdsl.compiler import lower_to_nvgpu_level
from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.verify.mutations import NAMED_BARRIER_MUTATIONS
from tawa_xdsl.verify.named_barriers import NamedBarrierViolation, check_named, trip_cases
from tests.corpus import proved

ROW_SUMS = next(case for case in proved.CASES if case.name == "gemm_with_row_sums")


def _row_sums(mma_depth: int, stages: int) -> ModuleOp:
    """The GEMM with row sums at the nvgpu level, its releases lagged by mma_depth - 1 (the
    slot-read barrier sits under that lag guard)."""
    compiled = ROW_SUMS.compile(np.random.default_rng(0))
    options = replace(compiled.options, verify=False, mma_depth=mma_depth, stages=stages)
    ir: dict[str, str] = {}
    lower_to_nvgpu_level(compiled.module, options, ir)
    return parse_module(make_context(), ir["nvgpu"], "row_sums.nvgpu.mlir")


@pytest.mark.parametrize("lag", [3, 6])
def test_a_turn_wrong_from_iteration_lag_on_is_found(lag: int) -> None:
    module = _row_sums(lag + 1, lag + 2)
    assert check_named(module) == 1
    NAMED_BARRIER_MUTATIONS["lagged_turn_given_twice"].apply(module)
    with pytest.raises(NamedBarrierViolation, match="arrives twice in one phase"):
        check_named(module)


def test_a_known_trip_count_answers_alone() -> None:
    record = {("loop", ()): (4, 4)}
    assert trip_cases(record, ("loop", ()), "eq", 4) == [(True, record)]
    assert trip_cases(record, ("loop", ()), "ge", 5) == [(False, record)]


def test_an_unknown_trip_count_splits_into_every_answer() -> None:
    """n >= 2, asked `n == 3`: n is 2 (no), 3 (yes) or at least 4 (no)."""
    at = ("loop", ())
    answers = trip_cases({at: (None, 2)}, at, "eq", 3)
    assert answers == [
        (False, {at: (2, 2)}),
        (True, {at: (3, 3)}),
        (False, {at: (None, 4)}),
    ]
    assert trip_cases({at: (None, 2)}, at, "ge", 1) == [(True, {at: (None, 2)})]
    assert trip_cases({}, at, "ge", 1) == [(False, {at: (0, 0)}), (True, {at: (None, 1)})]
    assert trip_cases({}, at, "ge", 1, floor=1) == [(True, {})]
