"""Runtime smoke run on an sm_90 GPU: round trips, the reference GEMM checked and timed.

    python tests/gpu/runtime_smoke.py        # prints a report; the table comes last

Loads shared/reference/ptx/ws_gemm_bf16.ptx through `tawa_xdsl.runtime` (driver JIT, tensor maps
from runtime.tensormap, cuLaunchKernelEx), checks it against torch on fresh random data with a
NaN-poisoned output, and times it against cuBLAS (torch.matmul, bf16) in the same process.
"""

from __future__ import annotations

import platform
import sys
import time
from importlib import metadata

import ml_dtypes
import numpy as np
import torch
from ws_gemm_reference import WsGemm, find_reference_ptx, load_reference_kernel

from tawa_xdsl import runtime as rt

CHECK_SHAPES = [(256, 256, 128), (1024, 512, 1024), (2048, 4096, 8192)]
TIMED_SHAPES = [(8192, 8192, 4096), (8192, 8192, 8192), (8192, 8192, 16384)]


def median_ms(fn, warmup: int = 10, reps: int = 50) -> float:
    """Median of `reps` event-timed calls after `warmup`; one synchronize at the end, so the
    host enqueues ahead of the GPU and launch overhead is hidden wherever a call outlasts it."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(reps)
    ]
    for start, stop in events:
        start.record()
        fn()
        stop.record()
    torch.cuda.synchronize()
    return float(np.median([start.elapsed_time(stop) for start, stop in events]))


def report_environment(device: rt.Device) -> None:
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"cuda-bindings {metadata.version('cuda-bindings')}, numpy {np.__version__}"
    )
    print(
        f"device {device.ordinal}: {device.name} {device.arch}, {device.multiprocessors} SMs, "
        f"smem opt-in {device.max_shared_memory_optin} B"
    )


def check_round_trips() -> None:
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8):
        host = (rng.standard_normal((513, 257)) * 10).astype(dtype)
        back = rt.to_host(rt.to_device(host))
        verdict = "ok" if back.tobytes() == host.tobytes() else "MISMATCH"
        print(f"round trip numpy {np.dtype(dtype).name:9s}: {verdict}")
    t = torch.randn(1000, 1000, device="cuda", dtype=torch.bfloat16)
    same = rt.to_device(t).pointer == t.data_ptr()
    equal = np.array_equal(rt.to_host(t).astype(np.float32), t.float().cpu().numpy())
    print(f"torch bf16 tensor in place: pointer shared {same}, to_host equal {equal}")
    ours = rt.to_device(np.arange(6, dtype=np.float32))
    print(
        f"DeviceArray -> torch.as_tensor shares memory: "
        f"{torch.as_tensor(ours, device='cuda').data_ptr() == ours.pointer}"
    )


def gemm_operands(m: int, n: int, k: int):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    bt = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    return a, bt, c


def check_gemm(kernel: rt.Kernel, m: int, n: int, k: int) -> str:
    a, bt, c = gemm_operands(m, n, k)
    WsGemm(kernel, a, bt, c).run()
    rt.synchronize()
    ref = a.float() @ bt.float().T
    err = ((c - ref).norm() / ref.norm()).item()
    nan = int(torch.isnan(c).sum().item())
    verdict = "ok" if err < 1e-4 and nan == 0 else "FAIL"
    return f"check M={m} N={n} K={k}: relerr {err:.2e}, unwritten {nan}: {verdict}"


def time_gemm(kernel: rt.Kernel, m: int, n: int, k: int) -> tuple[float, float, float, float]:
    a, bt, c = gemm_operands(m, n, k)
    gemm = WsGemm(kernel, a, bt, c)
    flops = 2.0 * m * n * k
    run = gemm.prepared()
    ours = [median_ms(run) for _ in range(2)]
    cublas = median_ms(lambda: torch.matmul(a, bt.T))
    rt.synchronize()
    err = ((c - a.float() @ bt.float().T).norm() / (a.float() @ bt.float().T).norm()).item()
    assert err < 1e-4, f"timed GEMM wrong: relerr {err}"
    return flops / ours[0] / 1e9, flops / ours[1] / 1e9, flops / cublas / 1e9, err


def launch_overhead_us(kernel: rt.Kernel) -> dict[str, float]:
    """Host time of one launch: prepared, `launch_with` (prepared config), `launch` (all)."""
    a, bt, c = gemm_operands(128, 128, 64)
    gemm = WsGemm(kernel, a, bt, c)

    def full() -> None:
        rt.launch(
            kernel,
            (1, 1),
            384,
            gemm.tm_a,
            gemm.tm_b,
            c,
            64,
            128,
            shared_bytes=gemm.config.shared_bytes,
        )

    results = {}
    for name, fn in (
        ("prepare_launch", gemm.prepared()),
        ("launch_with", gemm.run),
        ("launch", full),
    ):
        fn()
        rt.synchronize()
        start = time.perf_counter()
        for _ in range(200):
            fn()
        results[name] = (time.perf_counter() - start) / 200 * 1e6
        rt.synchronize()
    return results


def main() -> int:
    device = rt.require_gpu()
    report_environment(device)
    check_round_trips()
    print(f"reference PTX: {find_reference_ptx()}")
    kernel = load_reference_kernel()
    print(
        f"loaded {kernel.name}: {kernel.registers} registers, max threads {kernel.max_threads}; "
        f"JIT log: {kernel.module.info_log.splitlines()[:2]}"
    )
    for shape in CHECK_SHAPES:
        print(check_gemm(kernel, *shape))
    overheads = launch_overhead_us(kernel)
    print("host time per launch: " + ", ".join(f"{k} {v:.1f} us" for k, v in overheads.items()))
    print()
    print("| M | N | K | ours TFLOP/s (run 1) | ours (run 2) | cuBLAS bf16 | ratio | relerr |")
    print("|---|---|---|---|---|---|---|---|")
    for m, n, k in TIMED_SHAPES:
        one, two, cublas, err = time_gemm(kernel, m, n, k)
        print(
            f"| {m} | {n} | {k} | {one:.0f} | {two:.0f} | {cublas:.0f} | "
            f"{max(one, two) / cublas:.2f} | {err:.1e} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
