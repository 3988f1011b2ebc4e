"""C = A @ B^T through the library kernel `tawa_xdsl.kernels.gemm.gemm`, launched like Triton.

A is MxK and B is NxK (both K-major, as the tensor cores like them), C is MxN, all f16 or all
bf16 (the kernel takes its element types from the descriptors). Run as a script it checks itself
against numpy on the CPU interpreter (or on an sm_90 GPU when one is present):

    python examples/gemm.py [--m 200 --n 136 --k 96]
"""

from __future__ import annotations

import argparse

import numpy as np

import tawa_xdsl
from tawa_xdsl.kernels.gemm import gemm


def matmul(a: np.ndarray, b: np.ndarray, block_m=128, block_n=128, block_k=64, group_m=8):
    """C = A @ B^T through the kernel: on an sm_90 GPU when one is present, else in the tile
    interpreter. 128x128x64 blocks are the shape the GPU backend takes."""
    (m, k), (n, _) = a.shape, b.shape
    c = np.zeros((m, n), a.dtype)
    a_desc = tawa_xdsl.TensorDescriptor.from_tensor(a, [block_m, block_k])
    b_desc = tawa_xdsl.TensorDescriptor.from_tensor(b, [block_n, block_k])
    c_desc = tawa_xdsl.TensorDescriptor.from_tensor(c, [block_m, block_n])

    def grid(meta):
        return (tl_cdiv(m, meta["BLOCK_M"]) * tl_cdiv(n, meta["BLOCK_N"]),)

    gemm[grid](
        a_desc, b_desc, c_desc, m, n, k,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
    )  # fmt: skip
    return c


def tl_cdiv(x: int, div: int) -> int:
    return (x + div - 1) // div


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=200)
    parser.add_argument("--n", type=int, default=136)
    parser.add_argument("--k", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    a = rng.standard_normal((args.m, args.k)).astype(np.float16)
    b = rng.standard_normal((args.n, args.k)).astype(np.float16)
    c = matmul(a, b)
    expected = (a.astype(np.float32) @ b.astype(np.float32).T).astype(np.float16)
    error = float(np.max(np.abs(c.astype(np.float32) - expected.astype(np.float32))))
    ok = np.allclose(c.astype(np.float32), expected.astype(np.float32), rtol=1e-2, atol=1e-2)
    print(f"gemm M={args.m} N={args.n} K={args.k}: max abs error {error:.2e} "
          f"{'OK' if ok else 'MISMATCH'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
