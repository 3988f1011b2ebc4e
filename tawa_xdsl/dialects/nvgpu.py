"""The nvgpu dialect: the hardware level of tawa-xdsl, one op per PTX concept (sm_90a).

Shared memory is explicit (`!nvgpu.smem`: a ring of slots, optionally swizzled for TMA and
wgmma), barriers are explicit (`!nvgpu.mbarrier`: an array of mbarriers addressed by an i32 slot,
waited on with an i32 parity), and register tiles are `!nvgpu.fragment`s: one thread's share of
a tile distributed over a warpgroup in a wgmma layout. Every op is executed by each thread that
reaches it; where one thread must act (mbarrier init, arrive, TMA issue) the program guards the
op with `nvgpu.elect_sync` or `nvgpu.thread_index`. Docstrings name the PTX each op becomes;
section numbers refer to `reference/hopper-ptx.md`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import auto
from typing import ClassVar

from xdsl.dialects.arith import ConstantOp
from xdsl.dialects.builtin import (
    I32,
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    IntAttr,
    IntegerAttr,
    TensorType,
    UnitAttr,
    i1,
    i32,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    Dialect,
    ParametrizedAttribute,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from tawa_xdsl.dialects.tile import (
    FLOAT_TYPES,
    MMA_INPUT_TYPES,
    ComparePredicateAttr,
    DescType,
    ReduceKind,
    ReduceKindAttr,
    format_shape,
)

SWIZZLE_SPANS = (0, 32, 64, 128)
FP8_TYPES = (Float8E4M3FNType, Float8E5M2Type)
WARPGROUP_ROWS = 64  # rows of one wgmma instruction (m64), i.e. of one warpgroup
MAX_WGMMA_N = 256
MAX_MBARRIER_COUNT = 2**20 - 1  # arrival counts and tx-counts are 20-bit (§2.2)


def element_bytes(element_type: Attribute) -> int:
    """Bytes of one element: 1 for fp8, 2 for f16/bf16, 4 for f32."""
    assert isinstance(element_type, FLOAT_TYPES)
    return element_type.bitwidth // 8


def mma_k(element_type: Attribute) -> int:
    """K of one wgmma instruction: 16 for f16/bf16, 32 for fp8 (§4.1)."""
    return 32 if isinstance(element_type, FP8_TYPES) else 16


# --------------------------------------------------------------------------------------- types


@irdl_attr_definition
class MBarrierType(ParametrizedAttribute, TypeAttribute):
    """An array of `count` mbarriers (8 bytes each) in shared memory, indexed by an i32 slot.

    `!nvgpu.mbarrier<3>` is the `full` (or `empty`) side of a 3-deep ring.
    """

    name = "nvgpu.mbarrier"

    count: IntAttr

    def __init__(self, count: int):
        super().__init__(IntAttr(count))

    @property
    def num_barriers(self) -> int:
        return self.count.data

    def verify(self) -> None:
        if self.count.data < 1:
            raise VerifyException(
                f"!nvgpu.mbarrier needs at least one barrier, got {self.count.data}"
            )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            count = parser.parse_integer(allow_boolean=False, allow_negative=False)
        return [IntAttr(count)]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.count.data}>")


@irdl_attr_definition
class SmemType(ParametrizedAttribute, TypeAttribute):
    """A shared-memory buffer of `slots` slots (the leading dim), each holding one tile.

    `!nvgpu.smem<3x128x64xf16, swizzle 128>` is three 128x64 f16 tiles of 16 KiB. A slot is
    row-major. With a swizzle of S bytes it is stored as column slabs S bytes wide (a 128x128
    bf16 tile with swizzle 128 is two [128][64] slabs), and within a slab the 16-byte chunks of
    row r are XORed with (r mod S/16): the layout TMA writes and wgmma reads (§3.2, §4.3).
    """

    name = "nvgpu.smem"

    shape: ArrayAttr[IntAttr]
    element_type: Attribute
    swizzle: IntAttr

    def __init__(self, shape: Sequence[int], element_type: Attribute, swizzle: int = 0):
        super().__init__(ArrayAttr(IntAttr(d) for d in shape), element_type, IntAttr(swizzle))

    def get_shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape)

    @property
    def slot_count(self) -> int:
        return self.get_shape()[0]

    @property
    def slot_shape(self) -> tuple[int, ...]:
        return self.get_shape()[1:]

    @property
    def swizzle_bytes(self) -> int:
        return self.swizzle.data

    def slot_bytes(self) -> int:
        """Bytes of one slot: what one TMA load of a whole slot delivers (its expect_tx)."""
        return math.prod(self.slot_shape) * element_bytes(self.element_type)

    def slot_type(self) -> TensorType:
        """The tile a slot holds, as a tensor type."""
        return TensorType(self.element_type, self.slot_shape)

    def verify(self) -> None:
        shape = self.get_shape()
        if len(shape) < 2:
            raise VerifyException(
                f"!nvgpu.smem needs a slot count and a tile shape (rank >= 2), got "
                f"{format_shape(shape)}"
            )
        if any(d <= 0 for d in shape):
            raise VerifyException(f"!nvgpu.smem dims must be positive, got {shape}")
        if not isinstance(self.element_type, FLOAT_TYPES):
            raise VerifyException(
                f"!nvgpu.smem element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, "
                f"got {self.element_type}"
            )
        span = self.swizzle.data
        if span not in SWIZZLE_SPANS:
            raise VerifyException(f"!nvgpu.smem swizzle must be 0, 32, 64 or 128, got {span}")
        row_bytes = shape[-1] * element_bytes(self.element_type)
        if span and row_bytes % span:
            raise VerifyException(
                f"!nvgpu.smem with swizzle {span} needs rows of a multiple of {span} bytes, "
                f"got {shape[-1]} x {element_bytes(self.element_type)} = {row_bytes} bytes"
            )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            shape, element_type = parser.parse_ranked_shape()
            swizzle = 0
            if parser.parse_optional_punctuation(","):
                parser.parse_keyword("swizzle")
                swizzle = parser.parse_integer(allow_boolean=False, allow_negative=False)
        return [ArrayAttr(IntAttr(d) for d in shape), element_type, IntAttr(swizzle)]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_dimension_list(self.get_shape())
            printer.print_string("x")
            printer.print_attribute(self.element_type)
            printer.print_string(f", swizzle {self.swizzle.data}")


class FragmentLayout(StrEnum):
    WGMMA_ACC = auto()
    WGMMA_ROW = auto()
    WGMMA_OPERAND_A = auto()


@irdl_attr_definition
class FragmentLayoutAttr(EnumAttribute[FragmentLayout], SpacedOpaqueSyntaxAttribute):
    """How a fragment's tile is spread over the 128 threads of a warpgroup."""

    name = "nvgpu.fragment_layout"


