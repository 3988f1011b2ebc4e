"""The hand-written warp-specialized GEMM (shared/reference/ptx/ws_gemm_bf16.ptx) as a client of
the runtime: C[M, N] (fp32) = A[M, K] @ Bt[N, K]^T with bf16 inputs, both K-contiguous.

The kernel: 384 threads (a producer warpgroup and two consumer warpgroups), a 128x128 tile per
CTA, BK = 64 with 128B swizzle, 4 stages of 32 KiB, 1024 bytes of alignment slack and 64 of
mbarriers; parameters (tmA, tmB, pC, K, N); M and N multiples of 128, K of 64.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tawa_xdsl import runtime as rt

ENTRY = "ws_gemm_bf16"
TILE_M = TILE_N = 128
TILE_K = 64
THREADS = 384
SHARED_BYTES = 4 * 32768 + 64 + 1024
REPO = Path(__file__).resolve().parents[2]


def find_reference_ptx(entry: str = ENTRY) -> Path | None:
    """`$TAWA_REFERENCE_PTX_DIR`, the repo's carry/ptx (device runs), or ../shared beside it."""
    candidates = [REPO / "carry" / "ptx", REPO.parent / "shared" / "reference" / "ptx"]
    if "TAWA_REFERENCE_PTX_DIR" in os.environ:
        candidates.insert(0, Path(os.environ["TAWA_REFERENCE_PTX_DIR"]))
    for folder in candidates:
        if (folder / f"{entry}.ptx").exists():
            return folder / f"{entry}.ptx"
    return None


class WsGemm:
    """Tensor maps + launch for one (A, Bt, C) triple; `run()` launches asynchronously."""

    def __init__(self, kernel: rt.Kernel, a: Any, bt: Any, c: Any, cluster: int = 1):
        m, k = rt.describe(a, "A").shape
        n, k_b = rt.describe(bt, "Bt").shape
        if k != k_b or m % TILE_M or n % TILE_N or k % TILE_K:
            raise ValueError(f"ws_gemm_bf16 needs M, N % 128 == 0, K % 64 == 0; got {m, n, k}")
        rt.expect_dtype(rt.describe(a).dtype, "bfloat16", "A")
        rt.expect_dtype(rt.describe(bt).dtype, "bfloat16", "Bt")
        rt.expect_dtype(rt.describe(c).dtype, "float32", "C")
        self.kernel = kernel
        self.tm_a = rt.tensor_map(a, box=(TILE_M, TILE_K), swizzle="128B", name="A")
        self.tm_b = rt.tensor_map(bt, box=(TILE_N, TILE_K), swizzle="128B", name="Bt")
        self.c, self.k, self.n = c, k, n
        self.config = rt.LaunchConfig.make(
            (n // TILE_N, m // TILE_M), THREADS, SHARED_BYTES, cluster=cluster
        )

    def run(self) -> None:
        """Launch through the full path (checks and packing on every call)."""
        rt.launch_with(self.kernel, self.config, self.tm_a, self.tm_b, self.c, self.k, self.n)

    def prepared(self) -> rt.PreparedLaunch:
        """A launcher that only calls cuLaunchKernelEx."""
        return rt.prepare_launch(
            self.kernel, self.config, self.tm_a, self.tm_b, self.c, self.k, self.n
        )


def load_reference_kernel() -> rt.Kernel:
    path = find_reference_ptx()
    if path is None:
        raise FileNotFoundError("ws_gemm_bf16.ptx not found (set TAWA_REFERENCE_PTX_DIR)")
    return rt.load_kernel(path.read_text(), ENTRY)
