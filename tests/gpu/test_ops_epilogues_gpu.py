"""`ops.scaled_mm`'s scales and `ops.matmul`'s row and column biases in the GEMM's epilogue on
the H200, against torch: every scale form (per-tensor, per-row, per-column, mixed), one
kernel launch per call (no torch epilogue), ragged shapes, fp8 e4m3 and e5m2, and the ops
under torch.compile(fullgraph=True).

Run: `pytest tests/gpu/test_ops_epilogues_gpu.py -v` (needs torch with CUDA and the `gpu`
extra)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tawa_xdsl.ops as ops  # noqa: E402

M, N, K = 1000, 384, 512


def scale(kind: str, length: int, which: str):
    if kind == "tensor":
        return torch.tensor(0.75, device="cuda")
    values = torch.rand(length, device="cuda") + 0.5
    if kind == "vector":
        return values
    return values.reshape(-1, 1) if which == "a" else values.reshape(1, -1)


def as_factor(s):
    return s.reshape(()) if s.numel() == 1 else s.reshape(-1, 1) if s.shape[0] == M else s


@pytest.mark.parametrize(
    ("kind_a", "kind_b"),
    [("tensor", "tensor"), ("vector", "vector"), ("2d", "2d"), ("tensor", "2d"), ("2d", "tensor")],
)
@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16], ids=str)
def test_scaled_mm_every_scale_form(device, monkeypatch, kind_a, kind_b, dtype, out_dtype):
    torch.manual_seed(7)
    a = torch.randn(M, K, device="cuda").to(dtype)
    b = torch.randn(N, K, device="cuda").to(dtype).t()  # column-major, as torch._scaled_mm's
    scale_a, scale_b = scale(kind_a, M, "a"), scale(kind_b, N, "b")
    monkeypatch.setattr(ops, "epilogue", lambda *args: pytest.fail("torch epilogue used"))
    c = ops.scaled_mm(a, b, scale_a, scale_b, out_dtype=out_dtype)
    ref = (a.double() @ b.double()) * as_factor(scale_a) * as_factor(scale_b)
    assert c.dtype == out_dtype
    torch.testing.assert_close(c.double(), ref, rtol=2**-7, atol=0.25)


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((N,), torch.bfloat16), ((1, N), torch.float32), ((M,), torch.float32),
     ((M, 1), torch.bfloat16)],
    ids=["cols", "cols_2d_f32", "rows_f32", "rows_2d"],
)  # fmt: skip
@pytest.mark.parametrize("activation", [None, "gelu"], ids=str)
def test_matmul_row_and_column_bias(device, monkeypatch, shape, dtype, activation) -> None:
    torch.manual_seed(8)
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(*shape, device="cuda", dtype=dtype)
    monkeypatch.setattr(ops, "epilogue", lambda *args: pytest.fail("torch epilogue used"))
    c = ops.matmul(a, b, bias=bias, activation=activation)
    rows = shape[0] == M and shape != (1, N)
    x = a.double() @ b.double() + (bias.reshape(-1, 1) if rows else bias.reshape(1, -1)).double()
    if activation == "gelu":
        x = torch.nn.functional.gelu(x, approximate="tanh")
    torch.testing.assert_close(c.double(), x, rtol=2e-2, atol=6e-2)


def test_scaled_mm_under_torch_compile(device) -> None:
    torch.manual_seed(9)
    a = torch.randn(256, 256, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(128, 256, device="cuda").to(torch.float8_e4m3fn).t()
    scale_a = torch.rand(256, 1, device="cuda") + 0.5
    scale_b = torch.rand(1, 128, device="cuda") + 0.5

    @torch.compile(fullgraph=True)
    def step(a, b, scale_a, scale_b):
        return ops.scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16).float().relu()

    ref = ((a.double() @ b.double()) * scale_a * scale_b).relu()
    torch.testing.assert_close(step(a, b, scale_a, scale_b).double(), ref, rtol=2**-7, atol=0.25)


def test_a_repeated_per_tensor_scaled_mm_launches_the_gemm_alone(device) -> None:
    """Per-tensor scales are folded into a vector on the first call only: later calls with
    the same scale tensors launch one kernel each (the GEMM), and a scale written in place is
    folded again (the result doubles exactly: a power-of-two scale)."""
    torch.manual_seed(10)
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn).t()
    scale_a, scale_b = torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
    first = ops.scaled_mm(a, b, scale_a, scale_b)
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        for _ in range(3):
            again = ops.scaled_mm(a, b, scale_a, scale_b)
        torch.cuda.synchronize()
    kernels = [e.name for e in profile.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert len(kernels) == 3 and len(set(kernels)) == 1, kernels
    assert torch.equal(again, first)
    scale_b.fill_(4.0)
    doubled = ops.scaled_mm(a, b, scale_a, scale_b)
    assert torch.equal(doubled.float(), 2 * first.float())