@irdl_attr_definition
class FragmentType(ParametrizedAttribute, TypeAttribute):
    """One thread's registers of a tile distributed over a warpgroup (128 threads).

    Thread t is warp w = t >> 5, lane l = t & 31; every 64 rows of the tile form one block,
    laid out the same way (register indices continue block after block).

    * `wgmma_acc`, `!nvgpu.fragment<wgmma_acc, 64xNxf32>`: the m64nN accumulator (§4.4). Value
      i (0 .. N/2 - 1) of a 64-row block is at row 16w + (l >> 2) + 8((i >> 1) & 1), column
      8(i >> 2) + 2(l & 3) + (i & 1). One 8-column group of warp 0, by lane (values 0-1 in
      the top 8 rows, 2-3 in the bottom 8)::

          row 0: l0 l0 l1 l1 l2 l2 l3 l3      row 8: l0 l0 l1 l1 l2 l2 l3 l3   (i = 2, 3)
          row 1: l4 l4 l5 l5 l6 l6 l7 l7      row 9: l4 l4 l5 l5 l6 l6 l7 l7
          ...                                 ...
          row 7: l28 ...          l31 l31     row 15: l28 ...          l31 l31

    * `wgmma_row`, `!nvgpu.fragment<wgmma_row, 64xf32>`: a per-row vector reduced from an
      accumulator; per 64-row block a thread holds rows 16w + (l >> 2) and that row + 8, so the
      4 lanes of a quad hold the same two values.
    * `wgmma_operand_a`, `!nvgpu.fragment<wgmma_operand_a, 64xKxbf16>`: wgmma's register A
      operand for f16/bf16: each k16 slice is laid out as an m64n16 accumulator, so an f32
      accumulator becomes an A operand by conversion alone (the FA3 P@V identity, §4.4). The
      fp8 A layout differs and is not modelled.

    Values pack into 32-bit registers: two per register for 16-bit types, four for fp8.
    """

    name = "nvgpu.fragment"

    layout: FragmentLayoutAttr
    shape: ArrayAttr[IntAttr]
    element_type: Attribute

    def __init__(self, layout: FragmentLayout, shape: Sequence[int], element_type: Attribute):
        super().__init__(
            FragmentLayoutAttr(layout), ArrayAttr(IntAttr(d) for d in shape), element_type
        )

    @property
    def kind(self) -> FragmentLayout:
        return self.layout.data

    def get_shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.shape)

    @property
    def rows(self) -> int:
        return self.get_shape()[0]

    def values_per_thread(self) -> int:
        """How many elements of the tile one thread holds."""
        blocks = self.rows // WARPGROUP_ROWS
        if self.kind == FragmentLayout.WGMMA_ROW:
            return 2 * blocks
        return blocks * self.get_shape()[1] // 2

    def registers_per_thread(self) -> int:
        """How many 32-bit registers one thread uses (a 64xN f32 accumulator: N/2)."""
        bits = self.values_per_thread() * element_bytes(self.element_type) * 8
        return -(-bits // 32)

    def verify(self) -> None:
        shape, kind, et = self.get_shape(), self.kind, self.element_type
        rank = 1 if kind == FragmentLayout.WGMMA_ROW else 2
        if len(shape) != rank:
            raise VerifyException(
                f"!nvgpu.fragment<{kind}> needs a rank-{rank} shape, got {format_shape(shape)}"
            )
        if shape[0] <= 0 or shape[0] % WARPGROUP_ROWS:
            raise VerifyException(
                f"!nvgpu.fragment rows must be a positive multiple of 64, got {shape[0]}"
            )
        if not isinstance(et, FLOAT_TYPES):
            raise VerifyException(
                f"!nvgpu.fragment element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, got {et}"
            )
        if kind == FragmentLayout.WGMMA_ACC and not (
            0 < shape[1] <= MAX_WGMMA_N and shape[1] % 8 == 0
        ):
            raise VerifyException(
                f"!nvgpu.fragment<wgmma_acc> columns must be a multiple of 8 in 8..256 "
                f"(wgmma N), got {shape[1]}"
            )
        if kind == FragmentLayout.WGMMA_OPERAND_A:
            if not isinstance(et, Float16Type | BFloat16Type):
                raise VerifyException(
                    f"!nvgpu.fragment<wgmma_operand_a> element type must be f16 or bf16, got {et}"
                )
            if shape[1] <= 0 or shape[1] % 16:
                raise VerifyException(
                    f"!nvgpu.fragment<wgmma_operand_a> columns must be a positive multiple of "
                    f"16 (wgmma K), got {shape[1]}"
                )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            layout = parser.parse_str_enum(FragmentLayout)
            parser.parse_punctuation(",")
            shape, element_type = parser.parse_ranked_shape()
        return [FragmentLayoutAttr(layout), ArrayAttr(IntAttr(d) for d in shape), element_type]

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(f"{self.kind}, ")
            printer.print_dimension_list(self.get_shape())
            printer.print_string("x")
            printer.print_attribute(self.element_type)


class RegisterAction(StrEnum):
    INCREASE = auto()
    DECREASE = auto()


@irdl_attr_definition
class RegisterActionAttr(EnumAttribute[RegisterAction], SpacedOpaqueSyntaxAttribute):
    """What `nvgpu.setmaxnreg` does: `increase` (.inc) or `decrease` (.dec)."""

    name = "nvgpu.register_action"


class BinaryKind(StrEnum):
    ADD = auto()
    SUB = auto()
    MUL = auto()
    DIV = auto()
    MAX = auto()
    MIN = auto()


@irdl_attr_definition
class BinaryKindAttr(EnumAttribute[BinaryKind], SpacedOpaqueSyntaxAttribute):
    """The function of `nvgpu.fragment_binary`: `add`, `sub`, `mul`, `div`, `max` or `min`."""

    name = "nvgpu.binary_kind"


class UnaryKind(StrEnum):
    EXP2 = auto()
    LOG2 = auto()
    NEG = auto()


@irdl_attr_definition
class UnaryKindAttr(EnumAttribute[UnaryKind], SpacedOpaqueSyntaxAttribute):
    """The function of `nvgpu.fragment_unary`: `exp2` (ex2.approx), `log2` (lg2.approx) or
    `neg`."""

    name = "nvgpu.unary_kind"


# ------------------------------------------------------------------------------- helpers


def _smem_type(value: SSAValue) -> SmemType:
    assert isinstance(value.type, SmemType)
    return value.type


def _fragment_type(value: SSAValue) -> FragmentType:
    assert isinstance(value.type, FragmentType)
    return value.type


def _constant(value: SSAValue) -> int | None:
    """The value of an i32 operand defined by `arith.constant`, else None."""
    op = value.owner
    if isinstance(op, ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def _verify_slot(op: IRDLOperation, slot: SSAValue, count: int, what: str) -> None:
    """A constant slot operand must index one of the `count` slots of `what`."""
    index = _constant(slot)
    if index is not None and not 0 <= index < count:
        raise VerifyException(f"'{op.name}' {what} slot {index} is out of range 0..{count - 1}")


def _verify_offsets(op: IRDLOperation, desc: DescType, offsets: Sequence[SSAValue]) -> None:
    if len(offsets) != desc.rank:
        raise VerifyException(
            f"'{op.name}' needs one offset per descriptor dim: {desc} has rank {desc.rank}, "
            f"got {len(offsets)} offsets"
        )


def squeeze_leading(shape: Sequence[int]) -> tuple[int, ...]:
    """`shape` without its leading unit dims, keeping at least two (1x128x64 -> 128x64)."""
    dims = tuple(shape)
    while len(dims) > 2 and dims[0] == 1:
        dims = dims[1:]
    return dims


def _verify_tma_box(op: IRDLOperation, desc: DescType, buf: SmemType) -> None:
    """The TMA box is the descriptor's block; it must fill exactly one smem slot (leading unit
    dims of the block may be dropped in the slot: a 1x64x64 block fills a 64x64 slot)."""
    same = squeeze_leading(desc.get_block_shape()) == squeeze_leading(buf.slot_shape)
    if not same or desc.element_type != buf.element_type:
        raise VerifyException(
            f"'{op.name}' descriptor block {format_shape(desc.get_block_shape())}x"
            f"{desc.element_type} must equal the smem slot {format_shape(buf.slot_shape)}x"
            f"{buf.element_type}"
        )
    if any(d > 256 for d in desc.get_block_shape()):
        raise VerifyException(
            f"'{op.name}' box dims must be at most 256, got {format_shape(desc.get_block_shape())}"
        )
    inner_bytes = desc.get_block_shape()[-1] * element_bytes(desc.element_type)
    if inner_bytes % 16:
        raise VerifyException(
            f"'{op.name}' innermost box dim must span a multiple of 16 bytes, got "
            f"{inner_bytes} bytes"
        )


# ----------------------------------------------------------------------------- mbarriers


@irdl_op_definition
class MBarrierAllocOp(IRDLOperation):
    """Reserve shared memory for an array of mbarriers (a `.shared .b64` array)."""

    name = "nvgpu.mbarrier_alloc"

    bars = result_def(MBarrierType)

    assembly_format = "attr-dict `:` type($bars)"

    def __init__(self, bars_type: MBarrierType):
        super().__init__(result_types=[bars_type])


@irdl_op_definition
class MBarrierInitOp(IRDLOperation):
    """Initialise every barrier of the array to phase 0 expecting `count` arrivals per phase.

    Becomes one `mbarrier.init.shared::cta.b64 [a], count;` per barrier; one thread runs it,
    followed by `nvgpu.fence_mbarrier_init` and `nvgpu.cta_barrier` (§2.4)."""

    name = "nvgpu.mbarrier_init"

    bars = operand_def(MBarrierType)
    count = prop_def(IntegerAttr[I32])

    assembly_format = "$bars `,` `count` $count attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, count: int):
        super().__init__(operands=[bars], properties={"count": IntegerAttr(count, i32)})

    def verify_(self) -> None:
        count = self.count.value.data
        if not 1 <= count <= MAX_MBARRIER_COUNT:
            raise VerifyException(
                f"'nvgpu.mbarrier_init' count must be in 1..{MAX_MBARRIER_COUNT}, got {count}"
            )


class _MBarrierSlotOp(IRDLOperation):
    bars = operand_def(MBarrierType)
    slot = operand_def(i32)

    def verify_(self) -> None:
        assert isinstance(self.bars.type, MBarrierType)
        _verify_slot(self, self.slot, self.bars.type.num_barriers, "barrier")


@irdl_op_definition
class MBarrierArriveOp(_MBarrierSlotOp):
    """Arrive once on barrier `slot` (`mbarrier.arrive.shared::cta.b64 _, [a];`)."""

    name = "nvgpu.mbarrier_arrive"

    assembly_format = "$bars `[` $slot `]` attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, slot: SSAValue):
        super().__init__(operands=[bars, slot])


@irdl_op_definition
class MBarrierArriveExpectTxOp(_MBarrierSlotOp):
    """Raise the tx-count of barrier `slot` by `bytes`, then arrive once, atomically
    (`mbarrier.arrive.expect_tx.shared::cta.b64 _, [a], bytes;`)."""

    name = "nvgpu.mbarrier_arrive_expect_tx"

    tx_bytes = prop_def(IntegerAttr[I32], prop_name="bytes")

    assembly_format = "$bars `[` $slot `]` `,` `bytes` $bytes attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, slot: SSAValue, tx_bytes: int):
        super().__init__(operands=[bars, slot], properties={"bytes": IntegerAttr(tx_bytes, i32)})

    def verify_(self) -> None:
        super().verify_()
        tx_bytes = self.tx_bytes.value.data
        if not 0 < tx_bytes <= MAX_MBARRIER_COUNT:
            raise VerifyException(
                f"'nvgpu.mbarrier_arrive_expect_tx' bytes must be in 1..{MAX_MBARRIER_COUNT} "
                f"(the 20-bit tx-count), got {tx_bytes}"
            )


@irdl_op_definition
class MBarrierWaitOp(IRDLOperation):
    """Block until the phase of barrier `slot` with parity `parity` (0 or 1) has completed:
    a `mbarrier.try_wait.parity.shared::cta.b64` loop (§2.1)."""

    name = "nvgpu.mbarrier_wait"

    bars = operand_def(MBarrierType)
    slot = operand_def(i32)
    parity = operand_def(i32)

    assembly_format = "$bars `[` $slot `]` `,` $parity attr-dict `:` type($bars)"

    def __init__(self, bars: SSAValue, slot: SSAValue, parity: SSAValue):
        super().__init__(operands=[bars, slot, parity])

    def verify_(self) -> None:
        assert isinstance(self.bars.type, MBarrierType)
        _verify_slot(self, self.slot, self.bars.type.num_barriers, "barrier")
        parity = _constant(self.parity)
        if parity is not None and parity not in (0, 1):
            raise VerifyException(f"'nvgpu.mbarrier_wait' parity must be 0 or 1, got {parity}")


@irdl_op_definition
class FenceMBarrierInitOp(IRDLOperation):
    """Make mbarrier inits visible to the async proxy and the cluster
    (`fence.mbarrier_init.release.cluster;`)."""

    name = "nvgpu.fence_mbarrier_init"

    assembly_format = "attr-dict"


@irdl_op_definition
class CtaBarrierOp(IRDLOperation):
    """Synchronise all threads of the CTA (`bar.sync 0;`, i.e. `__syncthreads`)."""

    name = "nvgpu.cta_barrier"

    assembly_format = "attr-dict"


# ------------------------------------------------------------------------ shared memory, TMA


@irdl_op_definition
class SmemAllocOp(IRDLOperation):
    """Reserve a shared-memory buffer (a slice of the dynamic `.shared` window, 1024-byte
    aligned so that every swizzle pattern starts on its repeat boundary)."""

    name = "nvgpu.smem_alloc"

    buf = result_def(SmemType)

    assembly_format = "attr-dict `:` type($buf)"

    def __init__(self, buf_type: SmemType):
        super().__init__(result_types=[buf_type])


@irdl_op_definition
class TmaLoadOp(IRDLOperation):
    """Copy the descriptor block at element offsets `[o0, ...]` into smem slot `slot`; the copy
    completes on barrier `bar_slot` with `complete_tx` of the slot's bytes
    (`cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes`).

    Elements outside the global tensor are filled with zeros (and still counted)."""

    name = "nvgpu.tma_load"

    desc = operand_def(DescType)
    offsets = var_operand_def(i32)
    buf = operand_def(SmemType)
    slot = operand_def(i32)
    bars = operand_def(MBarrierType)
    bar_slot = operand_def(i32)

    assembly_format = (
        "$desc `[` $offsets `]` `->` $buf `[` $slot `]` `,` $bars `[` $bar_slot `]` attr-dict "
        "`:` type($desc) `,` type($buf) `,` type($bars)"
    )

    def __init__(
        self,
        desc: SSAValue,
        offsets: Sequence[SSAValue],
        buf: SSAValue,
        slot: SSAValue,
        bars: SSAValue,
        bar_slot: SSAValue,
    ):
        super().__init__(operands=[desc, offsets, buf, slot, bars, bar_slot])

    def verify_(self) -> None:
        assert isinstance(self.desc.type, DescType)
        assert isinstance(self.bars.type, MBarrierType)
        buf = _smem_type(self.buf)
        _verify_offsets(self, self.desc.type, self.offsets)
        _verify_tma_box(self, self.desc.type, buf)
        _verify_slot(self, self.slot, buf.slot_count, "buffer")
        _verify_slot(self, self.bar_slot, self.bars.type.num_barriers, "barrier")


@irdl_op_definition
class TmaStoreOp(IRDLOperation):
    """Copy smem slot `slot` to the descriptor block at element offsets `[o0, ...]`
    (`cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group`).

    Elements outside the global tensor are dropped. The source slot may be overwritten only
    after `nvgpu.tma_store_commit` and `nvgpu.tma_store_wait`, in the issuing thread."""

    name = "nvgpu.tma_store"

    desc = operand_def(DescType)
    offsets = var_operand_def(i32)
    buf = operand_def(SmemType)
    slot = operand_def(i32)

    assembly_format = (
        "$desc `[` $offsets `]` `,` $buf `[` $slot `]` attr-dict `:` type($desc) `,` type($buf)"
    )

    def __init__(self, desc: SSAValue, offsets: Sequence[SSAValue], buf: SSAValue, slot: SSAValue):
        super().__init__(operands=[desc, offsets, buf, slot])

    def verify_(self) -> None:
        assert isinstance(self.desc.type, DescType)
        buf = _smem_type(self.buf)
        _verify_offsets(self, self.desc.type, self.offsets)
        _verify_tma_box(self, self.desc.type, buf)
        _verify_slot(self, self.slot, buf.slot_count, "buffer")


@irdl_op_definition
class TmaStoreCommitOp(IRDLOperation):
    """Close the group of this thread's pending TMA stores (`cp.async.bulk.commit_group;`)."""

    name = "nvgpu.tma_store_commit"

    assembly_format = "attr-dict"


@irdl_op_definition
class TmaStoreWaitOp(IRDLOperation):
    """Wait until at most `pending` of this thread's store groups still read shared memory
    (`cp.async.bulk.wait_group.read pending;`)."""

    name = "nvgpu.tma_store_wait"

    pending = prop_def(IntegerAttr[I32])

    assembly_format = "$pending attr-dict"

    def __init__(self, pending: int = 0):
        super().__init__(properties={"pending": IntegerAttr(pending, i32)})

    def verify_(self) -> None:
        if self.pending.value.data < 0:
            raise VerifyException(
                f"'nvgpu.tma_store_wait' pending must be >= 0, got {self.pending.value.data}"
            )


@irdl_op_definition
class SmemLoadOp(IRDLOperation):
    """Read smem slot `slot` as a tile value (`ld.shared`, unswizzling as the buffer says)."""

    name = "nvgpu.smem_load"

    buf = operand_def(SmemType)
    slot = operand_def(i32)
    result = result_def(TensorType)

    assembly_format = "$buf `[` $slot `]` attr-dict `:` type($buf) `->` type($result)"

    def __init__(self, buf: SSAValue, slot: SSAValue):
        super().__init__(operands=[buf, slot], result_types=[_smem_type(buf).slot_type()])

    def verify_(self) -> None:
        buf = _smem_type(self.buf)
        if self.result.type != buf.slot_type():
            raise VerifyException(
                f"'nvgpu.smem_load' of a slot of {buf} must produce {buf.slot_type()}, "
                f"got {self.result.type}"
            )
        _verify_slot(self, self.slot, buf.slot_count, "buffer")


@irdl_op_definition
class SmemStoreOp(IRDLOperation):
    """Write a tile value into smem slot `slot` (`st.shared`, swizzling as the buffer says).

    Before TMA or wgmma read the slot: `nvgpu.fence_proxy_async` and a barrier."""

    name = "nvgpu.smem_store"

    value = operand_def(TensorType)
    buf = operand_def(SmemType)
    slot = operand_def(i32)

    assembly_format = "$value `,` $buf `[` $slot `]` attr-dict `:` type($value) `,` type($buf)"

    def __init__(self, value: SSAValue, buf: SSAValue, slot: SSAValue):
        super().__init__(operands=[value, buf, slot])

    def verify_(self) -> None:
        buf = _smem_type(self.buf)
        if self.value.type != buf.slot_type():
            raise VerifyException(
                f"'nvgpu.smem_store' into a slot of {buf} needs a {buf.slot_type()} value, "
                f"got {self.value.type}"
            )
        _verify_slot(self, self.slot, buf.slot_count, "buffer")


@irdl_op_definition
class FenceProxyAsyncOp(IRDLOperation):
    """Order this thread's generic-proxy smem writes before later async-proxy (TMA, wgmma)
    accesses (`fence.proxy.async.shared::cta;`)."""

    name = "nvgpu.fence_proxy_async"

    assembly_format = "attr-dict"


# ------------------------------------------------------------------------------------ wgmma


@irdl_op_definition
class WgmmaFenceOp(IRDLOperation):
    """Order earlier register accesses before the following wgmmas
    (`wgmma.fence.sync.aligned;`)."""

    name = "nvgpu.wgmma_fence"

    assembly_format = "attr-dict"


@irdl_op_definition
class WgmmaCommitGroupOp(IRDLOperation):
    """Close the group of this warpgroup's pending wgmmas (`wgmma.commit_group.sync.aligned;`)."""

    name = "nvgpu.wgmma_commit_group"

    assembly_format = "attr-dict"


@irdl_op_definition
class WgmmaWaitGroupOp(IRDLOperation):
    """Wait until at most `pending` wgmma groups are in flight; the results of the others may
    then be read (`wgmma.wait_group.sync.aligned pending;`)."""

    name = "nvgpu.wgmma_wait_group"

    pending = prop_def(IntegerAttr[I32])

    assembly_format = "$pending attr-dict"

    def __init__(self, pending: int = 0):
        super().__init__(properties={"pending": IntegerAttr(pending, i32)})

    def verify_(self) -> None:
        if self.pending.value.data < 0:
            raise VerifyException(
                f"'nvgpu.wgmma_wait_group' pending must be >= 0, got {self.pending.value.data}"
            )


def _verify_wgmma(
    op: IRDLOperation,
    a_type: Attribute,
    m: int,
    k: int,
    b_buf: SSAValue,
    b_slot: SSAValue,
    acc_value: SSAValue,
    transpose_b: bool,
) -> None:
    """Checks shared by the SS and RS forms: `acc(MxN) += A(MxK) @ B`, B from an smem slot."""
    acc, b = _fragment_type(acc_value), _smem_type(b_buf)
    if acc.kind != FragmentLayout.WGMMA_ACC or not isinstance(acc.element_type, Float32Type):
        raise VerifyException(
            f"'{op.name}' accumulator must be a wgmma_acc fragment of f32, got {acc}"
        )
    b_type = b.element_type
    if not isinstance(a_type, MMA_INPUT_TYPES) or not (
        a_type == b_type or isinstance(a_type, FP8_TYPES) and isinstance(b_type, FP8_TYPES)
    ):
        raise VerifyException(
            f"'{op.name}' inputs must both be f16, both bf16, or both fp8, got {a_type} "
            f"and {b_type}"
        )
    if transpose_b and isinstance(a_type, FP8_TYPES):
        raise VerifyException(
            f"'{op.name}' transpose_b is not available for fp8 inputs (both must be K-major)"
        )
    if len(b.slot_shape) != 2:
        raise VerifyException(f"'{op.name}' B slots must be 2-D, got {b}")
    m_acc, n = acc.get_shape()
    b_n, b_k = b.slot_shape[::-1] if transpose_b else b.slot_shape
    if m != m_acc or b_k != k or b_n != n:
        b_form = "KxN (transpose_b)" if transpose_b else "NxK"
        raise VerifyException(
            f"'{op.name}' shape mismatch: A {m}x{k}, B {format_shape(b.slot_shape)}, acc "
            f"{m_acc}x{n} (needs A MxK, B {b_form}, acc MxN)"
        )
    if k % mma_k(a_type):
        raise VerifyException(
            f"'{op.name}' K = {k} must be a multiple of the instruction K {mma_k(a_type)} "
            f"for {a_type}"
        )
    _verify_slot(op, b_slot, b.slot_count, "B")


@irdl_op_definition
class WgmmaMmaAsyncOp(IRDLOperation):
    """`result = acc + A @ B` over a whole K slice, A and B from smem slots: K/16 (fp8: K/32)
    times M/64 `wgmma.mma_async.sync.aligned.m64nNk16` instructions on smem descriptors.

    A's slot is MxK (K-major); with a row offset `a_row`, this warpgroup uses the M rows of
    the slot from `a_row` on (cooperative consumers split one A tile). B's slot is NxK
    (K-major, PTX tB = 0), or with `transpose_b` KxN (N-major, tB = 1). The result is valid
    after a `nvgpu.wgmma_wait_group` covering it."""

    name = "nvgpu.wgmma_mma_async"

    ACC: ClassVar = VarConstraint("ACC", base(FragmentType))
    a_buf = operand_def(SmemType)
    a_slot = operand_def(i32)
    a_row = opt_operand_def(i32)
    b_buf = operand_def(SmemType)
    b_slot = operand_def(i32)
    acc = operand_def(ACC)
    result = result_def(ACC)
    transpose_b = opt_prop_def(UnitAttr)

    assembly_format = (
        "$a_buf `[` $a_slot (`,` $a_row^)? `]` `,` $b_buf `[` $b_slot `]` `,` $acc "
        "(`transpose_b` $transpose_b^)? attr-dict `:` type($a_buf) `,` type($b_buf) `,` "
        "type($acc)"
    )

    def __init__(
        self,
        a_buf: SSAValue,
        a_slot: SSAValue,
        b_buf: SSAValue,
        b_slot: SSAValue,
        acc: SSAValue,
        *,
        a_row: SSAValue | None = None,
        transpose_b: bool = False,
    ):
        super().__init__(
            operands=[a_buf, a_slot, [a_row] if a_row else [], b_buf, b_slot, acc],
            properties={"transpose_b": UnitAttr()} if transpose_b else {},
            result_types=[acc.type],
        )

    def verify_(self) -> None:
        a, acc = _smem_type(self.a_buf), _fragment_type(self.acc)
        if len(a.slot_shape) != 2:
            raise VerifyException(f"'nvgpu.wgmma_mma_async' A slots must be 2-D, got {a}")
        a_m, k = a.slot_shape
        m = acc.get_shape()[0]
        if self.a_row is None and a_m != m:
            raise VerifyException(
                f"'nvgpu.wgmma_mma_async' A slot has {a_m} rows but acc has {m}: pass a row "
                "offset to use a slice of the slot"
            )
        if self.a_row is not None and a_m % m:
            raise VerifyException(
                f"'nvgpu.wgmma_mma_async' A slot rows {a_m} must be a multiple of acc rows {m}"
            )
        _verify_wgmma(
            self, a.element_type, m, k, self.b_buf, self.b_slot, self.acc, bool(self.transpose_b)
        )
        _verify_slot(self, self.a_slot, a.slot_count, "A")


@irdl_op_definition
class WgmmaMmaAsyncRsOp(IRDLOperation):
    """`result = acc + A @ B` over a whole K slice, A from registers (a wgmma_operand_a
    fragment), B from an smem slot: K/16 times M/64
    `wgmma.mma_async.sync.aligned.m64nNk16` instructions with `{a0, a1, a2, a3}` operands.

    B is as in `nvgpu.wgmma_mma_async`."""

    name = "nvgpu.wgmma_mma_async_rs"

    ACC: ClassVar = VarConstraint("ACC", base(FragmentType))
    a = operand_def(FragmentType)
    b_buf = operand_def(SmemType)
    b_slot = operand_def(i32)
    acc = operand_def(ACC)
    result = result_def(ACC)
    transpose_b = opt_prop_def(UnitAttr)

    assembly_format = (
        "$a `,` $b_buf `[` $b_slot `]` `,` $acc (`transpose_b` $transpose_b^)? attr-dict `:` "
        "type($a) `,` type($b_buf) `,` type($acc)"
    )

    def __init__(
        self,
        a: SSAValue,
        b_buf: SSAValue,
        b_slot: SSAValue,
        acc: SSAValue,
        *,
        transpose_b: bool = False,
    ):
        super().__init__(
            operands=[a, b_buf, b_slot, acc],
            properties={"transpose_b": UnitAttr()} if transpose_b else {},
            result_types=[acc.type],
        )

    def verify_(self) -> None:
        a = _fragment_type(self.a)
        if a.kind != FragmentLayout.WGMMA_OPERAND_A:
            raise VerifyException(
                f"'nvgpu.wgmma_mma_async_rs' A must be a wgmma_operand_a fragment, got {a}"
            )
        m, k = a.get_shape()
        _verify_wgmma(
            self, a.element_type, m, k, self.b_buf, self.b_slot, self.acc, bool(self.transpose_b)
        )


# -------------------------------------------------------------------- threads and registers


@irdl_op_definition
class SetMaxNRegOp(IRDLOperation):
    """Set this warpgroup's registers per thread, giving them back to or taking them from the
    CTA's pool (`setmaxnreg.inc.sync.aligned.u32 N;` / `setmaxnreg.dec...`, §5)."""

    name = "nvgpu.setmaxnreg"

    action = prop_def(RegisterActionAttr)
    registers = prop_def(IntegerAttr[I32])

    assembly_format = "$action $registers attr-dict"

    def __init__(self, action: RegisterAction, registers: int):
        super().__init__(
            properties={
                "action": RegisterActionAttr(action),
                "registers": IntegerAttr(registers, i32),
            }
        )

    def verify_(self) -> None:
        registers = self.registers.value.data
        if not (24 <= registers <= 256 and registers % 8 == 0):
            raise VerifyException(
                f"'nvgpu.setmaxnreg' registers must be a multiple of 8 in 24..256, got {registers}"
            )


@irdl_op_definition
class NamedBarrierSyncOp(IRDLOperation):
    """Wait until `threads` threads (whole warps) have reached named barrier `id`
    (`bar.sync id, threads;`)."""

    name = "nvgpu.named_barrier_sync"

    barrier_id = prop_def(IntegerAttr[I32], prop_name="id")
    threads = prop_def(IntegerAttr[I32])

    assembly_format = "$id `,` $threads attr-dict"

    def __init__(self, barrier_id: int, threads: int):
        super().__init__(
            properties={"id": IntegerAttr(barrier_id, i32), "threads": IntegerAttr(threads, i32)}
        )

    def verify_(self) -> None:
        barrier_id, threads = self.barrier_id.value.data, self.threads.value.data
        if barrier_id == 0:
            raise VerifyException(
                "'nvgpu.named_barrier_sync' id 0 is reserved for the CTA-wide barrier "
                "(use nvgpu.cta_barrier)"
            )
        if not 1 <= barrier_id <= 15:
            raise VerifyException(
                f"'nvgpu.named_barrier_sync' id must be in 1..15, got {barrier_id}"
            )
        if not (0 < threads <= 1024 and threads % 32 == 0):
            raise VerifyException(
                f"'nvgpu.named_barrier_sync' threads must be a multiple of 32 in 32..1024, "
                f"got {threads}"
            )


@irdl_op_definition
class NamedBarrierArriveOp(IRDLOperation):
    """Arrive at named barrier `id` without waiting (`bar.arrive id, threads;`): the
    `threads` a `named_barrier_sync` of the same id waits for count these arrivals too
    (the consumer warpgroups' ping-pong hands the MMA turn over this way)."""

    name = "nvgpu.named_barrier_arrive"

    barrier_id = prop_def(IntegerAttr[I32], prop_name="id")
    threads = prop_def(IntegerAttr[I32])

    assembly_format = "$id `,` $threads attr-dict"

    def __init__(self, barrier_id: int, threads: int):
        super().__init__(
            properties={"id": IntegerAttr(barrier_id, i32), "threads": IntegerAttr(threads, i32)}
        )

    def verify_(self) -> None:
        barrier_id, threads = self.barrier_id.value.data, self.threads.value.data
        if not 1 <= barrier_id <= 15:
            raise VerifyException(
                f"'nvgpu.named_barrier_arrive' id must be in 1..15, got {barrier_id}"
            )
        if not (0 < threads <= 1024 and threads % 32 == 0):
            raise VerifyException(
                f"'nvgpu.named_barrier_arrive' threads must be a multiple of 32 in 32..1024, "
                f"got {threads}"
            )


@irdl_op_definition
class ElectSyncOp(IRDLOperation):
    """True in exactly one lane of the warp, the same lane every time
    (`elect.sync _|%p, 0xffffffff;`)."""

    name = "nvgpu.elect_sync"

    result = result_def(i1)

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self):
        super().__init__(result_types=[i1])


@irdl_op_definition
class WarpgroupIndexOp(IRDLOperation):
    """The index of this thread's warpgroup in the CTA (`%tid.x >> 7`)."""

    name = "nvgpu.warpgroup_index"

    result = result_def(i32)

    assembly_format = "attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self):
        super().__init__(result_types=[i32])


@irdl_op_definition
class ThreadIndexOp(IRDLOperation):
    """The index of this thread within its warpgroup, 0..127 (`%tid.x & 127`)."""

    name = "nvgpu.thread_index"

    result = result_def(i32)

    assembly_format = "attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self):
        super().__init__(result_types=[i32])


# -------------------------------------------------------------------------------- fragments


@irdl_op_definition
class FragmentSplatOp(IRDLOperation):
    """A fragment with every element equal to a scalar (`mov` into each register)."""

    name = "nvgpu.fragment_splat"

    value = operand_def()
    result = result_def(FragmentType)

    assembly_format = "$value attr-dict `:` type($value) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue, result_type: FragmentType):
        super().__init__(operands=[value], result_types=[result_type])

    def verify_(self) -> None:
        result = _fragment_type(self.result)
        if self.value.type != result.element_type:
            raise VerifyException(
                f"'nvgpu.fragment_splat' scalar type {self.value.type} must equal the element "
                f"type of {result}"
            )


@irdl_op_definition
class FragmentUndefOp(IRDLOperation):
    """A fragment with unspecified contents: its registers are declared, nothing writes them.

    For a value no one reads, where writing it would cost instructions or, worse, define a
    wgmma accumulator's registers (ptxas then serializes every wgmma, C7515)."""

    name = "nvgpu.fragment_undef"

    result = result_def(FragmentType)

    assembly_format = "attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self, result_type: FragmentType):
        super().__init__(result_types=[result_type])


@irdl_op_definition
class FragmentBinaryOp(IRDLOperation):
    """Elementwise `lhs <kind> rhs`, register by register (`add.f32`, `sub.f32`, `mul.f32`,
    `div.rn.f32`, `max.f32`, `min.f32`)."""

    name = "nvgpu.fragment_binary"

    T: ClassVar = VarConstraint("T", base(FragmentType))
    kind = prop_def(BinaryKindAttr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)

    assembly_format = "$kind $lhs `,` $rhs attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self, kind: BinaryKind, lhs: SSAValue, rhs: SSAValue):
        super().__init__(
            operands=[lhs, rhs], properties={"kind": BinaryKindAttr(kind)}, result_types=[lhs.type]
        )


@irdl_op_definition
class FragmentUnaryOp(IRDLOperation):
    """Elementwise `exp2` (`ex2.approx.ftz.f32`), `log2` (`lg2.approx.ftz.f32`) or `neg`
    (`neg.f32`), register by register."""

    name = "nvgpu.fragment_unary"

    T: ClassVar = VarConstraint("T", base(FragmentType))
    kind = prop_def(UnaryKindAttr)
    source = operand_def(T)
    result = result_def(T)

    assembly_format = "$kind $source attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self, kind: UnaryKind, source: SSAValue):
        super().__init__(
            operands=[source], properties={"kind": UnaryKindAttr(kind)}, result_types=[source.type]
        )

    def verify_(self) -> None:
        et = _fragment_type(self.source).element_type
        kind = self.kind.data
        if kind in (UnaryKind.EXP2, UnaryKind.LOG2) and not isinstance(et, Float32Type):
            raise VerifyException(
                f"'nvgpu.fragment_unary' {kind} needs f32 elements (.approx.f32), got {et}"
            )


@irdl_op_definition
class FragmentConvertOp(IRDLOperation):
    """Convert every element to another type (`cvt.rn.bf16x2.f32`, `cvt.rn.f16x2.f32`,
    `cvt.rn.satfinite.e4m3x2.f32`, ...), packing 16-bit results in pairs.

    The layout is kept, except that a wgmma_acc fragment may become a wgmma_operand_a
    fragment of the same shape: the registers are the same (§4.4)."""

    name = "nvgpu.fragment_convert"

    source = operand_def(FragmentType)
    result = result_def(FragmentType)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, result_type: FragmentType):
        super().__init__(operands=[source], result_types=[result_type])

    def verify_(self) -> None:
        src, dst = _fragment_type(self.source), _fragment_type(self.result)
        relayout = (src.kind, dst.kind) == (
            FragmentLayout.WGMMA_ACC,
            FragmentLayout.WGMMA_OPERAND_A,
        )
        if src.get_shape() != dst.get_shape() or (src.kind != dst.kind and not relayout):
            raise VerifyException(
                f"'nvgpu.fragment_convert' must keep the shape and layout (or turn wgmma_acc "
                f"into wgmma_operand_a), got {src} -> {dst}"
            )


