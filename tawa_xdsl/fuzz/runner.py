"""Run the fuzzing property for a time budget (`tawa fuzz`) and summarize.

    from tawa_xdsl.fuzz.runner import fuzz
    summary = fuzz(minutes=5, seed=0, out="fuzz-out", gpu=False)
    print(summary.render())

Rounds of Hypothesis runs (each seeded from `seed` and the round number, `max_examples`
cases each) until the budget is spent; a failing round is shrunk by Hypothesis and the
smallest failing case is written as a reproducer under `out` (`repro.write_reproducer`).
The run is deterministic for a seed, up to where the clock stops it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import FlakyFailure

from tawa_xdsl.fuzz.check import Case, FuzzFailure, Outcome, check_case
from tawa_xdsl.fuzz.programs import AttentionProgram, GemmProgram
from tawa_xdsl.fuzz.repro import write_reproducer
from tawa_xdsl.fuzz.strategies import cases


@dataclass
class FailureRecord:
    """One failure the run found, and where its reproducer is."""

    level: str
    message: str
    path: Path


@dataclass
class Summary:
    """Counts of what a fuzzing run tried."""

    mode: str = "cpu"
    seed: int = 0
    cases: int = 0
    rounds: int = 0
    seconds: float = 0.0
    kinds: Counter[str] = field(default_factory=Counter)
    dtypes: Counter[str] = field(default_factory=Counter)
    epilogue_ops: Counter[str] = field(default_factory=Counter)
    features: Counter[str] = field(default_factory=Counter)
    options: Counter[str] = field(default_factory=Counter)
    values: Counter[str] = field(default_factory=Counter)
    levels_ran: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    failures: list[FailureRecord] = field(default_factory=list)

    def record(self, case: Case, outcome: Outcome) -> None:
        program = case.program
        self.cases += 1
        self.kinds[program.kind] += 1
        self.dtypes[program.dtype] += 1
        if isinstance(program, GemmProgram):
            for op in program.epilogue:
                self.epilogue_ops[op.kind] += 1
        self.features.update(program.features())
        opts = case.options
        if not isinstance(program, AttentionProgram):  # software pipelining only touches it
            opts = replace(opts, attention=True, rotate=False)
        self.options[opts.key()] += 1
        self.values[case.values] += 1
        self.levels_ran.update(outcome.ran)
        self.skipped.update(f"{lvl}: {why}" for lvl, why in outcome.skipped.items())

    def option_values(self) -> dict[str, list[str]]:
        """Each option's values seen, with counts (from the `Options.key()` strings)."""
        names = ("D", "P", "C", "persistent", "walk", "rotated", "folded")
        seen: dict[str, Counter[str]] = {n: Counter() for n in names}
        for key, count in self.options.items():
            parts = key.split()
            for part in parts[:3]:
                seen[part[0]][part[1:]] += count
            seen["persistent"]["yes" if "persistent" in parts else "no"] += count
            if "persistent" in parts:  # the walk's order follows it when not x fastest
                seen["walk"]["yxz" if "yxz" in parts else "xyz"] += count
            seen["rotated"]["yes" if "rotated" in parts else "no"] += count
            seen["folded"]["yes" if "folded" in parts else "no"] += count
        return {n: [f"{v} ({c})" for v, c in sorted(vals.items())] for n, vals in seen.items()}

    def render(self) -> str:
        def counts(counter: Counter[str]) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(counter.items())) or "-"

        lines = [
            f"tawa fuzz ({self.mode}, seed {self.seed}): {self.cases} programs tried in "
            f"{self.rounds} rounds, {self.seconds:.0f} s",
            f"  kinds:        {counts(self.kinds)}",
            f"  dtypes:       {counts(self.dtypes)}",
            f"  epilogue ops: {counts(self.epilogue_ops)}",
            f"  features:     {counts(self.features)}",
            f"  values:       {counts(self.values)}",
            f"  levels run:   {counts(self.levels_ran)}",
            f"  options covered: {len(self.options)} combinations of (D, P, consumers, "
            "persistent and its walk, attention pipelining, its rotation, the grid folded)",
        ]
        for name, values in self.option_values().items():
            lines.append(f"    {name}: {', '.join(values)}")
        for reason, count in sorted(self.skipped.items()):
            lines.append(f"  skipped {reason} ({count} cases)")
        if not self.failures:
            lines.append("  failures: none")
        else:
            lines.append(f"  failures: {len(self.failures)}")
            for failure in self.failures:
                first = failure.message.splitlines()[0] if failure.message else ""
                lines.append(f"    [{failure.level}] {first}")
                lines.append(f"      reproducer: {failure.path}  (tawa repro {failure.path})")
        return "\n".join(lines)


def run_round(
    summary: Summary,
    round_seed: int,
    out: Path,
    gpu: bool = False,
    max_examples: int = 25,
    deadline: float | None = None,
    derandomize: bool = False,
    kind: str | None = None,
) -> FuzzFailure | None:
    """One Hypothesis run (of programs of `kind` only, when given); returns (and records,
    writing its reproducer) the shrunk failure."""

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=derandomize,
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.target, Phase.shrink],
    )
    @given(case=cases(gpu=gpu, kind=kind))
    def prop(case: Case) -> None:
        if deadline is not None and time.monotonic() > deadline:
            return  # out of time: let the round finish quickly
        outcome = Outcome()
        try:
            check_case(case, outcome)
        except FuzzFailure:
            raise
        except Exception as error:  # a bug of the fuzzer itself (inputs, reference)
            raise FuzzFailure("fuzzer", f"{type(error).__name__}: {error}", case) from error
        finally:
            summary.record(case, outcome)

    if not derandomize:
        prop = hypothesis_seed(round_seed)(prop)
    summary.rounds += 1
    try:
        prop()
    except FuzzFailure as failure:
        return _record(summary, failure, out)
    except FlakyFailure as flaky:
        # Failed once, passed on Hypothesis's replay: still a bug (often state on the GPU),
        # reported with the first failure's reproducer rather than crashing the run.
        failure = next(e for e in flaky.exceptions if isinstance(e, FuzzFailure))
        failure.message += " (did not fail again on replay)"
        return _record(summary, failure, out)
    return None


def _record(summary: Summary, failure: FuzzFailure, out: Path) -> FuzzFailure:
    path = write_reproducer(failure, out)
    summary.failures.append(FailureRecord(failure.level, failure.message, path))
    return failure


def fuzz(
    minutes: float,
    seed: int = 0,
    out: Path | str = "fuzz-out",
    gpu: bool = False,
    max_examples: int = 200,
    progress: Callable[[Summary], None] | None = None,
    kind: str | None = None,
) -> Summary:
    """Run rounds until `minutes` have passed (at least one round); `progress` is called
    after each round (a long run leaves a trace even if it is killed);
    `kind` ("gemm", "rows", "attention") draws programs of that kind only."""
    start = time.monotonic()
    deadline = start + minutes * 60
    summary = Summary(mode="gpu" if gpu else "cpu", seed=seed)
    round_index = 0
    while round_index == 0 or time.monotonic() < deadline:
        run_round(
            summary, seed * 1_000_003 + round_index, Path(out), gpu, max_examples, deadline,
            kind=kind,
        )  # fmt: skip
        round_index += 1
        summary.seconds = time.monotonic() - start
        if progress is not None:
            progress(summary)
    return summary
