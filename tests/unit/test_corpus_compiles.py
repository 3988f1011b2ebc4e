"""Every corpus kernel (`tests/corpus/*.py`, each module's `CASES`) compiles with default
launch options to PTX that ptxas accepts without warnings, and matches its numpy answer in the
tile interpreter and at the nvgpu level (the IR emit-ptx prints, run per thread). The GPU half
is tests/gpu/test_corpus_gpu.py."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import lower_to_nvgpu_level
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel

# The corpus modules import `tests.corpus.case`: the repository root must be importable
# (pytest puts only this folder on sys.path).
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import tests.corpus  # noqa: E402
from tests.corpus.case import Case, check, nvgpu_launch  # noqa: E402

# The shared shape is not a family; forms and more have their own tests (test_corpus_forms*.py:
# both epilogues, and the kernels the verifier cannot model yet; test_corpus_more*.py: both
# epilogues, and what stays refused).
SKIP = {"case", "forms", "more"}


def corpus() -> list[Case]:
    """The cases of every corpus module."""
    cases: list[Case] = []
    for module in pkgutil.iter_modules(tests.corpus.__path__):
        if module.name not in SKIP:
            cases += importlib.import_module(f"tests.corpus.{module.name}").CASES
    return cases


CASES = corpus()


def test_the_corpus_covers_the_issue_items():
    covered = {item for case in CASES for item in case.covers}
    assert {"1", "2", "3"} <= covered
    assert len({case.name for case in CASES}) == len(CASES) >= 18


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_corpus_kernel_compiles_and_matches_numpy(case: Case):
    run = case.launch(np.random.default_rng(0))
    compiled = case.kernel.compile(*run.args, **run.kwargs)
    result = assemble(compiled.gpu_kernel().ptx)
    assert result.ok and "warning" not in result.log.lower(), result.log
    case.kernel[run.grid](*run.args, **run.kwargs, interpret=True)
    check(run)
    run = case.launch(np.random.default_rng(0))
    nvgpu = lower_to_nvgpu_level(compiled.module, replace(compiled.options, verify=False))
    run_nvgpu_kernel(nvgpu, *nvgpu_launch(run, compiled.options.persistent))
    check(run)
