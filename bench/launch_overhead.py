"""Host cost of a launch: ours against Triton's in the same process. Writes JSON (one row per
launcher).

    python bench/launch_overhead.py [--iters 2000] [--out bench/results/launch_overhead.json]
    python bench/launch_overhead.py --mock      # no GPU: the driver's launch call is a no-op

Rows: microseconds of host time per launch, a 128x128x64 f16 GEMM (the GPU finishes each one
faster than the host issues the next, so the loop measures the host), the same tensors every
launch, median of 5 rounds:

* `tawa jit kernel[grid]`: the library's @jit GEMM (`tawa_xdsl.kernels.gemm.gemm`) on torch
  CUDA tensors through TensorDescriptors (the repeat-launch path of `tawa_xdsl.jit.RepeatLaunch`;
  the issue's target is <= 20 us);
* `tawa jit kernel[grid] (grid callable)`: the same with `grid=lambda meta: ...`, as Triton
  code writes it;
* `tawa jit kernel[grid] (new output each launch)`: C cycles through more tensors than the
  launch caches and the tensor-map cache remember, so every launch is a miss: its launch key
  is new, C's tensor map is encoded, the parameters are packed (A's and B's maps reused);
* `tawa CompiledKernel.launch`: the runtime's unprepared path (kernel looked up, launch config
  checked, parameters packed with every check, every call; the same three tensors, so their
  maps come from the tensor-map cache: it encodes nothing);
* `tawa prepared launch`: `CompiledKernel.prepare`'s launcher (one cuLaunchKernelEx);
* `triton descriptors` / `triton pointers`: a Triton kernel with the same argument list (three
  host TensorDescriptors, or pointers, and three ints), when Triton is installed.

`--mock` measures the Python side on a machine without a GPU (`tawa_xdsl.runtime.fake_driver`:
the driver's calls succeed at once; the launch is still one ctypes call, to a C stand-in),
the tensors torch CPU tensors that say they are on CUDA; it also prints the repeated launch's
steps timed alone, in the process's CPU time (a machine shared with other work does not
inflate it as it does wall time). What it leaves out is the driver's own work in
cuLaunchKernelEx. As a proxy for the H200: the tree before the ctypes launch measured 15.9 us
here (`kernel[grid]` row, mock, development machine idle) and its Python side on the H200 was
16.0 us (that row less the prepared launch), so H200 ~= this mock row + the H200's prepared
launch (the driver call, cuda-python's 7.6 us before; ctypes' smaller).
The op overhead of `torch.ops.tawa.*` over the raw kernels is bench/op_overhead.py.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

import tawa_xdsl
from tawa_xdsl.kernels.gemm import gemm

ROOT = Path(__file__).resolve().parents[1]
META = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}


def host_us(
    launch: Callable[[], None], iters: int, sync: Callable[[], None],
    clock: Callable[[], float] = time.perf_counter,
) -> float:  # fmt: skip
    """Median over 5 rounds of the host microseconds per call of `launch` (`clock`: wall
    time; the mock passes the process's CPU time, which a loaded machine does not inflate)."""
    for _ in range(20):
        launch()
    sync()
    rounds = []
    for _ in range(5):
        start = clock()
        for _ in range(iters):
            launch()
        rounds.append((clock() - start) / iters * 1e6)
        sync()
    return statistics.median(rounds)


def tawa_launchers(
    m: int, n: int, k: int, device: Callable[[torch.Tensor], torch.Tensor], mock: bool
) -> dict[str, Callable[[], None]]:
    a = device(torch.randn(m, k, dtype=torch.float16))
    b = device(torch.randn(n, k, dtype=torch.float16))
    c = device(torch.empty(m, n, dtype=torch.float16))
    D = tawa_xdsl.TensorDescriptor.from_tensor
    descs = (D(a, [128, 64]), D(b, [128, 64]), D(c, [128, 128]))
    grid = (tawa_xdsl.cdiv(m, 128) * tawa_xdsl.cdiv(n, 128),)
    launch = gemm[grid]
    launchers: dict[str, Callable[[], None]] = {
        "tawa jit kernel[grid]": lambda: launch(*descs, m, n, k, **META),
        "tawa jit kernel[grid] (grid callable)": lambda: gemm[
            lambda meta: (tawa_xdsl.cdiv(m, meta["BLOCK_M"]) * tawa_xdsl.cdiv(n, meta["BLOCK_N"]),)
        ](*descs, m, n, k, **META),
    }
    # more outputs than the caches hold (256 launch keys, 256 tensor maps): every launch misses
    outputs = [device(torch.empty(m, n, dtype=torch.float16)) for _ in range(300)]
    moving = [D(out, [128, 128]) for out in outputs]
    turn = itertools.count()
    launchers["tawa jit kernel[grid] (new output each launch)"] = lambda: launch(
        descs[0], descs[1], moving[next(turn) % len(moving)], m, n, k, **META
    )
    backend = gemm.warmup(*descs, m, n, k, **META).gpu_kernel()
    stream = 0 if mock else torch.cuda.current_stream().cuda_stream
    launchers["tawa prepared launch"] = backend.prepare(grid, a, b, c, m, n, k, stream=stream)
    launchers["tawa CompiledKernel.launch"] = lambda: backend.launch(
        grid, a, b, c, m, n, k, stream=stream
    )
    return launchers


def triton_launchers(m: int, n: int, k: int) -> dict[str, Callable[[], None]]:
    try:
        import triton
        import triton.language as ttl
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:
        return {}

    @triton.jit
    def touch_desc(a_desc, b_desc, c_desc, M, N, K):
        tile = a_desc.load([0, 0])
        c_desc.store([0, 0], tile)

    @triton.jit
    def touch_ptr(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: ttl.constexpr):
        offs = ttl.arange(0, BLOCK)
        ttl.store(c_ptr + offs, ttl.load(a_ptr + offs))

    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    c = torch.empty(m, 64, device="cuda", dtype=torch.float16)
    descs = (
        TensorDescriptor.from_tensor(a, [128, 64]),
        TensorDescriptor.from_tensor(b, [128, 64]),
        TensorDescriptor.from_tensor(c, [128, 64]),
    )
    launchers = {"triton pointers": lambda: touch_ptr[(1,)](a, b, c, m, n, k, BLOCK=128)}
    try:
        touch_desc[(1,)](*descs, m, n, k)
        launchers["triton descriptors"] = lambda: touch_desc[(1,)](*descs, m, n, k)
    except Exception as error:  # noqa: BLE001 -- older Triton: pointers only, say why
        print(f"triton descriptors skipped: {error}")
    return launchers


# ------------------------------------------------------------------- the mocked driver


class MockCudaTensor(torch.Tensor):
    """A torch CPU tensor that says it is on CUDA device 0 (for the launch path's checks)."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def is_cuda(self) -> bool:
        return True

    def get_device(self) -> int:
        return 0


def mock_cuda_tensor(tensor: torch.Tensor) -> torch.Tensor:
    return torch.Tensor._make_subclass(MockCudaTensor, tensor)


def install_mock() -> None:
    """`tawa_xdsl.runtime.fake_driver` in place of the driver; torch's raw stream getter on a
    CPU build of torch."""
    from tawa_xdsl.runtime import fake_driver

    fake_driver.install()
    if not hasattr(torch._C, "_cuda_getCurrentRawStream"):  # a CPU build of torch
        torch._C._cuda_getCurrentRawStream = lambda device: 0


def steps_us(m: int, n: int, k: int, iters: int) -> dict[str, float]:
    """The repeated launch's steps, each timed alone (microseconds per call, best of 5)."""
    from tawa_xdsl import jit

    a, b = (mock_cuda_tensor(torch.randn(r, k, dtype=torch.float16)) for r in (m, n))
    c = mock_cuda_tensor(torch.empty(m, n, dtype=torch.float16))
    D = tawa_xdsl.TensorDescriptor.from_tensor
    args = (D(a, [128, 64]), D(b, [128, 64]), D(c, [128, 128]), m, n, k)
    grid = (tawa_xdsl.cdiv(m, 128) * tawa_xdsl.cdiv(n, 128),)
    gemm[grid](*args, **META)
    key = jit.launch_key(args, META)
    repeat = gemm.launches[key]
    prepared = repeat.prepared[grid, 0]
    steps = {
        "launch_key": lambda: jit.launch_key(args, META),
        "repeat lookup": lambda: gemm.launches.get(key),
        "stream": repeat.stream,
        "prepared lookup": lambda: repeat.prepared.get((grid, 0)),
        "prepared launch (ctypes call)": prepared,
        "kernel[grid](...) (all of it)": lambda: gemm[grid](*args, **META),
    }
    return {name: best_us(step, iters) for name, step in steps.items()}


def best_us(step: Callable[[], object], iters: int) -> float:
    step()
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(iters):
            step()
        best = min(best, (time.process_time() - start) / iters * 1e6)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--mock", action="store_true", help="no GPU: a stand-in driver")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/launch_overhead.json")
    args = parser.parse_args()
    m, n, k = 128, 128, 64
    if args.mock:
        install_mock()
        launchers = tawa_launchers(m, n, k, mock_cuda_tensor, mock=True)
        sync, device_name = (lambda: None), "mock driver (no GPU)"
        for name, us in steps_us(m, n, k, args.iters).items():
            print(f"  step: {name:34s} {us:8.2f} us")
    else:
        cuda = lambda t: t.cuda()  # noqa: E731
        launchers = {**tawa_launchers(m, n, k, cuda, mock=False), **triton_launchers(m, n, k)}
        sync, device_name = torch.cuda.synchronize, torch.cuda.get_device_name()
    rows = []
    for name, launch in launchers.items():
        us = host_us(
            launch, args.iters, sync, time.process_time if args.mock else time.perf_counter
        )
        rows.append({"launcher": name, "host_us_per_launch": us, "shape": [m, n, k]})
        print(f"{name:40s} {us:8.2f} us/launch")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"device": device_name, "rows": rows}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
