"""Differential tests: the warp-specialized program equals the tile program, bit for bit.

For random inputs (shapes that are not multiples of the tile, K loops of 0 and 1 tiles), every
option of the `tawa-warp-specialize` pipeline (ring depth D in 1..6, MMA depth P in 1..3,
cooperative consumers on/off, persistent on/off) and random or Hypothesis-chosen schedules,
the aref-level program run in the aref interpreter must store exactly what the tile program
stores in the tile interpreter: both run the same numpy ops in the same order per element.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.interp.aref import run_warp_specialized
from tawa_xdsl.interp.scheduler import POLICIES, HypothesisPolicy
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.transforms.persistent import persistent_launch
from tawa_xdsl.transforms.warp_specialize import warp_specialize

EXAMPLES = Path(__file__).parents[2] / "examples"
KERNELS = ("gemm", "attention", "attention_causal")

SETTINGS = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Options:
    """One configuration of the warp-specialization pipeline (`warp_specialize`'s options)."""

    stages: int = 3
    mma_depth: int = 2
    consumers: int = 1
    persistent: bool = False
    attention: bool = True


options_strategy = st.builds(
    Options,
    stages=st.integers(1, 6),
    mma_depth=st.integers(1, 3),
    consumers=st.sampled_from([1, 2]),
    persistent=st.booleans(),
    attention=st.booleans(),
)


@cache
def tile_module(kernel: str) -> Any:
    text = (EXAMPLES / f"{kernel}.mlir").read_text()
    return parse_module(make_context(), text, f"{kernel}.mlir")


@cache
def ws_module(kernel: str, options: Options) -> Any:
    """The example after the warp-specialization pipeline (cached per option set)."""
    return warp_specialize(tile_module(kernel), **asdict(options))


def schedule_strategy(data: st.DataObject) -> Any:
    """A named policy, a random seed, or every choice drawn by Hypothesis (shrinkable)."""
    kind = data.draw(st.sampled_from(["hypothesis", "seed", *POLICIES]), label="schedule kind")
    if kind == "hypothesis":
        return HypothesisPolicy(data)
    if kind == "seed":
        return data.draw(st.integers(0, 2**32 - 1), label="seed")
    return kind


def launch(
    kernel: str, options: Options, grid: tuple[int, ...], args: list[Any], schedule: Any, sms: int
) -> None:
    """Run the warp-specialized kernel as the tile kernel would be launched with `grid`."""
    extra: list[Any] = []
    if options.persistent:
        grid, extra = persistent_launch(grid, sms)
    run_warp_specialized(ws_module(kernel, options), grid, [*args, *extra], schedule=schedule)


# ------------------------------------------------------------------------------- GEMM


def gemm_case(m: int, n: int, k: int, seed: int) -> tuple[tuple[int, ...], list[Any]]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    return (-(-m // 128) * -(-n // 128),), [a, b, np.zeros((m, n), np.float16), m, n, k]


def check_gemm(m: int, n: int, k: int, options: Options, schedule: Any, sms: int) -> None:
    grid, args = gemm_case(m, n, k, seed=m * 7 + n * 3 + k)
    run_kernel(tile_module("gemm"), grid, args)
    expected = args[2].copy()
    args[2][...] = 0
    launch("gemm", options, grid, args, schedule, sms)
    np.testing.assert_array_equal(args[2], expected)


@SETTINGS
@given(
    m=st.integers(1, 256),
    n=st.integers(1, 256),
    k=st.one_of(st.sampled_from([0, 1, 64, 65]), st.integers(0, 256)),
    options=options_strategy,
    sms=st.integers(1, 3),
    data=st.data(),
)
def test_gemm(m: int, n: int, k: int, options: Options, sms: int, data: st.DataObject) -> None:
    check_gemm(m, n, k, options, schedule_strategy(data), sms)


@pytest.mark.parametrize("k", [0, 1, 64])
def test_gemm_short_k_loops(k: int) -> None:
    """K loops of 0 and 1 tiles with D = 1 and P = 3 (larger than the trip count)."""
    for consumers, persistent in [(1, False), (2, True)]:
        options = Options(stages=1, mma_depth=3, consumers=consumers, persistent=persistent)
        check_gemm(130, 257, k, options, "producer-first", sms=2)


# -------------------------------------------------------------------------- attention


def attention_case(heads: int, seq: int, seed: int) -> tuple[tuple[int, ...], list[Any]]:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((heads, seq, 64)).astype(np.float16) for _ in range(3))
    o = np.zeros((heads, seq, 64), np.float16)
    return (-(-seq // 128), heads), [q, k, v, o, seq, np.float32(0.125)]


def check_attention(
    kernel: str, heads: int, seq: int, options: Options, schedule: Any, sms: int
) -> None:
    grid, args = attention_case(heads, seq, seed=seq + heads)
    run_kernel(tile_module(kernel), grid, args)
    expected = args[3].copy()
    assert not np.isnan(expected).any()
    args[3][...] = 0
    launch(kernel, options, grid, args, schedule, sms)
    np.testing.assert_array_equal(args[3], expected)


@SETTINGS
@given(
    kernel=st.sampled_from(["attention", "attention_causal"]),
    heads=st.integers(1, 2),
    seq=st.one_of(st.sampled_from([1, 64, 65, 128, 129]), st.integers(1, 200)),
    options=options_strategy,
    sms=st.integers(1, 3),
    data=st.data(),
)
def test_attention(
    kernel: str, heads: int, seq: int, options: Options, sms: int, data: st.DataObject
) -> None:
    check_attention(kernel, heads, seq, options, schedule_strategy(data), sms)


@pytest.mark.parametrize("kernel", ["attention", "attention_causal"])
@pytest.mark.parametrize("seq", [1, 64])
def test_attention_short_key_loops(kernel: str, seq: int) -> None:
    """One key block (the peeled first QK^T and nothing else), D = 1, P = 3."""
    for consumers, persistent in [(1, False), (2, True)]:
        options = Options(stages=1, mma_depth=3, consumers=consumers, persistent=persistent)
        check_attention(kernel, 1, seq, options, "consumer-first", sms=2)


# ----------------------------------------------------------------- every combination

COMBINATIONS = [
    (kernel, mma_depth, consumers, persistent)
    for kernel in KERNELS
    for mma_depth in (1, 2, 3)
    for consumers in (1, 2)
    for persistent in (False, True)
]


@pytest.mark.parametrize(("kernel", "mma_depth", "consumers", "persistent"), COMBINATIONS)
def test_every_option_combination(
    kernel: str, mma_depth: int, consumers: int, persistent: bool
) -> None:
    """Each (P, cooperative, persistent) combination for each kernel, D cycling through
    1..6, three output tiles per launch (with persistence: on two SMs)."""
    stages = 1 + COMBINATIONS.index((kernel, mma_depth, consumers, persistent)) % 6
    options = Options(stages, mma_depth, consumers, persistent)
    seed = stages * 131 + mma_depth
    if kernel == "gemm":
        check_gemm(300, 100, 190, options, seed, sms=2)
    else:
        check_attention(kernel, 1, 300, options, seed, sms=2)
