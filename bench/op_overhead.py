"""The overhead of `torch.ops.tawa.*` over the raw kernel it launches, per shape, in one process.

    python bench/op_overhead.py RESULTS_DIR [--quick]

For each op and shape: the op's time per call and the raw kernel's (the same program with the
config the op's autotuner picked, launched through its prepared cuLaunchKernelEx on the same
tensors), in milliseconds, from CUDA events around `--calls` back-to-back calls, as a model's
forward issues them, in `--rounds` rounds that alternate which of op and raw runs first;
`overhead` is the median over rounds of op / raw - 1 (the issue's target is <= 3%);
`op_issue_us` / `raw_issue_us` are the host microseconds to issue one call (an op whose issue
time exceeds its kernel's time is host-bound). Rows go to RESULTS_DIR/op_overhead.json.

* matmul: f16 4096^3 plain, and with a bias vector and gelu (fused in the epilogue);
* scaled_mm: fp8 e4m3 4096^3, per-row x per-column scales (both vectors read by the kernel's
  epilogue) and per-tensor x per-tensor (folded by torch into one [N] vector on the first
  call, kept while the scale tensors are unchanged: `ops.cached_scale_vectors`); the raw
  kernel reads the same vectors;
* attention: bf16 [B, H, S, D] = [4, 32, 4096, 128] causal, and GQA with 8 K/V heads.

`--quick` takes small shapes (a test of the script, not a measurement).

`--mock` needs no GPU: the host microseconds per call of each op (the process's CPU time, best
of 5 rounds), on small CPU tensors that all claim to be on CUDA device 0, under
`tawa_xdsl.runtime.fake_driver` (the launch is one ctypes call to a C stand-in, tensor maps
are not really encoded), with the first config of each GEMM instead of autotuning, and the
dispatch of a no-op `torch.library` op for scale. An op is host-bound on the GPU when this
time (plus the driver's launch, ~5 us) exceeds its kernel's: the queue runs dry.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

import tawa_xdsl
import tawa_xdsl.ops as ops
from tawa_xdsl.kernels.gemm import epilogue_arguments


def ms_per_round(run: Callable[[], object], calls: int) -> float:
    """The GPU milliseconds per call of `calls` back-to-back calls of `run`, in the steady
    state: one call is queued before the start event, so the GPU is busy when the round
    starts and the first call's host issue time (the op's is 30-55 us, the raw kernel's 5-8
    us) is not timed as GPU idleness; the issue time is `issue_us`'s row of its own."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    run()
    start.record()
    for _ in range(calls):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def issue_us(run: Callable[[], object], calls: int, rounds: int = 10) -> float:
    """The median host microseconds to issue one call of `run` (wall time of `calls` calls,
    the GPU idle at the start of each round): an op whose issue time exceeds its kernel's
    time is host-bound, the launch queue runs dry."""
    samples = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            run()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def paired_ms(
    op: Callable[[], object], raw: Callable[[], object], calls: int, rounds: int
) -> tuple[float, float, float]:
    """(op ms, raw ms, median of the per-round op / raw) over `rounds` rounds that alternate
    which of the two runs first, so clock and thermal drift fall on both alike."""
    op(), raw()
    torch.cuda.synchronize()
    op_times, raw_times, ratios = [], [], []
    for i in range(rounds):
        if i % 2:
            raw_ms, op_ms = ms_per_round(raw, calls), ms_per_round(op, calls)
        else:
            op_ms, raw_ms = ms_per_round(op, calls), ms_per_round(raw, calls)
        op_times.append(op_ms)
        raw_times.append(raw_ms)
        ratios.append(op_ms / raw_ms)
    return statistics.median(op_times), statistics.median(raw_times), statistics.median(ratios)


def prepared(program: ops.Program, grid: tuple[int, ...], args: list) -> Callable[[], None]:
    stream = torch.cuda.current_stream().cuda_stream
    return program.gpu_kernel().prepare(grid, *args, stream=stream)


