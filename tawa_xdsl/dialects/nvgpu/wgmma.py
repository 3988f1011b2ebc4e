"""wgmma: the asynchronous matrix multiply of a warpgroup, its fences and groups (§4)."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    I32,
    I64,
    DenseArrayBase,
    Float32Type,
    IntegerAttr,
    UnitAttr,
    i32,
)
from xdsl.ir import Attribute, SSAValue
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
)
from xdsl.utils.exceptions import VerifyException

from tawa_xdsl.dialects.nvgpu.hardware import WARPGROUP_ROWS
from tawa_xdsl.dialects.nvgpu.types import (
    FP8_TYPES,
    FragmentLayout,
    FragmentType,
    SmemType,
    fragment_type,
    mma_k,
    operand_a_layout,
    smem_type,
    verify_slot,
)
from tawa_xdsl.dialects.tile import (
    MMA_INPUT_TYPES,
    format_shape,
)

# The swizzle code of a wgmma smem descriptor, bits 62..63 (not the TMA enum: 128B is 1 here).
DESCRIPTOR_LAYOUT_CODE = {128: 1, 64: 2, 32: 3}
DESCRIPTOR_UNIT = 16  # descriptor addresses and offsets count 16-byte units (§4.3)


def k_major_descriptor_bits(swizzle: int) -> int:
    """The constant bits of a K-major smem descriptor for `swizzle`-byte rows (§4.3): LBO = 1
    (unused for swizzled K-major), SBO = 8 rows of the swizzle span, base offset 0."""
    if swizzle not in DESCRIPTOR_LAYOUT_CODE:
        raise ValueError(f"wgmma descriptors need a 32, 64 or 128-byte swizzle, got {swizzle}")
    sbo = 8 * swizzle
    return (DESCRIPTOR_LAYOUT_CODE[swizzle] << 62) | ((sbo >> 4) << 32) | (1 << 16)


def mn_major_descriptor_bits(swizzle: int, slab_bytes: int) -> int:
    """The constant bits of an MN-major (`tB = 1`) descriptor: SBO = 8 K-rows of the span,
    LBO = the distance between 64-element MN slabs (§4.3)."""
    if swizzle not in DESCRIPTOR_LAYOUT_CODE:
        raise ValueError(f"wgmma descriptors need a 32, 64 or 128-byte swizzle, got {swizzle}")
    return (
        (DESCRIPTOR_LAYOUT_CODE[swizzle] << 62)
        | (((8 * swizzle) >> 4) << 32)
        | (((slab_bytes >> 4) & 0x3FFF) << 16)
    )


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
    acc, b = fragment_type(acc_value), smem_type(b_buf)
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
    verify_slot(op, b_slot, b.slot_count, "B")


def descriptor_bits(buf: SmemType, mn_major: bool) -> int:
    """The constant descriptor bits that describe a slot of `buf` (§4.3): its swizzle, SBO and,
    MN-major, the LBO between its 64-element column slabs."""
    if mn_major:
        return mn_major_descriptor_bits(buf.swizzle_bytes, buf.slab_pitch())
    return k_major_descriptor_bits(buf.swizzle_bytes)


def verify_descriptor_plan(
    op: IRDLOperation,
    operand: str,
    bits: IntegerAttr | None,
    steps: DenseArrayBase | None,
    instructions: int,
    buf: SmemType,
    mn_major: bool,
) -> None:
    """A descriptor plan (written by legalize-nvgpu) has its constant bits, which describe the
    operand's slot, and one step per wgmma instruction, or is absent."""
    if (bits is None) != (steps is None):
        raise VerifyException(
            f"'{op.name}' needs both {operand}_desc_bits and {operand}_desc_steps, or neither"
        )
    if steps is not None and len(steps.get_values()) != instructions:
        raise VerifyException(
            f"'{op.name}' {operand}_desc_steps needs one step per wgmma instruction "
            f"({instructions}), got {len(steps.get_values())}"
        )
    if bits is None:
        return
    got = bits.value.data & (2**64 - 1)  # an i64 attribute holds the bits signed
    expected = (
        descriptor_bits(buf, mn_major) if buf.swizzle_bytes in DESCRIPTOR_LAYOUT_CODE else None
    )
    if got != expected:
        want = "none (unswizzled)" if expected is None else f"0x{expected:016X}"
        raise VerifyException(
            f"'{op.name}' {operand}_desc_bits 0x{got:016X} do not describe a slot of {buf} "
            f"(swizzle, SBO, LBO): expected {want}"
        )


