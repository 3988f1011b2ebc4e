"""The aref-level interpreter on hand-written warp-specialized GEMMs, and the scheduler alone.

The programs below are what the warp-specialization passes should produce for
examples/gemm.mlir: a producer that loads A/B tiles and puts them into a ring, consumers that
get, dot and release. Under every scheduling policy they must compute exactly what the tile
program computes; broken variants must fail with a message naming the groups and places.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import IntegerAttr, i32

from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.dialects.aref import ConsumedOp, GetOp, WarpgroupIndexOp
from tawa_xdsl.interp.aref import ArefProtocolError, run_warp_specialized
from tawa_xdsl.interp.dtypes import InterpreterError
from tawa_xdsl.interp.engine import Blocked
from tawa_xdsl.interp.scheduler import (
    POLICIES,
    ChoicePolicy,
    DeadlockError,
    RoundRobinPolicy,
    Scheduler,
    Task,
    TraceEvent,
    make_policy,
    run_tasks,
)
from tawa_xdsl.interp.tile import run_kernel
from tests.samples import gemm_aref, gemm_args, gemm_reference

EXAMPLES = Path(__file__).parents[2] / "examples"

# Program prologue shared by the hand-written kernels: row-major tile order, K tile count.
PROLOGUE = """
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %block = arith.constant 128 : i32
  %block_k = arith.constant 64 : i32
  %c127 = arith.constant 127 : i32
  %c63 = arith.constant 63 : i32
  %pid = tile.program_id 0 : i32
  %n_round = arith.addi %n, %c127 : i32
  %tiles_n = arith.divsi %n_round, %block : i32
  %pid_m = arith.divsi %pid, %tiles_n : i32
  %pid_n = arith.remsi %pid, %tiles_n : i32
  %off_m = arith.muli %pid_m, %block : i32
  %off_n = arith.muli %pid_n, %block : i32
  %k_round = arith.addi %k, %c63 : i32
  %k_tiles = arith.divsi %k_round, %block_k : i32
"""

# One producer, one consumer warpgroup; `RING` is the ring type, `D` its depth.
GEMM = (
    """func.func @gemm(%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<128x64xf16>,
                %c_desc: !tile.desc<128x128xf16>, %m: i32, %n: i32, %k: i32) {"""
    + PROLOGUE
    + """  %ring = aref.create : RING
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      scf.for %kt = %c0 to %k_tiles step %c1 : i32 {
        %off_k = arith.muli %kt, %block_k : i32
        %a = tile.load %a_desc[%off_m, %off_k] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
        %b = tile.load %b_desc[%off_n, %off_k] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
        aref.put %ring[%kt], %a, %b : RING, tensor<128x64xf16>, tensor<128x64xf16>
        scf.yield
      }
    }
    aref.group consumer warpgroups(1) registers(232) {
      %zero = arith.constant 0.000000e+00 : f32
      %acc0 = tile.splat %zero : f32 -> tensor<128x128xf32>
      %acc = scf.for %kt = %c0 to %k_tiles step %c1
          iter_args(%acc_iter = %acc0) -> (tensor<128x128xf32>) : i32 {
        %a, %b = aref.get %ring[%kt] : RING -> tensor<128x64xf16>, tensor<128x64xf16>
        %b_t = tile.trans %b : tensor<128x64xf16> -> tensor<64x128xf16>
        %acc_next = tile.dot %a, %b_t, %acc_iter
            : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
        aref.consumed %ring[%kt] : RING
        scf.yield %acc_next : tensor<128x128xf32>
      }
      %c_tile = tile.convert %acc : tensor<128x128xf32> -> tensor<128x128xf16>
      tile.store %c_desc[%off_m, %off_n], %c_tile : !tile.desc<128x128xf16>, tensor<128x128xf16>
    }
  }
  func.return
}
"""
)
GEMM_RING = "!aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], D>"

# Cooperative consumers: A is loaded as two 64-row halves, each consumer warpgroup computes
# the 64x128 half of the C tile its `aref.warpgroup_index` selects.
COOPERATIVE_CONSUMER = """
      %wg = aref.warpgroup_index : i32
      %top = arith.cmpi eq, %wg, %c0 : i32
      %row_off = arith.muli %wg, %c64 : i32
      %my_off_m = arith.addi %off_m, %row_off : i32
      %zero = arith.constant 0.000000e+00 : f32
      %acc0 = tile.splat %zero : f32 -> tensor<64x128xf32>
      %acc = scf.for %kt = %c0 to %k_tiles step %c1
          iter_args(%acc_iter = %acc0) -> (tensor<64x128xf32>) : i32 {
        %a0, %a1, %b = aref.get %ring[%kt]
            : RING -> tensor<64x64xf16>, tensor<64x64xf16>, tensor<128x64xf16>
        %a = arith.select %top, %a0, %a1 : tensor<64x64xf16>
        %b_t = tile.trans %b : tensor<128x64xf16> -> tensor<64x128xf16>
        %acc_next = tile.dot %a, %b_t, %acc_iter
            : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
        aref.consumed %ring[%kt] : RING
        scf.yield %acc_next : tensor<64x128xf32>
      }
      %c_tile = tile.convert %acc : tensor<64x128xf32> -> tensor<64x128xf16>
      tile.store %c_desc[%my_off_m, %off_n], %c_tile : !tile.desc<64x128xf16>, tensor<64x128xf16>
