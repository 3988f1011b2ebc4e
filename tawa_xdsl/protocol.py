"""The ring protocol: the one place that turns a logical use counter into barrier arithmetic.

An aref ring of depth D is D smem slots guarded by D `full` and D `empty` mbarriers. Use `i`
of the ring (the aref-level index, 0, 1, 2, ... per side) lives in

    slot(i)             = i mod D
    phase(i)            = (i div D) & 1          the parity of the round use i belongs to
    consumer_parity(i)  = phase(i)               consumers wait full[slot] for round i div D
    producer_parity(i)  = phase(i) ^ 1           the producer waits empty[slot] for the round
                                                 before; on a fresh barrier (phase bit 0)
                                                 parity 1 passes at once, so the first D
                                                 puts do not wait (CUTLASS's "phase -1")

Barrier counts: `full[s]` expects one arrival per phase (the producer's; for TMA payloads an
`arrive.expect_tx` carrying the slot's total bytes, the copies' `complete_tx` finish the
phase); `empty[s]` expects one arrival per consumer warpgroup that gets from the ring.

The lowering (`transforms/lower_aref.py`) emits these formulas as `arith` ops with the helpers
below, the mbarrier interpreter runs them, and the verifier (`tawa_xdsl/verify`) reads them
back with `match_slot` / `match_parity`: any other shape of slot or parity expression is not
this protocol, and the verifier says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, TensorType, i32
from xdsl.ir import Attribute, Operation, SSAValue

# ------------------------------------------------------------------------- the arithmetic


def slot(i: int, depth: int) -> int:
    """The slot of use `i` of a ring of `depth` slots."""
    return i % depth


def phase(i: int, depth: int) -> int:
    """The parity of the round of use `i`: 0 for uses 0..D-1, 1 for D..2D-1, 0 again, ..."""
    return (i // depth) & 1


def consumer_parity(i: int, depth: int) -> int:
    """The parity a consumer waits `full[slot(i)]` with for use `i`."""
    return phase(i, depth)


def producer_parity(i: int, depth: int) -> int:
    """The parity the producer waits `empty[slot(i)]` with before use `i` (the opposite one)."""
    return phase(i, depth) ^ 1


FULL_INIT_COUNT = 1  # the producer arrives once per phase (one elected thread)


def empty_init_count(consumer_warpgroups: int) -> int:
    """`empty[s]` completes a phase when every consumer warpgroup has released the slot."""
    if consumer_warpgroups < 1:
        raise ValueError(f"a ring needs at least one consumer warpgroup, got {consumer_warpgroups}")
    return consumer_warpgroups


def tile_bytes(tile: Attribute) -> int:
    """Bytes of one payload tile (`tensor<128x64xf16>` -> 16384)."""
    assert isinstance(tile, TensorType)
    return math.prod(tile.get_shape()) * (tile.element_type.bitwidth // 8)


def expect_tx_bytes(tma_payloads: Sequence[Attribute]) -> int:
    """What the producer's `arrive.expect_tx` announces: the bytes of every TMA copy of one
    put, which their `complete_tx` deliver."""
    return sum(tile_bytes(t) for t in tma_payloads)


def swizzle_for(tile: Attribute) -> int:
    """The widest TMA/wgmma swizzle span (128, 64, 32 bytes or none) a tile's rows allow.

    A vector (rank 1, e.g. a GEMM bias, or one row with leading unit dims: a `[1, 128]` block
    of per-K-block scales) gets none: it is never a wgmma operand, and TMA swizzles by shared
    address, so a swizzled row lands with its 16-byte chunks permuted by the address bits of
    its slab and slot (measured on the H200: a 512-byte scale row read back with chunks
    XORed from its second slab on)."""
    assert isinstance(tile, TensorType)
    if all(d == 1 for d in tile.get_shape()[:-1]):
        return 0
    row_bytes = tile.get_shape()[-1] * (tile.element_type.bitwidth // 8)
    for span in (128, 64, 32):
        if row_bytes % span == 0:
            return span
    return 0


@dataclass(frozen=True)
class RingProtocol:
    """The derived quantities of one ring: what lower-aref emits and the verifier expects."""

    depth: int
    consumer_warpgroups: int
    expect_tx: int  # bytes per put delivered by TMA (0: the payload is stored by threads)

    @property
    def full_count(self) -> int:
        return FULL_INIT_COUNT

    @property
    def empty_count(self) -> int:
        return empty_init_count(self.consumer_warpgroups)


# ------------------------------------------------------------------------- emitting the IR


def _const(value: int, name: str) -> arith.ConstantOp:
    op = arith.ConstantOp(IntegerAttr(value, i32))
    op.result.name_hint = name
    return op


def emit_slot(i: SSAValue, depth: int) -> tuple[list[Operation], SSAValue]:
    """`%slot = arith.remui %i, D`."""
    d = _const(depth, "depth")
    rem = arith.RemUIOp(i, d.result)
    rem.result.name_hint = "slot"
    return [d, rem], rem.result


def emit_consumer_parity(i: SSAValue, depth: int) -> tuple[list[Operation], SSAValue]:
    """`%parity = arith.andi (arith.divui %i, D), 1`."""
    d, one = _const(depth, "depth"), _const(1, "one")
    div = arith.DivUIOp(i, d.result)
    div.result.name_hint = "round"
    par = arith.AndIOp(div.result, one.result)
    par.result.name_hint = "parity"
    return [d, one, div, par], par.result


def emit_producer_parity(i: SSAValue, depth: int) -> tuple[list[Operation], SSAValue]:
    """`%parity = arith.xori (consumer parity of %i), 1`."""
    ops, par = emit_consumer_parity(i, depth)
    one = ops[1]
    flip = arith.XOrIOp(par, one.results[0])
    flip.result.name_hint = "parity"
    return [*ops, flip], flip.result


# ------------------------------------------------------------------- reading the IR back


def constant_of(value: SSAValue) -> int | None:
    """The integer an `arith.constant` defines, else None."""
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def split_offset(value: SSAValue) -> tuple[SSAValue, int]:
    """`%x + c` (or `%x - c`) as (%x, c); any other value as (value, 0)."""
    op = value.owner
    if isinstance(op, arith.AddiOp | arith.SubiOp):
        sign = 1 if isinstance(op, arith.AddiOp) else -1
        rhs = constant_of(op.rhs)
        if rhs is not None:
            base, off = split_offset(op.lhs)
            return base, off + sign * rhs
        lhs = constant_of(op.lhs)
        if lhs is not None and sign == 1:
            base, off = split_offset(op.rhs)
            return base, off + lhs
    return value, 0


@dataclass(frozen=True)
class SlotExpr:
    """`slot = (base + offset) mod modulus` (the protocol emits offset 0, modulus D)."""

    base: SSAValue
    offset: int
    modulus: int

    def __call__(self, use: int) -> int:
        return (use + self.offset) % self.modulus


@dataclass(frozen=True)
class ParityExpr:
    """`parity = (((base + offset) div divisor) & 1) ^ flip`."""

    base: SSAValue
    offset: int
    divisor: int
    flip: int

    def __call__(self, use: int) -> int:
        return (((use + self.offset) // self.divisor) & 1) ^ self.flip


def match_slot(value: SSAValue) -> SlotExpr | None:
    """Read `arith.remui (%i + c), D` back; None for any other shape."""
    op = value.owner
    if isinstance(op, arith.RemUIOp | arith.RemSIOp):
        modulus = constant_of(op.rhs)
        if modulus is not None and modulus > 0:
            base, off = split_offset(op.lhs)
            return SlotExpr(base, off, modulus)
    return None


def match_parity(value: SSAValue) -> ParityExpr | None:
    """Read `((%i + c) div D) & 1`, optionally `^ 1` (or `1 - x`), back."""
    op = value.owner
    flip = 0
    if isinstance(op, arith.XOrIOp) and constant_of(op.rhs) == 1:
        flip, op = 1, op.lhs.owner
    elif isinstance(op, arith.SubiOp) and constant_of(op.lhs) == 1:
        flip, op = 1, op.rhs.owner
    if isinstance(op, arith.AndIOp) and constant_of(op.rhs) == 1:
        div = op.lhs.owner
        if isinstance(div, arith.DivUIOp | arith.DivSIOp):
            divisor = constant_of(div.rhs)
            if divisor is not None and divisor > 0:
                base, off = split_offset(div.lhs)
                return ParityExpr(base, off, divisor, flip)
    return None
