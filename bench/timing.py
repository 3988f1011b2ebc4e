"""Timing several kernels in one process fairly: interleaved rounds, each kernel's median.

The H200 holds its power cap by lowering its clock within about a second of a load starting
(1980 MHz idle, 1500-1900 MHz under attention: bench/results/h200_2026-12-04_s19/*/dmon.log),
so a kernel timed first after a pause runs fast: one launch timed four times back to back after
2 s idle read 707, 625, 630 and 631 TFLOP/s (bench/order_bias.py, `bias/`). Timed one after
another, whichever kernel a benchmark times first gains. So the kernels of a configuration
first run unrecorded for `SETTLE_MS`, then `interleaved` times every kernel once per round,
each round starting one kernel further on (odd rounds backwards, so that no kernel always
follows the same one; each is first equally often when the rounds are a multiple of the
kernels), each timing after its own warm-up, and keeps the median of each kernel's rounds and
their spread. Tuning (the fastest of a peer's configurations) may time kernels one by one; the
numbers reported come from `interleaved`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass

ROUNDS = 4
# each timing's own warm-up: the clock follows a new kernel's power draw within some 100 ms, so
# a short warm-up times a kernel at its predecessor's clock (two launches of one kernel, 10 ms
# warm-ups, differed by 10% at d = 64 causal 2K: round19 fair/, ours against ours_m128)
REP_MS, WARMUP_MS = 40, 150
SETTLE_MS = 1000


def time_once(run: Callable[[], object], rep_ms: float = REP_MS) -> float:
    """Milliseconds per call of `run`: the median of CUDA-event timings over `rep_ms`."""
    from triton.testing import do_bench

    return float(do_bench(run, warmup=WARMUP_MS, rep=rep_ms, return_mode="median"))


@dataclass(frozen=True)
class Timing:
    """One kernel's milliseconds per call in each round, in the order the rounds ran."""

    rounds: tuple[float, ...]

    @property
    def ms(self) -> float:
        return statistics.median(self.rounds)

    @property
    def spread(self) -> float:
        """(slowest - fastest round) / median: rounds that disagree by more than the gap
        between two kernels leave that gap unmeasured."""
        return (max(self.rounds) - min(self.rounds)) / self.ms


def rounds_for(count: int, least: int = ROUNDS) -> int:
    """The fewest rounds, at least `least`, that start with each of `count` kernels equally
    often."""
    return -(-least // count) * count if count else 0


def interleaved(
    runs: Mapping[str, Callable[[], object]],
    least_rounds: int = ROUNDS,
    rep_ms: float = REP_MS,
    errors: dict[str, str] | None = None,
    timer: Callable[[Callable[[], object], float], float] = time_once,
) -> dict[str, Timing]:
    """Each of `runs` (name -> a no-argument launch) timed by `timer` once per round, round r
    in `round_order`. A kernel that raises is left out from then on, its first line in
    `errors`."""
    names = list(runs)
    times: dict[str, list[float]] = {name: [] for name in names}
    failed: set[str] = set()
    settle(runs, timer, errors, failed)
    for r in range(rounds_for(len(names), least_rounds)):
        for name in round_order(names, r):
            if name in failed:
                continue
            try:
                times[name].append(timer(runs[name], rep_ms))
            except Exception as exc:  # noqa: BLE001 (one kernel failing must not lose the others)
                failed.add(name)
                if errors is not None:
                    errors[name] = first_line(exc)
    return {name: Timing(tuple(ms)) for name, ms in times.items() if ms and name not in failed}


def round_order(names: list[str], r: int) -> list[str]:
    """Round r's order: from the (r mod n)th name on, forwards in even rounds and backwards in
    odd ones (each name first equally often over a multiple of n rounds; its neighbours vary)."""
    step = -1 if r % 2 else 1
    return [names[(r + step * i) % len(names)] for i in range(len(names))]


def settle(
    runs: Mapping[str, Callable[[], object]],
    timer: Callable[[Callable[[], object], float], float],
    errors: dict[str, str] | None,
    failed: set[str],
) -> None:
    """Run every kernel, unrecorded, for `SETTLE_MS` in all (the clock settles under load)."""
    share = SETTLE_MS / max(len(runs), 1)
    for name, run in runs.items():
        try:
            timer(run, share)
        except Exception as exc:  # noqa: BLE001 (one kernel failing must not lose the others)
            failed.add(name)
            if errors is not None:
                errors[name] = first_line(exc)


class Lineup:
    """The kernels one configuration times: each launched once as it joins (one that raises
    or fails its check stays out, its first line in `errors`), then all timed together by
    `interleaved`."""

    def __init__(self) -> None:
        self.runs: dict[str, Callable[[], object]] = {}
        self.errors: dict[str, str] = {}

    def join(
        self,
        name: str,
        run: Callable[[], object],
        check: Callable[[object], None] | None = None,
        poison: Callable[[], object] | None = None,
    ) -> bool:
        """Launch `run` once, after `poison` (NaN into the output it writes, so that an element
        it leaves unwritten fails the check), and pass its result to `check` (which raises on a
        wrong answer)."""
        import torch

        try:
            if poison is not None:
                poison()
            result = run()
            torch.cuda.synchronize()
            if check is not None:
                check(result)
        except Exception as exc:  # noqa: BLE001 (a peer that cannot run this configuration)
            self.errors[name] = first_line(exc)
            return False
        self.runs[name] = run
        return True

    def time(self, least_rounds: int = ROUNDS) -> dict[str, Timing]:
        return interleaved(self.runs, least_rounds, errors=self.errors)


def first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [repr(exc)])[0][:200]
