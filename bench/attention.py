"""Attention forward on the H200: ours (the rotated key loop with and without ping-pong, and
the straightforward schedule) against FlashAttention-4's Hopper path, cuDNN (through SDPA)
and a Triton kernel with TMA descriptors (bench/triton_attention_tma.py), in one process.

Configurations of ANCHORS.md: 16K tokens per batch (batch = 16384 / seq), hidden 2048 (heads =
2048 / d), d 64 and 128, causal and not, f16 and bf16; plus grouped-query attention (`--gqa
32/8`: 32 query heads and 8 K/V heads of d = 128). TFLOP/s = 4 * B * H * S^2 * d / t (halved
when causal): every kernel of a configuration timed in interleaved rounds, each one's median
round (bench/timing.py says why; `<name>_rounds`: each round's TFLOP/s, `<name>_spread`: their
spread). One JSON row per
configuration (the file is rewritten after every row): `ours`, `ours_pingpong`, `ours_single`,
`ours_straightforward`, `ours_persistent`, `ours_per_tile` (`SCHEDULES`; a schedule a shape
cannot take leaves its column null and its one-line refusal under `<name>_error`), each peer
under its own key (`fa4`, `cudnn`, `triton`; with `--weak-peers` also `sdpa_flash` and
`triton_ptr`, the pointer-load Triton kernel), our ratios to each, each kernel's max abs error
against SDPA, and the configuration keys (`d`, `seq`, `causal`, `dtype`, `heads`, `kv_heads`,
`batch`). FA4 (`flash_attn.cute`) is imported lazily: absent, it is skipped with one message and
its column is null.

    python bench/attention.py [--dtypes f16,bf16] [--seqs 2048,16384] [--dims 64,128]
                              [--gqa 32/8] [--gqa-seqs 4096,8192] [--no-peers]
                              [--weak-peers] [--pingpong] [--stages 3] [--block-n 128]
                              [--registers 24,240] [--peers fa4,cudnn,triton]
                              [--schedules ours,ours_pingpong,ours_single,...]
                              [--before DIR] [--out results.json]

`--before DIR` also times, in the same process and on the same tensors, the PTX another tree
printed for our default schedule (`ours_before`, and `ours_over_before`), written by
bench/attention_ptx.py of that tree.
"""

from __future__ import annotations

import argparse
import dataclasses
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
import triton_attention  # noqa: E402
import triton_attention_tma  # noqa: E402
from attention_ptx import ptx_name  # noqa: E402
from timing import ROUNDS, Lineup, time_once  # noqa: E402

