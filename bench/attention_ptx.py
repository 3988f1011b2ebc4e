"""Write the PTX of our attention (the library default schedule, in the form the library
launches for each length: `default_form`) for bench/attention.py's configurations, so that
another tree's kernel can be timed beside today's in one process (`bench/attention.py
--before DIR`). Needs no GPU and no torch.

    python bench/attention_ptx.py DIR [--dims 64,128] [--dtypes f16] [--gqa 32/8]
                                  [--seqs 1024,2048,4096,16384]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tawa_xdsl.kernels.attention import compile_attention, default_form  # noqa: E402


def ptx_name(d: int, dtype: str, causal: bool, group: int, block_m: int, persistent: bool) -> str:
    form = f"m{block_m}{'_persistent' if persistent else ''}"
    return f"attention_d{d}_{dtype}_{'causal' if causal else 'full'}_g{group}_{form}.ptx"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--dtypes", default="f16")
    parser.add_argument("--gqa", default="", help="query/kv heads at d = 128, e.g. 32/8")
    parser.add_argument("--seqs", default="1024,2048,4096,16384", help="the forms of these")
    args = parser.parse_args(argv)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    configs = [(d, dtype, 1) for dtype in args.dtypes.split(",")
               for d in (int(x) for x in args.dims.split(","))]  # fmt: skip
    if args.gqa:
        heads, kv_heads = (int(x) for x in args.gqa.split("/"))
        configs.append((128, args.dtypes.split(",")[0], heads // kv_heads))
    written = 0
    for d, dtype, group in configs:
        for causal in (False, True):
            forms = {default_form(d, causal, int(seq)) for seq in args.seqs.split(",")}
            for block_m, persistent in sorted(forms):
                kernel = compile_attention(d, dtype, causal, group=group, block_m=block_m,
                                           persistent=persistent)  # fmt: skip
                name = ptx_name(d, dtype, causal, group, block_m, persistent)
                (folder / name).write_text(kernel.ptx)
                written += 1
    print(f"wrote {written} kernels to {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
