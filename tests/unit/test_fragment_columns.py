"""The column-vector layout (`wgmma_col`, a reduction along an accumulator's rows) and the
column gathers of split and joined fragments, against the accumulator layout they come from."""

from __future__ import annotations

import pytest

from tawa_xdsl.dialects.nvgpu import WARPGROUP_THREADS, WGMMA_ACC, WGMMA_COL
from tawa_xdsl.dialects.nvgpu.layout import column_gather


@pytest.mark.parametrize("cols", [8, 64, 256])
def test_a_thread_holds_the_columns_it_holds_in_the_accumulator(cols: int) -> None:
    for thread in range(WARPGROUP_THREADS):
        held = {WGMMA_COL.coords((cols,), thread, v)[0] for v in range(cols // 4)}
        acc = {WGMMA_ACC.coords((128, cols), thread, v)[1] for v in range(cols)}
        assert held == acc and len(held) == cols // 4
        for v in range(cols):  # the broadcast map names the value of the same column
            col = WGMMA_ACC.coords((128, cols), thread, v)[1]
            assert WGMMA_COL.coords((cols,), thread, WGMMA_COL.acc_value_column(v, cols)) == (col,)


def test_the_owner_of_a_column_holds_it() -> None:
    for col in range(64):
        thread, value = WGMMA_COL.owner((64,), col)
        assert thread < 4 and WGMMA_COL.coords((64,), thread, value) == (col,)


def test_a_column_half_is_a_register_selection() -> None:
    """The right half of a 128x64 accumulator: values 16..31 of each 64-row block."""
    plan = column_gather(WGMMA_ACC, (128, 64), (128, 32), [0] * 32, list(range(32, 64)))
    assert plan == [(0, v + 16) for v in range(16)] + [(0, v + 48) for v in range(16)]


def test_a_column_that_moves_to_other_threads_is_refused() -> None:
    with pytest.raises(ValueError, match="column 2 would come from column 1"):
        column_gather(WGMMA_ACC, (64, 16), (64, 16), [0] * 16, [c // 2 for c in range(16)])
