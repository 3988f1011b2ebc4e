"""What the GPU fuzz run on the H200 found, checked here without a GPU: kernels whose rings do
not fit in shared memory are refused at compile time, a grid with no programs launches
nothing, and a descriptor over an array with no elements is described by a zero stand-in."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tawa_xdsl
from tawa_xdsl import runtime as rt
from tawa_xdsl.backend.compile import (
    SM90_MAX_SMEM_BYTES,
    CompileOptions,
    compile_to_ptx,
    empty_tensor_stand_in,
)
from tawa_xdsl.diagnostics import TawaError, parse_file
from tawa_xdsl.dialects import make_context

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def gemm_kernel() -> Any:
    module = parse_file(make_context(), EXAMPLES / "gemm.mlir")
    return compile_to_ptx(module, CompileOptions(stages=2, mma_depth=1, consumers=1, verify=False))


def test_rings_that_do_not_fit_in_shared_memory_are_refused() -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        from attention_compile import compile_attention
    finally:
        sys.path.pop(0)
    assert compile_attention(head_dim=128, stages=3).smem_bytes <= SM90_MAX_SMEM_BYTES
    with pytest.raises(
        TawaError,
        match=r"^@attn_fwd: error: needs 296080 bytes of shared memory for rings ring \(4 slots "
        r"of tensor<1x128x128xf16>, 32768 bytes each\), .*; an sm_90 block may use at most 232448",
    ):
        compile_attention(head_dim=128, stages=4)


class FakeRuntime:
    """Records what the launch path asks of the driver."""

    def __init__(self) -> None:
        self.staged: list[np.ndarray] = []
        self.launches: list[tuple] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(rt, "require_gpu", lambda: object())
        monkeypatch.setattr(rt, "load_kernel", lambda ptx, name: name)
        monkeypatch.setattr(rt, "to_device", self.to_device)
        monkeypatch.setattr(rt, "to_host", lambda dev, out: None)
        monkeypatch.setattr(rt, "launch", lambda *args, **kwargs: self.launches.append(args))
        monkeypatch.setattr(
            "tawa_xdsl.backend.compile.CompiledKernel.launch_args", lambda self, args: list(args)
        )

    def to_device(self, array: np.ndarray) -> np.ndarray:
        self.staged.append(array)
        return array


def descriptors(m: int, n: int, k: int) -> list[Any]:
    make = tawa_xdsl.TensorDescriptor.from_tensor
    a, b = np.ones((m, k), np.float16), np.ones((n, k), np.float16)
    c = np.zeros((m, n), np.float16)
    return [make(a, [128, 64]), make(b, [128, 64]), make(c, [128, 128]), m, n, k]


def test_a_grid_without_programs_launches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRuntime()
    fake.install(monkeypatch)
    gemm_kernel().launch((0,), *descriptors(0, 8, 64))
    assert fake.launches == [] and fake.staged == []


def test_an_empty_descriptor_is_described_by_zeros(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeRuntime()
    fake.install(monkeypatch)
    gemm_kernel().launch((1,), *descriptors(1, 8, 0))  # K = 0: A and B have no elements
    a, b, c = fake.staged
    assert a.shape == b.shape == (1, 8) and not a.any() and not b.any()
    assert c.shape == (1, 8) and len(fake.launches) == 1


def test_stand_in_rows_are_16_bytes() -> None:
    for dtype, elements in ((np.float16, 8), (np.float32, 4)):
        stand_in = empty_tensor_stand_in(np.zeros((5, 0, 3), dtype))
        assert stand_in.shape == (1, 1, elements) and stand_in.nbytes == 16


def test_descriptors_accept_arrays_without_elements() -> None:
    descriptor = tawa_xdsl.TensorDescriptor.from_tensor(np.zeros((3, 0), np.float16), [128, 64])
    assert descriptor.strides == (0, 1)