from tawa_xdsl.compiler import CompileOptions, compile_to_ptx  # noqa: E402
from tawa_xdsl.diagnostics import TawaError  # noqa: E402
from tawa_xdsl.kernels.attention import (  # noqa: E402
    compile_attention,
    default_form,
    grid,
    persistent_default,
    tile_module,
)

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
TOKENS, HIDDEN = 16384, 2048
PEERS = ("fa4", "cudnn", "triton", "sdpa_flash", "triton_ptr")
# Our schedules, all timed in every row: the library default (the rotated key loop, split by
# the compiler where the masks stop holding: the unmasked key blocks in a loop of their own),
# the same with ping-pong of the two consumer warpgroups around the MMA issue, the rotated loop
# left whole (`split_loops=False`: every block masked), and the straightforward schedule: the
# same source and options without the rotation, softmax(j) under QK^T(j+1), P V(j) waited in
# its iteration.
SCHEDULES = {
    "ours": {"rotate": True, "pingpong": False, "split": True},
    "ours_pingpong": {"rotate": True, "pingpong": True, "split": True},
    # d = 64's 192 rows with the issue in turns round its three warpgroups (FA3's scheduler
    # barrier; ping-pong takes the guarded rotation)
    "ours_m192_pingpong": {
        "rotate": True,
        "pingpong": True,
        "split": True,
        "block_m": 192,
        "dims": (64,),
    },
    "ours_single": {"rotate": True, "pingpong": False, "split": False},
    # the rotated loop guarded instead of peeled (the default before round 18; ping-pong's form)
    "ours_guarded": {"rotate": True, "pingpong": False, "split": True, "peel": False},
    # 2-deep K/V rings (FA4's depth) instead of 3
    "ours_s2": {"rotate": True, "pingpong": False, "split": True, "stages": 2},
    # causal row blocks in pairs, longest with shortest (`fold`, fold-grid): one program per
    # pair, and persistent (every pair the same work, so a fixed deal is even)
    "ours_fold": {
        "rotate": True,
        "pingpong": False,
        "split": True,
        "fold": True,
        "persistent": False,
    },  # fmt: skip
    "ours_fold_persistent": {
        "rotate": True,
        "pingpong": False,
        "split": True,
        "fold": True,
        "persistent": True,
    },  # fmt: skip
    # O staged in shared memory and written by one TMA store, 2-deep rings (d = 128's room)
    "ours_s2_tma_out": {
        "rotate": True,
        "pingpong": False,
        "split": True,
        "stages": 2,
        "epilogue": "tma",
    },
    "ours_straightforward": {"rotate": False, "pingpong": False, "split": True},
    # `ours` is the library's form (`default_form`): at d = 128 persistent (one program per SM
    # over the row blocks, dealt in snake waves; K/V rings 3 deep, Q's up to 2) without a causal
    # mask and with one up to 2K keys, else one program per row block; at d = 64, 192 rows per
    # program, one per row block, past 1K keys (causal: 2K; 128 rows persistent below); these two
    # time both forms everywhere
    "ours_persistent": {"rotate": True, "pingpong": False, "split": True, "persistent": True},
    "ours_per_tile": {"rotate": True, "pingpong": False, "split": True, "persistent": False},
    # persistent, row block x of every head before x + 1 (longest first when causal): 5-13%
    # slower than one program per row block from 2K keys (NOTES round 11)
    "ours_persistent_heads_first": {
        "rotate": True,
        "pingpong": False,
        "split": True,
        "persistent": True,
        "tile_order": "yxz",
    },
    # the 128-row form at d = 64 (persistent without a causal mask): the default to round 12,
    # 192 rows per program were 2-15% faster there (NOTES round 12)
    "ours_m128": {"rotate": True, "pingpong": False, "split": True, "block_m": 128, "dims": (64,)},
    # FA3's d = 128 step without a causal mask: 176 keys, 2-deep K/V rings to fit (24/240);
    # spill-free since round 11 (NOTES round 11b), 2-5% slower while it spilled (round 9)
    "ours_n176": {
        "rotate": True,
        "pingpong": False,
        "split": True,
        "block_n": 176,
        "stages": 2,
        "dims": (128,),
    },
    "ours_n176_pingpong": {
        "rotate": True,
        "pingpong": True,
        "split": True,
        "block_n": 176,
        "stages": 2,
        "dims": (128,),
    },
    # eighths of the scores' exp2s on the FMA units (`ours`: emulate-exp2's choice, none for
    # these tiles; 1-3 of 8 measured 0-13% slower at d = 64, NOTES round 14)
    **{
        f"ours_exp2_{share}": {
            "rotate": True,
            "pingpong": False,
            "split": True,
            "exp2_emulation": share,
        }  # fmt: skip
        for share in (0, 1, 2, 3)
    },
}
EXPERIMENTS = (
    *(f"ours_exp2_{share}" for share in (0, 1, 2, 3)),
    "ours_guarded",
    "ours_s2",
    "ours_s2_tma_out",
    "ours_fold",
    "ours_fold_persistent",
    "ours_launch_defaults",
    "ours_twin",
    "ours_m128",
    "ours_m192_pingpong",
    "ours_n176",
    "ours_n176_pingpong",
    "ours_persistent_heads_first",
)


def tflops(row: dict, ms: float | None) -> float | None:
    if ms is None:
        return None
    flop = 4 * row["batch"] * row["heads"] * row["seq"] ** 2 * row["d"]
    return flop * (0.5 if row["causal"] else 1.0) / (ms * 1e-3) / 1e12


def bench(fn) -> float:
    """Milliseconds per call, for tuning a peer's configurations (reported numbers come from
    `timing.interleaved`)."""
    return time_once(fn)


_FA4: list = []  # [flash_attn_func or None], imported on first use


