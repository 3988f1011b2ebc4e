"""Fragment ops: math, converts, reductions, shuffles and stores of register tiles (one
thread's share of a tile spread over a warpgroup in a layout of `layout.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, TypeVar

from xdsl.dialects.builtin import (
    I32,
    BFloat16Type,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    IntegerAttr,
    UnitAttr,
    i32,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from tawa_xdsl.dialects.nvgpu.hardware import (
    SWIZZLE_CHUNK_BYTES,
    SWIZZLE_ROW_SHIFT,
    WARP_THREADS,
    WARPGROUP_ROWS,
    WARPGROUP_THREADS,
)
from tawa_xdsl.dialects.nvgpu.layout import (
    INT_ARITH,
    WGMMA_ACC,
    WGMMA_OPERAND_A8,
    column_gather,
)
from tawa_xdsl.dialects.nvgpu.types import (
    FP8_TYPES,
    BinaryKind,
    BinaryKindAttr,
    FragmentLayout,
    FragmentType,
    SmemType,
    UnaryKind,
    UnaryKindAttr,
    element_bytes,
    fragment_type,
    smem_type,
    swizzle_address,
    verify_address_plan,
    verify_offsets,
    verify_slot,
)
from tawa_xdsl.dialects.tile import (
    ComparePredicateAttr,
    DescType,
    ReduceKind,
    ReduceKindAttr,
    format_shape,
)

T = TypeVar("T")


def vector_length(slot_shape: Sequence[int]) -> int | None:
    """The length of a vector slot (its dims but the last are 1), else None."""
    if any(d != 1 for d in slot_shape[:-1]):
        return None
    return slot_shape[-1]


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
        result = fragment_type(self.result)
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
    `div.rn.f32`, `max.f32`, `min.f32`); 16-bit fragments compute in f32 and round each
    result."""

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


# `exp2` on the FMA units (`FragmentUnaryOp.emulated`): 2^x = 2^floor(t) * q(t - floor(t)),
# t = x clamped to [-127, 128] (NaN kept), q the cubic below (relative error 7.5e-5 on [0, 1),
# under half an f16 ulp) and 2^floor(t) built from its exponent bits (0 at -127, inf at 128).
# The printer and the nvgpu interpreter compute the same steps.
EXP2_EMULATION_PERIOD = 8  # values v with v % 8 < emulated take the polynomial
EXP2_POLY = (0.9999251961708069, 0.6958337426185608, 0.2260672152042389, 0.07802419364452362)
EXP2_CLAMP = (-127.0, 128.0)


@irdl_op_definition
class FragmentUnaryOp(IRDLOperation):
    """Elementwise math, register by register: `exp2` (`ex2.approx.ftz.f32`), `log2`
    (`lg2.approx.ftz.f32`), `exp` and `log` (the same, scaled by log2(e) / ln(2)), `sqrt`
    (`sqrt.rn.f32`), `rsqrt` (`rsqrt.approx.ftz.f32`), `tanh` (`tanh.approx.f32`), `erf`
    (Abramowitz-Stegun 7.1.26, |error| < 1.5e-7), `neg` and `abs`. 16-bit fragments compute
    in f32 and round each result. `exp2 emulated N`: values v of a thread with
    v % 8 < N are computed by `EXP2_POLY` on the FMA units instead of the MUFU unit."""

    name = "nvgpu.fragment_unary"

    T: ClassVar = VarConstraint("T", base(FragmentType))
    kind = prop_def(UnaryKindAttr)
    source = operand_def(T)
    result = result_def(T)
    emulated = opt_prop_def(IntegerAttr[I32])

    assembly_format = "$kind $source (`emulated` $emulated^)? attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self, kind: UnaryKind, source: SSAValue, emulated: int | None = None):
        properties: dict = {"kind": UnaryKindAttr(kind)}
        if emulated:
            properties["emulated"] = IntegerAttr(emulated, i32)
        super().__init__(operands=[source], properties=properties, result_types=[source.type])

    def emulated_share(self) -> int:
        """How many of every `EXP2_EMULATION_PERIOD` values take the polynomial (0: none)."""
        return 0 if self.emulated is None else self.emulated.value.data

    def verify_(self) -> None:
        et = fragment_type(self.source).element_type
        if isinstance(et, FP8_TYPES):
            raise VerifyException(
                f"'nvgpu.fragment_unary' computes on f32, f16 or bf16 elements, got {et}"
            )
        share = self.emulated_share()
        if self.emulated is not None and self.kind.data != UnaryKind.EXP2:
            raise VerifyException("'nvgpu.fragment_unary' emulates exp2 only")
        if self.emulated is not None and not 1 <= share <= EXP2_EMULATION_PERIOD:
            raise VerifyException(
                f"'nvgpu.fragment_unary' emulated must be 1..{EXP2_EMULATION_PERIOD}, got {share}"
            )


