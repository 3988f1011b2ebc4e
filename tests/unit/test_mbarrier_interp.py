"""The mbarrier-level interpreter: lowered GEMMs agree with numpy and with the aref level under
any schedule (Hypothesis picks the interleaving and when each TMA copy lands)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.interp.aref import run_warp_specialized
from tawa_xdsl.interp.mbarrier import Barrier, MBarrierError, run_mbarrier_kernel
from tawa_xdsl.interp.scheduler import DeadlockError, HypothesisPolicy
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.transforms.lower_aref import lower_arefs
from tests.samples import gemm_aref, gemm_args, gemm_reference, shrink_rings

GEMM_TILE = (__import__("pathlib").Path(__file__).parents[2] / "examples" / "gemm.mlir").read_text()


def lowered(depth, mma_depth, consumers, persistent):
    module = parse_module(make_context(), gemm_aref(depth, mma_depth, consumers, persistent))
    lower_arefs(module)
    module.verify()
    return module


def test_barrier_phase_completion_needs_arrivals_and_bytes():
    bar = Barrier()
    bar.init(1)
    bar.arrive(None, expect_tx=64)  # the producer's own arrive cannot complete the phase
    assert (bar.bit, bar.pending, bar.tx) == (0, 0, 64)
    bar.complete_tx(None, 32)
    assert bar.bit == 0
    bar.complete_tx(None, 32)
    assert (bar.bit, bar.pending, bar.tx) == (1, 1, 0)


def test_arrive_underflow_is_an_error():
    bar = Barrier()
    bar.init(1)
    bar.arrive(None, expect_tx=8)
    with pytest.raises(MBarrierError, match="no pending arrival"):
        bar.arrive(None)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    depth=st.integers(1, 3),
    mma_depth=st.integers(1, 2),
    consumers=st.integers(1, 2),
    persistent=st.booleans(),
    k_tiles=st.integers(0, 4),
    data=st.data(),
)
def test_lowered_gemm_matches_aref_and_numpy(
    depth, mma_depth, consumers, persistent, k_tiles, data
):
    if mma_depth > depth:
        mma_depth = depth
    module = lowered(depth, mma_depth, consumers, persistent)
    a, b, c, scalars = gemm_args(2, 1, k_tiles, seed=k_tiles, persistent=persistent)
    grid = 1 if persistent else 2
    run_mbarrier_kernel(module, grid, [a, b, c, *scalars], schedule=HypothesisPolicy(data))
    np.testing.assert_allclose(c, gemm_reference(a, b), atol=1e-2)
    ref = np.zeros_like(c)
    aref_module = parse_module(make_context(), gemm_aref(depth, mma_depth, consumers, persistent))
    run_warp_specialized(aref_module, grid, [a, b, ref, *scalars], schedule=0)
    np.testing.assert_array_equal(c, ref)


@pytest.mark.parametrize("schedule", ["producer-first", "consumer-first", "round-robin", 7])
def test_adversarial_schedules(schedule):
    module = lowered(2, 2, 2, True)
    a, b, c, scalars = gemm_args(2, 2, 5, persistent=True)
    run_mbarrier_kernel(module, 3, [a, b, c, *scalars], schedule=schedule)
    np.testing.assert_allclose(c, gemm_reference(a, b), atol=1e-2)


def test_tile_level_example_agrees_with_sample_reference():
    # The sample computes what examples/gemm.mlir computes (A @ B^T), at the tile level.
    module = parse_module(make_context(), GEMM_TILE)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((128, 128)).astype(np.float16)
    b = rng.standard_normal((128, 128)).astype(np.float16)
    c = np.zeros((128, 128), np.float16)
    run_kernel(module, 1, [a, b, c, 128, 128, 128])
    np.testing.assert_allclose(c, gemm_reference(a, b).astype(np.float16), rtol=2e-2, atol=0.5)


def test_ring_shallower_than_mma_depth_deadlocks_with_barrier_dump():
    """A lag the aref dialect refuses (2 uses held, 1 slot), planted below it, deadlocks."""
    module = parse_module(make_context(), gemm_aref(2, 2, 1, False))
    shrink_rings(module, 1)
    lower_arefs(module)
    a, b, c, scalars = gemm_args(1, 1, 3)
    with pytest.raises(DeadlockError, match=r"ring_empty\[0\]: phase"):
        run_mbarrier_kernel(module, 1, [a, b, c, *scalars], schedule=0)