@irdl_op_definition
class FragmentRowReduceOp(IRDLOperation):
    """Reduce each row of an accumulator over this thread's own values (`max.f32` /
    `add.f32` chains); the 4 lanes of a quad still hold partial results, to be combined
    with `nvgpu.shuffle_xor` 1 and 2."""

    name = "nvgpu.fragment_row_reduce"

    kind = prop_def(ReduceKindAttr)
    source = operand_def(FragmentType)
    result = result_def(FragmentType)

    assembly_format = "$kind $source attr-dict `:` type($source) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, kind: ReduceKind, source: SSAValue):
        src = _fragment_type(source)
        super().__init__(
            operands=[source],
            properties={"kind": ReduceKindAttr(kind)},
            result_types=[FragmentType(FragmentLayout.WGMMA_ROW, [src.rows], src.element_type)],
        )

    def verify_(self) -> None:
        src, dst = _fragment_type(self.source), _fragment_type(self.result)
        expected = FragmentType(FragmentLayout.WGMMA_ROW, [src.rows], src.element_type)
        if src.kind != FragmentLayout.WGMMA_ACC or dst != expected:
            raise VerifyException(
                f"'nvgpu.fragment_row_reduce' reduces a wgmma_acc fragment to its wgmma_row "
                f"fragment, got {src} -> {dst}"
            )