def instruction_count(rows: int, k: int, element_type: Attribute) -> tuple[int, int]:
    """(64-row blocks, k steps) of the wgmma instructions of one op: M/64 x K/mma_k."""
    return rows // WARPGROUP_ROWS, k // mma_k(element_type)


@irdl_op_definition
class WgmmaMmaAsyncOp(IRDLOperation):
    """`result = acc + A @ B` over a whole K slice, A and B from smem slots: K/16 (fp8: K/32)
    times M/64 `wgmma.mma_async.sync.aligned.m64nNk16` instructions on smem descriptors.

    A's slot is MxK (K-major), or with `transpose_a` KxM (M-major, PTX tA = 1; 16-bit inputs
    only); with an offset `a_row`, this warpgroup uses the M rows of A from `a_row` on (slot
    rows, or slot columns when transposed: cooperative consumers split one A tile). B's slot
    is NxK
    (K-major, PTX tB = 0), or with `transpose_b` KxN (N-major, tB = 1). The result is valid
    after a `nvgpu.wgmma_wait_group` covering it.

    Descriptor plan (`legalize-nvgpu`): `x_desc_bits` are the constant bits of operand x's
    smem descriptor (everything but the start address) and `x_desc_steps` the encoded
    (16-byte) offset added to it for each instruction, block-major (A: M/64 x K/k entries;
    B: K/k entries, the same for every block). With `a_row`, `a_row_pitch` is the bytes A's
    start address moves per row of M: a slot row (the swizzle span) when K-major, when
    M-major 1/64 of a 64-column slab (`K * span / 64`: `a_row` is a multiple of 64)."""

    name = "nvgpu.wgmma_mma_async"

    ACC: ClassVar = VarConstraint("ACC", base(FragmentType))
    a_buf = operand_def(SmemType)
    a_slot = operand_def(i32)
    a_row = opt_operand_def(i32)
    b_buf = operand_def(SmemType)
    b_slot = operand_def(i32)
    acc = operand_def(ACC)
    result = result_def(ACC)
    transpose_a = opt_prop_def(UnitAttr)
    transpose_b = opt_prop_def(UnitAttr)
    a_desc_bits = opt_prop_def(IntegerAttr[I64])
    a_desc_steps = opt_prop_def(DenseArrayBase)
    b_desc_bits = opt_prop_def(IntegerAttr[I64])
    b_desc_steps = opt_prop_def(DenseArrayBase)
    a_row_pitch = opt_prop_def(IntegerAttr[I32])

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$a_buf `[` $a_slot (`,` $a_row^)? `]` (`transpose_a` $transpose_a^)? `,` $b_buf "
        "`[` $b_slot `]` `,` $acc (`transpose_b` $transpose_b^)? attr-dict `:` type($a_buf) "
        "`,` type($b_buf) `,` type($acc)"
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
        transpose_a: bool = False,
        transpose_b: bool = False,
    ):
        flags = {"transpose_a": transpose_a, "transpose_b": transpose_b}
        super().__init__(
            operands=[a_buf, a_slot, [a_row] if a_row else [], b_buf, b_slot, acc],
            properties={name: UnitAttr() for name, on in flags.items() if on},
            result_types=[acc.type],
        )

    def verify_(self) -> None:
        a, acc = smem_type(self.a_buf), fragment_type(self.acc)
        if len(a.slot_shape) != 2:
            raise VerifyException(f"'nvgpu.wgmma_mma_async' A slots must be 2-D, got {a}")
        if self.transpose_a is not None and isinstance(a.element_type, FP8_TYPES):
            raise VerifyException(
                "'nvgpu.wgmma_mma_async' transpose_a is not available for fp8 inputs (A must "
                "be K-major)"
            )
        a_m, k = a.slot_shape[::-1] if self.transpose_a is not None else a.slot_shape
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
        verify_slot(self, self.a_slot, a.slot_count, "A")
        blocks, steps = self.instructions()
        transpose_a, transpose_b = self.transpose_a is not None, self.transpose_b is not None
        a_bits, a_steps = self.a_desc_bits, self.a_desc_steps
        verify_descriptor_plan(self, "a", a_bits, a_steps, blocks * steps, a, transpose_a)
        b_bits, b_steps, b = self.b_desc_bits, self.b_desc_steps, smem_type(self.b_buf)
        verify_descriptor_plan(self, "b", b_bits, b_steps, steps, b, transpose_b)
        self.verify_row_pitch(a)

    def expected_row_pitch(self) -> int:
        """Bytes per row of M from A's slot start: see the op's docstring."""
        a = smem_type(self.a_buf)
        if self.transpose_a is not None:
            return a.slot_rows() * a.swizzle_bytes // WARPGROUP_ROWS
        return a.swizzle_bytes

    def verify_row_pitch(self, a: SmemType) -> None:
        planned = self.a_desc_bits is not None and self.a_row is not None
        if planned != (self.a_row_pitch is not None):
            raise VerifyException(
                f"'{self.name}' needs a_row_pitch exactly when it has an a_row and a "
                "descriptor plan"
            )
        if self.a_row_pitch is not None and self.a_row_pitch.value.data != (
            expected := self.expected_row_pitch()
        ):
            raise VerifyException(
                f"'{self.name}' a_row_pitch must be {expected} bytes per row of M for a slot of "
                f"{a}, got {self.a_row_pitch.value.data}"
            )

    def instructions(self) -> tuple[int, int]:
        """(64-row blocks, k steps) of the instructions this op prints."""
        a = smem_type(self.a_buf)
        k = a.slot_shape[0] if self.transpose_a is not None else a.slot_shape[1]
        return instruction_count(fragment_type(self.acc).get_shape()[0], k, a.element_type)