def fa4_function():
    """FlashAttention-4's `flash_attn_func`, or None (reported once) when it is absent."""
    if not _FA4:
        try:
            from flash_attn.cute import flash_attn_func
        except Exception as exc:  # noqa: BLE001 (missing wheel, CuTe DSL, driver: skip the peer)
            print(f"FA4 (flash_attn.cute) skipped: {type(exc).__name__}: {exc}", flush=True)
            flash_attn_func = None
        _FA4.append(flash_attn_func)
    return _FA4[0]


TOLERANCE = 5e-2  # max abs error against SDPA a timed kernel may have (bf16 rows: ~8e-3)


def max_abs_error(row: dict, name: str, reference: torch.Tensor, out=None):
    """A `Lineup.join` check: the launch's result (or `out()`) against `reference`, its max
    abs error into row[<name>_max_abs_err]; a NaN (an element left unwritten in the poisoned
    output) or an error over `TOLERANCE` keeps the kernel out of the timing."""

    def check(result) -> None:
        got = result if out is None else out()
        error = (got.float() - reference.float()).abs().max().item()
        row[f"{name}_max_abs_err"] = error
        if not error <= TOLERANCE:
            raise ValueError(f"max abs error {error} against SDPA (over {TOLERANCE})")

    return check


def record(row: dict, lineup: Lineup, least_rounds: int = ROUNDS) -> None:
    """Time the lineup's kernels interleaved: each one's TFLOP/s (its median round) into
    row[name], the rounds' spread into row[<name>_spread]; one that failed gets None and its
    first line under <name>_error."""
    for name, timing in lineup.time(least_rounds).items():
        row[name], row[f"{name}_spread"] = tflops(row, timing.ms), round(timing.spread, 4)
        row[f"{name}_rounds"] = [round(tflops(row, ms), 1) for ms in timing.rounds]
    for name, error in lineup.errors.items():
        row[name], row[f"{name}_error"] = None, error


