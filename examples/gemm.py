"""C = A @ B^T with fp32 accumulation, as a Triton-style kernel with tensor descriptors.

A is MxK and B is NxK (both K-major, as the tensor cores like them), C is MxN, all f16.
Programs walk the output tiles in groups of GROUP_M tile rows, so that neighbouring programs
share B tiles in L2 (Triton's grouped ordering). Run as a script it checks itself against
numpy on the CPU interpreter:

    python examples/gemm.py [--m 200 --n 136 --k 96]
"""

from __future__ import annotations

import argparse

import numpy as np

import tawa_xdsl
import tawa_xdsl.language as tl


@tawa_xdsl.jit
def grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """The (row, column) output tile of program `pid` in grouped ordering."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles_per_group = GROUP_M * tiles_n
    first_m = (pid // tiles_per_group) * GROUP_M
    group_size = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % tiles_per_group) % group_size
    pid_n = (pid % tiles_per_group) // group_size
    return pid_m, pid_n


@tawa_xdsl.jit
def matmul_kernel(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_m, pid_n = grouped_tile(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K)):
        off_k = k * BLOCK_K
        a = a_desc.load([off_m, off_k])
        b = b_desc.load([off_n, off_k])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(tl.float16))


def matmul(a: np.ndarray, b: np.ndarray, block_m=128, block_n=128, block_k=64, group_m=8):
    """C = A @ B^T through the kernel: on an sm_90 GPU when one is present, else in the tile
    interpreter. 128x128x64 blocks are the shape the GPU backend takes."""
    (m, k), (n, _) = a.shape, b.shape
    c = np.zeros((m, n), np.float16)
    a_desc = tawa_xdsl.TensorDescriptor.from_tensor(a, [block_m, block_k])
    b_desc = tawa_xdsl.TensorDescriptor.from_tensor(b, [block_n, block_k])
    c_desc = tawa_xdsl.TensorDescriptor.from_tensor(c, [block_m, block_n])

    def grid(meta):
        return (tl_cdiv(m, meta["BLOCK_M"]) * tl_cdiv(n, meta["BLOCK_N"]),)

    matmul_kernel[grid](
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
