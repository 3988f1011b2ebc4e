"""The whole-program fuzzer on the GPU: a bounded deterministic profile (tile interpreter vs
numpy, then compile_to_ptx + launch vs numpy). Skipped without an sm_90 GPU; the long run is
`tawa fuzz --gpu --minutes 10`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tawa_xdsl.fuzz.runner import Summary, run_round
from tawa_xdsl.runtime import gpu_available

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not gpu_available(), reason="needs an sm_90 GPU"),
]


def test_gpu_fuzz_profile(tmp_path: Path) -> None:
    summary = Summary(mode="gpu")
    failure = run_round(summary, 0, tmp_path, gpu=True, max_examples=30, derandomize=True)
    assert failure is None, summary.render()
    assert summary.levels_ran["gpu"] > 0, summary.render()
