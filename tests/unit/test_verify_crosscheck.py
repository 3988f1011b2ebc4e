"""Cross-check the two oracles on small random ring protocols: the Z3 certificate check
(1-induction) proves a protocol exactly when the explicit lag-relative search finds no
violation. A protocol the search shows safe but the certificate rejects would be an internal
error of the certificate (incomplete); the reverse would be unsound."""

import functools
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import tawa_xdsl.language as tl
from tawa_xdsl.compiler import CompileOptions, pipeline
from tawa_xdsl.dialects import make_context
from tawa_xdsl.kernels import attention
from tawa_xdsl.kernels.gemm import gemm_tile_ir
from tawa_xdsl.verify.certificate import forget_proofs, prove
from tawa_xdsl.verify.explicit import search
from tawa_xdsl.verify.extract import Actor, RingProtocolModel, Step, extract


@st.composite
def protocols(draw) -> RingProtocolModel:
    """Groups, depth, counts, parities, offsets, lags, bytes and trip counts, mostly right,
    sometimes wrong in one or more places."""
    depth = draw(st.integers(1, 3))
    wgs = draw(st.integers(1, 2))
    lag = draw(st.integers(0, min(depth, 2)))
    ncopies = draw(st.integers(1, 2))
    nbytes = [draw(st.sampled_from([1024, 2048])) for _ in range(ncopies)]

    def bug(p: float = 0.15) -> bool:
        return draw(st.floats(0, 1)) < p

    expect = sum(nbytes) + (draw(st.sampled_from([-512, 512])) if bug() else 0)
    prod = [
        Step("wait", "empty", 0, depth, 0, depth, 0 if bug() else 1),
        Step("arrive", "full", 0, depth, tx=expect),
    ]
    for j, b in enumerate(nbytes):
        bar_off = 1 if depth > 1 and bug(0.1) else 0
        prod.append(Step("tma", "", 0, depth, tx=b, buffer=j, bar_slot_off=bar_off))
    reads = [Step("read", "", 0, depth, buffer=j) for j in range(ncopies)]
    release = Step("arrive", "empty", 1 if depth > 1 and bug(0.05) else 0, depth, lag=lag)
    cons = [Step("wait", "full", 0, depth, 0, depth, 1 if bug(0.1) else 0)]
    if bug(0.1):
        cons += [release, *reads]  # early release
    elif bug(0.05):
        cons += reads  # missing release
    else:
        cons += [*reads, release]
    full_count = 2 if bug(0.1) else 1
    empty_count = wgs + (draw(st.sampled_from([-1, 1])) if bug(0.1) else 0)
    delta = draw(st.sampled_from([-1, 1])) if bug(0.1) else 0
    producer = Actor("P", "producer", 1, prod, ())
    consumer = Actor("C0", "consumer", wgs, cons, (), drain=lag > 0 and not bug(0.05))
    return RingProtocolModel(
        "r",
        depth,
        full_count,
        max(empty_count, 1),
        producer,
        [consumer],
        {"depth": depth, "consumers": wgs, "expect_tx": sum(nbytes)},
        {"C0": delta},
    )


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protocols())
def test_certificate_agrees_with_explicit_search(ring):
    explicit = search(ring)
    assert explicit.violation != "UNKNOWN"
    proof = prove(ring)
    assert proof.proved == (explicit.violation is None), (proof.failed, explicit.message)


def test_correct_protocols_are_proved_by_the_certificate():
    """The template is complete on every correct shape of the grid (no internal errors)."""
    for depth in (1, 2, 3):
        for wgs in (1, 2):
            for lag in range(0, min(depth, 2) + 1):
                prod = [
                    Step("wait", "empty", 0, depth, 0, depth, 1),
                    Step("arrive", "full", 0, depth, tx=2048),
                    Step("tma", "", 0, depth, tx=2048, buffer=0),
                ]
                cons = [
                    Step("wait", "full", 0, depth, 0, depth, 0),
                    Step("read", "", 0, depth, buffer=0),
                    Step("arrive", "empty", 0, depth, lag=lag),
                ]
                ring = RingProtocolModel(
                    "r",
                    depth,
                    1,
                    wgs,
                    Actor("P", "producer", 1, prod, ()),
                    [Actor("C0", "consumer", wgs, cons, (), drain=lag > 0)],
                    {"depth": depth, "consumers": wgs, "expect_tx": 2048},
                    {"C0": 0},
                )
                deadlocks = lag >= depth  # holding D uses: the producer can never refill
                assert prove(ring).proved == (not deadlocks), (depth, wgs, lag)
                if depth * wgs <= 4:  # the explicit search agrees (kept small: it is slower)
                    assert (search(ring).violation is None) == (not deadlocks)


