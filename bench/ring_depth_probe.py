"""One launch of the d = 64 library attention (192 rows, one program per row block, 16K tokens,
32 heads) with K/V rings DEPTH deep, for a profiler to read (bench/NOTES.md round 13: 4-deep
rings were 3-7% slower than 3-deep). Usage: python bench/ring_depth_probe.py DEPTH [SEQ]"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tawa_xdsl.kernels.attention import compile_attention, grid  # noqa: E402

depth, seq = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 4096
heads, d = 32, 64
bh = 16384 // seq * heads
q, k, v = (torch.randn(bh, seq, d, device="cuda", dtype=torch.float16) for _ in "qkv")
o = torch.empty_like(q)
kernel = compile_attention(d, "f16", False, stages=depth, block_m=192, persistent=False)
launch = kernel.prepare(grid(seq, bh, 192), q, k, v, o, seq, 1 / math.sqrt(d))
for _ in range(3):
    launch()
torch.cuda.synchronize()
print("launched", depth, seq)
