"""fp8 (e4m3) attention forward on the H200: ours against the fp8 peers that run on sm_90, in
one process: Triton's fused-attention structure with TMA descriptors in e4m3
(bench/triton_attention_tma.py, V transposed as its tutorial does for fp8) and FlashAttention-4
(`flash_attn.cute`) if it takes e4m3 here (it refused fp8 below sm_100 when last read: the
refusal is recorded under `fa4_error`).

Q, K and V are e4m3 (`torch.randn` rounded to e4m3), V also as V^T [B*H, d, seq] (what fp8
wgmma needs; Triton reads it so, ours with the keys of each 32 in the order that keeps P in
its threads, `fp8_v`), O is bf16. Error: max abs and relative Frobenius error of
O against float32 attention over the same (rounded) e4m3 inputs. TFLOP/s = 4 * B * H * S^2 * d
/ t (halved when causal), the kernels timed in interleaved rounds (bench/timing.py); 16K
tokens per batch, hidden 2048, as bench/attention.py. One JSON row
per configuration: `ours`, `triton`, `fa4`, `ratio_triton`, `ratio_fa4`, the errors, and the
configuration keys (`d`, `seq`, `causal`, `dtype`).

    python bench/attention_fp8.py [--dims 128] [--seqs 1024,2048,4096,16384] [--peers triton,fa4]
                                  [--stages 3] [--block-n 128] [--no-rotate] [--before DIR]
                                  [--out results.json]

`--before DIR` also times another tree's PTX of the same form (bench/attention_ptx.py --dtypes
e4m3), reading V^T in key order, in the same lineup (`ours_before`, `ratio_ours_before`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import triton_attention_tma  # noqa: E402
from attention import HIDDEN, TOKENS, bench, fa4_function, record  # noqa: E402
from attention_ptx import ptx_name  # noqa: E402
from timing import Lineup  # noqa: E402

from tawa_xdsl.diagnostics import TawaError  # noqa: E402
from tawa_xdsl.kernels.attention import (  # noqa: E402
    BLOCK_M,
    compile_attention,
    default_form,
    fp8_v,
    grid,
)

E4M3 = torch.float8_e4m3fn
# our schedules beside the default, timed in the same row (`--variants`)
VARIANTS = {
    "s2": {"stages": 2},
    "s4": {"stages": 4},
    "straightforward": {"rotate": False},
    "pingpong": {"pingpong": True, "persistent": False},  # the proof refuses it persistent
    # `ours` is persistent without a causal mask (NOTES round 11), folded and persistent with one
    # (round 20)
    "persistent": {"persistent": True},
    "per_tile": {"persistent": False},
    "persistent_heads_first": {"persistent": True, "tile_order": "yxz"},
    # the split the library's table gave fp8 to session 11 (set-registers chooses 40/232 for
    # its tiles since session 12: P is one byte an element)
    "r240": {"registers": (24, 240)},
    # 2 of 8 exp2s on the FMA units (what emulate-exp2 chose for fp8 d = 128 in round 14's
    # first run, before it measured 2-6% slower; `ours` now keeps the MUFU unit)
    "exp2_2": {"exp2_emulation": 2},
    "exp2_1": {"exp2_emulation": 1},
    # causal row blocks in pairs (fold-grid), per pair or dealt to persistent programs (the
    # default at causal since round 20), or not folded
    "fold": {"fold": True, "persistent": False},
    "fold_persistent": {"fold": True, "persistent": True},
    "unfolded": {"fold": False, "persistent": False},
}


REL_TOLERANCE = 0.06  # e4m3 inputs and P: 0.019-0.027 relative for ours and Triton alike


def errors(got: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    diff = got.float() - reference
    return diff.abs().max().item(), (diff.norm() / reference.norm()).item()


def one(
    d: int, seq: int, causal: bool, peers: set[str], options: dict, variants: list[str],
    before: str | None = None,
) -> dict:  # fmt: skip
    batch, heads = TOKENS // seq, HIDDEN // d
    row = {"d": d, "seq": seq, "causal": causal, "dtype": "e4m3", "heads": heads,
           "kv_heads": heads, "batch": batch}  # fmt: skip
    bh = batch * heads
    q, k, v = (torch.randn(bh, seq, d, device="cuda").to(E4M3) for _ in "qkv")
    vt = v.transpose(1, 2).contiguous()  # [B*H, d, seq], for Triton
    vt_ours = fp8_v(v)  # the same keys in fp8_key_order's order
    o = torch.empty(bh, seq, d, device="cuda", dtype=torch.bfloat16)
    sm_scale = 1.0 / math.sqrt(d)
    reference = torch.nn.functional.scaled_dot_product_attention(
        *(x.float().view(batch, heads, seq, d) for x in (q, k, v)), is_causal=causal,
        scale=sm_scale,
    ).reshape(bh, seq, d)  # fmt: skip
    # the library's form for this length (default_form: causal folded and persistent), unless
    # --options names one
    options = {"persistent": default_form(d, causal, seq, dtype="e4m3")[1], **options}
    kernel = compile_attention(d, "e4m3", causal, **options)
    row["ours_config"] = options
    launch = kernel.prepare(grid(seq, bh), q, k, vt_ours, o, seq, sm_scale)
    lineup = Lineup()

    def error_of(name: str):
        """A `Lineup.join` check: the errors into the row; NaN (an element left unwritten) or a
        relative error over `REL_TOLERANCE` keeps the kernel out of the timing."""

        def check(result) -> None:
            absolute, relative = errors(o, reference)
            row[f"{name}_max_abs_err"], row[f"{name}_rel_err"] = absolute, relative
            if not relative <= REL_TOLERANCE:
                raise ValueError(f"relative error {relative} (over {REL_TOLERANCE})")

        return check

    o.fill_(float("nan"))
    lineup.join("ours", launch, error_of("ours"))
    # the form the trees before round 20 launched for this length (the 16-bit one, unfolded)
    old_persistent = default_form(d, causal, seq)[1]
    form = ptx_name(d, "e4m3", causal, 1, BLOCK_M, old_persistent)
    if before and (Path(before) / form).exists():
        # another tree's PTX of this form, launched as ours of that form is; it reads V^T in
        # key order (the trees before round 20 moved P between lanes instead)
        same_form = compile_attention(d, "e4m3", causal, persistent=old_persistent, fold=False)
        old = dataclasses.replace(same_form, ptx=(Path(before) / form).read_text())
        old_launch = old.prepare(grid(seq, bh), q, k, vt, o, seq, sm_scale)
        o.fill_(float("nan"))
        lineup.join("ours_before", old_launch, error_of("ours_before"))
    for name in variants:
        try:
            other = compile_attention(d, "e4m3", causal, **{**options, **VARIANTS[name]})
        except TawaError as error:  # a schedule this shape cannot take: its column is null
            row[f"ours_{name}_error"] = str(error).splitlines()[0]
            continue
        lineup.join(f"ours_{name}", other.prepare(grid(seq, bh), q, k, vt_ours, o, seq, sm_scale))
    if "triton" in peers:
        # its fastest configuration, tuned one by one, then timed with the others
        _, config, failed = triton_attention_tma.best(
            q, k, vt, o, sm_scale, causal, heads, bench, v_transposed=True
        )
        row["triton_config"] = config
        if failed:
            row["triton_errors"] = failed
        if config is not None:
            o.fill_(float("nan"))
            run = triton_attention_tma.launcher(q, k, vt, o, sm_scale, causal, heads, config, True)
            lineup.join("triton", run, error_of("triton"))
    if "fa4" in peers and (fa4 := fa4_function()) is not None:
        qs, ks, vs = (x.view(batch, heads, seq, d).transpose(1, 2).contiguous() for x in (q, k, v))
        lineup.join("fa4", lambda: fa4(qs, ks, vs, softmax_scale=sm_scale, causal=causal)[0])
    record(row, lineup)
    for peer in ("triton", "fa4", "ours_before"):
        if row.get("ours") and row.get(peer):
            row[f"ratio_{peer}"] = row["ours"] / row[peer]
    return row


def show(row: dict) -> str:
    def f(x):
        return f"{x:6.0f}" if x else "   n/a"

    ratio = row.get("ratio_triton")
    return (
        f"e4m3 {row['d']:>4} {row['seq']:>6} {str(row['causal']):>6} | ours {f(row['ours'])} "
        f"triton {f(row.get('triton'))} fa4 {f(row.get('fa4'))} | x{ratio or 0:5.2f} | err "
        f"ours {row.get('ours_max_abs_err', float('nan')):.3f} "
        f"({row.get('ours_rel_err', float('nan')):.4f}) triton "
        f"{row.get('triton_max_abs_err', float('nan')):.3f} "
        f"({row.get('triton_rel_err', float('nan')):.4f})"
        + (f" | fa4: {row['fa4_error'][:80]}" if "fa4_error" in row else "")
        + (
            f" | before {f(row['ours_before'])} x{row.get('ratio_ours_before') or 0:5.2f}"
            if "ours_before" in row
            else ""
        )
        + "".join(f" | {k[5:]} {f(v)}" for k, v in row.items() if k[5:] in VARIANTS)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="128")
    parser.add_argument("--seqs", default="1024,2048,4096,16384")
    parser.add_argument("--peers", default="triton,fa4")
    parser.add_argument("--stages", type=int, default=3, help="our K/V ring depth")
    parser.add_argument("--block-n", type=int, default=None, help="our keys per step")
    parser.add_argument("--no-rotate", action="store_true", help="our straightforward schedule")
    parser.add_argument("--variants", default="", help=f"also time ours as: {','.join(VARIANTS)}")
    parser.add_argument("--before", default=None, help="PTX of another tree (attention_ptx.py)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "attention_fp8.json"))
    args = parser.parse_args(argv)
    rows = []
    for d in (int(x) for x in args.dims.split(",")):
        for causal in (False, True):
            for seq in (int(x) for x in args.seqs.split(",")):
                options = {"stages": args.stages, "block_n": args.block_n,
                           "rotate": not args.no_rotate}  # fmt: skip
                variants = [v for v in args.variants.split(",") if v]
                peers = set(args.peers.split(","))
                rows.append(one(d, seq, causal, peers, options, variants, args.before))
                print(show(rows[-1]), flush=True)
                Path(args.out).write_text(json.dumps(rows, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
