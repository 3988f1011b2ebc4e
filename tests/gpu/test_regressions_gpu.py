"""Every reproducer the GPU fuzz run found (bugs since fixed) passes on the GPU now.

From `tawa fuzz --gpu` on the H200, 2026-11-30 (bench/results/fuzz_gpu_2026-11-30/):

* repro-gpu-08be846894.json, repro-gpu-0e6a8a9f09.json: a GEMM with K = 0 could not be
  launched: a descriptor over an array with no elements was rejected (numpy gives it zero
  strides) and TMA cannot describe an empty tensor; now it is described by a zero stand-in.
* repro-gpu-1ca6413477.json, repro-gpu-5c6a232ef7.json, repro-gpu-5e7b45c619.json: attention
  with 3- to 5-deep rings compiled to kernels needing more shared memory than an sm_90 block
  has, and failed at launch; compile_to_ptx now refuses them with a one-line error (the
  fuzzer counts the refusal as skipped).

From the 2026-12-01 GPU run (bench/results/h200_2026-12-01_s5/):

* repro-gpu-4188ff0c10.json, repro-gpu-9735344ead.json, repro-gpu-1ed9c37d0b.json: GEMMs with
  two K loops in a persistent kernel (f16 and e4m3, BLOCK_M 64 and 128) were refused by the
  verifier ("the next tile does not continue this tile's use counter"): a loop sequence inside
  a loop of tiles is now modelled (the next tile continues from the sequence's last loop).

From the GPU fuzz run of session 6 (bench/results/h200_2026-12-01_s6/):

* repro-gpu-408850195c.json, repro-gpu-86cea313ee.json: GEMMs with two K loops and a 3-deep
  MMA pipeline (lag 2; f16 and e4m3) were refused by the wgmma-retirement check ("releases a
  slot a wgmma may still read"): it judged a release in the second loop by the last
  wait_group before it only (the loop's `wait_group 2`), not by the `wait_group 0` that ends
  the first loop. Now any wait that surely runs before the release counts, and a wait under
  a conditional counts for nothing (mutation `wgmma_wait_under_condition`).

The CPU side of these fixes is tested in tests/unit/test_backend_launch.py and
tests/unit/test_mutation_corpus.py (persistent_two_loop_gemm and its two mutations).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tawa_xdsl.fuzz.repro import replay

pytestmark = pytest.mark.gpu

REPRODUCERS = sorted((Path(__file__).parents[1] / "regressions" / "gpu").glob("repro-*.json"))


@pytest.mark.parametrize("path", REPRODUCERS, ids=lambda p: p.stem)
def test_gpu_reproducer_passes_now(path: Path) -> None:
    result = replay(path)
    assert result.failure is None, str(result.failure)