@irdl_op_definition
class ShuffleXorOp(IRDLOperation):
    """Exchange each row value with lane `lane ^ mask`, mask 1 or 2 within a quad
    (`shfl.sync.bfly.b32 d, a, mask, 0x1f, 0xffffffff;`)."""

    name = "nvgpu.shuffle_xor"

    T: ClassVar = VarConstraint("T", base(FragmentType))
    source = operand_def(T)
    mask = prop_def(IntegerAttr[I32])
    result = result_def(T)

    assembly_format = "$source `,` $mask attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, mask: int):
        super().__init__(
            operands=[source],
            properties={"mask": IntegerAttr(mask, i32)},
            result_types=[source.type],
        )

    def verify_(self) -> None:
        src = _fragment_type(self.source)
        if src.kind != FragmentLayout.WGMMA_ROW:
            raise VerifyException(f"'nvgpu.shuffle_xor' needs a wgmma_row fragment, got {src}")
        if self.mask.value.data not in (1, 2):
            raise VerifyException(
                f"'nvgpu.shuffle_xor' mask must be 1 or 2 (the lanes of a quad), "
                f"got {self.mask.value.data}"
            )


@irdl_op_definition
class FragmentBroadcastRowsOp(IRDLOperation):
    """Spread a row vector over the columns of an accumulator: value i of the result is the
    thread's row value for row r (i & 2 == 0) or r + 8 (register moves only)."""

    name = "nvgpu.fragment_broadcast_rows"

    source = operand_def(FragmentType)
    result = result_def(FragmentType)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, columns: int):
        src = _fragment_type(source)
        super().__init__(
            operands=[source],
            result_types=[
                FragmentType(FragmentLayout.WGMMA_ACC, [src.rows, columns], src.element_type)
            ],
        )

    def verify_(self) -> None:
        src, dst = _fragment_type(self.source), _fragment_type(self.result)
        if (
            src.kind != FragmentLayout.WGMMA_ROW
            or dst.kind != FragmentLayout.WGMMA_ACC
            or src.rows != dst.rows
            or src.element_type != dst.element_type
        ):
            raise VerifyException(
                f"'nvgpu.fragment_broadcast_rows' turns a wgmma_row fragment into a wgmma_acc "
                f"fragment of the same rows and element type, got {src} -> {dst}"
            )


