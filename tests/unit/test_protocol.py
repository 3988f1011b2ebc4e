"""The ring arithmetic and its IR round trip (emit -> match) in tawa_xdsl.protocol."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from xdsl.dialects import test as xdsl_test
from xdsl.dialects.builtin import TensorType, f16, f32, i32

from tawa_xdsl import protocol


@given(st.integers(1, 16), st.integers(0, 10_000))
def test_slot_and_parities(depth, i):
    assert protocol.slot(i, depth) == i % depth
    assert protocol.consumer_parity(i, depth) == (i // depth) % 2
    assert protocol.producer_parity(i, depth) == 1 - protocol.consumer_parity(i, depth)


@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_first_round_producer_waits_pass_on_fresh_barriers(depth):
    # A fresh barrier has phase bit 0; try_wait.parity(p) passes iff bit != p.
    assert all(protocol.producer_parity(i, depth) != 0 for i in range(depth))
    assert all(protocol.consumer_parity(i, depth) == 0 for i in range(depth))


def test_counts_and_bytes():
    proto = protocol.RingProtocol(depth=3, consumer_warpgroups=2, expect_tx=32768)
    assert (proto.full_count, proto.empty_count) == (1, 2)
    tiles = [TensorType(f16, [128, 64]), TensorType(f16, [64, 128])]
    assert protocol.expect_tx_bytes(tiles) == 2 * 128 * 64 * 2
    assert protocol.tile_bytes(TensorType(f32, [16, 16])) == 1024
    assert protocol.swizzle_for(TensorType(f16, [128, 64])) == 128
    assert protocol.swizzle_for(TensorType(f16, [16, 16])) == 32
    with pytest.raises(ValueError, match="at least one consumer"):
        protocol.empty_init_count(0)


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_emitted_ir_reads_back(depth):
    i = xdsl_test.TestOp(result_types=[i32]).results[0]
    _, slot = protocol.emit_slot(i, depth)
    _, cpar = protocol.emit_consumer_parity(i, depth)
    _, ppar = protocol.emit_producer_parity(i, depth)
    s, c, p = protocol.match_slot(slot), protocol.match_parity(cpar), protocol.match_parity(ppar)
    assert s is not None and c is not None and p is not None
    assert (s.base, s.offset, s.modulus) == (i, 0, depth)
    assert (c.base, c.offset, c.divisor, c.flip) == (i, 0, depth, 0)
    assert (p.base, p.offset, p.divisor, p.flip) == (i, 0, depth, 1)
    for use in range(3 * depth):
        assert s(use) == protocol.slot(use, depth)
        assert c(use) == protocol.consumer_parity(use, depth)
        assert p(use) == protocol.producer_parity(use, depth)


def test_match_rejects_other_shapes():
    i = xdsl_test.TestOp(result_types=[i32]).results[0]
    assert protocol.match_slot(i) is None
    assert protocol.match_parity(i) is None
