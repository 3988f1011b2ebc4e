"""The types of the nvgpu dialect (barriers, shared memory, fragments) and the helpers every
op family's verifier shares. Section numbers refer to `reference/hopper-ptx.md`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import auto
from typing import TypeVar

from xdsl.dialects.arith import ConstantOp
from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    IntAttr,
    IntegerAttr,
    TensorType,
)
from xdsl.dialects.utils import EnumAttribute
from xdsl.ir import (
    Attribute,
    ParametrizedAttribute,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import IRDLOperation, irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from tawa_xdsl.dialects.nvgpu.hardware import (
    SWIZZLE_CHUNK_BYTES,
    SWIZZLE_REPEAT_ROWS,
    SWIZZLE_ROW_SHIFT,
    SWIZZLE_SPANS,
    TMA_BOX_INNER_BYTES,
    TMA_MAX_BOX_DIM,
)
from tawa_xdsl.dialects.nvgpu.layout import (
    FragmentLayout,
    Layout,
    layout_of,
    registers_per_thread,
)
from tawa_xdsl.dialects.tile import FLOAT_TYPES, DescType, format_shape

FP8_TYPES = (Float8E4M3FNType, Float8E5M2Type)
T = TypeVar("T")
THREADS_ATTR = "nvgpu.threads"  # the discardable kernel attribute giving the CTA size


def element_bytes(element_type: Attribute) -> int:
    """Bytes of one element: 1 for fp8, 2 for f16/bf16, 4 for f32."""
    assert isinstance(element_type, FLOAT_TYPES)
    return element_type.bitwidth // 8


def mma_k(element_type: Attribute) -> int:
    """K of one wgmma instruction: 16 for f16/bf16, 32 for fp8 (§4.1)."""
    return 32 if isinstance(element_type, FP8_TYPES) else 16


def operand_a_layout(element_type: Attribute) -> FragmentLayout:
    """The layout of wgmma's register A operand of this element type (§4.4)."""
    if isinstance(element_type, FP8_TYPES):
        return FragmentLayout.WGMMA_OPERAND_A8
    return FragmentLayout.WGMMA_OPERAND_A


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

    def slot_rows(self) -> int:
        """Rows of one slot: every dim but the innermost (a 1x128x64 slot has 128)."""
        return math.prod(self.slot_shape[:-1])

    def row_pitch(self) -> int:
        """Bytes from one row of a slot to the next inside a column slab: the swizzle span,
        or the whole row when the slot is not swizzled."""
        return self.swizzle_bytes or self.slot_shape[-1] * element_bytes(self.element_type)

    def slab_pitch(self) -> int:
        """Bytes from one column slab of a slot to the next (rows x row pitch)."""
        return self.slot_rows() * self.row_pitch()

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
      accumulator becomes an A operand by conversion alone (the FA3 P@V identity, §4.4).
    * `wgmma_operand_a8`, `!nvgpu.fragment<wgmma_operand_a8, 64xKxf8E4M3FN>`: wgmma's register
      A operand for fp8 (k32 slices): lane l of warp w holds rows 16w + (l >> 2) and + 8, four
      consecutive k from 4(l & 3) and the same at k + 16, so an accumulator converted into it
      moves values between the lanes of each quad.

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

    @property
    def layout_object(self) -> Layout:
        """The layout object that knows which thread and register hold which element."""
        return layout_of(self.kind)

    def values_per_thread(self) -> int:
        """How many elements of the tile one thread holds."""
        return self.layout_object.values_per_thread(self.get_shape())

    def registers_per_thread(self) -> int:
        """How many 32-bit registers one thread uses (a 64xN f32 accumulator: N/2)."""
        return registers_per_thread(self.values_per_thread(), self.element_type.bitwidth)

    def verify(self) -> None:
        shape, kind, et = self.get_shape(), self.kind, self.element_type
        layout = self.layout_object
        if len(shape) != layout.rank:
            raise VerifyException(
                f"!nvgpu.fragment<{kind}> needs a rank-{layout.rank} shape, got "
                f"{format_shape(shape)}"
            )
        if not isinstance(et, FLOAT_TYPES):
            raise VerifyException(
                f"!nvgpu.fragment element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, got {et}"
            )
        if kind == FragmentLayout.WGMMA_OPERAND_A and not isinstance(
            et, Float16Type | BFloat16Type
        ):
            raise VerifyException(
                f"!nvgpu.fragment<wgmma_operand_a> element type must be f16 or bf16, got {et}"
            )
        if kind == FragmentLayout.WGMMA_OPERAND_A8 and not isinstance(et, FP8_TYPES):
            raise VerifyException(
                f"!nvgpu.fragment<wgmma_operand_a8> element type must be f8E4M3FN or f8E5M2, "
                f"got {et}"
            )
        try:
            layout.check(shape)
        except ValueError as error:
            raise VerifyException(f"!nvgpu.fragment<{kind}> {error}") from None

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
    EXP = auto()
    LOG = auto()
    SQRT = auto()
    RSQRT = auto()
    TANH = auto()
    ERF = auto()
    NEG = auto()
    ABS = auto()
    RCP = auto()