"""

GEMM_HALVES = (
    """func.func @gemm(%a_desc: !tile.desc<64x64xf16>, %b_desc: !tile.desc<128x64xf16>,
                %c_desc: !tile.desc<64x128xf16>, %m: i32, %n: i32, %k: i32) {"""
    + PROLOGUE
    + """  %ring = aref.create : RING
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %off_m1 = arith.addi %off_m, %c64 : i32
      scf.for %kt = %c0 to %k_tiles step %c1 : i32 {
        %off_k = arith.muli %kt, %block_k : i32
        %a0 = tile.load %a_desc[%off_m, %off_k] : !tile.desc<64x64xf16> -> tensor<64x64xf16>
        %a1 = tile.load %a_desc[%off_m1, %off_k] : !tile.desc<64x64xf16> -> tensor<64x64xf16>
        %b = tile.load %b_desc[%off_n, %off_k] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
        aref.put %ring[%kt], %a0, %a1, %b
            : RING, tensor<64x64xf16>, tensor<64x64xf16>, tensor<128x64xf16>
        scf.yield
      }
    }
    CONSUMERS
  }
  func.return
}
"""
)
HALVES_RING = "!aref.ring<[tensor<64x64xf16>, tensor<64x64xf16>, tensor<128x64xf16>], D>"


# Cooperative consumers on full tiles: each warpgroup slices its 64 rows out of the A tile.
SLICING_CONSUMER = """aref.group consumer warpgroups(2) registers(232) {
      %wg = aref.warpgroup_index : i32
      %row = arith.muli %wg, %c64 : i32
      %my_off_m = arith.addi %off_m, %row : i32
      %zero = arith.constant 0.000000e+00 : f32
      %acc0 = tile.splat %zero : f32 -> tensor<64x128xf32>
      %acc = scf.for %kt = %c0 to %k_tiles step %c1
          iter_args(%acc_iter = %acc0) -> (tensor<64x128xf32>) : i32 {
        %a_tile, %b = aref.get %ring[%kt] : RING -> tensor<128x64xf16>, tensor<128x64xf16>
        %a = tile.extract_slice %a_tile[%row, %c0] : tensor<128x64xf16> -> tensor<64x64xf16>
        %b_t = tile.trans %b : tensor<128x64xf16> -> tensor<64x128xf16>
        %acc_next = tile.dot %a, %b_t, %acc_iter
            : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
        aref.consumed %ring[%kt] : RING
        scf.yield %acc_next : tensor<64x128xf32>
      }
      %c_tile = tile.convert %acc : tensor<64x128xf32> -> tensor<64x128xf16>
      tile.store_slice %c_desc[%my_off_m, %off_n], %c_tile
          : !tile.desc<128x128xf16>, tensor<64x128xf16>
    }
  }
  """


def slicing_text(depth: int) -> str:
    consumer = GEMM[GEMM.index("aref.group consumer") : GEMM.rindex("func.return")]
    text = GEMM.replace(consumer, SLICING_CONSUMER)
    return text.replace("RING", GEMM_RING).replace("], D>", f"], {depth}>")


def cooperative_consumers(split_groups: bool) -> str:
    """One consumer group of two warpgroups, or two groups of one (the warpgroup index is
    then 0 in both, so the second group's copy selects its half by a constant)."""
    group = "aref.group consumer warpgroups({n}) registers(232) {{{body}    }}"
    if not split_groups:
        return group.format(n=2, body=COOPERATIVE_CONSUMER)
    second = COOPERATIVE_CONSUMER.replace(
        "%wg = aref.warpgroup_index : i32", "%wg = arith.constant 1 : i32"
    )
    return group.format(n=1, body=COOPERATIVE_CONSUMER) + "\n    " + group.format(n=1, body=second)


def gemm_text(depth: int) -> str:
    return GEMM.replace("RING", GEMM_RING).replace("], D>", f"], {depth}>")


def halves_text(depth: int, split_groups: bool) -> str:
    text = GEMM_HALVES.replace("CONSUMERS", cooperative_consumers(split_groups))
    return text.replace("RING", HALVES_RING).replace("], D>", f"], {depth}>")


def parse(text: str, name: str = "ws.mlir") -> Any:
    return parse_module(make_context(), text, name)


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first line of `text` containing `needle`."""
    return next(k for k, line in enumerate(text.splitlines(), 1) if needle in line)


def gemm_inputs(m: int, n: int, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    return a, b, -(-m // 128) * -(-n // 128)


_REFERENCE: dict[tuple[int, ...], np.ndarray] = {}


def reference(m: int, n: int, k: int, seed: int = 0) -> np.ndarray:
    """C from examples/gemm.mlir in the tile interpreter (cached)."""
    key = (m, n, k, seed)
    if key not in _REFERENCE:
        a, b, grid = gemm_inputs(m, n, k, seed)
        c = np.zeros((m, n), np.float16)
        run_kernel(
            parse((EXAMPLES / "gemm.mlir").read_text(), "gemm.mlir"), grid, [a, b, c, m, n, k]
        )
        _REFERENCE[key] = c
    return _REFERENCE[key]


def run_ws(text: str, m: int, n: int, k: int, seed: int = 0, **kwargs: Any) -> np.ndarray:
    a, b, grid = gemm_inputs(m, n, k, seed)
    c = np.zeros((m, n), np.float16)
    run_warp_specialized(parse(text), grid, [a, b, c, m, n, k], **kwargs)
    return c


# ------------------------------------------------------------------ correct programs

SHAPE = (200, 130, 150)  # 2x2 output tiles, 3 K tiles, none of them full


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
@pytest.mark.parametrize("schedule", [*POLICIES, 7, [1, 0, 1, 1, 0]])
def test_gemm_equals_tile_level_under_every_policy(depth: int, schedule: Any) -> None:
    np.testing.assert_array_equal(
        run_ws(gemm_text(depth), *SHAPE, schedule=schedule), reference(*SHAPE)
    )


@pytest.mark.parametrize("split_groups", [False, True], ids=["warpgroups2", "two-groups"])
@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("schedule", ["random", "producer-first", "consumer-first", "round-robin"])
def test_cooperative_gemm_equals_tile_level(depth: int, split_groups: bool, schedule: str) -> None:
    c = run_ws(halves_text(depth, split_groups), *SHAPE, schedule=schedule)
    np.testing.assert_array_equal(c, reference(*SHAPE))


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("schedule", ["random", "producer-first", "consumer-first", "round-robin"])
def test_slicing_cooperative_gemm_equals_tile_level(depth: int, schedule: str) -> None:
    c = run_ws(slicing_text(depth), *SHAPE, schedule=schedule)
    np.testing.assert_array_equal(c, reference(*SHAPE))


@pytest.mark.parametrize("k", [0, 1, 64, 65, 256])
def test_gemm_k_edge_cases(k: int) -> None:
    shape = (70, 129, k)
    np.testing.assert_array_equal(run_ws(gemm_text(2), *shape, schedule=3), reference(*shape))


@settings(max_examples=20, deadline=None, derandomize=True)
@given(data=st.data(), depth=st.integers(1, 4), seed=st.integers(0, 3))
def test_gemm_equals_tile_level_under_hypothesis_schedules(
    data: st.DataObject, depth: int, seed: int
) -> None:
    from tawa_xdsl.interp.scheduler import HypothesisPolicy

    shape = (100, 40, 200)
    c = run_ws(gemm_text(depth), *shape, seed=seed, schedule=HypothesisPolicy(data))
    np.testing.assert_array_equal(c, reference(*shape, seed=seed))


def test_unreleased_uses_at_the_end_are_fine() -> None:
    """A ring deep enough for every use never needs a release."""
    text = gemm_text(3).replace("aref.consumed %ring[%kt]", "// aref.consumed %ring[%kt]")
    np.testing.assert_array_equal(run_ws(text, *SHAPE), reference(*SHAPE))


def test_producer_first_fills_the_ring_before_any_get() -> None:
    trace: list[TraceEvent] = []
    run_ws(gemm_text(3), 100, 100, 256, schedule="producer-first", trace=trace)
    ops = [(e.task, e.op.name) for e in trace if e.op is not None]
    assert ops[:4] == [("producer wg0", "aref.put")] * 3 + [("consumer wg0", "aref.get")]


def test_consumer_first_gets_each_use_as_soon_as_it_is_put() -> None:
    trace: list[TraceEvent] = []
    run_ws(gemm_text(3), 100, 100, 256, schedule="consumer-first", trace=trace)
    ops = [e.op.name for e in trace if e.op is not None]
    assert ops[:6] == ["aref.put", "aref.get", "aref.consumed"] * 2
    assert str(trace[1]).startswith("program (0, 0, 0)")


# ------------------------------------------------------------------- broken programs


def test_never_consuming_with_depth_1_deadlocks_naming_both_groups() -> None:
    text = gemm_text(1).replace("aref.consumed %ring[%kt]", "// aref.consumed %ring[%kt]")
    with pytest.raises(DeadlockError) as info:
        run_ws(text, *SHAPE, schedule="round-robin")
    message = str(info.value)
    put, get = line_of(text, "aref.put %ring"), line_of(text, "aref.get %ring")
    assert re.search(
        rf"producer wg0 at ws\.mlir:{put}:\d+ 'aref\.put': waits for %ring slot 0", message
    )
    assert re.search(
        rf"consumer wg0 at ws\.mlir:{get}:\d+ 'aref\.get': waits for use 1 of %ring", message
    )
    assert "ring states of program (0, 0, 0)" in message
    assert "slot 0: use 0 released by 0/1" in message
    assert "completed: consumer wg0: 1 get; producer wg0: 1 put" in message
    assert {t.name for t in info.value.blocked} == {"producer wg0", "consumer wg0"}


def test_deadlock_names_the_waiting_warpgroup_of_a_cooperative_group() -> None:
    """Only warpgroup 0 releases: the producer waits on warpgroup 1's share."""
    text = halves_text(1, split_groups=False).replace(
        "aref.consumed %ring[%kt] : RING".replace("RING", HALVES_RING.replace("D>", "1>")),
        "scf.if %top { aref.consumed %ring[%kt] : "
        + HALVES_RING.replace("D>", "1>")
        + " scf.yield }",
    )
    with pytest.raises(DeadlockError) as info:
        run_ws(text, *SHAPE)
    assert "(1 slots, 2 consumer warpgroups)" in str(info.value)
    assert "use 0 released by 1/2" in str(info.value)
    assert "consumer wg0: 1 consumed, 1 get; consumer wg1: 1 get; producer wg0: 1 put" in str(
        info.value
    )
    assert {t.name for t in info.value.blocked} == {"producer wg0", "consumer wg0", "consumer wg1"}


def test_put_index_skipping_is_a_protocol_error() -> None:
    text = gemm_text(2).replace(
        "aref.put %ring[%kt]", "%twice = arith.addi %kt, %kt : i32\n        aref.put %ring[%twice]"
    )
    with pytest.raises(ArefProtocolError) as info:
        run_ws(text, *SHAPE)
    line = line_of(text, "aref.put %ring")
    assert re.fullmatch(
        rf"ws\.mlir:{line}:\d+: 'aref\.put' on %ring by producer wg0: "
        r"use counter out of order: expected put 1, got put 2",
        str(info.value),
    )


def test_consumed_without_get_is_a_protocol_error() -> None:
    consumed = "aref.consumed %ring[%kt] : " + GEMM_RING.replace("D>", "2>")
    text = gemm_text(2).replace(consumed, "%next = arith.addi %kt, %c1 : i32\n" + consumed)
    text = text.replace("aref.consumed %ring[%kt]", "aref.consumed %ring[%next]")
    with pytest.raises(ArefProtocolError, match=r"by consumer wg0: consumed use 1 without a get"):
        run_ws(text, *SHAPE)


def test_get_out_of_order_is_a_protocol_error() -> None:
    text = gemm_text(2).replace("aref.get %ring[%kt]", "aref.get %ring[%c0]")
    with pytest.raises(ArefProtocolError, match=r"expected get 1, got get 0"):
        run_ws(text, *SHAPE)


def test_reading_a_payload_after_releasing_it_fails() -> None:
    """Releasing before the dot would let the producer overwrite A/B under the MMA."""
    ring = GEMM_RING.replace("D>", "2>")
    consumed = f"        aref.consumed %ring[%kt] : {ring}\n"
    text = gemm_text(2).replace(consumed, "")
    text = text.replace("        %b_t = tile.trans", consumed + "        %b_t = tile.trans")
    with pytest.raises(InterpreterError, match=r"'tile.trans' .*reads use 0 of %ring after its"):
        run_ws(text, *SHAPE)


def test_warpgroup_index_outside_a_group_is_an_error() -> None:
    text = gemm_text(1).replace(
        "%pid = tile.program_id", "%wg = aref.warpgroup_index : i32\n  %pid = tile.program_id"
    )
    with pytest.raises(InterpreterError, match="outside an aref.group"):
        run_ws(text, *SHAPE)


# ------------------------------------------------------------------------- scheduler


SOME_OP = WarpgroupIndexOp()


def counter(name: str, log: list[str], steps: int) -> Generator[Blocked, None, str]:
    """A task with `steps` always-ready synchronization points."""
    for k in range(steps):
        log.append(f"{name}{k}")
        yield Blocked(SOME_OP, "", lambda: True)
    return name


def tasks_of(log: list[str], **steps: int) -> list[Task]:
    return [Task(name, counter(name, log, n), role=name) for name, n in steps.items()]


def test_round_robin_alternates() -> None:
    log: list[str] = []
    run_tasks(tasks_of(log, p=3, c=2), RoundRobinPolicy())
    assert log == ["p0", "c0", "p1", "c1", "p2"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("producer-first", ["p0", "p1", "p2", "c0", "c1"]),
        ("consumer-first", ["c0", "c1", "p0", "p1", "p2"]),
        ("furthest-behind", ["p0", "c0", "p1", "c1", "p2"]),
    ],
)
def test_adversarial_orders(name: str, expected: list[str]) -> None:
    log: list[str] = []
    tasks = [
        Task("p", counter("p", log, 3), "producer"),
        Task("c", counter("c", log, 2), "consumer"),
    ]
    run_tasks(tasks, name)
    assert log == expected