def test_a_second_wait_on_one_barrier_is_decided_not_a_crash():
    """A producer waiting twice on `empty` per use is outside the certificate's template
    (TemplateMismatch, not an exception); the explicit search then decides it: safe, since
    nothing arrives on `empty` between the two waits, so the second finds its phase complete."""
    depth = 2
    wait = Step("wait", "empty", 0, depth, 0, depth, 1)
    prod = [wait, Step("arrive", "full", 0, depth, tx=2048), wait]
    prod.append(Step("tma", "", 0, depth, tx=2048, buffer=0))
    cons = [
        Step("wait", "full", 0, depth, 0, depth, 0),
        Step("read", "", 0, depth, buffer=0),
        Step("arrive", "empty", 0, depth),
    ]
    ring = RingProtocolModel(
        "r",
        depth,
        1,
        1,
        Actor("P", "producer", 1, prod, ()),
        [Actor("C0", "consumer", 1, cons, ())],
        {"depth": depth, "consumers": 1, "expect_tx": 2048},
        {"C0": 0},
    )
    proof = prove(ring)
    assert not proof.proved and proof.failed.startswith("template")
    assert search(ring).violation is None


# ------------------------------------------------------------------ the compiler's own models


def _mbarrier_level(module, options: CompileOptions):
    """`module` lowered to the mbarrier level (the IR the extractor reads)."""
    ctx, lowered = make_context(), module.clone()
    for level, step in pipeline(options):
        step.apply(ctx, lowered)
        if level == "mbarrier":
            return lowered
    raise AssertionError("the pipeline has no mbarrier level")


@functools.cache
def compiler_rings() -> list[RingProtocolModel]:
    """The rings of the library GEMM (one consumer, D 1-3, MMA depth 1-2, persistent or not)
    and of the causal attention (Q ring of depth 1, K and V rings of depth 2)."""
    gemm = gemm_tile_ir(128, 128, 64, tl.float16)
    rings = []
    for d, p, persistent in [(1, 1, False), (2, 1, True), (2, 2, False), (3, 2, True)]:
        rings += extract(_mbarrier_level(gemm, CompileOptions(d, p, 1, persistent)))
    rings += extract(_mbarrier_level(attention.tile_module(64, "f16", True), ATTENTION))
    return rings


ATTENTION = CompileOptions(stages=2, mma_depth=1, consumers=2)


@st.composite
def shifted_compiler_rings(draw) -> RingProtocolModel:
    """A ring the compiler made, with slot and parity offsets moved across several ring turns
    both ways: a common shift of one barrier array's or buffer's slots (a renaming: safe),
    whole turns added to one slot (safe), parity offsets moved by whole turns (an odd number
    flips the parity: broken) or by anything (mostly broken)."""
    ring = draw(st.sampled_from(compiler_rings()))
    D = ring.depth
    turns = st.integers(-3, 3)
    shift = {
        ("full",): draw(st.integers(-3 * D, 3 * D)),
        ("empty",): draw(st.integers(-3 * D, 3 * D)),
    }

    def moved(step: Step) -> Step:
        changes = {}
        if step.kind in ("wait", "arrive"):
            changes["slot_off"] = step.slot_off + shift[(step.barrier,)] + D * draw(turns)
        elif step.kind == "tma":
            changes["bar_slot_off"] = step.bar_slot_off + shift[("full",)] + D * draw(turns)
        if step.kind == "wait":
            how = draw(st.sampled_from(["turns", "two turns", "any", "none"]))
            extra = {
                "turns": D * draw(turns),
                "two turns": 2 * D * draw(turns),
                "any": draw(st.integers(-3 * D, 3 * D)),
                "none": 0,
            }[how]
            changes["parity_off"] = step.parity_off + extra
        return replace(step, **changes)

    def actor(a: Actor) -> Actor:
        return replace(a, steps=[moved(s) for s in a.steps])

    return replace(
        ring, producer=actor(ring.producer), consumers=[actor(c) for c in ring.consumers]
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shifted_compiler_rings())
def test_certificate_agrees_with_explicit_search_on_shifted_offsets(ring):
    """Exact slot and parity arithmetic: proved exactly when no counterexample exists, for
    offsets anywhere (several ring turns, negative)."""
    explicit = search(ring)
    assert explicit.violation != "UNKNOWN"
    event(f"explicit search: {explicit.violation or 'safe'}")
    proof = prove(ring)
    assert proof.proved == (explicit.violation is None), (proof.failed, explicit.message)