@irdl_op_definition
class FragmentConvertOp(IRDLOperation):
    """Convert every element to another type (`cvt.rn.bf16x2.f32`, `cvt.rn.f16x2.f32`,
    `cvt.rn.satfinite.e4m3x2.f32`, ...), packing 16-bit results in pairs.

    The layout is kept, except that a wgmma_acc fragment may become a wgmma_operand_a
    fragment of the same shape (the registers are the same, §4.4) or, converting to fp8, a
    wgmma_operand_a8 one (each thread gets four consecutive columns of its quad's). Into
    wgmma_operand_a8, `columns` may say that result column k is source column `columns[k]`
    (a permutation of the columns written in the kernel): then every value must stay in its
    thread (`register_plan`), and the conversion packs each thread's own values."""

    name = "nvgpu.fragment_convert"

    source = operand_def(FragmentType)
    columns = opt_prop_def(DenseArrayBase)
    result = result_def(FragmentType)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)
    traits = traits_def(Pure())

    def __init__(
        self, source: SSAValue, result_type: FragmentType, columns: Sequence[int] | None = None
    ):
        properties = {}
        if columns is not None:
            properties["columns"] = DenseArrayBase.from_list(i32, list(columns))
        super().__init__(operands=[source], result_types=[result_type], properties=properties)

    def column_map(self) -> list[int] | None:
        """The source column of each result column, where `columns` is given."""
        if self.columns is None:
            return None
        return [int(c) for c in self.columns.get_values()]

    def register_plan(self) -> list[int]:
        """With `columns`: the source value each result value is, the same in every thread;
        ValueError where a value would come from another thread."""
        src, dst = fragment_type(self.source), fragment_type(self.result)
        columns = self.column_map()
        assert columns is not None
        if any(not 0 <= c < src.get_shape()[1] for c in columns):
            raise ValueError("names a column the source does not have")
        plan = column_gather(
            WGMMA_OPERAND_A8, src.get_shape(), dst.get_shape(), [0] * len(columns), columns,
            source_layout=WGMMA_ACC,
        )  # fmt: skip
        return [value for _, value in plan]

    def verify_(self) -> None:
        src, dst = fragment_type(self.source), fragment_type(self.result)
        relayout = src.kind == FragmentLayout.WGMMA_ACC and dst.kind in (
            FragmentLayout.WGMMA_OPERAND_A,
            FragmentLayout.WGMMA_OPERAND_A8,
        )
        if src.get_shape() != dst.get_shape() or (src.kind != dst.kind and not relayout):
            raise VerifyException(
                f"'nvgpu.fragment_convert' must keep the shape and layout (or turn wgmma_acc "
                f"into wgmma_operand_a or wgmma_operand_a8), got {src} -> {dst}"
            )
        if self.columns is None:
            return
        if dst.kind != FragmentLayout.WGMMA_OPERAND_A8 or src.kind != FragmentLayout.WGMMA_ACC:
            raise VerifyException(
                "'nvgpu.fragment_convert' moves columns only from wgmma_acc into "
                f"wgmma_operand_a8, got {src} -> {dst}"
            )
        try:
            self.register_plan()
        except ValueError as error:
            raise VerifyException(f"'nvgpu.fragment_convert' {error}") from None


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
        src = fragment_type(source)
        super().__init__(
            operands=[source],
            properties={"kind": ReduceKindAttr(kind)},
            result_types=[FragmentType(FragmentLayout.WGMMA_ROW, [src.rows], src.element_type)],
        )

    def verify_(self) -> None:
        src, dst = fragment_type(self.source), fragment_type(self.result)
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
        src = fragment_type(self.source)
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
        src = fragment_type(source)
        super().__init__(
            operands=[source],
            result_types=[
                FragmentType(FragmentLayout.WGMMA_ACC, [src.rows, columns], src.element_type)
            ],
        )

    def verify_(self) -> None:
        src, dst = fragment_type(self.source), fragment_type(self.result)
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

    Before TMA reads the slot: `nvgpu.fence_proxy_async` and a barrier.

    Store plan (`legalize-nvgpu`): `st.shared` k writes the column pair of values
    `store_values[k]`, `+ 1` at `(store_rows[k], store_cols[k])` from the thread's layout
    origin (plus `row`), at the byte the address plan gives element (r, c) (`row_pitch`,
    `slab_pitch`, `swizzle`: see `slot_byte`). `uniform_phase` (`legalize-nvgpu`, where
    `phase_is_uniform` holds): every store has the swizzle phase of the thread's origin row
    and writes one 32-bit pair inside one 16-byte chunk, so the printer computes the phase
    and each chunk's address once per thread."""

    name = "nvgpu.fragment_store"

    value = operand_def(FragmentType)
    buf = operand_def(SmemType)
    slot = operand_def(i32)
    row = opt_operand_def(i32)
    store_values = opt_prop_def(DenseArrayBase)
    store_rows = opt_prop_def(DenseArrayBase)
    store_cols = opt_prop_def(DenseArrayBase)
    row_pitch = opt_prop_def(IntegerAttr[I32])
    slab_pitch = opt_prop_def(IntegerAttr[I32])
    swizzle = opt_prop_def(IntegerAttr[I32])
    uniform_phase = opt_prop_def(UnitAttr)

    assembly_format = (
        "$value `,` $buf `[` $slot (`,` $row^)? `]` attr-dict `:` type($value) `,` type($buf)"
    )
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, value: SSAValue, buf: SSAValue, slot: SSAValue, row: SSAValue | None = None):
        super().__init__(operands=[value, buf, slot, [row] if row else []])

    def verify_(self) -> None:
        frag, buf = fragment_type(self.value), smem_type(self.buf)
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
        verify_slot(self, self.slot, buf.slot_count, "buffer")
        verify_store_plan(self, frag, 2)
        verify_address_plan(self, buf, self.row_pitch, self.slab_pitch, self.swizzle)
        if (self.store_values is None) != (self.row_pitch is None):
            raise VerifyException(
                f"'{self.name}' needs a store plan and an address plan, or neither"
            )
        if self.uniform_phase is not None and not phase_is_uniform(self):
            raise VerifyException(
                f"'{self.name}' uniform_phase: some store of the plan changes the swizzle "
                "phase of the origin row, leaves a 16-byte chunk or is not one 32-bit pair"
            )

    def plan(self) -> list[tuple[int, int, int]] | None:
        """(first value, row offset, column offset) of each `st.shared`, or None unplanned."""
        return store_plan(self)


