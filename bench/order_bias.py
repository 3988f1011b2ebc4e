"""Does the order of timing move the numbers? One of our attention kernels timed the old way
(do_bench, 25 ms warm-up and 100 ms, the same launch four times back to back after 2 s idle)
and the new way (bench/timing.py: two launches of the same kernel interleaved, which should
agree), in one process. Prints one line per configuration and writes JSON.

    python bench/order_bias.py [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from timing import interleaved  # noqa: E402

from tawa_xdsl.kernels.attention import compile_attention, default_form, grid  # noqa: E402

CONFIGS = ((128, 16384, False), (128, 2048, False), (64, 2048, False), (64, 16384, True))


def one(d: int, seq: int, causal: bool) -> dict:
    batch, heads = 16384 // seq, 2048 // d
    q, k, v = (torch.randn(batch * heads, seq, d, device="cuda", dtype=torch.float16)
               for _ in "qkv")  # fmt: skip
    o = torch.empty_like(q)
    block_m, persistent = default_form(d, causal, seq)
    kernel = compile_attention(d, "f16", causal, block_m=block_m, persistent=persistent)
    rows = grid(seq, batch * heads, block_m)
    launches = [kernel.prepare(rows, q, k, v, o, seq, 1 / math.sqrt(d)) for _ in range(2)]
    flop = 4 * batch * heads * seq**2 * d * (0.5 if causal else 1.0)
    launches[0]()
    torch.cuda.synchronize()
    time.sleep(2)
    in_a_row = [float(do_bench(launches[0], warmup=25, rep=100)) for _ in range(4)]
    timed = interleaved({"a": launches[0], "b": launches[1]})
    row = {
        "d": d, "seq": seq, "causal": causal,
        "in_a_row_tflops": [flop / ms / 1e9 for ms in in_a_row],
        "twins_tflops": {name: flop / t.ms / 1e9 for name, t in timed.items()},
        "twins_spread": {name: t.spread for name, t in timed.items()},
    }  # fmt: skip
    first, last = row["in_a_row_tflops"][0], row["in_a_row_tflops"][-1]
    a, b = row["twins_tflops"]["a"], row["twins_tflops"]["b"]
    print(f"d={d} seq={seq} causal={causal}: in a row "
          + " ".join(f"{x:.0f}" for x in row["in_a_row_tflops"])
          + f" (first/last {first / last:.3f}); interleaved twins {a:.0f} {b:.0f} "
          f"(a/b {a / b:.3f})", flush=True)  # fmt: skip
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "order_bias.json"))
    args = parser.parse_args()
    rows = [one(*config) for config in CONFIGS]
    Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows},
                                         indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
