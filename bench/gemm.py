"""GEMM benchmark: the generated warp-specialized kernel vs cuBLAS (torch.matmul), same run.

    python bench/gemm.py [--dtype bf16|f16] [--out bench/results/gemm.json]

M = N = 8192, K from 256 to 16384. Prints TFLOP/s of ours and of cuBLAS and their ratio, one
line per K and option set, and writes the table as JSON. Timing: triton.testing.do_bench
(CUDA events, median), fresh random inputs (never zeros), checked against torch first.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch
from triton.testing import do_bench
from xdsl.parser import Parser

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tawa_xdsl.backend.compile import CompileOptions, compile_to_ptx  # noqa: E402
from tawa_xdsl.dialects import make_context  # noqa: E402

GEMM = (Path(__file__).resolve().parents[1] / "examples" / "gemm.mlir").read_text()
OPTIONS = {
    "D4-P1-coop": CompileOptions(stages=4, mma_depth=1, consumers=2, persistent=False),
    "D4-P2-coop": CompileOptions(stages=4, mma_depth=2, consumers=2, persistent=False),
    "D6-P2-coop": CompileOptions(stages=6, mma_depth=2, consumers=2, persistent=False),
    "D4-P2-coop-persistent": CompileOptions(stages=4, mma_depth=2, consumers=2, persistent=True),
}
KS = (256, 512, 1024, 2048, 4096, 8192, 16384)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "f16"))
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--ks", default=",".join(map(str, KS)))
    parser.add_argument("--out", default="bench/results/gemm.json")
    args = parser.parse_args()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    text = GEMM if args.dtype == "f16" else GEMM.replace("xf16>", "xbf16>")
    kernels = {
        name: compile_to_ptx(Parser(make_context(), text).parse_module(), opts)
        for name, opts in OPTIONS.items()
    }
    m = n = args.size
    rows = []
    for k in map(int, args.ks.split(",")):
        a = torch.randn(m, k, device="cuda").to(dtype)
        b = torch.randn(n, k, device="cuda").to(dtype)
        flop = 2 * m * n * k
        ms_cublas = do_bench(lambda a=a, b=b: a @ b.T, warmup=25, rep=100, return_mode="median")
        ref = a.float() @ b.float().T
        for name, kernel in kernels.items():
            c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
            grid = ((m // 128) * (n // 128), 1, 1)
            run = kernel.prepare(grid, a, b, c, m, n, k)
            run()
            torch.cuda.synchronize()
            err = ((c.float() - ref).norm() / ref.norm()).item()
            ms = do_bench(run, warmup=25, rep=100, return_mode="median")
            row = {
                "M": m, "N": n, "K": k, "dtype": args.dtype, "kernel": name,
                "tflops": flop / ms / 1e9, "cublas_tflops": flop / ms_cublas / 1e9,
                "ratio": ms_cublas / ms, "rel_err": err,
            }  # fmt: skip
            rows.append(row)
            print(
                f"K={k:6d} {name:24s} ours {row['tflops']:7.1f} TFLOP/s  cuBLAS "
                f"{row['cublas_tflops']:7.1f}  ratio {row['ratio']:.3f}  relerr {err:.1e}",
                flush=True,
            )
    meta = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "timing": "triton.testing.do_bench median, warmup 25 ms, rep 100 ms",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"\n{'K':>6} " + " ".join(f"{n:>24}" for n in kernels) + f" {'cuBLAS':>8}")
    for k in map(int, args.ks.split(",")):
        these = [r for r in rows if r["K"] == k]
        cells = " ".join(f"{r['tflops']:8.1f} ({r['ratio']:.2f}x)".rjust(24) for r in these)
        print(f"{k:6d} {cells} {these[0]['cublas_tflops']:8.1f}")


if __name__ == "__main__":
    main()