@irdl_attr_definition
class UnaryKindAttr(EnumAttribute[UnaryKind], SpacedOpaqueSyntaxAttribute):
    """The function of `nvgpu.fragment_unary`: `exp2`, `log2`, `exp`, `log`, `sqrt`, `rsqrt`,
    `tanh`, `erf` (f32, approximate as PTX computes them), `neg`, `abs` or `rcp` (1 / x,
    rounded to nearest: exact)."""

    name = "nvgpu.unary_kind"


# ------------------------------------------------------------------------------- helpers


def smem_type(value: SSAValue) -> SmemType:
    assert isinstance(value.type, SmemType)
    return value.type


def fragment_type(value: SSAValue) -> FragmentType:
    assert isinstance(value.type, FragmentType)
    return value.type


def constant_value(value: SSAValue) -> int | None:
    """The value of an i32 operand defined by `arith.constant`, else None."""
    op = value.owner
    if isinstance(op, ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def verify_slot(op: IRDLOperation, slot: SSAValue, count: int, what: str) -> None:
    """A constant slot operand must index one of the `count` slots of `what`."""
    index = constant_value(slot)
    if index is not None and not 0 <= index < count:
        raise VerifyException(f"'{op.name}' {what} slot {index} is out of range 0..{count - 1}")


def swizzle_address(address: T, span: int) -> T:
    """Where TMA and wgmma put byte `address` of a `span`-byte swizzled buffer: 16-byte chunk
    bits [4:6] XORed with address bits [7:9], masked to span/16 chunks (§3.2). Works on ints
    and numpy arrays."""
    if not span:
        return address
    phase = (address >> SWIZZLE_ROW_SHIFT) & (span // SWIZZLE_CHUNK_BYTES - 1)
    return address ^ (phase * SWIZZLE_CHUNK_BYTES)


def swizzle_repeat(span: int) -> int:
    """Bytes after which a `span`-byte swizzle pattern repeats: 8 rows of 128 bytes (1024 for
    128 B, 512 for 64 B, 256 for 32 B); a swizzled slot starts on it."""
    return SWIZZLE_REPEAT_ROWS * span or 1


def verify_address_plan(
    op: IRDLOperation,
    buf: SmemType,
    row_pitch: IntegerAttr | None,
    slab_pitch: IntegerAttr | None,
    swizzle: IntegerAttr | None,
) -> None:
    """An address plan (written by legalize-nvgpu) has all three numbers or none, and they
    are the buffer's: row pitch, slab pitch and the swizzle TMA and wgmma use on it."""
    parts = (row_pitch, slab_pitch, swizzle)
    if all(part is None for part in parts):
        return
    if any(part is None for part in parts):
        raise VerifyException(f"'{op.name}' address plan needs row_pitch, slab_pitch, swizzle")
    got = tuple(part.value.data for part in parts)  # type: ignore[union-attr]
    expected = (buf.row_pitch(), buf.slab_pitch(), buf.swizzle_bytes)
    if got != expected:
        raise VerifyException(
            f"'{op.name}' address plan (row_pitch, slab_pitch, swizzle) = {got} does not "
            f"address {buf}: its rows are {expected[0]} bytes apart, its column slabs "
            f"{expected[1]}, its swizzle {expected[2]} bytes"
        )


def verify_placement(op: IRDLOperation, offset: IntegerAttr | None, align: int) -> None:
    """A placement offset (written by legalize-nvgpu) is a non-negative multiple of `align`."""
    if offset is not None and (offset.value.data < 0 or offset.value.data % align):
        raise VerifyException(
            f"'{op.name}' offset must be a non-negative multiple of {align}, "
            f"got {offset.value.data}"
        )


def verify_offsets(op: IRDLOperation, desc: DescType, offsets: Sequence[SSAValue]) -> None:
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


def verify_tma_box(op: IRDLOperation, desc: DescType, buf: SmemType) -> None:
    """The TMA box is the descriptor's block; it must fill exactly one smem slot (leading unit
    dims of the block may be dropped in the slot: a 1x64x64 block fills a 64x64 slot)."""
    same = squeeze_leading(desc.get_block_shape()) == squeeze_leading(buf.slot_shape)
    if not same or desc.element_type != buf.element_type:
        raise VerifyException(
            f"'{op.name}' descriptor block {format_shape(desc.get_block_shape())}x"
            f"{desc.element_type} must equal the smem slot {format_shape(buf.slot_shape)}x"
            f"{buf.element_type}"
        )
    if any(d > TMA_MAX_BOX_DIM for d in desc.get_block_shape()):
        raise VerifyException(
            f"'{op.name}' box dims must be at most 256, got {format_shape(desc.get_block_shape())}"
        )
    inner_bytes = desc.get_block_shape()[-1] * element_bytes(desc.element_type)
    if inner_bytes % TMA_BOX_INNER_BYTES:
        raise VerifyException(
            f"'{op.name}' innermost box dim must span a multiple of 16 bytes, got "
            f"{inner_bytes} bytes"
        )