@irdl_op_definition
class WgmmaMmaAsyncRsOp(IRDLOperation):
    """`result = acc + A @ B` over a whole K slice, A from registers (a wgmma_operand_a
    fragment), B from an smem slot: K/16 times M/64
    `wgmma.mma_async.sync.aligned.m64nNk16` instructions with `{a0, a1, a2, a3}` operands.

    B and its descriptor plan (`b_desc_bits`, `b_desc_steps`) are as in
    `nvgpu.wgmma_mma_async`."""

    name = "nvgpu.wgmma_mma_async_rs"

    ACC: ClassVar = VarConstraint("ACC", base(FragmentType))
    a = operand_def(FragmentType)
    b_buf = operand_def(SmemType)
    b_slot = operand_def(i32)
    acc = operand_def(ACC)
    result = result_def(ACC)
    transpose_b = opt_prop_def(UnitAttr)
    b_desc_bits = opt_prop_def(IntegerAttr[I64])
    b_desc_steps = opt_prop_def(DenseArrayBase)

    irdl_options = (ParsePropInAttrDict(),)
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
        a = fragment_type(self.a)
        wanted = operand_a_layout(a.element_type)
        if a.kind != wanted:
            raise VerifyException(
                f"'nvgpu.wgmma_mma_async_rs' A of {a.element_type} must be a {wanted} "
                f"fragment, got {a}"
            )
        m, k = a.get_shape()
        _verify_wgmma(
            self, a.element_type, m, k, self.b_buf, self.b_slot, self.acc, bool(self.transpose_b)
        )
        _, steps = self.instructions()
        b_bits, b_steps, b = self.b_desc_bits, self.b_desc_steps, smem_type(self.b_buf)
        verify_descriptor_plan(self, "b", b_bits, b_steps, steps, b, self.transpose_b is not None)

    def instructions(self) -> tuple[int, int]:
        """(64-row blocks, k steps) of the instructions this op prints."""
        m, k = fragment_type(self.a).get_shape()
        return instruction_count(m, k, fragment_type(self.a).element_type)