def store_plan(op: FragmentStoreOp | FragmentStoreGlobalOp) -> list[tuple[int, int, int]] | None:
    """(first value, row offset, column offset) of each store of `op`'s plan, or None."""
    if op.store_values is None or op.store_rows is None or op.store_cols is None:
        return None
    parts = (op.store_values, op.store_rows, op.store_cols)
    return list(zip(*(part.get_values() for part in parts), strict=True))


def slot_byte(row: T, col_byte: T, row_pitch: int, slab_pitch: int, swizzle: int) -> T:
    """The byte of a slot holding byte `col_byte` of row `row` under an address plan: slab
    `col_byte // row_pitch` (slabs `slab_pitch` apart), row `row` of it (`row_pitch` apart),
    16-byte chunk c of the row at chunk c ^ ((row * row_pitch >> 7) mod swizzle/16)
    (`swizzle_address` of the slot-relative byte, so the slot must start a swizzle repeat).
    Works on ints and numpy arrays."""
    slab, within = col_byte // row_pitch, col_byte % row_pitch
    return slab * slab_pitch + swizzle_address(row * row_pitch + within, swizzle)


def phase_is_uniform(op: FragmentStoreOp) -> bool:
    """Whether every store of `op`'s plans writes one 32-bit pair of 16-bit values inside one
    16-byte chunk, at the swizzle phase of the thread's origin row: its row offset moves the
    row bytes by whole swizzle repeats (`swizzle / 16` times 128 bytes) and the origin
    columns of every thread plus its column offset stay inside a chunk."""
    plan, frag = op.plan(), fragment_type(op.value)
    if plan is None or op.row_pitch is None or op.swizzle is None or not op.swizzle.value.data:
        return False
    eb, row_pitch = element_bytes(frag.element_type), op.row_pitch.value.data
    if 2 * eb != 4:
        return False
    repeat = op.swizzle.value.data // SWIZZLE_CHUNK_BYTES << SWIZZLE_ROW_SHIFT
    layout = frag.layout_object
    last_origin_col = max(layout.thread_origin(t, INT_ARITH)[1] for t in range(WARPGROUP_THREADS))
    return all(
        drow * row_pitch % repeat == 0
        and dcol * eb % SWIZZLE_CHUNK_BYTES + (last_origin_col + 2) * eb <= SWIZZLE_CHUNK_BYTES
        for _, drow, dcol in plan
    )


def verify_store_plan(op: FragmentStoreOp | FragmentStoreGlobalOp, frag: FragmentType, width: int):
    """A store plan has all three arrays, of one length, and stores each value once."""
    parts = (op.store_values, op.store_rows, op.store_cols)
    if all(part is None for part in parts):
        return
    if any(part is None for part in parts):
        raise VerifyException(f"'{op.name}' store plan needs store_values, store_rows, store_cols")
    if len({len(part.get_values()) for part in parts}) != 1:  # type: ignore[union-attr]
        raise VerifyException(f"'{op.name}' store plan arrays differ in length")
    stored = sorted(v + i for v, _, _ in store_plan(op) or [] for i in range(width))
    if stored != list(range(frag.values_per_thread())):
        raise VerifyException(
            f"'{op.name}' store plan must store each of the {frag.values_per_thread()} values "
            f"of a thread once, in groups of {width}"
        )