def matmul_rows(size: int, fused: bool) -> tuple[Callable, Callable, dict]:
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b_nk = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = b_nk.t()  # [K, N], K-major: the op reads it without a copy
    bias = torch.randn(size, device="cuda", dtype=torch.float16) if fused else None
    activation = "gelu" if fused else None
    ops.matmul(a, b, bias=bias, activation=activation)  # tunes this shape
    form = ops.GemmForm("float16", "float16", "float16" if fused else None, activation=activation)
    config = ops.gemm_tuner("float16").best[size, size, size, form]
    program, grid = ops.GEMM_CHOICES[size, size, size, form]  # what the op launches
    c = torch.empty(size, size, device="cuda", dtype=torch.float16)
    args = [a, b_nk, c, size, size, size, *([bias] if fused else [])]
    row = {"op": "matmul", "shape": [size] * 3, "dtype": "float16",
           "epilogue": "bias+gelu" if fused else "none", "config": str(config)}  # fmt: skip
    return (
        (lambda: ops.matmul(a, b, bias=bias, activation=activation)),
        prepared(program, grid, args),
        row,
    )


def scaled_mm_rows(size: int, per_tensor: bool) -> tuple[Callable, Callable, dict]:
    a = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn)
    b_nk = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn)
    if per_tensor:
        scale_a, scale_b = torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
    else:
        scale_a = torch.rand(size, 1, device="cuda") + 0.5
        scale_b = torch.rand(1, size, device="cuda") + 0.5
    op = lambda: ops.scaled_mm(a, b_nk.t(), scale_a, scale_b, out_dtype=torch.bfloat16)  # noqa: E731
    op()  # tunes this shape
    row_scale, col_scale = ops.scale_vectors(scale_a, scale_b, size, size)
    form = ops.GemmForm("float8_e4m3fn", "bfloat16", row_scale=row_scale is not None,
                        col_scale=col_scale is not None)  # fmt: skip
    config = ops.gemm_tuner("float8_e4m3fn").best[size, size, size, form]
    program, grid = ops.GEMM_CHOICES[size, size, size, form]
    c = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    vectors = epilogue_arguments(row_scale=row_scale, col_scale=col_scale)
    scales = "per-tensor x per-tensor" if per_tensor else "per-row x per-column"
    row = {"op": "scaled_mm", "shape": [size] * 3, "dtype": "float8_e4m3fn",
           "epilogue": f"{scales} scales", "config": str(config)}  # fmt: skip
    return op, prepared(program, grid, [a, b_nk, c, size, size, size, *vectors]), row


