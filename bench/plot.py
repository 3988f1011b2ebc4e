"""Plot bench/gemm.py's JSON: TFLOP/s against K, ours (best config) beside cuBLAS.

One panel per dtype (fp8 first): the peer is torch.matmul for f16/bf16 and torch._scaled_mm
(unit scales, bf16 out) for fp8; each point of ours is labelled with its ratio to the peer.

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
    order = {"fp8": 0, "bf16": 1, "f16": 2}
    dtypes = sorted({r["dtype"] for r in rows}, key=lambda d: (order.get(d, 9), d))
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6 * len(dtypes), 4.2), squeeze=False)
    for ax, dtype in zip(axes[0], dtypes, strict=True):
        these = sorted((r for r in rows if r["dtype"] == dtype), key=lambda r: r["K"])
        ks = [r["K"] for r in these]
        ax.plot(ks, [r["tflops"] for r in these], "o-", label="tawa-xdsl (best config)")
        peer = "cuBLAS fp8 (torch._scaled_mm)" if dtype == "fp8" else "cuBLAS (torch.matmul)"
        ax.plot(ks, [r["cublas_tflops"] for r in these], "s--", label=peer)
        for r in these:
            ax.annotate(f"{r['ratio']:.2f}x", (r["K"], r["tflops"]), textcoords="offset points",
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
    fig.tight_layout()
    dst.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(dst, dpi=120)


if __name__ == "__main__":
    main(sys.argv[1:])