@irdl_op_definition
class FragmentStoreOp(IRDLOperation):
    """Write an accumulator fragment into smem slot `slot` (`st.shared` / `stmatrix`,
    swizzling as the buffer says); with `row`, into the rows of the slot from `row` on. A
    fragment wider than a slot of swizzle-span rows fills slots `slot`, `slot + 1`, ... (one
    column slab each).

    Before TMA reads the slot: `nvgpu.fence_proxy_async` and a barrier."""

    name = "nvgpu.fragment_store"

    value = operand_def(FragmentType)
    buf = operand_def(SmemType)
    slot = operand_def(i32)
    row = opt_operand_def(i32)

    assembly_format = (
        "$value `,` $buf `[` $slot (`,` $row^)? `]` attr-dict `:` type($value) `,` type($buf)"
    )

    def __init__(self, value: SSAValue, buf: SSAValue, slot: SSAValue, row: SSAValue | None = None):
        super().__init__(operands=[value, buf, slot, [row] if row else []])

    def verify_(self) -> None:
        frag, buf = _fragment_type(self.value), _smem_type(self.buf)
        if frag.kind != FragmentLayout.WGMMA_ACC:
            raise VerifyException(f"'nvgpu.fragment_store' needs a wgmma_acc fragment, got {frag}")
        if frag.element_type != buf.element_type:
            raise VerifyException(
                f"'nvgpu.fragment_store' element types differ: {frag.element_type} into "
                f"{buf.element_type} (convert first)"
            )
        slot_shape, (rows, cols) = buf.slot_shape, frag.get_shape()
        # A fragment wider than a slot whose rows are exactly the swizzle span fills
        # consecutive slots, one per column slab (a TMA-store staging buffer).
        slab = buf.swizzle_bytes and slot_shape[-1] * element_bytes(buf.element_type) == (
            buf.swizzle_bytes
        )
        fits = len(slot_shape) == 2 and (
            slot_shape[1] == cols or bool(slab) and cols % slot_shape[1] == 0
        )
        fits = fits and (
            slot_shape[0] == rows or self.row is not None and slot_shape[0] % rows == 0
        )
        if not fits:
            raise VerifyException(
                f"'nvgpu.fragment_store' of {rows}x{cols} into a {format_shape(slot_shape)} slot: "
                "the slot must have the same shape, or, with a row offset, a multiple of the rows"
            )
        _verify_slot(self, self.slot, buf.slot_count, "buffer")