@irdl_op_definition
class FragmentStoreGlobalOp(IRDLOperation):
    """Write a fragment to global memory at element offsets `[..., row, col]` of the
    descriptor's tensor, dropping elements outside it: an accumulator one `st.global` per
    register pair; a row vector (`wgmma_row`, one value per query row, e.g. a log-sum-exp)
    along the last dim, row i at `col + i` of plane row `row` (at `offset + i` of a rank-1
    descriptor), by the first thread of each quad.

    Store plan (`legalize-nvgpu`): `st.global` k writes the thread's values from
    `store_values[k]` on (a pair for an accumulator, one for a row vector) at
    `(store_rows[k], store_cols[k])` from the thread's layout origin -- for a row vector the
    origin row counts along the plane's columns -- and is predicated on that element lying
    inside the extent of every dim in `clip_dims` (the plane's rows and columns)."""

    name = "nvgpu.fragment_store_global"

    value = operand_def(FragmentType)
    desc = operand_def(DescType)
    offsets = var_operand_def(i32)
    store_values = opt_prop_def(DenseArrayBase)
    store_rows = opt_prop_def(DenseArrayBase)
    store_cols = opt_prop_def(DenseArrayBase)
    clip_dims = opt_prop_def(DenseArrayBase)

    assembly_format = "$value `,` $desc `[` $offsets `]` attr-dict `:` type($value) `,` type($desc)"
    irdl_options = (ParsePropInAttrDict(),)

    def __init__(self, value: SSAValue, desc: SSAValue, offsets: Sequence[SSAValue]):
        super().__init__(operands=[value, desc, offsets])

    def verify_(self) -> None:
        frag, desc = fragment_type(self.value), self.desc.type
        assert isinstance(desc, DescType)
        if frag.kind in (FragmentLayout.WGMMA_OPERAND_A, FragmentLayout.WGMMA_OPERAND_A8):
            raise VerifyException(
                f"'nvgpu.fragment_store_global' needs a wgmma_acc or wgmma_row fragment, got {frag}"
            )
        vector = frag.kind == FragmentLayout.WGMMA_ROW and desc.rank == 1
        if not vector and (desc.rank < 2 or any(d != 1 for d in desc.get_block_shape()[:-2])):
            raise VerifyException(
                f"'nvgpu.fragment_store_global' needs a rank-2 descriptor, or one whose "
                f"leading block dims are 1 (a row vector also a rank-1 one), got {desc}"
            )
        verify_offsets(self, desc, self.offsets)
        if frag.element_type != desc.element_type:
            raise VerifyException(
                f"'nvgpu.fragment_store_global' element types differ: {frag.element_type} into "
                f"{desc.element_type} (convert first)"
            )
        self.verify_plan(frag, desc.rank)

    def store_width(self) -> int:
        """Values per `st.global`: a column pair of an accumulator, one row-vector value."""
        return 1 if fragment_type(self.value).kind == FragmentLayout.WGMMA_ROW else 2

    def plan(self) -> list[tuple[int, int, int]] | None:
        """(first value, row offset, column offset) of each `st.global`, or None unplanned."""
        return store_plan(self)

    def verify_plan(self, frag: FragmentType, rank: int) -> None:
        verify_store_plan(self, frag, self.store_width())
        if (self.clip_dims is None) != (self.store_values is None):
            raise VerifyException(f"'{self.name}' store plan needs clip_dims, and only with it")
        if self.clip_dims is None:
            return
        name = f"'{self.name}'"
        clip = list(self.clip_dims.get_values())
        if clip != sorted(set(clip)) or not set(clip) <= {max(rank - 2, 0), rank - 1}:
            raise VerifyException(
                f"{name} clip_dims {clip} must name the plane's dims ({rank - 2}, {rank - 1}) "
                "in order: leading offsets select the plane, they are not clipped"
            )


@irdl_op_definition
class FragmentMaskOp(IRDLOperation):
    """Keep element (r, c) of an accumulator where every condition
    `row_coefficients[k] * r + col_coefficients[k] * c < bounds[k]` holds, else `fill`
    (`setp.lt.s32` per condition and value, `and.pred`, `selp.f32`).

    r and c are coordinates in the fragment's tile (0 .. rows - 1, 0 .. cols - 1). Attention
    masks keys past the sequence end with (0, 1, seq - start_n) and, when causal, keys after
    the query row with (-1, 1, off_m - start_n + 1).

    Branch plan (`legalize-nvgpu`): `skip_corners[k]` is the largest value condition k's
    left side takes over the tile; when every `bounds[k] > skip_corners[k]` nothing is
    masked, and the warpgroup branches over the per-value selects."""

    name = "nvgpu.fragment_mask"

    T: ClassVar = VarConstraint("T", base(FragmentType))
    source = operand_def(T)
    fill = operand_def()
    bounds = var_operand_def(i32)
    row_coefficients = prop_def(DenseArrayBase)
    col_coefficients = prop_def(DenseArrayBase)
    skip_corners = opt_prop_def(DenseArrayBase)
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
        src = fragment_type(self.source)
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
        corners = self.skip_corners
        if corners is not None and len(corners.get_values()) != len(self.bounds):
            raise VerifyException(
                f"'nvgpu.fragment_mask' skip_corners needs one value per condition "
                f"({len(self.bounds)}), got {len(corners.get_values())}"
            )


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
        ty = fragment_type(self.result)
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
        buf, frag = smem_type(self.buf), fragment_type(self.result)
        if frag.kind != FragmentLayout.WGMMA_ACC or not isinstance(frag.element_type, Float32Type):
            raise VerifyException(
                f"'nvgpu.fragment_load_columns' makes an f32 wgmma_acc fragment, got {frag}"
            )
        if vector_length(buf.slot_shape) != frag.get_shape()[1]:
            raise VerifyException(
                f"'nvgpu.fragment_load_columns' needs a slot of one row of "
                f"{frag.get_shape()[1]} elements, got {format_shape(buf.slot_shape)}"
            )
        if isinstance(buf.element_type, FP8_TYPES):
            raise VerifyException(
                f"'nvgpu.fragment_load_columns' reads f16, bf16 or f32, got {buf.element_type}"
            )
        if buf.swizzle_bytes:
            raise VerifyException(
                f"'nvgpu.fragment_load_columns' reads a vector slot, never swizzled, got {buf}"
            )
        verify_slot(self, self.slot, buf.slot_count, "buffer")