def test_decisions_replay_a_random_schedule() -> None:
    first: list[str] = []
    scheduler = run_tasks(tasks_of(first, a=4, b=4, c=4), 11)
    replayed: list[str] = []
    run_tasks(tasks_of(replayed, a=4, b=4, c=4), ChoicePolicy(scheduler.decisions))
    assert replayed == first and first != sorted(first)


def test_deadlock_lists_blocked_tasks_and_the_dump() -> None:
    def wait_forever() -> Generator[Blocked, None, None]:
        yield Blocked(SOME_OP, "waits for nothing", lambda: False)

    log: list[str] = []
    tasks = [*tasks_of(log, done=1), Task("stuck", wait_forever())]
    with pytest.raises(DeadlockError) as info:
        run_tasks(tasks, "round-robin", dump=lambda: "STATE")
    assert [t.name for t in info.value.blocked] == ["stuck"]
    assert "stuck at <unknown> 'aref.warpgroup_index': waits for nothing" in str(info.value)
    assert str(info.value).endswith("STATE")
    assert "1 unfinished tasks are blocked" in str(info.value)


def test_spawn_while_running() -> None:
    log: list[str] = []
    scheduler = Scheduler(make_policy("round-robin"))

    def parent() -> Generator[Blocked, None, None]:
        yield Blocked(SOME_OP, "", lambda: True)
        scheduler.spawn(Task("child", counter("child", log, 1)))

    scheduler.run([Task("parent", parent())])
    assert log == ["child0"] and all(t.finished for t in scheduler.tasks)
    assert scheduler.tasks[1].result == "child"