@irdl_op_definition
class FragmentStoreGlobalOp(IRDLOperation):
    """Write a fragment to global memory at element offsets `[..., row, col]` of the
    descriptor's tensor, dropping elements outside it: an accumulator one `st.global` per
    register pair; a row vector (`wgmma_row`, one value per query row, e.g. a log-sum-exp)
    along the last dim, row i at `col + i` of plane row `row`, by the first thread of each
    quad."""

    name = "nvgpu.fragment_store_global"

    value = operand_def(FragmentType)
    desc = operand_def(DescType)
    offsets = var_operand_def(i32)

    assembly_format = "$value `,` $desc `[` $offsets `]` attr-dict `:` type($value) `,` type($desc)"

    def __init__(self, value: SSAValue, desc: SSAValue, offsets: Sequence[SSAValue]):
        super().__init__(operands=[value, desc, offsets])

    def verify_(self) -> None:
        frag, desc = _fragment_type(self.value), self.desc.type
        assert isinstance(desc, DescType)
        if frag.kind == FragmentLayout.WGMMA_OPERAND_A:
            raise VerifyException(
                f"'nvgpu.fragment_store_global' needs a wgmma_acc or wgmma_row fragment, got {frag}"
            )
        if desc.rank < 2 or any(d != 1 for d in desc.get_block_shape()[:-2]):
            raise VerifyException(
                f"'nvgpu.fragment_store_global' needs a rank-2 descriptor, or one whose "
                f"leading block dims are 1, got {desc}"
            )
        _verify_offsets(self, desc, self.offsets)
        if frag.element_type != desc.element_type:
            raise VerifyException(
                f"'nvgpu.fragment_store_global' element types differ: {frag.element_type} into "
                f"{desc.element_type} (convert first)"
            )