@irdl_op_definition
class FragmentLoadOp(IRDLOperation):
    """An accumulator-layout fragment read from rows `[row, row + rows)` of smem slot `slot`
    (row 0 without `row`): `ld.shared` of each column pair the thread owns, where the
    layout object places it, through the buffer's swizzle. The inverse of
    `nvgpu.fragment_store`, for tiles a consumer computes on without a dot.

    Address plan (`legalize-nvgpu`): element (r, c) is read at the byte `slot_byte` gives it
    with `row_pitch`, `slab_pitch` and `swizzle`."""

    name = "nvgpu.fragment_load"

    buf = operand_def(SmemType)
    slot = operand_def(i32)
    row = opt_operand_def(i32)
    row_pitch = opt_prop_def(IntegerAttr[I32])
    slab_pitch = opt_prop_def(IntegerAttr[I32])
    swizzle = opt_prop_def(IntegerAttr[I32])
    result = result_def(FragmentType)

    irdl_options = (ParsePropInAttrDict(),)

    assembly_format = "$buf `[` $slot (`,` $row^)? `]` attr-dict `:` type($buf) `->` type($result)"

    def __init__(
        self, buf: SSAValue, slot: SSAValue, result_type: FragmentType, row: SSAValue | None = None
    ):
        super().__init__(operands=[buf, slot, [row] if row else []], result_types=[result_type])

    def verify_(self) -> None:
        buf, frag = smem_type(self.buf), fragment_type(self.result)
        if frag.kind != FragmentLayout.WGMMA_ACC or frag.element_type != buf.element_type:
            raise VerifyException(
                f"'nvgpu.fragment_load' makes a wgmma_acc fragment of the slot's element type "
                f"{buf.element_type}, got {frag}"
            )
        if isinstance(buf.element_type, FP8_TYPES):
            raise VerifyException(
                f"'nvgpu.fragment_load' reads f16, bf16 or f32, got {buf.element_type}"
            )
        rows, cols = frag.get_shape()
        slot_shape = buf.slot_shape
        fits = len(slot_shape) == 2 and slot_shape[1] == cols
        offset = self.row is not None and slot_shape[0] % rows == 0
        fits = fits and (slot_shape[0] == rows or offset)
        if not fits:
            raise VerifyException(
                f"'nvgpu.fragment_load' of {rows}x{cols} from a {format_shape(slot_shape)} slot: "
                "the slot must have the same shape, or, with a row offset, a multiple of the rows"
            )
        verify_slot(self, self.slot, buf.slot_count, "buffer")
        verify_address_plan(self, buf, self.row_pitch, self.slab_pitch, self.swizzle)


@irdl_op_definition
class FragmentLoadRowsOp(IRDLOperation):
    """A row-vector fragment (`wgmma_row`) read from elements `[row, row + rows)` of the
    1-D smem slot `slot` (a per-row scale or bias): `ld.shared` of the thread's rows."""

    name = "nvgpu.fragment_load_rows"

    buf = operand_def(SmemType)
    slot = operand_def(i32)
    row = opt_operand_def(i32)
    result = result_def(FragmentType)

    assembly_format = "$buf `[` $slot (`,` $row^)? `]` attr-dict `:` type($buf) `->` type($result)"

    def __init__(
        self, buf: SSAValue, slot: SSAValue, result_type: FragmentType, row: SSAValue | None = None
    ):
        super().__init__(operands=[buf, slot, [row] if row else []], result_types=[result_type])

    def verify_(self) -> None:
        buf, frag = smem_type(self.buf), fragment_type(self.result)
        if frag.kind != FragmentLayout.WGMMA_ROW or frag.element_type != buf.element_type:
            raise VerifyException(
                f"'nvgpu.fragment_load_rows' makes a wgmma_row fragment of the slot's element "
                f"type {buf.element_type}, got {frag}"
            )
        if not isinstance(buf.element_type, Float32Type | Float16Type | BFloat16Type):
            raise VerifyException(
                f"'nvgpu.fragment_load_rows' reads f16, bf16 or f32, got {buf.element_type}"
            )
        (rows,) = frag.get_shape()
        length, slot_shape = vector_length(buf.slot_shape), buf.slot_shape
        fits = length is not None and (
            length == rows or self.row is not None and length % rows == 0
        )
        if not fits:
            raise VerifyException(
                f"'nvgpu.fragment_load_rows' of {rows} rows from a {format_shape(slot_shape)} "
                "slot: the slot must have as many elements, or, with a row offset, a multiple"
            )
        if buf.swizzle_bytes:
            raise VerifyException(
                f"'nvgpu.fragment_load_rows' reads a vector slot, never swizzled, got {buf}"
            )
        verify_slot(self, self.slot, buf.slot_count, "buffer")


