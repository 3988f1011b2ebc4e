"""GEMM benchmark: the generated warp-specialized kernel (best config) vs cuBLAS and Triton's
persistent TMA matmul (bench/triton_matmul_tma.py, best of its configs), same run.

    python bench/gemm.py [--dtypes fp8,bf16,f16] [--out bench/results/gemm.json]

C = A @ B^T, M = N = 8192, K from 256 to 16384. For each dtype and K, every config of
`tawa_xdsl.kernels.gemm.configs_for(dtype)` (the library kernel `tawa_xdsl.kernels.gemm.gemm`)
is timed through `tawa_xdsl.autotune.Autotuner.tune` (the same search `@autotune` runs), the
winner is checked against torch (relative error), and cuBLAS is timed in the same process:
torch.matmul for f16/bf16, and for fp8 (e4m3 A and B, bf16 C) torch._scaled_mm with unit
scales and bf16 output, the same function as ours. Each row also carries the issue's keys:
`ours`, `cublas` (fast accumulation for fp8) and `triton` TFLOP/s, `ratio_triton`.
Kernels are compiled with `verify=False`: the ring proofs are CPU work (tests/unit proves
these configurations) and would only spend the GPU lease. Prints one line per K with the best
config, both TFLOP/s and the ratio, and writes every timing as JSON. Timing: the configs tuned
one by one (do_bench medians), then our winner, cuBLAS and Triton's winner timed together in
interleaved rounds, each one's median round (bench/timing.py says why); fresh random inputs
(never zeros).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tawa_xdsl.language as tl  # noqa: E402
from tawa_xdsl.autotune import Autotuner, Config  # noqa: E402
from tawa_xdsl.compiler import CompiledKernel  # noqa: E402
from tawa_xdsl.kernels.gemm import compile_gemm, configs_for, grid  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import triton_matmul_tma  # noqa: E402
from timing import Lineup, time_once  # noqa: E402

KS = (256, 512, 1024, 2048, 4096, 8192, 16384)
DTYPES = {
    "bf16": (torch.bfloat16, tl.bfloat16),
    "f16": (torch.float16, tl.float16),
    "fp8": (torch.float8_e4m3fn, tl.float8e4nv),
}


def peer(a: torch.Tensor, b: torch.Tensor, fast_accum: bool = False) -> torch.Tensor:
    """cuBLAS on the same problem: C = A @ B^T (fp8: torch._scaled_mm, unit scales, bf16 out;
    `fast_accum` lets cuBLAS accumulate in the tensor core throughout, as our kernel does)."""
    if a.dtype == torch.float8_e4m3fn:
        one = torch.ones((), device=a.device, dtype=torch.float32)
        return torch._scaled_mm(
            a, b.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast_accum
        )
    return a @ b.T


def timer(run) -> float:
    """Milliseconds per call, for tuning (reported numbers: `timing.interleaved`)."""
    return time_once(run)


def short(config: Config) -> str:
    """BN128-D4P2-tma-pers(-G16)(-C1x2): tile width, D, P, epilogue, persistence, GROUP_M if
    not 8, consumer warpgroups x CTAs per SM if not 2 x 1."""
    o, kw = config.options(), config.kwargs
    consumers, ctas = o.get("num_consumer_groups", 2), o.get("ctas_per_sm", 1)
    return (
        f"BN{kw['BLOCK_N']}-D{o['num_stages']}P{o['mma_depth']}-{o['epilogue']}"
        f"{'-pers' if o.get('persistent') else ''}"
        f"{'-G' + str(kw['GROUP_M']) if 'GROUP_M' in kw else ''}"
        f"{f'-C{consumers}x{ctas}' if (consumers, ctas) != (2, 1) else ''}"
    )


def write_json(out: Path, rows: list[dict], configs: list[Config]) -> None:
    """Every row so far, with the run's metadata, as JSON at `out`."""
    meta = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "timing": "tuned one by one (do_bench median); the winners and peers timed in "
        "interleaved rounds, each one's median round (bench/timing.py)",
        "configs": [c.to_json() for c in configs],
        "peers": {
            "bf16/f16": "torch.matmul",
            "fp8": "torch._scaled_mm (scales 1, bf16 out); cublas_fast: use_fast_accum=True",
        },
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtypes", default="fp8,bf16,f16")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--ks", default=",".join(map(str, KS)))
    parser.add_argument("--out", default="bench/results/gemm.json")
    parser.add_argument("--ptx-dir", default=None, help="write each winner's PTX here")
    parser.add_argument("--no-triton", dest="triton", action="store_false",
                        help="leave out the Triton persistent TMA matmul peer")  # fmt: skip
    args = parser.parse_args()
    m = n = args.size
    rows = []
    all_configs: list[Config] = []
    for dname in args.dtypes.split(","):
        tdtype, ldtype = DTYPES[dname]
        out_dtype = torch.bfloat16 if ldtype.is_fp8 else tdtype
        configs = configs_for(ldtype)
        all_configs.extend(configs)
        kernels: dict[Config, CompiledKernel] = {}
        t0 = time.time()
        for config in configs:
            kernels[config] = compile_gemm(config, ldtype, verify=False)
        print(f"{dname}: compiled {len(kernels)} configs in {time.time() - t0:.1f}s", flush=True)
        tuner = Autotuner(None, configs, ["M", "N", "K"], timer=timer, use_disk=False)
        for k in map(int, args.ks.split(",")):
            a = torch.randn(m, k, device="cuda").to(tdtype)
            b = torch.randn(n, k, device="cuda").to(tdtype)
            c = torch.empty(m, n, device="cuda", dtype=out_dtype)
            flop = 2 * m * n * k

            def run(config: Config, a=a, b=b, c=c, k=k):
                return kernels[config].prepare(grid(m, n, config), a, b, c, m, n, k)  # noqa: B023

            best = tuner.tune((m, n, k, dname), run)
            _, triton_config, triton_failed = (
                triton_matmul_tma.best(a, b, c, timer) if args.triton else (None, None, {})
            )
            # the winners of the tuning, then timed together (interleaved rounds)
            lineup = Lineup()
            lineup.join("ours", run(best))
            lineup.join("cublas", lambda a=a, b=b: peer(a, b))
            if ldtype.is_fp8:
                lineup.join("cublas_fast", lambda a=a, b=b: peer(a, b, True))
            if triton_config is not None:
                lineup.join("triton", triton_matmul_tma.launcher(a, b, c, triton_config))
            timed = lineup.time()
            ms = timed["ours"].ms
            ms_cublas = timed["cublas"].ms
            ms_fast = timed["cublas_fast"].ms if "cublas_fast" in timed else None
            ms_triton = timed["triton"].ms if "triton" in timed else None
            c.fill_(float("nan"))
            run(best)()
            torch.cuda.synchronize()
            ref = a.float() @ b.float().T
            err = ((c.float() - ref).norm() / ref.norm()).item()
            times = tuner.timings[(m, n, k, dname)]
            row = {
                "M": m, "N": n, "K": k, "dtype": dname, "best": short(best),
                "best_config": best.to_json(), "tflops": flop / ms / 1e9,
                "cublas_tflops": flop / ms_cublas / 1e9, "ratio": ms_cublas / ms,
                "rel_err": err,
                "configs": {short(cf): flop / t / 1e9 for cf, t in times.items()},
                "spread": {name: round(t.spread, 4) for name, t in timed.items()},
            }  # fmt: skip
            if ms_fast is not None:
                row["cublas_fast_tflops"], row["ratio_fast"] = flop / ms_fast / 1e9, ms_fast / ms
            row["ours"] = row["tflops"]
            row["cublas"] = row.get("cublas_fast_tflops", row["cublas_tflops"])
            if ms_triton is not None:
                row["triton"], row["ratio_triton"] = flop / ms_triton / 1e9, ms_triton / ms
                row["triton_config"] = triton_config._asdict()
            if triton_failed:
                row["triton_errors"] = triton_failed
            rows.append(row)
            fast = (
                f"  fast-accum {row['cublas_fast_tflops']:.1f} ratio {row['ratio_fast']:.3f}"
                if ms_fast is not None
                else ""
            )
            if "triton" in row:
                fast += f"  triton {row['triton']:.1f} ratio {row['ratio_triton']:.3f}"
            print(
                f"{dname} K={k:6d} best {short(best):22s} ours {row['tflops']:7.1f} TFLOP/s  "
                f"cuBLAS {row['cublas_tflops']:7.1f}  ratio {row['ratio']:.3f}  relerr {err:.1e}"
                f"{fast}  | " + " ".join(f"{name}:{v:.0f}" for name, v in row["configs"].items()),
                flush=True,
            )
            if args.ptx_dir:
                Path(args.ptx_dir).mkdir(parents=True, exist_ok=True)
                (Path(args.ptx_dir) / f"{short(best)}.ptx").write_text(kernels[best].ptx)
            del a, b, c, ref
            write_json(Path(args.out), rows, all_configs)  # a time limit keeps what ran
    write_json(Path(args.out), rows, all_configs)
    print(f"\n{'dtype':>5} {'K':>6} {'ours':>8} {'cuBLAS':>8} {'ratio':>6}  best")
    for r in rows:
        print(
            f"{r['dtype']:>5} {r['K']:6d} {r['tflops']:8.1f} {r['cublas_tflops']:8.1f} "
            f"{r['ratio']:6.3f}  {r['best']}"
        )
    for dname in {r["dtype"] for r in rows}:
        ratios = [r["ratio"] for r in rows if r["dtype"] == dname]
        print(f"{dname}: mean ratio {sum(ratios) / len(ratios):.3f}, min {min(ratios):.3f}")
        over_triton = [r["ratio_triton"] for r in rows if r["dtype"] == dname and "triton" in r]
        if over_triton:
            print(f"{dname}: against Triton persistent TMA min {min(over_triton):.3f}")


if __name__ == "__main__":
    main()
