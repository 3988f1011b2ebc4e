"""Run concurrent coroutines one step at a time, under a chosen interleaving.

Every interpreter level that simulates concurrency (warp groups talking through arefs, or
through mbarriers) runs each concurrent actor as a `Task`: a generator that yields a
`Blocked` event (from `engine.py`) at every synchronization point and returns when the actor
is done. A `Policy` picks which runnable task moves next; a task is runnable until it has
started, and afterwards while its pending event's `ready()` holds. One step resumes the chosen
task until it yields again or returns.

    tasks = [Task("producer wg0", producer_gen, role="producer"), Task(...)]
    Scheduler(make_policy("random"), dump=lambda: ring_states()).run(tasks)

Policies:

* `RandomPolicy(seed)` -- a seeded uniform choice among the runnable tasks.
* `RoundRobinPolicy()` -- the next runnable task after the one that moved last.
* `PriorityPolicy` -- adversarial orders: `producer-first` runs the producer until it
  blocks (a full ring), `consumer-first` the reverse (an empty ring), `furthest-ahead` keeps
  moving whoever has taken the most steps, `furthest-behind` keeps everyone in lockstep.
* `ChoicePolicy(choices)` -- driven by a list of indices or a callable; `HypothesisPolicy(data)`
  draws each choice from Hypothesis, so a failing schedule shrinks to a short one.

When every unfinished task is blocked the scheduler raises `DeadlockError`, listing each
blocked task with the op it waits at, its source location and the reason, followed by the
level's state dump. Every run records its decisions (the index picked among the runnable
tasks), so `ChoicePolicy(scheduler.decisions)` replays it; an optional trace records which
task ran which op.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from xdsl.ir import Operation

from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.interp.dtypes import InterpreterError
from tawa_xdsl.interp.engine import Blocked

Coroutine = Generator[Blocked, None, Any]


class DeadlockError(InterpreterError):
    """Every unfinished task waits on something no other task can provide."""

    def __init__(self, message: str, blocked: Sequence[Task], decisions: Sequence[int]):
        super().__init__(message)
        self.blocked = tuple(blocked)
        self.decisions = tuple(decisions)


@dataclass
class Task:
    """One concurrent actor: a coroutine plus what the report and the policies need."""

    name: str
    coroutine: Coroutine
    role: str = ""
    pending: Blocked | None = None
    started: bool = False
    finished: bool = False
    steps: int = 0
    result: Any = None
    index: int = -1  # the position in its scheduler, set by `Scheduler.spawn`

    def runnable(self) -> bool:
        if self.finished:
            return False
        return self.pending is None or self.pending.ready()

    def describe(self) -> str:
        """`producer wg0 at gemm.mlir:12:7 'aref.put': <reason>` for the deadlock report."""
        if self.pending is None:
            return f"{self.name}: not started"
        op = self.pending.op
        return f"{self.name} at {op_location(op)} '{op.name}': {self.pending.reason}"


@dataclass(frozen=True)
class TraceEvent:
    """Task `task` moved past `op` (None: it started) in step `step` of scheduler `where`."""

    where: str
    step: int
    task: str
    op: Operation | None

    def __str__(self) -> str:
        what = "start" if self.op is None else f"{self.op.name} at {op_location(self.op)}"
        return f"{self.where} {self.step:4d} {self.task}: {what}".lstrip()


# ------------------------------------------------------------------------------ policies


class Policy(Protocol):
    """Picks the task that moves next; `runnable` is never empty and keeps task order."""

    def choose(self, runnable: Sequence[Task]) -> Task: ...


class RandomPolicy:
    """A seeded uniform choice: the same seed gives the same interleaving."""

    def __init__(self, seed: int | random.Random = 0):
        self.random = seed if isinstance(seed, random.Random) else random.Random(seed)

    def choose(self, runnable: Sequence[Task]) -> Task:
        return runnable[self.random.randrange(len(runnable))]


class RoundRobinPolicy:
    """Each runnable task in turn: the first one after the task that moved last."""

    def __init__(self) -> None:
        self.last = -1

    def choose(self, runnable: Sequence[Task]) -> Task:
        later = [t for t in runnable if t.index > self.last]
        chosen = later[0] if later else runnable[0]
        self.last = chosen.index
        return chosen


class PriorityPolicy:
    """Moves the runnable task of highest `rank`. Ties go to the task that moved last when
    `sticky` (so a favoured task runs as long as it can), then to the earliest task."""

    def __init__(self, rank: Callable[[Task], float], sticky: bool = True):
        self.rank = rank
        self.sticky = sticky
        self.last: Task | None = None

    def choose(self, runnable: Sequence[Task]) -> Task:
        def key(item: tuple[int, Task]) -> tuple[float, bool, int]:
            position, task = item
            return (self.rank(task), self.sticky and task is self.last, -position)

        chosen = max(enumerate(runnable), key=key)[1]
        self.last = chosen
        return chosen


class ChoicePolicy:
    """Picks `runnable[choice % len(runnable)]`, the choices coming from a list (then 0 once it
    runs out) or from a callable given the number of runnable tasks. Nothing is consumed when
    only one task can move, so choice lists stay short and replay exactly."""

    def __init__(self, choices: Sequence[int] | Callable[[int], int]):
        self.next_choice = choices if callable(choices) else _list_choices(choices)

    def choose(self, runnable: Sequence[Task]) -> Task:
        if len(runnable) == 1:
            return runnable[0]
        return runnable[self.next_choice(len(runnable)) % len(runnable)]


def _list_choices(choices: Sequence[int]) -> Callable[[int], int]:
    remaining = iter(list(choices))
    return lambda n: next(remaining, 0)


def HypothesisPolicy(data: Any) -> ChoicePolicy:  # noqa: N802 (reads as a policy class)
    """Each choice drawn from a Hypothesis `data` object (`st.data()`), so schedules shrink."""
    from hypothesis import strategies as st

    return ChoicePolicy(lambda n: data.draw(st.integers(0, n - 1), label="schedule"))


POLICIES: dict[str, Callable[[], Policy]] = {
    "random": lambda: RandomPolicy(0),
    "round-robin": RoundRobinPolicy,
    "producer-first": lambda: PriorityPolicy(lambda t: t.role == "producer"),
    "consumer-first": lambda: PriorityPolicy(lambda t: t.role == "consumer"),
    "furthest-ahead": lambda: PriorityPolicy(lambda t: t.steps),
    "furthest-behind": lambda: PriorityPolicy(lambda t: -t.steps, sticky=False),
}
"""The named policies; each call makes a fresh one."""

ScheduleSpec = str | int | Sequence[int] | Callable[[int], int] | Policy


def make_policy(spec: ScheduleSpec) -> Policy:
    """A policy from a name in `POLICIES`, a random seed, a list of choices, a choice
    function, or a policy object (returned as is)."""
    if isinstance(spec, str):
        if spec not in POLICIES:
            raise ValueError(f"unknown schedule {spec!r}; expected one of {', '.join(POLICIES)}")
        return POLICIES[spec]()
    if isinstance(spec, bool):
        raise ValueError(f"a schedule cannot be a bool, got {spec!r}")
    if isinstance(spec, int):
        return RandomPolicy(spec)
    if hasattr(spec, "choose"):
        return spec  # type: ignore[return-value]
    if isinstance(spec, Sequence) or callable(spec):
        return ChoicePolicy(spec)
    raise ValueError(f"cannot make a schedule from {spec!r}")


# ----------------------------------------------------------------------------- scheduler


@dataclass
class Scheduler:
    """Runs tasks to completion one step at a time; `dump()` describes the shared state for
    deadlock reports; `trace`, when a list, receives a `TraceEvent` per step, tagged with
    `name` (e.g. the program instance)."""

    policy: Policy
    dump: Callable[[], str] | None = None
    trace: list[TraceEvent] | None = None
    name: str = ""
    tasks: list[Task] = field(default_factory=list)
    decisions: list[int] = field(default_factory=list)
    steps: int = 0

    def spawn(self, task: Task) -> Task:
        """Add a task; allowed while running (e.g. an asynchronous copy in flight)."""
        task.index = len(self.tasks)
        self.tasks.append(task)
        return task

    def run(self, tasks: Sequence[Task] = ()) -> None:
        for task in tasks:
            self.spawn(task)
        while True:
            unfinished = [t for t in self.tasks if not t.finished]
            if not unfinished:
                return
            runnable = [t for t in unfinished if t.runnable()]
            if not runnable:
                raise self.deadlock(unfinished)
            task = self.policy.choose(runnable)
            self.decisions.append(runnable.index(task))
            self.step(task)

    def step(self, task: Task) -> None:
        """Resume `task` until its next synchronization point or its end."""
        if self.trace is not None:
            op = task.pending.op if task.pending is not None else None
            self.trace.append(TraceEvent(self.name, self.steps, task.name, op))
        self.steps += 1
        task.steps += 1
        task.started = True
        try:
            task.pending = next(task.coroutine)
        except StopIteration as stop:
            task.pending, task.finished, task.result = None, True, stop.value

    def deadlock(self, blocked: Sequence[Task]) -> DeadlockError:
        lines = [f"deadlock: all {len(blocked)} unfinished tasks are blocked"]
        lines += [f"  {task.describe()}" for task in blocked]
        if self.dump is not None:
            lines.append(self.dump().rstrip())
        return DeadlockError("\n".join(lines), blocked, self.decisions)


def run_tasks(
    tasks: Sequence[Task],
    schedule: ScheduleSpec = "random",
    dump: Callable[[], str] | None = None,
    trace: list[TraceEvent] | None = None,
    name: str = "",
) -> Scheduler:
    """Run `tasks` to completion under `schedule`; returns the scheduler (its decisions)."""
    scheduler = Scheduler(make_policy(schedule), dump, trace, name)
    scheduler.run(tasks)
    return scheduler
