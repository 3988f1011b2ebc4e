"""Launch one library GEMM config a few times (for ncu): C = A @ B^T, M = N = 8192.

    python bench/gemm_probe.py [--config 2] [--k 256] [--dtype bf16] [--launches 3]

`--config` indexes `tawa_xdsl.kernels.gemm.configs_for(dtype)`. Under ncu, skip the first
launch (`--launch-skip 1 --launch-count 1`) so that the profiled one is warm.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tawa_xdsl.language as tl  # noqa: E402
from tawa_xdsl.kernels.gemm import compile_gemm, configs_for, grid  # noqa: E402

DTYPES = {"bf16": (torch.bfloat16, tl.bfloat16), "fp8": (torch.float8_e4m3fn, tl.float8e4nv)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", type=int, default=2)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--launches", type=int, default=3)
    args = parser.parse_args()
    tdtype, ldtype = DTYPES[args.dtype]
    config = configs_for(ldtype)[args.config]
    kernel = compile_gemm(config, ldtype, verify=False)
    m = n = 8192
    a = torch.randn(m, args.k, device="cuda").to(tdtype)
    b = torch.randn(n, args.k, device="cuda").to(tdtype)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    launch = kernel.prepare(grid(m, n, config), a, b, c, m, n, args.k)
    for _ in range(args.launches):
        launch()
    torch.cuda.synchronize()
    print(f"{config}: {args.launches} launches at K = {args.k}")


if __name__ == "__main__":
    main()
