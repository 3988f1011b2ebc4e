"""Attention forward on the H200: ours vs torch SDPA (flash, cuDNN) vs a Triton FlashAttention
kernel (bench/triton_attention.py), all in the same process run.

Configurations of ANCHORS.md: 16K tokens per batch (batch = 16384 / seq), hidden 2048
(heads = 2048 / d), seq 512 .. 16384, d 64 and 128, causal and not. TFLOP/s =
4 * B * H * S^2 * d / t (halved when causal), medians of `triton.testing.do_bench`. Prints a
table with ratios to each peer and writes JSON.

    python bench/attention.py [--dtype f16] [--seqs 512,2048] [--dims 128] [--stages 3]
                              [--block-n 64] [--registers 24,240] [--pingpong]
                              [--no-peers] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from triton_attention import CONFIGS, launcher  # noqa: E402

from tawa_xdsl.kernels.attention import compile_attention, grid  # noqa: E402

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
TOKENS, HIDDEN = 16384, 2048


def tflops(batch: int, heads: int, seq: int, d: int, causal: bool, ms: float) -> float:
    flop = 4 * batch * heads * seq * seq * d * (0.5 if causal else 1.0)
    return flop / (ms * 1e-3) / 1e12


def bench(fn) -> float:
    return float(triton.testing.do_bench(fn, warmup=25, rep=100))


def sdpa(backend, q4, k4, v4, causal: bool):
    def run() -> None:
        with sdpa_kernel(backend):
            torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, is_causal=causal)

    return run


def one(
    d: int,
    seq: int,
    causal: bool,
    dtype: str,
    stages: int = 3,
    block_n: int | None = None,
    registers: tuple[int, int] | None = None,
    pingpong: bool = False,
    peers: bool = True,
) -> dict:
    heads, batch = HIDDEN // d, TOKENS // seq
    bh = batch * heads
    q, k, v = (torch.randn(bh, seq, d, device="cuda", dtype=DTYPES[dtype]) for _ in range(3))
    o = torch.empty_like(q)
    sm_scale = 1.0 / math.sqrt(d)
    row = {"d": d, "heads": heads, "batch": batch, "seq": seq, "causal": causal, "dtype": dtype}
    q4, k4, v4 = (x.view(batch, heads, seq, d) for x in (q, k, v))
    for name, backend in (
        (
            ("sdpa_flash", SDPBackend.FLASH_ATTENTION),
            ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
        )
        if peers
        else ()
    ):
        try:
            row[name] = tflops(
                batch, heads, seq, d, causal, bench(sdpa(backend, q4, k4, v4, causal))
            )
        except RuntimeError as exc:  # backend not available for this configuration
            row[name] = None
            row[f"{name}_error"] = str(exc).splitlines()[0][:200]
    best = None
    for config in CONFIGS if peers else ():
        try:
            value = tflops(
                batch, heads, seq, d, causal, bench(launcher(q, k, v, o, sm_scale, causal, config))
            )
        except Exception as exc:  # noqa: BLE001 (a config that does not compile: skip it)
            row.setdefault("triton_errors", []).append(
                f"{config}: {str(exc).splitlines()[0][:120]}"
            )
            continue
        if best is None or value > best[0]:
            best = (value, config)
    row["triton"] = best[0] if best else None
    row["triton_config"] = list(best[1]) if best else None
    # ours last: the peers are measured even if our kernel faults
    kernel = compile_attention(d, dtype, causal, block_n, stages, registers, pingpong)
    row["ours_config"] = {
        "stages": stages, "block_n": block_n, "registers": registers, "pingpong": pingpong
    }  # fmt: skip
    ours = kernel.prepare(grid(seq, bh), q, k, v, o, seq, sm_scale)
    ours()
    torch.cuda.synchronize()
    ref = torch.nn.functional.scaled_dot_product_attention(q4, k4, v4, is_causal=causal)
    row["max_abs_err_vs_sdpa"] = (o.view_as(ref).float() - ref.float()).abs().max().item()
    row["ours"] = tflops(batch, heads, seq, d, causal, bench(ours))
    for peer in ("sdpa_flash", "sdpa_cudnn", "triton"):
        row[f"ratio_{peer}"] = row["ours"] / row[peer] if row.get(peer) else None
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="f16", choices=sorted(DTYPES))
    parser.add_argument("--seqs", default="512,1024,2048,4096,8192,16384")
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--stages", type=int, default=3, help="our K/V ring depth")
    parser.add_argument("--block-n", type=int, default=None, help="our keys per step")
    parser.add_argument(
        "--registers", default=None, help="setmaxnreg producer,consumer (e.g. 24,240)"
    )
    parser.add_argument("--pingpong", action="store_true", help="alternate the consumers' MMAs")
    parser.add_argument("--no-peers", action="store_true", help="measure ours only")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "attention_f16.json"))
    args = parser.parse_args(argv)
    registers = tuple(int(x) for x in args.registers.split(",")) if args.registers else None
    rows = []
    header = (
        f"{'d':>4} {'seq':>6} {'causal':>6} | {'ours':>6} {'flash':>6} {'cudnn':>6} "
        f"{'triton':>6} | ours/flash ours/cudnn ours/triton  err"
    )
    print(header, flush=True)
    start = time.time()
    for d in (int(x) for x in args.dims.split(",")):
        for causal in (False, True):
            for seq in (int(x) for x in args.seqs.split(",")):
                r = one(
                    d, seq, causal, args.dtype, args.stages, args.block_n,
                    registers, args.pingpong, not args.no_peers,
                )  # fmt: skip
                rows.append(r)

                def f(x):
                    return f"{x:6.0f}" if x else "   n/a"

                def g(x):
                    return f"{x:10.2f}" if x else "       n/a"

                print(
                    f"{d:>4} {seq:>6} {str(causal):>6} | {f(r['ours'])} {f(r.get('sdpa_flash'))} "
                    f"{f(r.get('sdpa_cudnn'))} {f(r['triton'])} | {g(r['ratio_sdpa_flash'])} "
                    f"{g(r['ratio_sdpa_cudnn'])} {g(r['ratio_triton'])}  "
                    f"{r['max_abs_err_vs_sdpa']:.1e}",
                    flush=True,
                )
    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "dtype": args.dtype,
        "seconds": round(time.time() - start, 1),
    }
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
