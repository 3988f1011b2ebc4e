"""Plot a benchmark's JSON: ours beside each peer, with our ratio to the peer on the points.

* bench/gemm.py: TFLOP/s against K, one panel per dtype (fp8 first); the peers are
  torch.matmul for f16/bf16 and torch._scaled_mm (unit scales, bf16 out; with fast
  accumulation too where the run has it) for fp8, and Triton's persistent TMA matmul.
* bench/attention.py: TFLOP/s against the sequence length,
  one panel per (dtype, head dim, heads, causal); our persistent form and the peers
  FlashAttention-4, cuDNN and the Triton TMA kernel where the run has them, ratios to FA4
  (else Triton).

python bench/plot.py bench/results/gemm.json bench/results/gemm.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    src, dst = Path(argv[0]), Path(argv[1])
    rows = json.loads(src.read_text())["rows"]
    fig = plot_attention(plt, rows) if "seq" in rows[0] else plot_gemm(plt, rows)
    fig.tight_layout()
    dst.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(dst, dpi=120)


def plot_gemm(plt, rows: list[dict]):
    order = {"fp8": 0, "bf16": 1, "f16": 2}
    dtypes = sorted({r["dtype"] for r in rows}, key=lambda d: (order.get(d, 9), d))
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6 * len(dtypes), 4.2), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes, strict=True):
        these = sorted((r for r in rows if r["dtype"] == dtype), key=lambda r: r["K"])
        ks = [r["K"] for r in these]
        ax.plot(ks, [r["tflops"] for r in these], "o-", label="tawa-xdsl (best config)")
        peer = "cuBLAS fp8 (torch._scaled_mm)" if dtype == "fp8" else "cuBLAS (torch.matmul)"
        ax.plot(ks, [r["cublas_tflops"] for r in these], "s--", label=peer)
        if all(r.get("cublas_fast_tflops") for r in these):
            fast = [r["cublas_fast_tflops"] for r in these]
            ax.plot(ks, fast, "v--", label="torch._scaled_mm, fast accumulation")
        if all(r.get("triton") for r in these):
            ax.plot(ks, [r["triton"] for r in these], "d--", label="Triton persistent TMA")
        for r in these:  # the ratio to the strongest cuBLAS form the run has
            ratio = f"{r['ratio_fast']:.2f}x fast" if r.get("ratio_fast") else f"{r['ratio']:.2f}x"
            ax.annotate(ratio, (r["K"], r["tflops"]), textcoords="offset points",
                        xytext=(0, -14), ha="center", fontsize=8)  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("K (M = N = 8192)")
        ax.set_ylabel("TFLOP/s")
        title = "e4m3 in, bf16 out" if dtype == "fp8" else f"{dtype} in and out"
        ax.set_title(f"GEMM {dtype} ({title}), H200")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    return fig


ATTENTION_PEERS = (("ours_straightforward", "tawa-xdsl, straightforward schedule", "o:"),
                   ("ours_persistent", "tawa-xdsl, persistent", "o-."),
                   ("fa4", "FlashAttention-4 (Hopper)", "s--"), ("cudnn", "cuDNN", "^--"),
                   ("triton", "Triton, TMA descriptors", "d--"))  # fmt: skip


def plot_attention(plt, rows: list[dict]):
    def panel(r: dict) -> tuple:
        return r["dtype"], r["d"], r.get("heads"), r.get("kv_heads"), r["causal"]

    panels = sorted({panel(r) for r in rows}, key=str)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.2), squeeze=False)
    for ax, key in zip(axes[0], panels, strict=True):
        dim, causal = key[1], key[-1]
        these = sorted((r for r in rows if panel(r) == key), key=lambda r: r["seq"])
        seqs = [r["seq"] for r in these]
        ax.plot(seqs, [r["ours"] for r in these], "o-", label="tawa-xdsl")
        for name, label, style in ATTENTION_PEERS:
            if all(r.get(name) for r in these):  # a peer absent from the run is not drawn
                ax.plot(seqs, [r[name] for r in these], style, label=label)
        peer = "fa4" if all(r.get("ratio_fa4") for r in these) else "triton"
        for r in these:
            ratio = f"{r[f'ratio_{peer}']:.2f}x {peer}"
            ax.annotate(ratio, (r["seq"], r["ours"]), textcoords="offset points",
                        xytext=(0, -14), ha="center", fontsize=8)  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_xticks(seqs, [str(s) for s in seqs])
        ax.set_xlabel("sequence length (16K tokens per batch)")
        ax.set_ylabel("TFLOP/s")
        mask = "causal" if causal else "full"
        heads = f", {key[2]}/{key[3]} heads" if key[2] != key[3] else ""
        ax.set_title(f"attention fwd {these[0]['dtype']}, d = {dim}{heads}, {mask}")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    return fig


if __name__ == "__main__":
    main(sys.argv[1:])
