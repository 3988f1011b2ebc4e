"""What `tawa_xdsl.ops` does per call once a shape has been seen, on the CPU under
`runtime.fake_driver` with torch CPU tensors that claim to be on CUDA: the tuner is asked
once per shape, a per-tensor fp8 scale is folded into a vector once (again after the scale
changes in place), and a call over the same tensors is the prepared launch (no tensor map
encoded, nothing prepared).

Skipped where torch is not installed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tawa_xdsl.ops as ops  # noqa: E402
from tawa_xdsl.runtime import fake_driver  # noqa: E402

M, N, K = 128, 128, 64


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    """The fake driver, every tensor on "CUDA device 0", GEMM tuners whose timer ties (the
    first config wins, nothing on disk), and the ops' caches emptied around the test."""
    driver = fake_driver.install(monkeypatch.setattr)
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 0)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 0, raising=False)
    tuner = ops.gemm_tuner("float8_e4m3fn")
    asked = []
    monkeypatch.setattr(tuner, "timer", lambda launch: asked.append(launch) or 0.0)
    monkeypatch.setattr(tuner, "use_disk", False)
    monkeypatch.setattr(tuner, "best", {})
    monkeypatch.setattr(ops, "GEMM_CHOICES", {})
    monkeypatch.setattr(ops, "SCALE_VECTORS", type(ops.SCALE_VECTORS)())
    ops.gemm_program.cache_clear()
    ops.stream_reader.cache_clear()
    driver.timed = asked
    yield driver
    ops.gemm_program.cache_clear()  # its programs hold launches made under the fake driver
    ops.stream_reader.cache_clear()  # it holds the stand-in stream getter


def test_a_repeated_scaled_mm_folds_tunes_and_prepares_once(fake, monkeypatch) -> None:
    a = torch.randn(M, K).to(torch.float8_e4m3fn)
    b_nk = torch.randn(N, K).to(torch.float8_e4m3fn)
    scale_a, scale_b = torch.tensor(0.5), torch.tensor(2.0)
    folded = []
    real = ops.scale_vectors
    monkeypatch.setattr(ops, "scale_vectors", lambda *args: folded.append(real(*args))
                        or folded[-1])  # fmt: skip
    c = torch.empty(M, N, dtype=torch.bfloat16)
    monkeypatch.setattr(torch.Tensor, "new_empty", lambda self, *args, **kwargs: c)
    ops.scaled_mm(a, b_nk.t(), scale_a, scale_b)
    timed, encoded = len(fake.timed), len(fake.encodings)
    assert timed == len(ops.gemm_tuner("float8_e4m3fn").configs) and len(folded) == 1
    ((program, _),) = ops.GEMM_CHOICES.values()
    for _ in range(3):
        ops.scaled_mm(a, b_nk.t(), scale_a, scale_b)
    assert len(fake.timed) == timed and len(folded) == 1  # no tuning, no fold
    assert len(fake.encodings) == encoded and program.launches.misses == 1
    assert program.launches.hits == 3
    scale_b.fill_(4.0)  # in place: the version counter moves, the fold is made again
    ops.scaled_mm(a, b_nk.t(), scale_a, scale_b)
    (_, (_, columns)) = folded
    assert len(folded) == 2 and torch.all(columns == 2.0)
    assert program.launches.misses == 2  # the new vector is a new tensor: a new launch


def test_a_fold_is_not_reused_for_another_scale_tensor(fake) -> None:
    first, second = torch.tensor(0.5), torch.tensor(3.0)
    rows, cols = ops.cached_scale_vectors(first, torch.tensor(1.0), M, N)
    assert rows is None and torch.all(cols == 0.5)
    again = ops.cached_scale_vectors(second, torch.tensor(1.0), M, N)
    assert torch.all(again[1] == 3.0)
    with torch.inference_mode():  # inference tensors keep no version counter: fold each call
        frozen = torch.tensor(2.0)
    assert torch.all(ops.cached_scale_vectors(frozen, frozen, M, N)[1] == 4.0)
