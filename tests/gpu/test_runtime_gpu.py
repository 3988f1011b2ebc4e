"""The runtime on an sm_90 GPU: memory round trips, tensor maps, loading, launching, errors.

The kernel is the hand-written warp-specialized bf16 GEMM (ws_gemm_reference.py), checked
against torch in float32 on fresh random inputs with a NaN-poisoned output.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from ws_gemm_reference import (
    ENTRY,
    SHARED_BYTES,
    THREADS,
    WsGemm,
    find_reference_ptx,
    load_reference_kernel,
)

from tawa_xdsl import runtime as rt
from tawa_xdsl.runtime.module import link_ptx, parse_entries

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def kernel(device: rt.Device) -> rt.Kernel:
    if find_reference_ptx() is None:
        pytest.skip("reference ws_gemm_bf16.ptx not found (set TAWA_REFERENCE_PTX_DIR)")
    return load_reference_kernel()


def relative_error(out, ref) -> float:
    return float(((out - ref).norm() / ref.norm()).item())


def test_device_is_hopper(device: rt.Device) -> None:
    assert device.compute_capability == (9, 0)
    assert device.max_shared_memory_optin >= SHARED_BYTES
    assert rt.gpu_available()


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8, np.float64]
)
def test_numpy_round_trip(device: rt.Device, dtype: type) -> None:
    host = (np.random.default_rng(0).standard_normal((37, 129)) * 50).astype(dtype)
    on_device = rt.to_device(host)
    assert on_device.dtype == rt.dtype_name(np.dtype(dtype))
    back = rt.to_host(on_device)
    assert back.dtype == host.dtype and back.tobytes() == host.tobytes()
    rt.copy_into(on_device, host[::-1].copy())
    assert rt.to_host(on_device).tobytes() == host[::-1].tobytes()


def test_torch_tensor_is_used_in_place(device: rt.Device, torch) -> None:
    t = torch.randn(64, 96, device="cuda", dtype=torch.bfloat16)
    wrapped = rt.to_device(t, dtype="bfloat16")
    assert wrapped.pointer == t.data_ptr()  # no copy
    host = rt.to_host(t)
    assert host.dtype == np.dtype(ml_dtypes.bfloat16)
    assert np.array_equal(host.astype(np.float32), t.float().cpu().numpy())
    rt.copy_into(t, np.ones((64, 96), ml_dtypes.bfloat16))  # writes through to torch's memory
    assert bool((t == 1).all())


def test_device_array_seen_by_torch_without_copy(device: rt.Device, torch) -> None:
    ours = rt.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    theirs = torch.as_tensor(ours, device="cuda")
    assert theirs.data_ptr() == ours.pointer
    theirs.mul_(2)
    torch.cuda.synchronize()
    assert np.array_equal(rt.to_host(ours), np.arange(12, dtype=np.float32).reshape(3, 4) * 2)


def test_dtype_mismatch_is_named(device: rt.Device, torch) -> None:
    t = torch.zeros(8, 8, device="cuda", dtype=torch.float16)
    with pytest.raises(
        rt.DTypeMismatchError, match="A: expected element type bfloat16, got float16"
    ):
        rt.to_device(t, dtype="bfloat16", what="A")


def test_tensor_map_rejects_unaligned_rows(device: rt.Device, torch) -> None:
    a = torch.zeros(256, 100, device="cuda", dtype=torch.bfloat16)  # 200-byte rows
    with pytest.raises(rt.TensorMapError, match="A: strides: dim 0 stride is 200 bytes"):
        rt.tensor_map(a, box=(128, 64), swizzle="128B", name="A")


def test_tensor_map_encodes_aligned(device: rt.Device, torch) -> None:
    a = torch.zeros(256, 128, device="cuda", dtype=torch.bfloat16)
    tm = rt.tensor_map(a, box=(128, 64), swizzle="128B", name="A")
    assert tm.address % 128 == 0 and any(tm.to_bytes())


@pytest.mark.parametrize(("m", "n", "k"), [(128, 128, 64), (256, 384, 128), (1024, 512, 1024)])
def test_reference_gemm_matches_torch(kernel: rt.Kernel, torch, m: int, n: int, k: int) -> None:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    bt = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    WsGemm(kernel, a, bt, c).run()
    rt.synchronize()
    assert not bool(torch.isnan(c).any()), "some outputs were never written"
    assert relative_error(c, a.float() @ bt.float().T) < 1e-5


def test_reference_gemm_from_numpy(kernel: rt.Kernel) -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 192)).astype(ml_dtypes.bfloat16)
    bt = rng.standard_normal((128, 192)).astype(ml_dtypes.bfloat16)
    c = rt.to_device(np.full((256, 128), np.nan, np.float32))
    d_a, d_bt = rt.to_device(a), rt.to_device(bt)
    WsGemm(kernel, d_a, d_bt, c).run()
    out = rt.to_host(c)
    ref = a.astype(np.float64) @ bt.astype(np.float64).T
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-5


def test_single_tile_gemm_below_48k_smem(device: rt.Device) -> None:
    """tile_gemm_64x64x64.ptx: one warpgroup, 17 KiB of smem (no limit raise), numpy in/out."""
    path = find_reference_ptx("tile_gemm_64x64x64")
    if path is None:
        pytest.skip("reference tile_gemm_64x64x64.ptx not found")
    kernel = rt.load_kernel(path.read_text(), "tile_gemm_64x64x64")
    rng = np.random.default_rng(2)
    a = rt.to_device(rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16))
    bt = rt.to_device(rng.standard_normal((64, 64)).astype(ml_dtypes.bfloat16))
    c = rt.to_device(np.full((64, 64), np.nan, np.float32))
    tm_a = rt.tensor_map(a, box=(64, 64), swizzle="128B", name="A")
    tm_b = rt.tensor_map(bt, box=(64, 64), swizzle="128B", name="Bt")
    rt.launch(kernel, 1, 128, tm_a, tm_b, c, shared_bytes=1024 + 2 * 8192 + 8)
    out = rt.to_host(c)
    ref = rt.to_host(a).astype(np.float64) @ rt.to_host(bt).astype(np.float64).T
    assert kernel.shared_limit == 48 * 1024  # not raised
    assert np.abs(out - ref).max() < 1e-3


def test_prepared_launch_repeats(kernel: rt.Kernel, torch) -> None:
    a, bt = (torch.randn(256, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    c = torch.full((256, 256), float("nan"), device="cuda", dtype=torch.float32)
    gemm = WsGemm(kernel, a, bt, c)
    run = rt.prepare_launch(kernel, gemm.config, gemm.tm_a, gemm.tm_b, c, 128, 256)
    for _ in range(3):
        c.fill_(float("nan"))
        run()
        rt.synchronize()
        assert relative_error(c, a.float() @ bt.float().T) < 1e-5


def test_cluster_launch(kernel: rt.Kernel, torch) -> None:
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    bt = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    c = torch.full((256, 512), float("nan"), device="cuda", dtype=torch.float32)
    WsGemm(kernel, a, bt, c, cluster=2).run()
    rt.synchronize()
    assert relative_error(c, a.float() @ bt.float().T) < 1e-5


def test_launch_errors_are_named(kernel: rt.Kernel, torch) -> None:
    with pytest.raises(rt.LaunchError, match=r"takes 5 arguments \(tmA, tmB, pC, K, N\); got 1"):
        rt.launch(kernel, 1, THREADS, 1, shared_bytes=SHARED_BYTES)
    with pytest.raises(rt.LaunchError, match="has 512 threads; the kernel allows at most 384"):
        rt.launch(kernel, 1, 512, shared_bytes=SHARED_BYTES)
    with pytest.raises(rt.LaunchError, match="exceed the .* this device allows per block"):
        rt.launch(kernel, 1, THREADS, shared_bytes=300_000)
    with pytest.raises(rt.LaunchError, match="not a multiple of cluster"):
        rt.launch(kernel, 3, THREADS, cluster=2)


def test_bad_ptx_reports_the_jit_log(device: rt.Device) -> None:
    ptx = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k() { bogus.op; }\n"
    with pytest.raises(rt.PTXLoadError) as info:
        rt.load_ptx(ptx)
    assert "cuModuleLoadDataEx failed with CUDA_ERROR_INVALID_PTX" in str(info.value)


def test_missing_entry_lists_the_kernels(kernel: rt.Kernel) -> None:
    with pytest.raises(rt.LaunchError, match="module has no kernel 'gemm'; it has: ws_gemm_bf16"):
        kernel.module.kernel("gemm")


def test_nvjitlink_cubin(kernel: rt.Kernel, torch) -> None:
    pytest.importorskip("cuda.bindings.nvjitlink", reason="nvJitLink is optional")
    ptx = find_reference_ptx().read_text()  # type: ignore[union-attr] - the fixture found it
    try:
        cubin, _ = link_ptx(ptx)
    except rt.PTXLoadError as exc:
        if exc.result != "unavailable":
            raise
        pytest.skip(f"nvJitLink unavailable: {exc}")
    assert cubin[:4] == b"\x7fELF"
    module = rt.load_cubin(cubin, parse_entries(ptx))
    a = torch.randn(128, 128, device="cuda", dtype=torch.bfloat16)
    bt = torch.randn(128, 128, device="cuda", dtype=torch.bfloat16)
    c = torch.full((128, 128), float("nan"), device="cuda", dtype=torch.float32)
    WsGemm(module.kernel(ENTRY), a, bt, c).run()
    rt.synchronize()
    assert relative_error(c, a.float() @ bt.float().T) < 1e-5


def test_kernel_cache_round_trip(kernel: rt.Kernel, tmp_path) -> None:
    ptx = find_reference_ptx().read_text()  # type: ignore[union-attr] - the fixture found it
    cache = rt.KernelCache(tmp_path)
    key = rt.cache_key(ptx, {"entry": ENTRY})
    cache.put(key, ptx.encode(), {"entry": ENTRY, "shared_bytes": SHARED_BYTES})
    entry = cache.get(key)
    assert entry is not None
    loaded = rt.load_ptx(entry.payload).kernel(entry.meta["entry"])
    assert loaded.registers > 0
