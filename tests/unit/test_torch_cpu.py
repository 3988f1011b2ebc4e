"""The PyTorch path on the CPU: torch CPU tensors through `@jit` in the interpreter (stores in
place), `torch.ops.tawa.*` against torch, and fake-tensor tracing under torch.compile.

Skipped where torch is not installed (CI installs `.[dev]`, which does not pull torch)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tawa_xdsl  # noqa: E402
import tawa_xdsl.language as tl  # noqa: E402
import tawa_xdsl.ops as ops  # noqa: E402


@tawa_xdsl.jit(interpret=True)
def add_one(x_desc, y_desc, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    x = x_desc.load([pid * BLOCK, 0])
    y_desc.store([pid * BLOCK, 0], (x.to(tl.float32) + 1.0).to(y_desc.dtype))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_torch_cpu_tensors_are_written_in_place(dtype) -> None:
    x = torch.arange(32 * 16, dtype=torch.float32).reshape(32, 16).to(dtype)
    y = torch.zeros(32, 16, dtype=dtype)
    pointer = y.data_ptr()
    x_desc = tawa_xdsl.TensorDescriptor.from_tensor(x, [16, 16])
    y_desc = tawa_xdsl.TensorDescriptor.from_tensor(y, [16, 16])
    add_one[(2,)](x_desc, y_desc, BLOCK=16)
    assert y.data_ptr() == pointer
    torch.testing.assert_close(y, (x.float() + 1).to(dtype))


def test_a_strided_torch_view_is_described_as_it_is() -> None:
    base = torch.zeros(32, 32, dtype=torch.float16)
    view = base[:, :16]
    desc = tawa_xdsl.TensorDescriptor.from_tensor(view, [16, 16])
    assert desc.shape == (32, 16) and desc.strides == (32, 1)
    add_one[(2,)](tawa_xdsl.TensorDescriptor.from_tensor(view.clone(), [16, 16]), desc, BLOCK=16)
    assert torch.all(base[:, :16] == 1) and torch.all(base[:, 16:] == 0)


def test_tensors_are_not_kernel_arguments_by_themselves() -> None:
    with pytest.raises(TypeError, match="wrap them with tawa_xdsl.TensorDescriptor"):
        add_one[(1,)](torch.zeros(16, 16), torch.zeros(16, 16), BLOCK=16)


def test_matmul_op_matches_torch() -> None:
    torch.manual_seed(0)
    a = torch.randn(96, 64, dtype=torch.float16)
    b = torch.randn(64, 80, dtype=torch.float16)
    bias = torch.randn(80, dtype=torch.float16)
    c = ops.matmul(a, b, bias=bias, activation="relu")
    ref = torch.relu(a.float() @ b.float() + bias.float())
    torch.testing.assert_close(c.float(), ref, atol=2e-2, rtol=2e-2)
    assert c.dtype == torch.float16 and c.shape == (96, 80)


@pytest.mark.parametrize("activation", ["gelu", "silu"])
def test_matmul_bias_and_activation_run_in_the_kernel(monkeypatch, activation: str) -> None:
    """A bias of N elements and the activation are the GEMM's epilogue, not torch's: the
    torch epilogue is not called; a full bias ([M, N]) still is, and both are right."""
    torch.manual_seed(5)
    a = torch.randn(64, 64, dtype=torch.bfloat16)
    b = torch.randn(64, 48, dtype=torch.bfloat16)
    bias = torch.randn(48, dtype=torch.bfloat16)
    act = {"gelu": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
           "silu": torch.nn.functional.silu}[activation]  # fmt: skip
    torch_epilogue = ops.epilogue
    calls = []
    monkeypatch.setattr(ops, "epilogue", lambda *args: calls.append(1) or torch_epilogue(*args))
    c = ops.matmul(a, b, bias=bias, activation=activation)
    torch.testing.assert_close(c.float(), act(a.float() @ b.float() + bias.float()),
                               atol=6e-2, rtol=2e-2)  # fmt: skip
    assert calls == []
    full_bias = torch.randn(64, 48, dtype=torch.bfloat16)
    c = ops.matmul(a, b, bias=full_bias, activation=activation)
    torch.testing.assert_close(c.float(), act(a.float() @ b.float() + full_bias.float()),
                               atol=6e-2, rtol=2e-2)  # fmt: skip
    assert calls == [1]


def test_scaled_mm_op_per_row_and_column_scales() -> None:
    torch.manual_seed(1)
    a = (torch.randn(64, 128) * 4).to(torch.float8_e4m3fn)
    b = (torch.randn(128, 32) * 4).to(torch.float8_e4m3fn)
    scale_a, scale_b = torch.rand(64, 1) + 0.5, torch.rand(1, 32) + 0.5
    c = ops.scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16)
    ref = (a.float() @ b.float()) * scale_a * scale_b
    torch.testing.assert_close(c.float(), ref, atol=0.5, rtol=2e-2)
    with pytest.raises(ValueError, match="scale_a must be per-tensor"):
        ops.scaled_mm(a, b, torch.ones(3), scale_b)


def test_attention_op_with_gqa_and_lse_matches_sdpa() -> None:
    torch.manual_seed(2)
    q = torch.randn(1, 2, 130, 64, dtype=torch.float16)
    k = torch.randn(1, 1, 130, 64, dtype=torch.float16)
    v = torch.randn(1, 1, 130, 64, dtype=torch.float16)
    o, lse = ops.attention(q, k, v, causal=True, return_lse=True)
    kk, vv = (t.float().repeat_interleave(2, dim=1) for t in (k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), kk, vv, is_causal=True)
    torch.testing.assert_close(o.float(), ref, atol=3e-3, rtol=3e-3)
    scores = (q.float() @ kk.transpose(-1, -2)) / 8.0
    scores = scores.masked_fill(torch.ones(130, 130).triu(1).bool(), float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), atol=1e-3, rtol=1e-3)


def test_ops_trace_with_fake_tensors_without_graph_breaks() -> None:
    def block(x, w, q, k, v):
        h = ops.matmul(x, w, activation="gelu")
        return h.sum() + ops.attention(q, k, v, causal=True).sum()

    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x, w = torch.empty(256, 512, dtype=torch.bfloat16), torch.empty(512, 128)
        c = ops.matmul(x, w.to(torch.bfloat16), out_dtype=torch.float16)
        assert c.shape == (256, 128) and c.dtype == torch.float16
        o, lse = ops.attention(*(torch.empty(2, 8, 1024, 128, dtype=torch.float16),) * 3,
                               return_lse=True)  # fmt: skip
        assert o.shape == (2, 8, 1024, 128) and lse.shape == (2, 8, 1024)
    explanation = torch._dynamo.explain(block)(
        torch.randn(64, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16),
        *(torch.randn(1, 1, 64, 64, dtype=torch.float16),) * 3,
    )  # fmt: skip
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    called = " ".join(str(n.target) for g in explanation.graphs for n in g.graph.nodes)
    assert "tawa.matmul" in called and "tawa.attention" in called


def test_the_ops_say_what_is_missing_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops, "torch", None)
    with pytest.raises(
        ModuleNotFoundError, match=r"needs PyTorch: pip install 'tawa-xdsl\[torch\]'"
    ):
        ops.matmul(np.zeros((2, 2)), np.zeros((2, 2)))


def test_the_launch_benchmark_runs_with_the_mocked_driver(tmp_path) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "launch.json"
    done = subprocess.run(
        [sys.executable, str(root / "bench" / "launch_overhead.py"), "--mock", "--iters", "50",
         "--out", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {
        row["launcher"]: row["host_us_per_launch"] for row in json.loads(out.read_text())["rows"]
    }
    jit_rows = ("", " (grid callable)", " (new output each launch)")
    assert set(rows) == {*(f"tawa jit kernel[grid]{r}" for r in jit_rows), "tawa prepared launch",
                         "tawa CompiledKernel.launch"}  # fmt: skip
    assert all(us > 0 for us in rows.values())
    assert "step: launch_key" in done.stdout  # the repeated launch's steps, each timed


def test_the_op_benchmark_measures_host_time_with_the_mocked_driver(tmp_path) -> None:
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "bench" / "op_overhead.py"), str(tmp_path), "--mock",
         "--iters", "5"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((tmp_path / "op_overhead_mock.json").read_text())["rows"]
    names = [row["op"] for row in rows]
    assert {"matmul", "scaled_mm per-tensor x per-tensor", "attention GQA causal"} <= set(names)
    assert all(row["host_us_per_call"] > 0 for row in rows)


def test_the_torch_block_example_checks_itself_in_the_interpreter() -> None:
    """examples/torch_block.py on a CPU-only machine: a tiny block under torch.compile
    (fullgraph, aot_eager) in the tile interpreter, against eager PyTorch."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "torch_block.py"
    cpu_only = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # the GPU run: tests/gpu
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=600, check=False, env=cpu_only)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "tile interpreter (CPU)" in done.stdout and "max |tawa - torch|" in done.stdout
