"""An experiment, not a product path: the GEMM's TMA-store epilogue with one named barrier
per consumer warpgroup (`bar.sync 1 + wg, 128`, a register id) instead of one barrier of both
warpgroups (`bar.sync 2, 256`), edited into the printed PTX, timed beside the PTX as printed
in the same process (M = N = 8192, every 128 x 256 config of the library).

    python bench/gemm_epilogue_ab.py [--dtypes bf16,fp8] [--ks 256,512,1024,2048] [--out F]

Each warpgroup writes and stores only its own staging slots, so its own threads are all a
staging barrier needs; the shared barrier makes the warpgroup that finishes its MMAs first
wait for the other's before its epilogue. Prints TMA-store TFLOP/s of both and the ratio,
and checks the edited kernel against torch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tawa_xdsl.language as tl  # noqa: E402
from tawa_xdsl.kernels.gemm import compile_gemm, configs_for, grid  # noqa: E402

DTYPES = {"bf16": (torch.bfloat16, tl.bfloat16), "fp8": (torch.float8_e4m3fn, tl.float8e4nv)}
SHARED = "bar.sync 2, 256;"
# warpgroup 1 and 2 (0 is the producer) meet on barriers 2 and 3 (3 is free in a GEMM)
OWN = (
    "{ .reg .b32 %eb; mov.u32 %eb, %tid.x; shr.u32 %eb, %eb, 7; add.u32 %eb, %eb, 1; "
    "bar.sync %eb, 128; }"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtypes", default="bf16,fp8")
    parser.add_argument("--ks", default="256,512,1024,2048")
    parser.add_argument("--out", default="bench/results/gemm_epilogue_ab.json")
    args = parser.parse_args()
    m = n = 8192
    rows = []
    for dname in args.dtypes.split(","):
        tdtype, ldtype = DTYPES[dname]
        configs = [c for c in configs_for(ldtype) if c.kwargs["BLOCK_N"] == 256]
        for config in configs:
            kernel = compile_gemm(config, ldtype, verify=False)
            assert kernel.ptx.count(SHARED) == 2, "the epilogue's shared barrier moved"
            edited = dataclasses.replace(kernel, ptx=kernel.ptx.replace(SHARED, OWN))
            for k in map(int, args.ks.split(",")):
                a = torch.randn(m, k, device="cuda").to(tdtype)
                b = torch.randn(n, k, device="cuda").to(tdtype)
                c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                runs = {
                    name: ker.prepare(grid(m, n, config), a, b, c, m, n, k)
                    for name, ker in (("shared", kernel), ("own", edited))
                }
                ms = {}
                for name in ("shared", "own", "shared", "own"):  # interleaved, best of two
                    t = do_bench(runs[name], warmup=25, rep=100, return_mode="median")
                    ms[name] = min(ms.get(name, t), t)
                c.fill_(float("nan"))
                runs["own"]()
                torch.cuda.synchronize()
                ref = a.float() @ b.float().T
                err = ((c.float() - ref).norm() / ref.norm()).item()
                tflops = {name: 2 * m * n * k / t / 1e9 for name, t in ms.items()}
                row = {"dtype": dname, "K": k, "config": str(config), **tflops,
                       "ratio": tflops["own"] / tflops["shared"], "relerr_own": err}  # fmt: skip
                rows.append(row)
                print(
                    f"{dname} K={k:6d} {str(config)[:70]:70s} shared {tflops['shared']:7.1f} "
                    f"own {tflops['own']:7.1f} x{row['ratio']:.3f} err {err:.1e}",
                    flush=True,
                )
    Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
