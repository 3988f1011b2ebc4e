"""Proof time per kernel on one core, across every option combination (issue 13, item 7).

    python bench/proof_times.py [--out bench/results/proof_times_<date>] [--cpu 0] [--quick]
                                [--kernels gemm,attention,attention-causal]

For the library GEMM (128x128x64, f16) and the attention forward (head dim 64, f16, causal
and not): ring depth D 1-6, MMA depth P 1-3, one or two consumer warpgroups, persistent or
not. Each kernel is lowered to the level the compile pipeline proves (`verify=False` for the
lowering itself), then timed: extraction, the certificate of every ring (1-induction), the
cross-ring composition, with every proof cache empty (a fresh disk cache directory per kernel
and `certificate.forget_proofs`). The process is pinned to one CPU (`--cpu`); Z3 is single-
threaded. A combination the compiler refuses (shared memory, P > D) is listed as refused.
Writes `proof_times.md` (a table and the median / max) and `proof_times.json` to `--out`,
again after every kernel (an interrupted run keeps what it measured).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import tawa_xdsl.language as tl
from tawa_xdsl.compiler import CompileOptions, pipeline
from tawa_xdsl.diagnostics import TawaError
from tawa_xdsl.dialects import make_context
from tawa_xdsl.kernels import attention
from tawa_xdsl.kernels.gemm import gemm_tile_ir
from tawa_xdsl.verify.certificate import forget_proofs
from tawa_xdsl.verify.check import verify_module

PROVED_LEVEL = "nvgpu"  # the level `lower_to_nvgpu_level` proves (compiler.py): the IR printed


def kernels() -> list[tuple[str, object]]:
    """(name, tile module) of every kernel timed."""
    return [
        ("gemm", gemm_tile_ir(128, 128, 64, tl.float16)),
        ("attention", attention.tile_module(64, "f16", False)),
        ("attention-causal", attention.tile_module(64, "f16", True)),
    ]


def combinations(quick: bool) -> list[CompileOptions]:
    depths = (1, 3, 6) if quick else range(1, 7)
    return [
        CompileOptions(stages=d, mma_depth=p, consumers=c, persistent=persistent)
        for d, p, c, persistent in itertools.product(depths, (1, 2, 3), (1, 2), (False, True))
    ]


def lowered(module, options: CompileOptions):
    """`module` lowered to the proved level, or the one-line reason the compiler refuses."""
    ctx, out = make_context(), module.clone()
    steps = pipeline(dataclasses.replace(options, verify=False))
    last = max(n for n, (level, _) in enumerate(steps) if level == PROVED_LEVEL)
    for _, step in steps[: last + 1]:
        try:
            step.apply(ctx, out)
        except (TawaError, ValueError) as error:
            return str(error).splitlines()[0]
    return out


def time_proof(module) -> dict:
    """Seconds (process CPU time and wall) to prove every ring of `module` from nothing."""
    forget_proofs()
    with tempfile.TemporaryDirectory(prefix="tawa-proof-bench-") as cache:
        os.environ["TAWA_CACHE_DIR"] = cache
        cpu, wall = time.process_time(), time.perf_counter()
        verdicts = verify_module(module)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "rings": len([v for v in verdicts if v.method not in ("composition", "named")]),
        "proved": all(v.proved for v in verdicts),
        "methods": sorted({v.method for v in verdicts}),
    }


def label(o: CompileOptions) -> str:
    return f"D{o.stages} P{o.mma_depth} C{o.consumers}{' persistent' if o.persistent else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    today = datetime.date.today().isoformat()
    parser.add_argument("--out", default=f"bench/results/proof_times_{today}")
    parser.add_argument("--cpu", type=int, default=0, help="the one CPU to run on")
    parser.add_argument("--quick", action="store_true", help="D in 1, 3, 6 only")
    parser.add_argument("--kernels", default="gemm,attention,attention-causal")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = [(n, m) for n, m in kernels() if n in args.kernels.split(",")]
    rows = []
    for (name, module), options in itertools.product(wanted, combinations(args.quick)):
        row = {"kernel": name, "options": label(options)}
        result = lowered(module, options)
        if isinstance(result, str):
            row["refused"] = result
        else:
            row |= time_proof(result)
            row["load"] = round(os.getloadavg()[0], 2)  # the machine is shared: note its load
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "proof_times.json").write_text(json.dumps(rows, indent=1) + "\n")
        (out / "proof_times.md").write_text(markdown(rows))
    print((out / "proof_times.md").read_text())


def markdown(rows: list[dict]) -> str:
    timed = [r for r in rows if "cpu_s" in r]
    lines = [
        "# Proof time per kernel, one core (bench/proof_times.py)",
        "",
        "CPU seconds to extract and prove every ring of the kernel (certificate by 1-induction,",
        "cross-ring composition) with every proof cache empty.",
        "",
    ]
    for name in dict.fromkeys(r["kernel"] for r in rows):
        mine = [r["cpu_s"] for r in timed if r["kernel"] == name]
        if mine:
            lines.append(
                f"* {name}: {len(mine)} kernels, median {statistics.median(mine):.2f} s, "
                f"max {max(mine):.2f} s"
            )
    if timed:
        every = [r["cpu_s"] for r in timed]
        lines.append(
            f"* all: {len(every)} kernels, median {statistics.median(every):.2f} s, max "
            f"{max(every):.2f} s (target: median <= 1 s, max <= 5 s)"
        )
    loads = [r["load"] for r in timed if "load" in r]
    if loads:
        lines.append(
            f"* load average (1 min) during the run: {min(loads):.1f}-{max(loads):.1f}, "
            f"median {statistics.median(loads):.1f}"
        )
    refused = [r for r in rows if "refused" in r]
    lines += [f"* refused by the compiler: {len(refused)} combinations", ""]
    lines += [
        "| kernel | options | rings | CPU s | wall s | proved by |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "refused" in r:
            lines.append(
                f"| {r['kernel']} | {r['options']} | - | - | - | refused: {r['refused']} |"
            )
            continue
        how = ", ".join(r["methods"]) if r["proved"] else "NOT PROVED"
        lines.append(
            f"| {r['kernel']} | {r['options']} | {r['rings']} | {r['cpu_s']:.2f} | "
            f"{r['wall_s']:.2f} | {how} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