def test_far_offsets_are_not_wrapped_into_one_turn():
    """A parity one ring turn (or three) off is a wrong parity; two turns off is the same one:
    the certificate tells them apart (its wrap once assumed offsets within one turn)."""
    ring = compiler_rings()[2]  # GEMM D=2, P=2
    D = ring.depth
    for extra, safe in [(D, False), (3 * D, False), (2 * D, True), (-4 * D, True), (-D, False)]:
        steps = [
            replace(s, parity_off=s.parity_off + extra) if s.kind == "wait" else s
            for s in ring.producer.steps
        ]
        moved = replace(ring, producer=replace(ring.producer, steps=steps))
        assert prove(moved).proved == safe, extra
        assert (search(moved).violation is None) == safe, extra


# ---------------------------------------------------------------------- the disk cache

CHILD = """
import json, sys
sys.path.insert(0, {tests!r})
from test_verify_crosscheck import small_ring
from tawa_xdsl.verify.certificate import forget_proofs, prove
result = prove(small_ring())
print(json.dumps({{"proved": result.proved, "detail": result.detail}}))
"""


def small_ring() -> RingProtocolModel:
    """A correct ring of depth 2, one consumer warpgroup (proved in well under a second)."""
    prod = [
        Step("wait", "empty", 0, 2, 0, 2, 1),
        Step("arrive", "full", 0, 2, tx=2048),
        Step("tma", "", 0, 2, tx=2048, buffer=0),
    ]
    cons = [
        Step("wait", "full", 0, 2, 0, 2, 0),
        Step("read", "", 0, 2, buffer=0),
        Step("arrive", "empty", 0, 2),
    ]
    return RingProtocolModel(
        "r",
        2,
        1,
        1,
        Actor("P", "producer", 1, prod, ()),
        [Actor("C0", "consumer", 1, cons, ())],
        {"depth": 2, "consumers": 1, "expect_tx": 2048},
        {"C0": 0},
    )


def prove_in_a_new_process(cache_dir: Path) -> dict:
    code = CHILD.format(tests=str(Path(__file__).parent))
    env = {**os.environ, "TAWA_CACHE_DIR": str(cache_dir)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_reads_the_proof_from_disk(tmp_path: Path):
    first = prove_in_a_new_process(tmp_path)
    assert first == {"proved": True, "detail": []}
    assert len(list((tmp_path / "proofs").glob("*/*.kernel"))) == 1
    assert prove_in_a_new_process(tmp_path) == {"proved": True, "detail": ["cached"]}


def renamed(ring: RingProtocolModel, shift: int) -> RingProtocolModel:
    """`ring` with other names and every slot renamed s -> s + shift (the same protocol)."""

    def move(step: Step) -> Step:
        bar = step.bar_slot_off + shift if step.kind == "tma" else step.bar_slot_off
        return replace(step, slot_off=step.slot_off + shift, bar_slot_off=bar)

    def actor(a: Actor, name: str) -> Actor:
        return replace(a, name=name, steps=[move(s) for s in a.steps])

    consumers = [actor(c, f"other{n}") for n, c in enumerate(ring.consumers)]
    delta = {f"other{n}": ring.trip_delta.get(c.name, 0) for n, c in enumerate(ring.consumers)}
    return replace(
        ring,
        name="other",
        producer=actor(ring.producer, "Q"),
        consumers=consumers,
        trip_delta=delta,
    )


def test_a_ring_equal_up_to_renaming_reuses_the_proof(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("TAWA_CACHE_DIR", str(tmp_path))
    forget_proofs()
    first = prove(small_ring())
    assert first.proved and first.queries > 0
    again = prove(renamed(small_ring(), 1))
    assert again.proved and again.queries == 0 and again.detail == ["cached"]
    # Another shape (fewer bytes announced than copied) is proved afresh, and fails.
    other = small_ring()
    other.producer.steps[1] = replace(other.producer.steps[1], tx=1024)
    assert prove(other).queries > 0 and not prove(other).proved


def test_an_unusable_proof_cache_costs_a_warning(tmp_path: Path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("TAWA_CACHE_DIR", str(blocked))
    forget_proofs()
    with pytest.warns(RuntimeWarning, match="unusable"):
        assert prove(small_ring()).proved