@pytest.mark.parametrize("spec", ["sideways", True, 1.5])
def test_bad_schedule_specs_are_refused(spec: Any) -> None:
    with pytest.raises(ValueError, match="schedule"):
        make_policy(spec)


# ------------------------------------------------------------------- the schedule as data


@pytest.mark.parametrize("k_tiles", [0, 1, 2, 5])
def test_drain_releases_the_uses_a_lagged_loop_still_holds(k_tiles: int) -> None:
    """MMA depth 3 on a 3-slot ring: the loop holds 2 uses; `aref.drain` gives them back
    (fewer when the loop ran fewer trips), in order, or the next tile would deadlock."""
    module = parse_module(make_context(), gemm_aref(3, 3, 1, True))
    a, b, c, scalars = gemm_args(1, 2, k_tiles, persistent=True)
    run_warp_specialized(module, 1, [a, b, c, *scalars], schedule="producer-first")
    np.testing.assert_allclose(c, gemm_reference(a, b), rtol=1e-3, atol=1e-3)


def test_lagged_release_that_holds_too_few_uses_is_a_protocol_error() -> None:
    """The release of use i claims lag 2 (on a 3-deep ring) but runs right after get i."""
    module = parse_module(make_context(), gemm_aref(3, 2, 1, False), "lag.mlir")
    (release,) = [op for op in module.walk() if isinstance(op, ConsumedOp)]
    (get,) = [op for op in module.walk() if isinstance(op, GetOp)]
    release.operands[1] = get.index
    release.lag = IntegerAttr(2, i32)
    a, b, c, scalars = gemm_args(1, 1, 3)
    with pytest.raises(
        ArefProtocolError, match=r"release of use 1 lagged by 2 runs before the get of use 2"
    ):
        run_warp_specialized(module, 1, [a, b, c, *scalars])
