"""The PyTorch path on the H200: torch CUDA tensors through @jit with no copies, the stream a
launch runs on, the launch cache, `torch.ops.tawa.*` against torch, torch.compile calling the
ops without graph breaks (the bias and activation in the GEMM's epilogue, GQA read in place),
examples/torch_block.py, and the launch- and op-overhead benchmarks writing their JSON.

Run: `pytest tests/gpu/test_torch_gpu.py -v` (needs torch with CUDA and the `gpu` extra).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import tawa_xdsl
import tawa_xdsl.runtime as rt
from tawa_xdsl.kernels.attention import attn_fwd
from tawa_xdsl.kernels.gemm import gemm

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]
D = tawa_xdsl.TensorDescriptor.from_tensor


@pytest.fixture
def no_host_copies(monkeypatch: pytest.MonkeyPatch):
    """Fail the test if the launch copies anything between host and device."""

    def refuse(*args, **kwargs):
        raise AssertionError("the launch copied through the host")

    monkeypatch.setattr(rt, "to_device", refuse)
    monkeypatch.setattr(rt, "to_host", refuse)


def gemm_launch(a, b, c, stream=None):
    (m, k), n = a.shape, b.shape[0]
    gemm[(tawa_xdsl.cdiv(m, 128) * tawa_xdsl.cdiv(n, 128),)](
        D(a, [128, 64]), D(b, [128, 64]), D(c, [128, 128]), m, n, k,
        BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, stream=stream,
    )  # fmt: skip


@pytest.mark.parametrize(("m", "n", "k"), [(256, 256, 256), (300, 200, 136)])
def test_jit_gemm_on_torch_cuda_tensors_in_place(device, no_host_copies, m, n, k) -> None:
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    pointer = c.data_ptr()
    gemm_launch(a, b, c)
    torch.cuda.synchronize()
    assert c.data_ptr() == pointer
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=5e-2, rtol=1e-2)


def test_a_repeated_launch_is_the_prepared_one(device) -> None:
    a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    c = torch.zeros(256, 256, device="cuda", dtype=torch.float16)
    gemm_launch(a, b, c)
    before = gemm.repeat_hits
    for _ in range(3):
        gemm_launch(a, b, c)
    assert gemm.repeat_hits == before + 3
    c2 = torch.zeros_like(c)  # a new output tensor: a new tensor map, then hits again
    gemm_launch(a, b, c2)
    torch.cuda.synchronize()
    torch.testing.assert_close(c2, c)


def test_a_repeat_reads_the_tensors_as_they_are_now(device) -> None:
    """The prepared launch (one ctypes cuLaunchKernelEx) reads the memory, not a copy: new
    contents at the same address are seen; a view of the same memory with more rows (same
    address, new shape) gets its own tensor map and launch, and both stay right."""
    torch.manual_seed(4)
    a_all = torch.randn(512, 128, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 128, device="cuda", dtype=torch.float16)
    c_all = torch.zeros(512, 256, device="cuda", dtype=torch.float16)
    a, c = a_all[:256], c_all[:256]
    gemm_launch(a, b, c)
    a.copy_(torch.randn_like(a))  # same address, new values
    before = gemm.repeat_hits
    gemm_launch(a, b, c)
    assert gemm.repeat_hits == before + 1
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=5e-2, rtol=1e-2)
    gemm_launch(a_all, b, c_all)  # same addresses, 512 rows: a miss, then right
    assert gemm.repeat_hits == before + 1
    torch.cuda.synchronize()
    torch.testing.assert_close(c_all.float(), a_all.float() @ b.float().T, atol=5e-2, rtol=1e-2)


def test_launches_run_on_the_current_or_the_given_stream(device) -> None:
    a = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    c1, c2 = (torch.zeros(256, 128, device="cuda", dtype=torch.float16) for _ in range(2))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        gemm_launch(a, b, c1)  # torch's current stream: `side`
    other = torch.cuda.Stream()
    gemm_launch(a, b, c2, stream=other)
    side.synchronize()
    other.synchronize()
    # the launch configs the repeated launches were prepared with (jit.RepeatLaunch)
    streams = {
        prepared.config.stream
        for repeat in gemm.launches.values()
        for prepared in repeat.prepared.values()
    }
    assert {side.cuda_stream, other.cuda_stream} <= streams
    ref = (a.float() @ b.float().T).half()
    torch.testing.assert_close(c1, ref, atol=5e-2, rtol=1e-2)
    torch.testing.assert_close(c2, ref, atol=5e-2, rtol=1e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_jit_attention_on_torch_cuda_tensors(device, no_host_copies, causal) -> None:
    torch.manual_seed(1)
    heads, seq, dim = 4, 384, 64
    q, k, v = (torch.randn(heads, seq, dim, device="cuda", dtype=torch.float16) for _ in "qkv")
    o = torch.empty_like(q)
    pointer = o.data_ptr()
    attn_fwd[(tawa_xdsl.cdiv(seq, 128), heads)](
        D(q, [1, 128, dim]), D(k, [1, 128, dim]), D(v, [1, 128, dim]), D(o, [1, 128, dim]),
        seq, 1 / math.sqrt(dim), HEAD_DIM=dim, BLOCK_M=128, BLOCK_N=128, CAUSAL=causal,
        num_stages=3, mma_depth=1,
    )  # fmt: skip
    torch.cuda.synchronize()
    assert o.data_ptr() == pointer
    ref = torch.nn.functional.scaled_dot_product_attention(
        q[None].float(), k[None].float(), v[None].float(), is_causal=causal
    )[0]
    torch.testing.assert_close(o.float(), ref, atol=2e-2, rtol=1e-2)


def test_numpy_arguments_still_work(device) -> None:
    import numpy as np

    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float16)
    b = np.random.default_rng(1).standard_normal((128, 64)).astype(np.float16)
    c = np.zeros((128, 128), np.float16)
    gemm_launch(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.T.astype(np.float32), atol=5e-2,
                               rtol=1e-2)  # fmt: skip


# ------------------------------------------------------------------------------ the ops


ACTIVATIONS = {
    None: lambda x: x,
    "relu": torch.relu,
    "gelu": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": torch.nn.functional.silu,
}


@pytest.mark.parametrize("activation", list(ACTIVATIONS), ids=str)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_matmul_op(device, dtype, activation, monkeypatch) -> None:
    """Bias and activation in the kernel's epilogue (torch's epilogue is never called)."""
    import tawa_xdsl.ops as ops

    monkeypatch.setattr(ops, "epilogue", lambda *args: pytest.fail("torch epilogue used"))
    torch.manual_seed(2)
    a = torch.randn(1000, 512, device="cuda", dtype=dtype)
    b = torch.randn(512, 768, device="cuda", dtype=dtype)
    bias = torch.randn(768, device="cuda", dtype=dtype)
    c = ops.matmul(a, b, bias=bias, activation=activation)
    ref = ACTIVATIONS[activation](a.float() @ b.float() + bias.float())
    torch.testing.assert_close(c.float(), ref, atol=6e-2, rtol=2e-2)
    torch.testing.assert_close(torch.ops.tawa.matmul(a, b).float(), a.float() @ b.float(),
                               atol=6e-2, rtol=2e-2)  # fmt: skip


def test_scaled_mm_op(device) -> None:
    import tawa_xdsl.ops as ops

    torch.manual_seed(3)
    a = torch.randn(512, 256, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(384, 256, device="cuda").to(torch.float8_e4m3fn).t()  # column-major
    for scale_a, scale_b in [
        (torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")),
        (torch.rand(512, 1, device="cuda") + 0.5, torch.rand(1, 384, device="cuda") + 0.5),
    ]:
        c = ops.scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16)
        ref = (a.float() @ b.float()) * scale_a * scale_b
        torch.testing.assert_close(c.float(), ref, atol=0.5, rtol=2e-2)


@pytest.mark.parametrize(
    ("head_dim", "seq", "heads", "kv_heads", "causal"),
    [
        (128, 500, 8, 8, False),
        (128, 500, 8, 2, True),
        (64, 1500, 4, 4, False),  # 192 rows per program, one per row block
        (64, 700, 4, 4, False),  # 128 rows persistent (short)
        (64, 2500, 4, 2, True),  # 192 rows, causal past CAUSAL_PERSISTENT_SEQ
        (64, 700, 4, 1, True),  # 128 rows persistent (causal, short)
    ],
)
def test_attention_op(device, head_dim, seq, heads, kv_heads, causal) -> None:
    """The op in each rows and form `default_form` launches, with GQA and the log-sum-exp."""
    import tawa_xdsl.ops as ops

    torch.manual_seed(4)
    q = torch.randn(2, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(2, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(2, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16)
    o, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
    group = heads // kv_heads
    kk, vv = (t.float().repeat_interleave(group, dim=1) for t in (k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), kk, vv, is_causal=causal)
    torch.testing.assert_close(o.float(), ref, atol=2e-2, rtol=2e-2)
    scores = q.float() @ kk.transpose(-1, -2) / math.sqrt(head_dim)
    if causal:
        scores = scores.masked_fill(
            torch.ones(seq, seq, device="cuda").triu(1).bool(), float("-inf")
        )
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1), atol=1e-2, rtol=1e-3)


def test_torch_compile_calls_the_ops_without_graph_breaks(device) -> None:
    import tawa_xdsl.ops as ops

    def block(x, w1, w2, q, k, v):
        h = ops.matmul(x, w1, activation="silu")
        return ops.matmul(h, w2) + 1, ops.attention(q, k, v, causal=True)

    compiled = torch.compile(block, fullgraph=True)
    x = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    w1 = torch.randn(512, 1024, device="cuda", dtype=torch.float16) / 16
    w2 = torch.randn(1024, 512, device="cuda", dtype=torch.float16) / 32
    q, k, v = (torch.randn(1, 4, 256, 64, device="cuda", dtype=torch.float16) for _ in "qkv")
    out, o = compiled(x, w1, w2, q, k, v)
    ref_out, ref_o = block(x, w1, w2, q, k, v)
    torch.testing.assert_close(out, ref_out, atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(o, ref_o)
    explanation = torch._dynamo.explain(block)(x, w1, w2, q, k, v)
    assert explanation.graph_break_count == 0


def test_the_launch_benchmark_writes_json(device, tmp_path: Path) -> None:
    out = tmp_path / "launch.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "launch_overhead.py"), "--iters", "200",
         "--out", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    names = {row["launcher"] for row in rows}
    assert {"tawa jit kernel[grid]", "tawa prepared launch",
            "tawa jit kernel[grid] (new output each launch)"} <= names  # fmt: skip
    assert all(row["host_us_per_launch"] > 0 for row in rows)


def test_the_op_benchmark_writes_json(device, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "op_overhead.py"), "--quick", str(tmp_path)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads((tmp_path / "op_overhead.json").read_text())["rows"]
    assert {row["op"] for row in rows} >= {"matmul", "scaled_mm", "attention"}
    assert all(row["op_ms"] > 0 and row["raw_ms"] > 0 for row in rows)


def test_the_torch_block_example_on_the_gpu(device) -> None:
    """examples/torch_block.py at its default (Llama-layer) size: matches eager PyTorch and
    prints both blocks' time."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "torch_block.py")],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "ms per forward" in done.stdout
    print(done.stdout)