@irdl_op_definition
class FragmentMaskOp(IRDLOperation):
    """Keep element (r, c) of an accumulator where every condition
    `row_coefficients[k] * r + col_coefficients[k] * c < bounds[k]` holds, else `fill`
    (`setp.lt.s32` per condition and value, `and.pred`, `selp.f32`).

    r and c are coordinates in the fragment's tile (0 .. rows - 1, 0 .. cols - 1). Attention
    masks keys past the sequence end with (0, 1, seq - start_n) and, when causal, keys after
    the query row with (-1, 1, off_m - start_n + 1)."""

    name = "nvgpu.fragment_mask"

    T: ClassVar = VarConstraint("T", base(FragmentType))
    source = operand_def(T)
    fill = operand_def()
    bounds = var_operand_def(i32)
    row_coefficients = prop_def(DenseArrayBase)
    col_coefficients = prop_def(DenseArrayBase)
    result = result_def(T)

    assembly_format = (
        "$source `,` $fill `where` `[` $bounds `]` attr-dict `:` type($source) `,` type($fill)"
    )
    irdl_options = (ParsePropInAttrDict(),)
    traits = traits_def(Pure())

    def __init__(
        self,
        source: SSAValue,
        fill: SSAValue,
        conditions: Sequence[tuple[int, int, SSAValue]],
    ):
        super().__init__(
            operands=[source, fill, [b for _, _, b in conditions]],
            properties={
                "row_coefficients": DenseArrayBase.from_list(i32, [r for r, _, _ in conditions]),
                "col_coefficients": DenseArrayBase.from_list(i32, [c for _, c, _ in conditions]),
            },
            result_types=[source.type],
        )

    def conditions(self) -> list[tuple[int, int, SSAValue]]:
        """(row coefficient, column coefficient, bound) of each condition."""
        rows = self.row_coefficients.get_values()
        cols = self.col_coefficients.get_values()
        return [(int(r), int(c), b) for r, c, b in zip(rows, cols, self.bounds, strict=True)]

    def verify_(self) -> None:
        src = _fragment_type(self.source)
        if src.kind != FragmentLayout.WGMMA_ACC or not isinstance(src.element_type, Float32Type):
            raise VerifyException(
                f"'nvgpu.fragment_mask' needs a wgmma_acc fragment of f32, got {src}"
            )
        if self.fill.type != src.element_type:
            raise VerifyException(
                f"'nvgpu.fragment_mask' fill type {self.fill.type} must equal the element type "
                f"{src.element_type}"
            )
        counts = {
            len(self.row_coefficients.get_values()),
            len(self.col_coefficients.get_values()),
            len(self.bounds),
        }
        if len(counts) != 1:
            raise VerifyException(
                "'nvgpu.fragment_mask' needs one row coefficient, one column coefficient and "
                "one bound per condition"
            )
        if not self.bounds:
            raise VerifyException("'nvgpu.fragment_mask' needs at least one condition")


