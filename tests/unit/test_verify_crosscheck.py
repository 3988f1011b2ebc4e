"""Cross-check the two oracles on small random ring protocols: the Z3 certificate check
(1-induction) proves a protocol exactly when the explicit lag-relative search finds no
violation. A protocol the search shows safe but the certificate rejects would be an internal
error of the certificate (incomplete); the reverse would be unsound."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tawa_xdsl.verify.certificate import prove
from tawa_xdsl.verify.explicit import search
from tawa_xdsl.verify.extract import Actor, RingProtocolModel, Step


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
