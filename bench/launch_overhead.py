"""Host cost of a launch: ours against Triton's in the same process. Writes JSON (one row per
launcher).

    python bench/launch_overhead.py [--iters 2000] [--out bench/results/launch_overhead.json]
    python bench/launch_overhead.py --mock      # no GPU: the driver's launch call is a no-op

Rows: microseconds of host time per launch, a 128x128x64 f16 GEMM (the GPU finishes each one
faster than the host issues the next, so the loop measures the host), the same tensors every
launch, median of 5 rounds:

* `tawa jit kernel[grid]`: the library's @jit GEMM (`tawa_xdsl.kernels.gemm.gemm`) on torch
  CUDA tensors through TensorDescriptors (the repeat-launch path of `JITFunction.run_on_gpu`;
  the issue's target is <= 20 us);
* `tawa jit kernel[grid] (grid callable)`: the same with `grid=lambda meta: ...`, as Triton
  code writes it;
* `tawa CompiledKernel.launch`: the uncached runtime path (tensor maps encoded every call);
* `tawa prepared launch`: `CompiledKernel.prepare`'s launcher (one cuLaunchKernelEx);
* `triton descriptors` / `triton pointers`: a Triton kernel with the same argument list (three
  host TensorDescriptors, or pointers, and three ints), when Triton is installed.

`--mock` measures the Python side on a machine without a GPU: the CUDA driver is a stand-in
whose calls return success at once, the tensors are torch CPU tensors that say they are on
CUDA, and the prepared launch is built without encoding tensor maps. What it leaves out is
the driver's own cost of cuLaunchKernelEx (on the H200 run, the `tawa prepared launch` row).
The op overhead of `torch.ops.tawa.*` over the raw kernels is bench/op_overhead.py.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import statistics
import time
import types
from collections.abc import Callable
from pathlib import Path

import torch

import tawa_xdsl
from tawa_xdsl.kernels.gemm import gemm

ROOT = Path(__file__).resolve().parents[1]
META = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}


def host_us(launch: Callable[[], None], iters: int, sync: Callable[[], None]) -> float:
    """Median over 5 rounds of the host microseconds per call of `launch`."""
    for _ in range(20):
        launch()
    sync()
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iters):
            launch()
        rounds.append((time.perf_counter() - start) / iters * 1e6)
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
    if not mock:
        backend = gemm.warmup(*descs, m, n, k, **META).gpu_kernel()
        stream = torch.cuda.current_stream().cuda_stream
        prepared = backend.prepare(grid, a, b, c, m, n, k, stream=stream)
        launchers["tawa CompiledKernel.launch"] = lambda: backend.launch(
            grid, a, b, c, m, n, k, stream=stream
        )
        launchers["tawa prepared launch"] = prepared
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


class DeviceAttributes:
    """`CUdevice_attribute`: each member is its own name."""

    def __getattr__(self, name: str) -> str:
        return name


def mock_driver() -> types.SimpleNamespace:
    """The cuda-python calls the launch path makes, each returning success at once (an sm_90
    device with 132 SMs)."""
    capability = {"COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0}

    def attribute(name: str, handle: int) -> tuple[int, int]:
        return 0, capability.get(name.removeprefix("CU_DEVICE_ATTRIBUTE_"), 132)

    return types.SimpleNamespace(
        cuInit=lambda flags: (0,),
        cuDeviceGetCount=lambda: (0, 1),
        cuDeviceGet=lambda ordinal: (0, 0),
        cuDeviceGetName=lambda size, handle: (0, b"mock sm_90\0"),
        cuDeviceGetAttribute=attribute,
        cuDevicePrimaryCtxRetain=lambda handle: (0, "context"),
        cuCtxSetCurrent=lambda context: (0,),
        cuLaunchKernelEx=lambda *args: (0,),
        CUdevice_attribute=DeviceAttributes(),
    )


def mock_prepare(kernel: object, grid: tuple[int, ...], args: list, stream: int) -> object:
    """A `PreparedLaunch` with the GEMM's parameter count, its tensor maps left unencoded."""
    launch = importlib.import_module("tawa_xdsl.runtime.launch")
    prepared = object.__new__(launch.PreparedLaunch)
    count = len(kernel.params)
    prepared.kernel = types.SimpleNamespace(handle=1, name=kernel.name)
    prepared.config = None
    prepared.args = ()
    prepared.storage = [ctypes.c_uint64(0) for _ in range(count)]
    prepared.pointers = (ctypes.c_void_p * count)()
    prepared.native = object()
    return prepared


def install_mock() -> None:
    """Replace the driver with `mock_driver()` and the launch preparation with `mock_prepare`."""
    driver = importlib.import_module("tawa_xdsl.runtime.driver")
    dispatch = importlib.import_module("tawa_xdsl.runtime.dispatch")
    fake = mock_driver()
    driver.cuda_driver = lambda: fake
    dispatch.prepare_device_launch = mock_prepare
    dispatch.LaunchCache.__init__.__defaults__ = (mock_prepare, 64)
    if not hasattr(torch._C, "_cuda_getCurrentRawStream"):  # a CPU build of torch
        torch._C._cuda_getCurrentRawStream = lambda device: 0


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
    else:
        cuda = lambda t: t.cuda()  # noqa: E731
        launchers = {**tawa_launchers(m, n, k, cuda, mock=False), **triton_launchers(m, n, k)}
        sync, device_name = torch.cuda.synchronize, torch.cuda.get_device_name()
    rows = []
    for name, launch in launchers.items():
        us = host_us(launch, args.iters, sync)
        rows.append({"launcher": name, "host_us_per_launch": us, "shape": [m, n, k]})
        print(f"{name:40s} {us:8.2f} us/launch")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"device": device_name, "rows": rows}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
