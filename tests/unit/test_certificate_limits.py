"""The certificate's resource budget: a query that runs out of Z3 resource units is a check
the solver gave up on (never proved, never cached), and the same ring with the normal budget
is proved."""

from __future__ import annotations

import pytest

from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
from tawa_xdsl.kernels.gemm import gemm_tile_ir
from tawa_xdsl.verify import certificate
from tawa_xdsl.verify.extract import extract


@pytest.fixture
def ring(tmp_path, monkeypatch):
    monkeypatch.setenv("TAWA_CACHE_DIR", str(tmp_path))  # no verdict from an earlier run
    certificate.forget_proofs()
    module = lower_to_nvgpu_level(
        gemm_tile_ir(128, 128, 64), CompileOptions(stages=3, mma_depth=2, verify=False)
    )
    return extract(module)[0]


def test_a_query_out_of_resources_gives_up_and_is_not_cached(ring) -> None:
    starved = certificate.prove(ring, rlimit=1)
    assert not starved.proved
    assert starved.failed.endswith(certificate.GAVE_UP), starved.failed
    again = certificate.prove(ring)  # not answered from the cache
    assert again.proved, again.failed
    assert "cached" not in again.detail