# ------------------------------------------------------------ reshapes of fragments (columns)


@irdl_op_definition
class FragmentGatherOp(IRDLOperation):
    """An accumulator fragment whose column j is column `columns[j]` of operand
    `source_of[j]` (the rows kept): the register moves of a `tl.split` of a reshaped and
    permuted tile, or of a `tl.join` reshaped back to 2-D (Triton's EPILOGUE_SUBTILE). The
    layout object plans the moves (`register_plan`); a column must stay in its threads."""

    name = "nvgpu.fragment_gather"

    T: ClassVar = VarConstraint("T", base(FragmentType))
    sources = var_operand_def(T)
    source_of = prop_def(DenseArrayBase)
    columns = prop_def(DenseArrayBase)
    result = result_def(FragmentType)

    assembly_format = "$sources attr-dict `:` type($sources) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)
    traits = traits_def(Pure())

    def __init__(
        self,
        sources: Sequence[SSAValue],
        source_of: Sequence[int],
        columns: Sequence[int],
        result_type: FragmentType,
    ):
        super().__init__(
            operands=[list(sources)],
            properties={
                "source_of": DenseArrayBase.from_list(i32, list(source_of)),
                "columns": DenseArrayBase.from_list(i32, list(columns)),
            },
            result_types=[result_type],
        )

    def register_plan(self) -> list[tuple[int, int]]:
        """(operand, value) that each value of the result copies, the same in every thread;
        ValueError where the layout cannot move a column in registers."""
        src, dst = fragment_type(self.sources[0]), fragment_type(self.result)
        source_of = [int(s) for s in self.source_of.get_values()]
        columns = [int(c) for c in self.columns.get_values()]
        if any(not 0 <= s < len(self.sources) for s in source_of) or any(
            not 0 <= c < src.get_shape()[1] for c in columns
        ):
            raise ValueError("names an operand or a column it does not have")
        return column_gather(WGMMA_ACC, src.get_shape(), dst.get_shape(), source_of, columns)

    def verify_(self) -> None:
        if not self.sources:
            raise VerifyException("'nvgpu.fragment_gather' needs at least one fragment")
        src, dst = fragment_type(self.sources[0]), fragment_type(self.result)
        kinds = {src.kind, dst.kind}
        if kinds != {FragmentLayout.WGMMA_ACC} or src.element_type != dst.element_type:
            raise VerifyException(
                f"'nvgpu.fragment_gather' makes a wgmma_acc fragment of its operands' element "
                f"type from wgmma_acc fragments, got {src} -> {dst}"
            )
        if isinstance(src.element_type, FP8_TYPES):
            raise VerifyException("'nvgpu.fragment_gather' moves f32, f16 or bf16 values")
        try:
            plan = self.register_plan()
        except ValueError as error:
            raise VerifyException(f"'nvgpu.fragment_gather' {error}") from None
        if not isinstance(src.element_type, Float32Type):  # two values per register
            pairs = plan[0::2], plan[1::2]
            if any(h != (s, v + 1) or v % 2 for (s, v), h in zip(*pairs, strict=True)):
                raise VerifyException(
                    "'nvgpu.fragment_gather' of 16-bit values must move whole registers "
                    "(adjacent column pairs)"
                )


# --------------------------------------------------- column vectors (reductions along axis 0)


WARPS_PER_WARPGROUP = WARPGROUP_THREADS // WARP_THREADS


def _column_of(acc: FragmentType) -> FragmentType:
    return FragmentType(FragmentLayout.WGMMA_COL, [acc.get_shape()[1]], acc.element_type)


@irdl_op_definition
class FragmentColumnReduceOp(IRDLOperation):
    """Reduce each column of an f32 accumulator over this thread's rows and the 8 lane rows
    of its warp (`max.f32` / `add.f32` chains, then `shfl.sync.bfly.b32` 4, 8 and 16): every
    lane then holds its warp's partial of each of its columns; `fragment_column_stage` and
    `fragment_column_combine` add up the 4 warps."""

    name = "nvgpu.fragment_column_reduce"

    kind = prop_def(ReduceKindAttr)
    source = operand_def(FragmentType)
    result = result_def(FragmentType)

    assembly_format = "$kind $source attr-dict `:` type($source) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, kind: ReduceKind, source: SSAValue):
        super().__init__(
            operands=[source],
            properties={"kind": ReduceKindAttr(kind)},
            result_types=[_column_of(fragment_type(source))],
        )

    def verify_(self) -> None:
        src, dst = fragment_type(self.source), fragment_type(self.result)
        f32_acc = src.kind == FragmentLayout.WGMMA_ACC and isinstance(src.element_type, Float32Type)
        if not f32_acc or dst != _column_of(src):
            raise VerifyException(
                f"'nvgpu.fragment_column_reduce' reduces an f32 wgmma_acc fragment to its "
                f"wgmma_col fragment, got {src} -> {dst}"
            )


