"""Every reproducer the fuzzer found (a compiler bug since fixed) passes now.

Each `repro-*.json` here was written by `tawa fuzz` (or by hand in its format) for a bug;
replaying it (as `tawa repro FILE` does) must run every recorded level without a failure.

* repro-aref-e37511652c.json, repro-aref-eb2fe21109.json: insert-aref put attention's Q
  (loaded before the key loop and held across it) and the loop's K tiles in one ring when
  BLOCK_N == BLOCK_M gave them the same type: consumed out of order, or a deadlock with D = 1.
* repro-nvgpu-e98e258209.json: the nvgpu interpreter reported persistent attention releasing
  V's slot 0 while the lookahead QK wgmma read Q's and K's slot 0: it matched a slot's
  guarding barrier by value, and the three rings' barrier arrays (same name hint, same
  state) compared equal. Barriers compare by identity now.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tawa_xdsl.fuzz.check import CPU_LEVELS, gpu_kernel
from tawa_xdsl.fuzz.repro import load_reproducer, replay

REPRODUCERS = sorted(Path(__file__).parent.glob("repro-*.json"))


@pytest.mark.parametrize("path", REPRODUCERS, ids=lambda p: p.stem)
def test_reproducer_passes_now(path: Path) -> None:
    result = replay(path)
    assert result.failure is None, str(result.failure)
    assert {"tile", "compile", "aref", "mbarrier"} <= set(result.outcome.ran)


# The GPU run's reproducers whose bug was in the compiler or the verifier (not in what the
# GPU computed) replay on every CPU level too, proof included.
CPU_REPLAYED = [
    "repro-gpu-4188ff0c10",
    "repro-gpu-9735344ead",
    "repro-gpu-1ed9c37d0b",
    "repro-gpu-408850195c",
    "repro-gpu-86cea313ee",
]


@pytest.mark.parametrize("name", CPU_REPLAYED)
def test_gpu_reproducer_passes_on_the_cpu_levels(name: str) -> None:
    result = replay(Path(__file__).parent / "gpu" / f"{name}.json", levels=CPU_LEVELS)
    assert result.failure is None, str(result.failure)
    assert {"compile", "verify", "mbarrier", "nvgpu"} <= set(result.outcome.ran)


# Reproducers whose bug was a refusal by the post-lowering checks that only the GPU path runs
# (compile_to_ptx with its proof): the whole compile to PTX succeeds now.
COMPILED = ["repro-gpu-408850195c", "repro-gpu-86cea313ee"]


@pytest.mark.parametrize("name", COMPILED)
def test_gpu_reproducer_compiles_to_ptx_with_its_proof(name: str) -> None:
    case, _ = load_reproducer(Path(__file__).parent / "gpu" / f"{name}.json")
    kernel = gpu_kernel(case.ir(), case.options)
    assert not isinstance(kernel, str), kernel
    assert "wgmma.wait_group.sync.aligned 0" in kernel.ptx
