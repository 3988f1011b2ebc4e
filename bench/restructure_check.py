"""Did the restructuring of issue 18 cost speed? The PTX of the tree before it and the PTX this
tree generates, timed in one process beside cuBLAS (GEMM) and cuDNN (attention).

    python bench/restructure_check.py --old-ptx DIR [--out results.json]

DIR holds the PTX the earlier tree generated for the same kernels, one file per kernel:
`gemm_{bf16,fp8}_<config>.ptx` for every config of `tawa_xdsl.kernels.gemm.configs_for`, and
`attn_d{64,128}_{f16,bf16}_{full,causal}.ptx` from `compile_attention(d, dtype, causal)` (the
kernel parameters are unchanged, so the old PTX launches through this tree's runtime). Each
kernel and its peer are timed with `triton.testing.do_bench` (median) in rounds of old, new,
peer, new, old (the two times of each tree averaged, so a drift of the clock over a round
favours neither), and the median over three rounds kept. Each row also records whether
ptxas (on the machine that runs it) assembles both PTX texts to the same cubin. Prints old and
new ratios to the peer per row and the largest difference.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tawa_xdsl.language as tl  # noqa: E402
from tawa_xdsl.backend.ptxas import find_ptxas  # noqa: E402
from tawa_xdsl.kernels import attention, gemm  # noqa: E402

GEMM_DTYPES = {"bf16": (torch.bfloat16, tl.bfloat16), "fp8": (torch.float8_e4m3fn, tl.float8e4nv)}
ATTENTION_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def ms(run) -> float:
    return float(do_bench(run, warmup=25, rep=100, return_mode="median"))


ROUNDS = 3


def paired(old, new, peer) -> tuple[float, float, float]:
    """Times of `old`, `new` and `peer`: per round old new peer new old (the two times of each
    tree averaged), the median over `ROUNDS` rounds of each."""
    olds, news, peers = [], [], []
    for _ in range(ROUNDS):
        a, b, p, c, d = ms(old), ms(new), ms(peer), ms(new), ms(old)
        olds.append((a + d) / 2)
        news.append((b + c) / 2)
        peers.append(p)
    return statistics.median(olds), statistics.median(news), statistics.median(peers)


def same_cubin(old_ptx: str, new_ptx: str) -> bool | None:
    """Whether ptxas makes the same machine code of both texts (None without ptxas)."""
    tool = find_ptxas()
    if tool is None:
        return None
    cubins = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in (("old", old_ptx), ("new", new_ptx)):
            src, out = Path(tmp) / f"{name}.ptx", Path(tmp) / f"{name}.cubin"
            src.write_text(text)
            subprocess.run([tool, "-arch=sm_90a", "-o", str(out), str(src)], check=True)
            cubins.append(out.read_bytes())
    return cubins[0] == cubins[1]


def config_name(config) -> str:
    o, kw = config.options(), config.kwargs
    return (
        f"BN{kw['BLOCK_N']}-D{o['num_stages']}P{o['mma_depth']}-{o['epilogue']}"
        f"{'-pers' if o.get('persistent') else ''}"
        f"{'-G' + str(kw['GROUP_M']) if 'GROUP_M' in kw else ''}"
    )


def gemm_rows(old_dir: Path, size: int, ks: list[int]) -> list[dict]:
    rows = []
    for dname, (tdtype, ldtype) in GEMM_DTYPES.items():
        for config in gemm.configs_for(ldtype):
            name = config_name(config)
            old_file = old_dir / f"gemm_{dname}_{name}.ptx"
            if not old_file.exists():
                continue
            new = gemm.compile_gemm(config, ldtype, verify=False)
            old = dataclasses.replace(new, ptx=old_file.read_text())
            for k in ks:
                a = torch.randn(size, k, device="cuda").to(tdtype)
                b = torch.randn(size, k, device="cuda").to(tdtype)
                c = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
                if tdtype == torch.bfloat16:

                    def peer(a=a, b=b):
                        return a @ b.T
                else:
                    one = torch.ones((), device="cuda")

                    def peer(a=a, b=b, one=one):
                        return torch._scaled_mm(
                            a, b.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                            use_fast_accum=True,
                        )  # fmt: skip

                grid = gemm.grid(size, size, config)
                run_old = old.prepare(grid, a, b, c, size, size, k)
                run_new = new.prepare(grid, a, b, c, size, size, k)
                c.fill_(float("nan"))
                run_new()
                torch.cuda.synchronize()
                ref = a.float() @ b.float().T
                err = ((c.float() - ref).norm() / ref.norm()).item()
                t_old, t_new, t_peer = paired(run_old, run_new, peer)
                flop = 2 * size * size * k
                rows.append({
                    "kernel": "gemm", "dtype": dname, "config": name, "M": size, "N": size,
                    "K": k, "same_ptx": old.ptx == new.ptx,
                    "same_cubin": same_cubin(old.ptx, new.ptx), "rel_err_new": err,
                    "tflops_old": flop / t_old / 1e9, "tflops_new": flop / t_new / 1e9,
                    "tflops_peer": flop / t_peer / 1e9,
                    "peer": "torch.matmul" if dname == "bf16" else "_scaled_mm fast_accum",
                    "ratio_old": t_peer / t_old, "ratio_new": t_peer / t_new,
                })  # fmt: skip
                print_row(rows[-1])
                del a, b, c, ref
    return rows


def attention_rows(old_dir: Path, seq: int) -> list[dict]:
    rows = []
    for d in (64, 128):
        for dname, tdtype in ATTENTION_DTYPES.items():
            for causal in (False, True):
                old_file = old_dir / f"attn_d{d}_{dname}_{'causal' if causal else 'full'}.ptx"
                if not old_file.exists():
                    continue
                new = attention.compile_attention(d, dname, causal)
                old = dataclasses.replace(new, ptx=old_file.read_text())
                heads, batch = 2048 // d, 16384 // seq
                bh = batch * heads
                q, k, v = (torch.randn(bh, seq, d, device="cuda", dtype=tdtype) for _ in range(3))
                o = torch.empty_like(q)
                scale = 1.0 / math.sqrt(d)
                grid = attention.grid(seq, bh)
                run_old = old.prepare(grid, q, k, v, o, seq, scale)
                run_new = new.prepare(grid, q, k, v, o, seq, scale)
                q4, k4, v4 = (x.view(batch, heads, seq, d) for x in (q, k, v))

                def peer(q4=q4, k4=k4, v4=v4, causal=causal):
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        return torch.nn.functional.scaled_dot_product_attention(
                            q4, k4, v4, is_causal=causal
                        )

                o.fill_(float("nan"))
                run_new()
                torch.cuda.synchronize()
                ref = peer()
                err = (o.view_as(ref).float() - ref.float()).abs().max().item()
                t_old, t_new, t_peer = paired(run_old, run_new, peer)
                flop = 4 * bh * seq * seq * d * (0.5 if causal else 1.0)
                rows.append({
                    "kernel": "attention", "dtype": dname,
                    "config": f"d{d}-{'causal' if causal else 'full'}",
                    "seq": seq, "batch": batch, "heads": heads, "same_ptx": old.ptx == new.ptx,
                    "same_cubin": same_cubin(old.ptx, new.ptx),
                    "max_abs_err_new_vs_cudnn": err,
                    "tflops_old": flop / t_old / 1e9, "tflops_new": flop / t_new / 1e9,
                    "tflops_peer": flop / t_peer / 1e9, "peer": "SDPA cuDNN",
                    "ratio_old": t_peer / t_old, "ratio_new": t_peer / t_new,
                })  # fmt: skip
                print_row(rows[-1])
    return rows


def print_row(r: dict) -> None:
    where = f"K={r['K']}" if "K" in r else f"seq={r['seq']}"
    err = r.get("rel_err_new", r.get("max_abs_err_new_vs_cudnn"))
    print(
        f"{r['kernel']:9s} {r['dtype']:4s} {r['config']:26s} {where:9s} old {r['tflops_old']:7.1f} "
        f"new {r['tflops_new']:7.1f} peer {r['tflops_peer']:7.1f} | ratio old {r['ratio_old']:.3f} "
        f"new {r['ratio_new']:.3f} diff {r['ratio_new'] - r['ratio_old']:+.3f} | "
        f"same PTX {r['same_ptx']} cubin {r['same_cubin']} err {err:.1e}",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-ptx", required=True, type=Path)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--ks", default="1024,4096,16384")
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=Path("bench/results/restructure.json"))
    args = parser.parse_args()
    rows = gemm_rows(args.old_ptx, args.size, [int(k) for k in args.ks.split(",")])
    rows += attention_rows(args.old_ptx, args.seq)
    meta = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "timing": "do_bench median, warmup 25 ms, rep 100 ms; "
        "rounds old-new-peer-new-old, median of 3",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    worst = max(rows, key=lambda r: abs(r["ratio_new"] - r["ratio_old"]))
    gap = abs(worst["ratio_new"] - worst["ratio_old"])
    print(f"\n{len(rows)} rows; largest |ratio_new - ratio_old| = {gap:.3f} "
          f"({worst['kernel']} {worst['config']})")  # fmt: skip
    for kernel in ("gemm", "attention"):
        mine = [r for r in rows if r["kernel"] == kernel]
        if mine:
            mean = sum(r["ratio_new"] - r["ratio_old"] for r in mine) / len(mine)
            print(f"{kernel}: mean ratio_new - ratio_old {mean:+.4f} over {len(mine)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