def _verify_column_slot(op: IRDLOperation, buf: SSAValue, slot: SSAValue, columns: int) -> None:
    smem = smem_type(buf)
    shape = tuple(smem.slot_shape)
    if (
        len(shape) != 2
        or shape[0] % WARPS_PER_WARPGROUP
        or shape[1] != columns
        or not isinstance(smem.element_type, Float32Type)
    ):
        raise VerifyException(
            f"'{op.name}' needs an f32 slot of one row per warp of its warpgroups and one "
            f"column per column ({WARPS_PER_WARPGROUP}n x {columns}), got "
            f"{format_shape(smem.slot_shape)} of {smem.element_type}"
        )
    verify_slot(op, slot, smem.slot_count, "buffer")


def verify_partials_plan(
    op: FragmentColumnStageOp | FragmentColumnCombineOp, rows: IntegerAttr | None
) -> None:
    """A column-partials plan (written by legalize-nvgpu) has all its numbers or none, and
    they are the slot's and the layout's: `row_pitch` the bytes of one partials row,
    `value_cols` each value's column from the thread's origin column (the layout's), and
    `rows` (`warp_rows` of a stage, `partial_rows` of a combine) as `expected_rows` says."""
    parts = (op.row_pitch, op.value_cols, rows)
    if all(part is None for part in parts):
        return
    if any(part is None for part in parts):
        raise VerifyException(f"'{op.name}' partials plan needs all of {op.PLAN_FIELDS}")
    smem = smem_type(op.buf)
    frag = fragment_type(op.result if isinstance(op, FragmentColumnCombineOp) else op.value)
    got = (
        op.row_pitch.value.data,  # type: ignore[union-attr]
        [int(c) for c in op.value_cols.get_values()],  # type: ignore[union-attr]
        rows.value.data,  # type: ignore[union-attr]
    )
    expected = (
        smem.slot_shape[-1] * element_bytes(smem.element_type),
        [frag.layout_object.value_offset(frag.get_shape(), v) for v in range(len(got[1]))],
        op.expected_rows(),
    )
    if got != expected:
        raise VerifyException(
            f"'{op.name}' partials plan {op.PLAN_FIELDS} = {got} does not address "
            f"{smem} from a {frag}: expected {expected}"
        )


@irdl_op_definition
class FragmentColumnStageOp(IRDLOperation):
    """Write each warp's column partials (a `wgmma_col` fragment of f32) into row `warp` of
    smem slot `slot` (with `row`, row `row + warp`: the warpgroup's rows of a slot that
    several warpgroups share): the 4 lanes of the warp's first lane row store
    (`st.shared.f32`).

    Partials plan (`legalize-nvgpu`): the thread whose layout origin is (r, c) stores, when
    r is a multiple of `warp_rows` (one lane row of each warp: every column once), value v
    at byte `(row + r / warp_rows) * row_pitch + 4 * (c + value_cols[v])` of the slot."""

    name = "nvgpu.fragment_column_stage"

    value = operand_def(FragmentType)
    buf = operand_def(SmemType)
    slot = operand_def(i32)
    row = opt_operand_def(i32)
    row_pitch = opt_prop_def(IntegerAttr[I32])
    warp_rows = opt_prop_def(IntegerAttr[I32])
    value_cols = opt_prop_def(DenseArrayBase)

    assembly_format = (
        "$value `,` $buf `[` $slot (`,` $row^)? `]` attr-dict `:` type($value) `,` type($buf)"
    )
    irdl_options = (ParsePropInAttrDict(),)
    PLAN_FIELDS: ClassVar[str] = "(row_pitch, value_cols, warp_rows)"

    def __init__(self, value: SSAValue, buf: SSAValue, slot: SSAValue, row: SSAValue | None = None):
        super().__init__(operands=[value, buf, slot, [row] if row else []])

    def expected_rows(self) -> int:
        """The accumulator rows of one warp: each warp of the warpgroup stages one row."""
        return WARPGROUP_ROWS // WARPS_PER_WARPGROUP

    def verify_(self) -> None:
        frag = fragment_type(self.value)
        if frag.kind != FragmentLayout.WGMMA_COL or not isinstance(frag.element_type, Float32Type):
            raise VerifyException(
                f"'nvgpu.fragment_column_stage' stores a wgmma_col fragment of f32, got {frag}"
            )
        _verify_column_slot(self, self.buf, self.slot, frag.get_shape()[0])
        verify_partials_plan(self, self.warp_rows)