@irdl_op_definition
class FragmentSelectOp(IRDLOperation):
    """Elementwise `(lhs <predicate> rhs) ? on_true : on_false` over f32 fragments of one
    layout (`setp.<predicate>.f32`, `selp.f32`). As numpy's comparisons (`tile.cmp`), every
    predicate is false when an operand is NaN, except `ne`, which is true."""

    name = "nvgpu.fragment_select"

    T: ClassVar = VarConstraint("T", base(FragmentType))
    predicate = prop_def(ComparePredicateAttr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    on_true = operand_def(T)
    on_false = operand_def(T)
    result = result_def(T)

    assembly_format = (
        "$predicate $lhs `,` $rhs `,` $on_true `,` $on_false attr-dict `:` type($result)"
    )
    traits = traits_def(Pure())

    def __init__(
        self,
        predicate: ComparePredicateAttr,
        lhs: SSAValue,
        rhs: SSAValue,
        on_true: SSAValue,
        on_false: SSAValue,
    ):
        super().__init__(
            operands=[lhs, rhs, on_true, on_false],
            properties={"predicate": predicate},
            result_types=[lhs.type],
        )

    def verify_(self) -> None:
        ty = _fragment_type(self.result)
        if not isinstance(ty.element_type, Float32Type):
            raise VerifyException(f"'nvgpu.fragment_select' needs f32 fragments, got {ty}")


@irdl_op_definition
class FragmentLoadColumnsOp(IRDLOperation):
    """An f32 accumulator fragment whose element (r, c) is element c of the vector in smem
    slot `slot` of `buf`, for every row r (a per-column vector such as a GEMM bias, broadcast
    over the rows): `ld.shared` of each column pair the thread owns, widened to f32.

    The slot is one row (rank 1) of the fragment's columns; one row is never swizzled."""

    name = "nvgpu.fragment_load_columns"

    buf = operand_def(SmemType)
    slot = operand_def(i32)
    result = result_def(FragmentType)

    assembly_format = "$buf `[` $slot `]` attr-dict `:` type($buf) `->` type($result)"

    def __init__(self, buf: SSAValue, slot: SSAValue, result_type: FragmentType):
        super().__init__(operands=[buf, slot], result_types=[result_type])

    def verify_(self) -> None:
        buf, frag = _smem_type(self.buf), _fragment_type(self.result)
        if frag.kind != FragmentLayout.WGMMA_ACC or not isinstance(frag.element_type, Float32Type):
            raise VerifyException(
                f"'nvgpu.fragment_load_columns' makes an f32 wgmma_acc fragment, got {frag}"
            )
        if buf.slot_shape != (frag.get_shape()[1],):
            raise VerifyException(
                f"'nvgpu.fragment_load_columns' needs a slot of one row of "
                f"{frag.get_shape()[1]} elements, got {format_shape(buf.slot_shape)}"
            )
        if isinstance(buf.element_type, FP8_TYPES):
            raise VerifyException(
                f"'nvgpu.fragment_load_columns' reads f16, bf16 or f32, got {buf.element_type}"
            )
        _verify_slot(self, self.slot, buf.slot_count, "buffer")


Nvgpu = Dialect(
    "nvgpu",
    [
        # mbarriers
        MBarrierAllocOp,
        MBarrierInitOp,
        MBarrierArriveOp,
        MBarrierArriveExpectTxOp,
        MBarrierWaitOp,
        FenceMBarrierInitOp,
        CtaBarrierOp,
        # Shared memory and TMA
        SmemAllocOp,
        TmaLoadOp,
        TmaStoreOp,
        TmaStoreCommitOp,
        TmaStoreWaitOp,
        SmemLoadOp,
        SmemStoreOp,
        FenceProxyAsyncOp,
        # wgmma
        WgmmaFenceOp,
        WgmmaCommitGroupOp,
        WgmmaWaitGroupOp,
        WgmmaMmaAsyncOp,
        WgmmaMmaAsyncRsOp,
        # Threads and registers
        SetMaxNRegOp,
        NamedBarrierSyncOp,
        NamedBarrierArriveOp,
        ElectSyncOp,
        WarpgroupIndexOp,
        ThreadIndexOp,
        # Fragments
        FragmentSplatOp,
        FragmentUndefOp,
        FragmentBinaryOp,
        FragmentUnaryOp,
        FragmentConvertOp,
        FragmentRowReduceOp,
        ShuffleXorOp,
        FragmentBroadcastRowsOp,
        FragmentStoreOp,
        FragmentStoreGlobalOp,
        FragmentMaskOp,
        FragmentSelectOp,
        FragmentLoadColumnsOp,
    ],
    [
        MBarrierType,
        SmemType,
        FragmentType,
        FragmentLayoutAttr,
        RegisterActionAttr,
        BinaryKindAttr,
        UnaryKindAttr,
    ],
)
