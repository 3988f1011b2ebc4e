"""`ops.scaled_mm` and `ops.matmul`'s bias on torch CPU tensors (the tile interpreter): every
scale form (per-tensor, per-row, per-column, mixed) and bias axis applied in the kernel's
epilogue, against torch; the shapes under fake tensors; bad scales refused in one line.

Skipped where torch is not installed (tests/unit/test_ops_gemm_epilogues.py checks the same
kernels through numpy)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tawa_xdsl.ops as ops  # noqa: E402

M, N, K = 64, 48, 128


def fp8_operands(seed: int):
    torch.manual_seed(seed)
    a = (torch.randn(M, K) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(K, N) * 2).to(torch.float8_e4m3fn)
    return a, b


def broadcast(scale, which: str):
    """`scale` shaped to multiply an [M, N] product, as the op documents it."""
    if scale.numel() == 1:
        return scale.reshape(())
    return scale.reshape(-1, 1) if scale.shape in ((M,), (M, 1)) else scale.reshape(1, -1)


SCALES = {
    "tensor_tensor": (lambda: torch.tensor(0.5), lambda: torch.tensor([2.0])),
    "rows_cols": (lambda: torch.rand(M) + 0.5, lambda: torch.rand(N) + 0.5),
    "rows2d_cols2d": (lambda: torch.rand(M, 1) + 0.5, lambda: torch.rand(1, N) + 0.5),
    "tensor_cols": (lambda: torch.tensor(0.25), lambda: torch.rand(1, N) + 0.5),
    "rows_tensor": (lambda: torch.rand(M, 1) + 0.5, lambda: torch.tensor(3.0)),
    "rows_rows": (lambda: torch.rand(M, 1) + 0.5, lambda: torch.rand(M, 1) + 0.5),
}


@pytest.mark.parametrize("form", list(SCALES))
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16], ids=str)
def test_scaled_mm_applies_every_scale_form_in_the_kernel(monkeypatch, form, out_dtype) -> None:
    a, b = fp8_operands(1)
    scale_a, scale_b = (make() for make in SCALES[form])
    launched = []
    real = ops.gemm_kernel_launch
    monkeypatch.setattr(ops, "gemm_kernel_launch",
                        lambda *args: launched.append(args[3]) or real(*args))  # fmt: skip
    c = ops.scaled_mm(a, b, scale_a, scale_b, out_dtype=out_dtype)
    ref = (a.double() @ b.double()) * broadcast(scale_a, "a") * broadcast(scale_b, "b")
    assert c.dtype == out_dtype and c.shape == (M, N)
    torch.testing.assert_close(c.double(), ref, rtol=2**-7, atol=2e-2)
    (form_launched,) = launched  # one kernel; the scales are its epilogue's vectors
    assert form_launched.row_scale or form_launched.col_scale


def test_scaled_mm_rounds_once_after_the_scales() -> None:
    """Scales that bring large products into range: applied in f32 before the one rounding
    to f16 (scaling an f16 C after the kernel would have overflowed to inf)."""
    a = torch.full((M, K), 448.0).to(torch.float8_e4m3fn)  # e4m3's largest value
    b = torch.full((K, N), 448.0).to(torch.float8_e4m3fn)
    scale = torch.tensor(1 / 4096.0)
    c = ops.scaled_mm(a, b, scale, scale, out_dtype=torch.float16)
    expected = 448.0 * 448.0 * K / 4096.0 / 4096.0
    torch.testing.assert_close(c.float(), torch.full((M, N), expected), rtol=2**-10, atol=0)


def test_scaled_mm_refuses_a_scale_of_another_shape_in_one_line() -> None:
    a, b = fp8_operands(2)
    with pytest.raises(ValueError, match=r"^tawa.scaled_mm: scale_a must be per-tensor, \[64\]"):
        ops.scaled_mm(a, b, torch.ones(3), torch.tensor(1.0))
    with pytest.raises(ValueError, match=r"scale_b must be .* got \[64\]"):
        ops.scaled_mm(a, b, torch.tensor(1.0), torch.ones(M))  # [M] is scale_a's form only


@pytest.mark.parametrize(
    ("shape", "dtype", "rows"),
    [((N,), torch.bfloat16, False), ((1, N), torch.float32, False), ((M,), torch.float32, True),
     ((M, 1), torch.bfloat16, True)],
    ids=["cols", "cols_2d_f32", "rows_f32", "rows_2d"],
)  # fmt: skip
def test_matmul_adds_a_row_or_column_bias_in_the_kernel(monkeypatch, shape, dtype, rows) -> None:
    torch.manual_seed(3)
    a = torch.randn(M, 64, dtype=torch.bfloat16)
    b = torch.randn(64, N, dtype=torch.bfloat16)
    bias = torch.randn(*shape, dtype=dtype)
    calls = []
    monkeypatch.setattr(ops, "epilogue", lambda *args: calls.append(args))
    c = ops.matmul(a, b, bias=bias, activation="silu")
    expanded = bias.reshape(-1, 1) if rows else bias.reshape(1, -1)
    ref = torch.nn.functional.silu(a.double() @ b.double() + expanded.double())
    torch.testing.assert_close(c.double(), ref, rtol=2**-7, atol=3e-2)
    assert calls == []  # not torch's epilogue


def test_a_square_matmul_takes_a_1d_bias_per_column_as_torch_does() -> None:
    torch.manual_seed(4)
    a, b = (torch.randn(64, 64, dtype=torch.float16) for _ in "ab")
    bias = torch.randn(64, dtype=torch.float16)
    c = ops.matmul(a, b, bias=bias)
    torch.testing.assert_close(c.float(), a.float() @ b.float() + bias.float(),
                               rtol=2e-3, atol=2e-2)  # fmt: skip


def test_a_full_bias_is_added_by_torch_after_the_kernel() -> None:
    torch.manual_seed(5)
    a = torch.randn(M, 64, dtype=torch.float16)
    b = torch.randn(64, N, dtype=torch.float16)
    bias = torch.randn(M, N, dtype=torch.float16)
    c = ops.matmul(a, b, bias=bias, activation="relu")
    ref = torch.relu(a.float() @ b.float() + bias.float())
    torch.testing.assert_close(c.float(), ref, rtol=2e-3, atol=2e-2)


def test_the_epilogue_forms_trace_with_fake_tensors() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(256, 512, dtype=torch.float8_e4m3fn)
        b = torch.empty(512, 128, dtype=torch.float8_e4m3fn)
        c = ops.scaled_mm(a, b, torch.empty(256), torch.empty(1, 128), out_dtype=torch.float16)
        assert c.shape == (256, 128) and c.dtype == torch.float16
        with pytest.raises(ValueError, match="scale_b must be per-tensor"):
            ops.scaled_mm(a, b, torch.empty(256), torch.empty(7))
        x = torch.empty(256, 512, dtype=torch.bfloat16)
        w = torch.empty(512, 128, dtype=torch.bfloat16)
        h = ops.matmul(x, w, bias=torch.empty(256, 1, dtype=torch.bfloat16))
        assert h.shape == (256, 128) and h.dtype == torch.bfloat16