def one(d: int, seq: int, causal: bool, dtype: str, heads: int, kv_heads: int,
        args: argparse.Namespace) -> dict:  # fmt: skip
    batch = TOKENS // seq
    row = {"d": d, "seq": seq, "causal": causal, "dtype": dtype, "heads": heads,
           "kv_heads": kv_heads, "batch": batch}  # fmt: skip
    element = DTYPES[dtype]
    q = torch.randn(batch * heads, seq, d, device="cuda", dtype=element)
    k, v = (torch.randn(batch * kv_heads, seq, d, device="cuda", dtype=element) for _ in "kv")
    o = torch.empty_like(q)
    sm_scale = 1.0 / math.sqrt(d)
    q4, k4, v4 = (x.view(batch, -1, seq, d) for x in (q, k, v))
    gqa = {"enable_gqa": True} if kv_heads != heads else {}
    ref = torch.nn.functional.scaled_dot_product_attention(
        q4, k4, v4, is_causal=causal, scale=sm_scale, **gqa
    )

    def sdpa(backend):
        def run():
            with sdpa_kernel(backend):
                return torch.nn.functional.scaled_dot_product_attention(
                    q4, k4, v4, is_causal=causal, scale=sm_scale, **gqa
                )

        return run

    peers = set() if args.no_peers else set(args.peers.split(","))
    lineup = Lineup()
    if "fa4" in peers:
        fa4 = fa4_function()
        if fa4 is not None:
            qs, ks, vs = (x.transpose(1, 2).contiguous() for x in (q4, k4, v4))  # [B, S, H, D]

            def run_fa4():
                return fa4(qs, ks, vs, softmax_scale=sm_scale, causal=causal)[0].transpose(1, 2)

            lineup.join("fa4", run_fa4, max_abs_error(row, "fa4", ref))
        else:
            row["fa4"] = None
    if "cudnn" in peers:
        cudnn = sdpa(SDPBackend.CUDNN_ATTENTION)
        lineup.join("cudnn", cudnn, max_abs_error(row, "cudnn", ref))
    out = lambda: o.view_as(ref)  # noqa: E731 (Triton's and our kernels write o)
    poison = lambda: o.fill_(float("nan"))  # noqa: E731 (each checked on a poisoned o)
    if "triton" in peers:
        # its fastest configuration, tuned one by one, then timed with the others
        _, config, errors = triton_attention_tma.best(q, k, v, o, sm_scale, causal, heads, bench)
        row["triton_config"] = config
        if errors:
            row["triton_errors"] = errors
        if config is not None:
            run = triton_attention_tma.launcher(q, k, v, o, sm_scale, causal, heads, config)
            lineup.join("triton", run, max_abs_error(row, "triton", ref, out), poison)
    if args.weak_peers:
        lineup.join("sdpa_flash", sdpa(SDPBackend.FLASH_ATTENTION))
        if kv_heads == heads:
            times = {c: bench(triton_attention.launcher(q, k, v, o, sm_scale, causal, c))
                     for c in triton_attention.CONFIGS}  # fmt: skip
            fastest = min(times, key=times.__getitem__)
            run = triton_attention.launcher(q, k, v, o, sm_scale, causal, fastest)
            lineup.join("triton_ptr", run)
    registers = tuple(int(x) for x in args.registers.split(",")) if args.registers else None
    options = {"block_n": args.block_n, "stages": args.stages, "registers": registers,
               "group": heads // kv_heads}  # fmt: skip
    if "ours_launch_defaults" in args.schedules.split(","):
        # the library's source at the library's block sizes launched with no options, as
        # `attn_fwd[grid](...)` compiles it: every schedule decision the compiler's own
        block_m = default_form(d, causal, seq)[0]
        module = tile_module(d, dtype, causal, group=heads // kv_heads, block_m=block_m)
        launch = compile_to_ptx(module, CompileOptions()).prepare(
            grid(seq, batch * heads, block_m), q, k, v, o, seq, sm_scale
        )
        check = max_abs_error(row, "ours_launch_defaults", ref, out)
        lineup.join("ours_launch_defaults", launch, check, poison)
    for name, schedule in SCHEDULES.items():
        if name not in args.schedules.split(",") or d not in schedule.get("dims", (d,)):
            continue
        if schedule.get("fold") and not causal:  # pairs of causal row blocks only
            continue
        pingpong = schedule["pingpong"] or args.pingpong
        fixed = ("persistent", "stages", "block_m", "block_n", "tile_order", "exp2_emulation",
                 "peel", "epilogue", "fold")  # fmt: skip
        chosen = {**options, **{k: schedule[k] for k in fixed if k in schedule}}
        # the library's rows and form for this length (`default_form`) unless the schedule
        # fixes them
        rows_m = chosen.setdefault("block_m", default_form(d, causal, seq, pingpong)[0])
        chosen.setdefault("persistent", persistent_default(causal, pingpong, seq, rows_m))
        rows = grid(seq, batch * heads, rows_m)
        try:
            kernel = compile_attention(d, dtype, causal, rotate=schedule["rotate"],
                                       pingpong=pingpong, split=schedule["split"],
                                       **chosen)  # fmt: skip
        except TawaError as error:  # a schedule this shape cannot take: its column is null
            row[f"{name}_error"] = str(error).splitlines()[0]
            continue
        launch = kernel.prepare(rows, q, k, v, o, seq, sm_scale)
        lineup.join(name, launch, max_abs_error(row, name, ref, out), poison)
        if name == "ours" and args.twin:  # the same kernel again: the method's own noise
            lineup.join("ours_twin", kernel.prepare(rows, q, k, v, o, seq, sm_scale))
        form = (heads // kv_heads, chosen["block_m"], chosen["persistent"])
        before = Path(args.before or "") / ptx_name(d, dtype, causal, *form)
        if name == "ours" and args.before and before.exists():
            # the other tree's PTX of this very form, launched as ours is
            old = dataclasses.replace(kernel, ptx=before.read_text())
            old_launch = old.prepare(rows, q, k, v, o, seq, sm_scale)
            check = max_abs_error(row, "ours_before", ref, out)
            lineup.join("ours_before", old_launch, check, poison)
    record(row, lineup)
    if row.get("ours_before") and row.get("ours"):
        row["ours_over_before"] = row["ours"] / row["ours_before"]
    row["ours_config"] = {**options, "registers": args.registers, "pingpong": args.pingpong}
    for peer in PEERS:
        row[f"ratio_{peer}"] = (
            row["ours"] / row[peer] if row.get("ours") and row.get(peer) else None
        )
    for name in ("ours_pingpong", "ours_single", "ours_straightforward", "ours_persistent",
                 "ours_per_tile", *EXPERIMENTS):  # fmt: skip
        if row.get("ours") and row.get(name):
            row[f"{name}_over_ours"] = row[name] / row["ours"]
    return row


def show(row: dict) -> str:
    err = row.get("ours_max_abs_err", float("nan"))

    def f(x):
        return f"{x:6.0f}" if x else "   n/a"

    def g(x):
        return f"{x:6.2f}" if x else "   n/a"

    return (
        f"{row['dtype']:>4} {row['d']:>4} {row['heads']:>3}/{row['kv_heads']:<3} {row['seq']:>6} "
        f"{str(row['causal']):>6} | {f(row.get('ours'))} {f(row.get('ours_pingpong'))} "
        f"{f(row.get('ours_straightforward'))} {f(row.get('ours_single'))} "
        f"{f(row.get('ours_persistent'))} {f(row.get('fa4'))} {f(row.get('cudnn'))} "
        f"{f(row.get('triton'))} | {g(row.get('ratio_fa4'))} {g(row.get('ratio_cudnn'))} "
        f"{g(row.get('ratio_triton'))}  {err:.1e}"
        + (
            f" | before {f(row.get('ours_before'))} x{g(row.get('ours_over_before'))}"
            if "ours_before" in row
            else ""
        )
        + "".join(
            f" | {name[5:]} {f(row.get(name))} x{g(row.get(name + '_over_ours'))}"
            for name in EXPERIMENTS
            if name in row
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", "--dtype", default="f16", help="f16, bf16 or both")
    parser.add_argument("--seqs", default="512,1024,2048,4096,8192,16384")
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--gqa", default="", help="query/kv heads at d = 128, e.g. 32/8")
    parser.add_argument("--gqa-seqs", default="4096,8192")
    parser.add_argument("--no-peers", action="store_true", help="measure ours only")
    parser.add_argument("--causal-only", action="store_true", help="only the causal rows")
    parser.add_argument("--weak-peers", action="store_true", help="also SDPA flash, pointer Triton")
    parser.add_argument("--pingpong", action="store_true", help="alternate the consumers' MMAs")
    parser.add_argument("--stages", type=int, default=3, help="our K/V ring depth")
    parser.add_argument("--block-n", type=int, default=None, help="our keys per step")
    parser.add_argument("--registers", default=None, help="setmaxnreg producer,consumer")
    parser.add_argument("--peers", default="fa4,cudnn,triton", help="the strong peers to time")
    parser.add_argument("--schedules", default=",".join(SCHEDULES), help="ours to time")
    parser.add_argument("--before", default=None, help="PTX of another tree (--dump-ptx)")
    parser.add_argument("--twin", action="store_true", help="time our kernel twice (noise)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "attention.json"))
    args = parser.parse_args(argv)
    configs = [
        (d, seq, causal, dtype, HIDDEN // d, HIDDEN // d)
        for dtype in args.dtypes.split(",")
        for d in (int(x) for x in args.dims.split(","))
        for causal in ((True,) if args.causal_only else (False, True))
        for seq in (int(x) for x in args.seqs.split(","))
    ]
    if args.gqa:
        heads, kv_heads = (int(x) for x in args.gqa.split("/"))
        configs += [
            (128, seq, causal, dtype, heads, kv_heads)
            for dtype in args.dtypes.split(",")[:1]
            for causal in (False, True)
            for seq in (int(x) for x in args.gqa_seqs.split(","))
        ]
    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "pingpong": args.pingpong,
    }
    print(
        "dtype    d   H/KV     seq causal |   ours  ppong  strfw single  pers.    fa4  cudnn "
        "triton |   /fa4 /cudnn /triton  err",
        flush=True,
    )
    rows, start = [], time.time()
    for config in configs:
        rows.append(one(*config, args))
        print(show(rows[-1]), flush=True)
        meta["seconds"] = round(time.time() - start, 1)
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