@irdl_op_definition
class FragmentColumnCombineOp(IRDLOperation):
    """Every thread reads the partials of its columns from smem slot `slot` (one row per
    warp of every warpgroup sharing the slot, written by `fragment_column_stage` before a
    named barrier) and combines them in row order: the column reduction over all their rows.

    Partials plan (`legalize-nvgpu`): the thread whose layout origin column is c combines,
    for value v, the f32 at bytes `k * row_pitch + 4 * (c + value_cols[v])` of the slot for
    k = 0 .. `partial_rows` - 1, in that order."""

    name = "nvgpu.fragment_column_combine"

    kind = prop_def(ReduceKindAttr)
    buf = operand_def(SmemType)
    slot = operand_def(i32)
    result = result_def(FragmentType)
    row_pitch = opt_prop_def(IntegerAttr[I32])
    partial_rows = opt_prop_def(IntegerAttr[I32])
    value_cols = opt_prop_def(DenseArrayBase)

    assembly_format = "$kind $buf `[` $slot `]` attr-dict `:` type($buf) `->` type($result)"
    irdl_options = (ParsePropInAttrDict(),)
    PLAN_FIELDS: ClassVar[str] = "(row_pitch, value_cols, partial_rows)"

    def __init__(self, kind: ReduceKind, buf: SSAValue, slot: SSAValue, result: FragmentType):
        super().__init__(
            operands=[buf, slot], properties={"kind": ReduceKindAttr(kind)}, result_types=[result]
        )

    def expected_rows(self) -> int:
        """Every row of the slot: one per staging warp."""
        return smem_type(self.buf).slot_shape[0]

    def verify_(self) -> None:
        frag = fragment_type(self.result)
        if frag.kind != FragmentLayout.WGMMA_COL or not isinstance(frag.element_type, Float32Type):
            raise VerifyException(
                f"'nvgpu.fragment_column_combine' makes a wgmma_col fragment of f32, got {frag}"
            )
        _verify_column_slot(self, self.buf, self.slot, frag.get_shape()[0])
        verify_partials_plan(self, self.partial_rows)


@irdl_op_definition
class FragmentBroadcastColumnsOp(IRDLOperation):
    """Spread a column vector over the rows of an accumulator: value i of the result is the
    thread's column value of its column (register moves only)."""

    name = "nvgpu.fragment_broadcast_columns"

    source = operand_def(FragmentType)
    result = result_def(FragmentType)

    assembly_format = "$source attr-dict `:` type($source) `->` type($result)"
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, rows: int):
        src = fragment_type(source)
        super().__init__(
            operands=[source],
            result_types=[
                FragmentType(FragmentLayout.WGMMA_ACC, [rows, src.get_shape()[0]], src.element_type)
            ],
        )

    def verify_(self) -> None:
        src, dst = fragment_type(self.source), fragment_type(self.result)
        if (
            src.kind != FragmentLayout.WGMMA_COL
            or dst.kind != FragmentLayout.WGMMA_ACC
            or dst.get_shape()[1] != src.get_shape()[0]
            or src.element_type != dst.element_type
        ):
            raise VerifyException(
                f"'nvgpu.fragment_broadcast_columns' turns a wgmma_col fragment into a "
                f"wgmma_acc fragment of its columns and element type, got {src} -> {dst}"
            )


@irdl_op_definition
class FragmentStoreColumnsOp(IRDLOperation):
    """Write a column vector (`wgmma_col`) to global memory along the last dim of the
    descriptor's tensor, element j at `[..., col + j]`, dropping elements outside it: the 4
    threads of warp 0's first lane row hold every column, and store them (`st.global`)."""

    name = "nvgpu.fragment_store_columns"

    value = operand_def(FragmentType)
    desc = operand_def(DescType)
    offsets = var_operand_def(i32)

    assembly_format = "$value `,` $desc `[` $offsets `]` attr-dict `:` type($value) `,` type($desc)"

    def __init__(self, value: SSAValue, desc: SSAValue, offsets: Sequence[SSAValue]):
        super().__init__(operands=[value, desc, offsets])

    def verify_(self) -> None:
        frag, desc = fragment_type(self.value), self.desc.type
        assert isinstance(desc, DescType)
        if frag.kind != FragmentLayout.WGMMA_COL or frag.element_type != desc.element_type:
            raise VerifyException(
                f"'nvgpu.fragment_store_columns' stores a wgmma_col fragment of the "
                f"descriptor's element type {desc.element_type}, got {frag}"
            )
        block = desc.get_block_shape()
        if any(d != 1 for d in block[:-1]) or block[-1] != frag.get_shape()[0]:
            raise VerifyException(
                f"'nvgpu.fragment_store_columns' needs a block of one row of "
                f"{frag.get_shape()[0]} elements, got {desc}"
            )
        if isinstance(frag.element_type, FP8_TYPES):
            raise VerifyException("'nvgpu.fragment_store_columns' stores f32, f16 or bf16")
        verify_offsets(self, desc, self.offsets)
