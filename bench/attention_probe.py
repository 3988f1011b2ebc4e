"""Launch one attention forward a few times (for ncu): ours (the library's form) or FA4's
Hopper path, on the ANCHORS configuration (16K tokens per batch, hidden 2048).

    python bench/attention_probe.py [--kernel ours|fa4] [--d 128] [--seq 2048] [--causal]
                                    [--dtype f16] [--launches 3]

Every tensor is made before the first launch, so under ncu `--launch-skip 1 --launch-count 1`
with a kernel-name filter profiles a warm launch of the attention kernel alone (FA4 compiles
on its first call).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention import (  # noqa: E402  (bench/attention.py: the same configurations and forms)
    DTYPES,
    HIDDEN,
    TOKENS,
    compile_attention,
    default_form,
    grid,
    persistent_default,
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernel", default="ours", choices=("ours", "fa4"))
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--dtype", default="f16", choices=sorted(DTYPES))
    parser.add_argument("--launches", type=int, default=3)
    args = parser.parse_args()
    batch, heads = TOKENS // args.seq, HIDDEN // args.d
    q, k, v = (
        torch.randn(batch * heads, args.seq, args.d, device="cuda", dtype=DTYPES[args.dtype])
        for _ in "qkv"
    )
    o = torch.empty_like(q)
    sm_scale = 1.0 / math.sqrt(args.d)
    if args.kernel == "fa4":
        from flash_attn.cute import flash_attn_func

        qs, ks, vs = (x.view(batch, heads, args.seq, args.d).transpose(1, 2).contiguous()
                      for x in (q, k, v))  # fmt: skip

        def launch():
            flash_attn_func(qs, ks, vs, softmax_scale=sm_scale, causal=args.causal)
    else:
        block_m = default_form(args.d, args.causal, args.seq)[0]
        persistent = persistent_default(args.causal, False, args.seq, block_m)
        kernel = compile_attention(args.d, args.dtype, args.causal, block_m=block_m,
                                   persistent=persistent)  # fmt: skip
        launch = kernel.prepare(grid(args.seq, batch * heads, block_m), q, k, v, o, args.seq,
                                sm_scale)  # fmt: skip
    for _ in range(args.launches):
        launch()
    torch.cuda.synchronize()
    print(f"{args.kernel} d={args.d} seq={args.seq} causal={args.causal}: {args.launches} launches")


if __name__ == "__main__":
    main()
