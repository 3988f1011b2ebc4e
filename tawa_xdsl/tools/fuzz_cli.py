"""`tawa fuzz` and `tawa repro`: property-based fuzzing of whole programs, and its replays.

    tawa fuzz --minutes 5 [--seed S] [--out DIR] [--gpu] [--examples N]
              [--kind gemm|rows|attention]
    tawa repro fuzz-out/repro-aref-0123456789.json [--level aref]

`fuzz` runs `tawa_xdsl.fuzz.runner.fuzz` for the budget and prints its summary (programs
tried, options covered, failures with their reproducer paths); exit status 1 when something
failed. `--kind` draws programs of one kind only. `--gpu`
needs an sm_90 GPU and says so in one line when there is none. `repro` replays a reproducer
file and reports whether the failure is still there (exit 1) or the case passes now (exit
0); `--level` names levels to run instead of the recorded ones (each with the levels it
needs: `aref` runs tile, compile and aref); a GPU case on a machine without a GPU is refused
in one line (exit 2), never replayed as a failure.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tawa_xdsl.fuzz.runner import Summary


KINDS = ("gemm", "rows", "attention")


class FuzzUsageError(Exception):
    """A bad `tawa fuzz` / `tawa repro` invocation; the message says what to change (the
    `tawa` driver prints it as one line)."""


def run_fuzz(args: argparse.Namespace) -> int:
    from tawa_xdsl.fuzz.runner import fuzz

    if args.minutes <= 0:
        raise FuzzUsageError("--minutes must be positive")
    if args.gpu:
        from tawa_xdsl.runtime import gpu_available

        if not gpu_available():
            print(
                "tawa fuzz: error: --gpu needs an sm_90 (H100/H200) GPU and none is usable here",
                file=sys.stderr,
            )
            return 2
    summary = fuzz(
        args.minutes, args.seed, args.out, gpu=args.gpu, max_examples=args.examples,
        progress=print_progress, kind=args.kind,
    )  # fmt: skip
    print(summary.render())
    return 1 if summary.failures else 0


def print_progress(summary: Summary) -> None:
    print(
        f"tawa fuzz: round {summary.rounds}: {summary.cases} programs, {summary.seconds:.0f} s, "
        f"{len(summary.failures)} failures",
        file=sys.stderr,
        flush=True,
    )


def run_repro(args: argparse.Namespace) -> int:
    from tawa_xdsl.fuzz.repro import LevelError, levels_to_run, load_reproducer, replay_case

    try:
        levels = levels_to_run(args.level) if args.level is not None else None
    except LevelError as error:
        raise FuzzUsageError(f"error: {error}") from None
    try:
        case, data = load_reproducer(args.file)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise FuzzUsageError(f"{args.file}: error: cannot read the reproducer: {error}") from None
    if "gpu" in (levels or case.levels):
        from tawa_xdsl.runtime import gpu_available

        if not gpu_available():
            print(
                f"tawa repro: {args.file}: error: the case runs on the GPU (level gpu) and no "
                "sm_90 (H100/H200) GPU is usable here; replay its CPU levels with "
                "--level tile,compile,verify,aref,mbarrier",
                file=sys.stderr,
            )
            return 2
    result = replay_case(case, data, levels)
    case = result.case
    print(f"{args.file}: {case.program.describe()}")
    print(
        f"  shape {case.shape}, inputs seed {case.seed} ({case.values}), scalars "
        f"{list(case.scalars)}"
    )
    print(
        f"  options {case.options.key()} (sms {case.options.sms}); levels "
        f"{', '.join(case.levels)}; recorded failure at: {result.recorded_level}"
    )
    if result.failure is None:
        skipped = "".join(f"; skipped {k}: {why}" for k, why in result.outcome.skipped.items())
        print(f"  passes now (ran: {', '.join(result.outcome.ran)}{skipped})")
        return 0
    print(f"  REPRODUCED at {result.failure.level}: {result.failure.message}")
    return 1


def add_fuzz(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "fuzz", help="fuzz whole programs through every level against numpy"
    )
    parser.add_argument("--minutes", type=float, default=1.0, help="time budget (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    parser.add_argument("--out", default="fuzz-out", help="where reproducers go (fuzz-out)")
    parser.add_argument("--gpu", action="store_true", help="compile to PTX and run on the GPU")
    parser.add_argument(
        "--examples", type=int, default=200, help="cases per Hypothesis round (200)"
    )
    parser.add_argument(
        "--kind",
        choices=KINDS,
        help="draw programs of this kind only (GEMM-like, no-dot rows, attention)",
    )
    parser.set_defaults(handler=run_fuzz)


def add_repro(subparsers: Any) -> None:
    parser = subparsers.add_parser("repro", help="replay a fuzzer reproducer file")
    parser.add_argument("file", help="the reproducer (.json) that tawa fuzz wrote")
    parser.add_argument(
        "--level",
        help="comma-separated levels to run instead of the recorded ones "
        "(tile, compile, verify, aref, mbarrier, gpu; each adds the levels it needs)",
    )
    parser.set_defaults(handler=run_repro)