def attention_rows(batch: int, heads: int, kv_heads: int, seq: int) -> tuple:
    dim, group = 128, heads // kv_heads
    q = torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(batch, kv_heads, seq, dim, device="cuda", dtype=torch.bfloat16)
            for _ in "kv")  # fmt: skip
    program = ops.attention_program(dim, "bfloat16", True, False, group)
    rows = batch * heads
    o = torch.empty(rows, seq, dim, device="cuda", dtype=torch.bfloat16)
    args = [q.reshape(rows, seq, dim), k.reshape(rows // group, seq, dim),
            v.reshape(rows // group, seq, dim), o, seq, 1 / math.sqrt(dim)]  # fmt: skip
    row = {"op": "attention", "shape": [batch, heads, seq, dim], "kv_heads": kv_heads,
           "dtype": "bfloat16", "causal": True}  # fmt: skip
    op = lambda: ops.attention(q, k, v, causal=True)  # noqa: E731
    return op, prepared(program, (tawa_xdsl.cdiv(seq, 128), rows, 1), args), row


def host_us(run: Callable[[], object], iters: int) -> float:
    """The best over 5 rounds of the process CPU microseconds per call of `run`."""
    run()
    best = math.inf
    for _ in range(5):
        start = time.process_time()
        for _ in range(iters):
            run()
        best = min(best, (time.process_time() - start) / iters * 1e6)
    return best


def install_mock() -> None:
    """The fake driver, torch's raw stream getter on a CPU build, and every tensor claiming
    CUDA device 0 (this process only); GEMM tuners that take their first config."""
    from tawa_xdsl.runtime import fake_driver

    fake_driver.install()
    if not hasattr(torch._C, "_cuda_getCurrentRawStream"):
        torch._C._cuda_getCurrentRawStream = lambda device: 0
    torch.Tensor.is_cuda = property(lambda self: True)
    torch.Tensor.get_device = lambda self: 0
    for dtype in ("float16", "float8_e4m3fn"):
        tuner = ops.gemm_tuner(dtype)
        tuner.timer, tuner.use_disk = (lambda launch: 0.0), False  # ties: the first config


def mock_rows(iters: int) -> list[dict]:
    """The host time per call of each op (see `--mock` in the module docstring)."""
    install_mock()
    size = 256
    a, b_nk = (torch.randn(size, size, dtype=torch.float16) for _ in "ab")
    bias = torch.randn(size, dtype=torch.float16)
    a8, b8_nk = (torch.randn(size, size).to(torch.float8_e4m3fn) for _ in "ab")
    rows_scale, cols_scale = torch.rand(size, 1) + 0.5, torch.rand(1, size) + 0.5
    one, two = torch.tensor(0.5), torch.tensor(2.0)
    q, k = (torch.randn(1, 4, 256, 128, dtype=torch.bfloat16) for _ in "qk")
    k_gqa = torch.randn(1, 1, 256, 128, dtype=torch.bfloat16)
    torch.library.define("tawa_bench::identity", "(Tensor a) -> Tensor")
    torch.library.impl("tawa_bench::identity", ("CPU", "CUDA"), lambda t: t)
    cases = {
        "matmul": lambda: ops.matmul(a, b_nk.t()),
        "matmul bias+gelu": lambda: ops.matmul(a, b_nk.t(), bias=bias, activation="gelu"),
        "scaled_mm per-row x per-column": lambda: ops.scaled_mm(
            a8, b8_nk.t(), rows_scale, cols_scale, out_dtype=torch.bfloat16
        ),
        "scaled_mm per-tensor x per-tensor": lambda: ops.scaled_mm(
            a8, b8_nk.t(), one, two, out_dtype=torch.bfloat16
        ),
        "attention causal": lambda: ops.attention(q, k, k, causal=True),
        "attention GQA causal": lambda: ops.attention(q, k_gqa, k_gqa, causal=True),
        "torch.library no-op op (dispatch alone)": lambda: torch.ops.tawa_bench.identity(a),
    }
    rows = []
    for name, run in cases.items():
        rows.append({"op": name, "host_us_per_call": host_us(run, iters)})
        print(f"{name:42s} {rows[-1]['host_us_per_call']:8.1f} us/call (host, mock driver)")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results_dir", type=Path)
    parser.add_argument("--quick", action="store_true", help="small shapes: a test of the script")
    parser.add_argument("--mock", action="store_true", help="no GPU: host time per call")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--iters", type=int, default=500, help="calls per round of --mock")
    args = parser.parse_args()
    args.results_dir.mkdir(parents=True, exist_ok=True)
    if args.mock:
        out = args.results_dir / "op_overhead_mock.json"
        rows = mock_rows(args.iters)
        out.write_text(json.dumps({"device": "mock driver (no GPU)", "rows": rows}, indent=1))
        print(f"wrote {out}")
        return 0
    size, seq = (1024, 512) if args.quick else (4096, 4096)
    cases = [
        lambda: matmul_rows(size, fused=False),
        lambda: matmul_rows(size, fused=True),
        lambda: scaled_mm_rows(size, per_tensor=False),
        lambda: scaled_mm_rows(size, per_tensor=True),
        lambda: attention_rows(4, 32, 32, seq),
        lambda: attention_rows(4, 32, 8, seq),
    ]
    rows = []
    for case in cases:
        op, raw, row = case()
        row["op_ms"], row["raw_ms"], ratio = paired_ms(op, raw, args.calls, args.rounds)
        row["overhead"] = ratio - 1
        row["op_issue_us"] = issue_us(op, args.calls)
        row["raw_issue_us"] = issue_us(raw, args.calls)
        rows.append(row)
        print(f"{row['op']:10s} {str(row['shape']):22s} {row.get('epilogue', ''):30s} "
              f"op {row['op_ms']:.4f} ms  raw {row['raw_ms']:.4f} ms  "
              f"overhead {row['overhead']:+.1%}  host issue op {row['op_issue_us']:.1f} us "
              f"raw {row['raw_issue_us']:.1f} us")  # fmt: skip
    out = args.results_dir / "op_overhead.json"
    out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
