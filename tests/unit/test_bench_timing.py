"""bench/timing.py: the kernels settle unrecorded, then interleaved rounds start with each
kernel equally often, report each kernel's median round, and leave out a kernel that fails
with its first line."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from timing import SETTLE_MS, Timing, interleaved, round_order, rounds_for  # noqa: E402


def test_rounds_are_a_multiple_of_the_kernels() -> None:
    assert rounds_for(4, 6) == 8
    assert rounds_for(3, 6) == 6
    assert rounds_for(7, 6) == 7
    assert rounds_for(0, 6) == 0


def test_each_kernel_is_timed_first_equally_often_after_settling() -> None:
    calls: list[tuple[str, float]] = []

    def timer(run, rep_ms: float) -> float:
        calls.append((run(), rep_ms))
        return 1.0

    runs = {name: (lambda name=name: name) for name in ("a", "b", "c")}
    timings = interleaved(runs, least_rounds=5, rep_ms=40, timer=timer)
    settling, rounds = calls[:3], [name for name, _ in calls[3:]]
    assert settling == [(name, SETTLE_MS / 3) for name in "abc"]
    assert rounds[:9] == ["a", "b", "c", "b", "a", "c", "c", "a", "b"]
    assert sorted(rounds[::3]) == ["a", "a", "b", "b", "c", "c"]
    assert all(rep == 40 for _, rep in calls[3:])
    assert all(len(t.rounds) == 6 for t in timings.values())


def test_round_orders_start_everywhere_and_change_neighbours() -> None:
    names = ["a", "b", "c", "d"]
    orders = [round_order(names, r) for r in range(4)]
    assert [order[0] for order in orders] == names
    assert orders[1] == ["b", "a", "d", "c"]
    assert all(sorted(order) == names for order in orders)


def test_median_and_spread_of_the_rounds() -> None:
    timing = Timing((1.0, 4.0, 2.0, 2.0, 3.0))
    assert timing.ms == 2.0
    assert timing.spread == 1.5


def test_a_failing_kernel_is_left_out_with_its_first_line() -> None:
    def timer(run, rep_ms: float) -> float:
        return run()

    def broken() -> float:
        raise RuntimeError("illegal memory access\nmore")

    errors: dict[str, str] = {}
    timings = interleaved({"ok": lambda: 2.0, "broken": broken}, errors=errors, timer=timer)
    assert set(timings) == {"ok"} and timings["ok"].ms == 2.0
    assert errors == {"broken": "illegal memory access"}
