"""The kernel printer: params, smem placement, registers, constants and control flow.

`KernelPrinter` walks one legalized nvgpu-level kernel and hands each op to the handler that
the registry (`Handlers`: op class -> function) names for its class; the op families
(`mbarrier`, `tma`, `wgmma`, `threads`, `fragment`) each register theirs, and this module
registers arith, scf and func. The printer only prints: every SSA value becomes PTX virtual
registers (a fragment becomes one register per 32 bits it holds), every op becomes the
instructions its docstring names, and ptxas allocates the real registers. Anything above the
nvgpu level (tensor values, aref ops) is refused with an error naming the op: run
`lower-to-nvgpu` first. What the printer needs decided (smem offsets and slot strides, wgmma
descriptors, TMA boxes, mask branches, store and address plans) is written into the IR by
`legalize-nvgpu`; an op without it is refused too.

Input contract (what `lower-to-nvgpu` produces):

* one `func.func` per kernel, with the discardable attribute `nvgpu.threads` (the CTA size);
* arguments `!tile.desc<...>` (a tensor map plus pointer, dims and row stride; see
  `kernel_params`), `i32` and `f32` scalars;
* smem comes from `nvgpu.smem_alloc` / `nvgpu.mbarrier_alloc` (their placement read by
  `SmemPlan`; every slot address is `base + slot * stride`, `KernelPrinter.slot_addr`);
* loops are `scf.for` on i32; single-thread work is guarded explicitly (`scf.if`).

Loop-carried values share registers with their loop's block arguments whenever the value is
dead after the update (`coalesce`), so a wgmma accumulates in place and a loop carries its
accumulator without a single copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from tawa_xdsl.backend.ptx import KernelText, Param, PtxBuilder, Reg, f32_hex, udiv_magic
from tawa_xdsl.dialects import nvgpu, tile
from tawa_xdsl.dialects.nvgpu import (
    MBARRIER_BYTES,
    SMEM_ALIGN,
    THREADS_ATTR,
    WARPGROUP_THREADS,
    FragmentLayout,
    FragmentType,
    MBarrierType,
    SmemType,
    ctas_per_sm,
)
from tawa_xdsl.dialects.tile import DescType

OpT = TypeVar("OpT", bound=Operation)
Handler = Callable[["KernelPrinter", Any], None]


class EmitError(ValueError):
    """The IR is not at the level emit-ptx prints, or uses a form it does not support."""


def fail(op: Operation, message: str) -> EmitError:
    """The one-line error for an op emit-ptx cannot print."""
    return EmitError(f"emit-ptx: '{op.name}' {message}")


class Handlers:
    """The registry of the printer: op class -> the function that prints an op of it."""

    def __init__(self) -> None:
        self.table: dict[type[Operation], Handler] = {}

    def on(
        self, *op_types: type[OpT]
    ) -> Callable[[Callable[[KernelPrinter, OpT], None]], Callable[[KernelPrinter, OpT], None]]:
        """Register the decorated function as the handler of `op_types`."""

        def register(
            handler: Callable[[KernelPrinter, OpT], None],
        ) -> Callable[[KernelPrinter, OpT], None]:
            for op_type in op_types:
                if op_type in self.table:
                    raise ValueError(f"emit-ptx: two handlers for {op_type.name}")
                self.table[op_type] = handler
            return handler

        return register

    def merged(self, *others: Handlers) -> Handlers:
        """One registry holding this one's handlers and those of `others`."""
        out = Handlers()
        for registry in (self, *others):
            for op_type, handler in registry.table.items():
                out.on(op_type)(handler)
        return out


# ------------------------------------------------------------------------ kernel params


@dataclass(frozen=True)
class KernelParam:
    """One `.param` of the kernel and the host value it carries.

    `field` says what of argument `arg` it is: "value" for scalars; for a descriptor
    "tensormap" (the 128-byte CUtensorMap), "ptr" (global address), "dim{d}" (extent of dim d,
    outermost first) or "stride{d}" (elements between consecutive indices of dim d, for every
    dim but the innermost, which is contiguous)."""

    name: str
    ptx_type: str
    arg: int
    field: str


def arg_name(arg: BlockArgument) -> str:
    hint = arg.name_hint or f"arg{arg.index}"
    return "".join(c if c.isalnum() or c == "_" else "_" for c in hint)


def kernel_params(kernel: func.FuncOp) -> list[KernelParam]:
    """The kernel's `.param` list, in order, derived from its argument types."""
    params: list[KernelParam] = []
    for arg in kernel.body.block.args:
        name, ty = arg_name(arg), arg.type
        if isinstance(ty, DescType):
            params.append(KernelParam(f"{name}_tmap", "tensormap", arg.index, "tensormap"))
            params.append(KernelParam(f"{name}_ptr", "u64", arg.index, "ptr"))
            params += [
                KernelParam(f"{name}_dim{d}", "u32", arg.index, f"dim{d}") for d in range(ty.rank)
            ]
            params += [
                KernelParam(f"{name}_stride{d}", "u32", arg.index, f"stride{d}")
                for d in range(ty.rank - 1)
            ]
        elif isinstance(ty, IntegerType) and ty.width.data == 32:
            params.append(KernelParam(name, "u32", arg.index, "value"))
        elif isinstance(ty, Float32Type):
            params.append(KernelParam(name, "f32", arg.index, "value"))
        else:
            raise EmitError(f"emit-ptx: kernel argument {name} has unsupported type {ty}")
    return params


# ------------------------------------------------------------------------- smem planning


@dataclass
class SmemPlan:
    """Offsets and slot strides of every buffer and barrier array in the dynamic smem window,
    as `legalize-nvgpu` placed them (the `offset` and `slot_stride` of each `smem_alloc`;
    barriers are 8 bytes apart).

    The kernel aligns the window base by hand, so the launch must pass `bytes` (which includes
    1 KiB of slack)."""

    offsets: dict[SSAValue, int] = field(default_factory=dict)
    strides: dict[SSAValue, int] = field(default_factory=dict)
    end: int = 0

    @staticmethod
    def of(kernel: func.FuncOp) -> SmemPlan:
        plan = SmemPlan()
        for op in kernel.walk():
            if isinstance(op, nvgpu.SmemAllocOp | nvgpu.MBarrierAllocOp):
                stride = op.slot_stride if isinstance(op, nvgpu.SmemAllocOp) else MBARRIER_BYTES
                if op.offset is None or stride is None:
                    raise fail(op, "has no smem offset; run legalize-nvgpu first")
                offset, result = op.offset.value.data, op.results[0]
                plan.offsets[result] = offset
                plan.strides[result] = stride if isinstance(stride, int) else stride.value.data
                plan.end = max(plan.end, offset + op.placed_bytes())
        return plan

    @property
    def bytes(self) -> int:
        return self.end + SMEM_ALIGN


# --------------------------------------------------------------------------- coalescing


def _single_use(value: SSAValue) -> bool:
    return value.has_one_use()


def _ancestor_in(block: Block, op: Operation) -> Operation | None:
    """The op of `block` that is or contains `op`."""
    current: Operation | None = op
    while current is not None and current.parent_block() is not block:
        current = current.parent_op()
    return current


def _dead_after(value: SSAValue, point: Operation) -> bool:
    """Every use of `value` is at or before `point` (both in `point`'s block)."""
    block = point.parent_block()
    assert block is not None
    index = {op: i for i, op in enumerate(block.ops)}
    for use in value.uses:
        user = _ancestor_in(block, use.operation)
        if user is None or index[user] > index[point]:
            return False
    return True


def _walk_outside_loops(block: Block) -> Iterator[Operation]:
    """The ops of `block` and of the branches nested in it, not those of nested loops."""
    for op in block.ops:
        yield op
        if not isinstance(op, scf.ForOp):
            for region in op.regions:
                for inner in region.blocks:
                    yield from _walk_outside_loops(inner)


def _accumulator(undef: nvgpu.FragmentUndefOp) -> bool:
    ty = undef.result.type
    return isinstance(ty, FragmentType) and ty.kind == FragmentLayout.WGMMA_ACC


class Coalescer:
    """Union-find over values that may share registers (see the module docstring)."""

    def __init__(self, kernel: func.FuncOp):
        self.parent: dict[SSAValue, SSAValue] = {}
        for op in kernel.walk():
            if isinstance(op, scf.ForOp):
                self._for(op)
            elif isinstance(op, scf.IfOp):
                self._if(op)
            elif isinstance(op, nvgpu.WgmmaMmaAsyncOp | nvgpu.WgmmaMmaAsyncRsOp):
                if _single_use(op.acc):
                    self.union(op.acc, op.result)

    def _for(self, op: scf.ForOp) -> None:
        body = op.body.block
        yield_op = body.last_op
        assert isinstance(yield_op, scf.YieldOp)
        for i, (init, result) in enumerate(zip(op.iter_args, op.results, strict=True)):
            arg = body.args[i + 1]
            self.union(arg, result)
            if _single_use(init) and list(op.iter_args).count(init) == 1:
                self.union(init, arg)
            new = yield_op.operands[i]
            if (
                isinstance(new.owner, Operation)
                and new.owner.parent_block() is body
                and _single_use(new)
                and _dead_after(arg, new.owner)
            ):
                self.union(new, arg)

    def _if(self, op: scf.IfOp) -> None:
        """A result shares the registers of what each branch yields when that value is made in
        the branch and used only there: no copy at the join, so a wgmma may still be writing
        the result's registers when the branch ends (the attention lookahead)."""
        for region in op.regions:
            for block in region.blocks:
                yield_op = block.last_op
                if not isinstance(yield_op, scf.YieldOp):
                    continue
                for new, result in zip(yield_op.operands, op.results, strict=True):
                    owner = new.owner
                    if (
                        isinstance(new.type, FragmentType)
                        and isinstance(owner, Operation)
                        and owner.parent_block() is block
                        and _single_use(new)
                    ):
                        self.union(result, new)

    def find(self, value: SSAValue) -> SSAValue:
        root = value
        while root in self.parent:
            root = self.parent[root]
        return root

    def union(self, a: SSAValue, b: SSAValue) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[rb] = ra


# ------------------------------------------------------------------------------ printer


CMP = {
    "eq": ("eq", "s32"), "ne": ("ne", "s32"), "slt": ("lt", "s32"), "sle": ("le", "s32"),
    "sgt": ("gt", "s32"), "sge": ("ge", "s32"), "ult": ("lo", "u32"), "ule": ("ls", "u32"),
    "ugt": ("hi", "u32"), "uge": ("hs", "u32"),
}  # fmt: skip
CMPI_NAMES = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]

# arith binary op -> (i32 mnemonic, i1 mnemonic or None)
INT_BINARY: dict[type[Operation], tuple[str, str | None]] = {
    arith.AddiOp: ("add.s32", None),
    arith.SubiOp: ("sub.s32", None),
    arith.MuliOp: ("mul.lo.s32", None),
    arith.DivSIOp: ("div.s32", None),
    arith.DivUIOp: ("div.u32", None),
    arith.RemSIOp: ("rem.s32", None),
    arith.RemUIOp: ("rem.u32", None),
    arith.MinSIOp: ("min.s32", None),
    arith.MaxSIOp: ("max.s32", None),
    arith.MinUIOp: ("min.u32", None),
    arith.MaxUIOp: ("max.u32", None),
    arith.AndIOp: ("and.b32", "and.pred"),
    arith.OrIOp: ("or.b32", "or.pred"),
    arith.XOrIOp: ("xor.b32", "xor.pred"),
    arith.ShLIOp: ("shl.b32", None),
    arith.ShRSIOp: ("shr.s32", None),
    arith.ShRUIOp: ("shr.u32", None),
}
FLOAT_BINARY: dict[type[Operation], str] = {
    arith.AddfOp: "add.f32",
    arith.SubfOp: "sub.f32",
    arith.MulfOp: "mul.f32",
    arith.DivfOp: "div.rn.f32",
    arith.MaximumfOp: "max.NaN.f32",
    arith.MaxnumfOp: "max.f32",
    arith.MinimumfOp: "min.NaN.f32",
    arith.MinnumfOp: "min.f32",
}
FRAGMENT_BINARY = {
    nvgpu.BinaryKind.ADD: "add.f32",
    nvgpu.BinaryKind.SUB: "sub.f32",
    nvgpu.BinaryKind.MUL: "mul.f32",
    nvgpu.BinaryKind.DIV: "div.rn.f32",
    nvgpu.BinaryKind.MAX: "max.f32",
    nvgpu.BinaryKind.MIN: "min.f32",
}


def _reg_class(ty: Attribute) -> str:
    if isinstance(ty, IntegerType):
        return {1: "pred", 16: "b16", 32: "b32", 64: "b64"}[ty.width.data]
    if isinstance(ty, IndexType | SmemType | MBarrierType):
        return "b32"  # smem buffers and barriers are 32-bit shared-window addresses
    if isinstance(ty, Float32Type):
        return "f32"
    if isinstance(ty, Float16Type | BFloat16Type):
        return "b16"
    raise EmitError(f"emit-ptx: no PTX register class for type {ty}")


def half_name(ty: Attribute) -> str:
    """The PTX type of a 16-bit float element: `f16` or `bf16`."""
    if isinstance(ty, BFloat16Type):
        return "bf16"
    if isinstance(ty, Float16Type):
        return "f16"
    raise EmitError(f"emit-ptx: expected an f16 or bf16 element type, got {ty}")


def frag_type(value: SSAValue) -> FragmentType:
    """The fragment type of `value` (the dialect verified it)."""
    assert isinstance(value.type, FragmentType)
    return value.type


def fragment_role(ty: FragmentType) -> str:
    """Register names tell accumulators (`%acc_f32_7`) from other fragments (`%frag_b32_3`)."""
    return "acc" if ty.kind == FragmentLayout.WGMMA_ACC and not packed(ty) else "frag"


def packed(ty: FragmentType) -> bool:
    """Whether two values share one 32-bit register (16-bit elements)."""
    return not isinstance(ty.element_type, Float32Type)


Values = Reg | list[Reg]


class KernelPrinter:
    """Prints one kernel. `print()` returns the PTX text of the whole module entry."""

    def __init__(self, kernel: func.FuncOp, handlers: Handlers):
        self.kernel = kernel
        self.b = PtxBuilder()
        self.values: dict[SSAValue, Values] = {}
        self.consts: dict[SSAValue, int | float] = {}
        self.coalesce = Coalescer(kernel)
        self.smem = SmemPlan.of(kernel)
        self.params = kernel_params(kernel)
        self.tmaps: dict[SSAValue, Reg] = {}
        self.smem_base: Reg | None = None
        self.handlers = handlers

    # ----------------------------------------------------------------- values

    def regs_for(self, value: SSAValue, role: str = "") -> Values:
        """The registers of `value`, allocated on first request (shared by coalesced values)."""
        if value in self.values:
            return self.values[value]
        root = self.coalesce.find(value)
        if root in self.values:
            regs = self.values[root]
        elif isinstance(value.type, FragmentType):
            regs = self.fragment_regs(value.type, role or fragment_role(value.type))
        else:
            regs = self.b.new(_reg_class(value.type), role)
        self.values[value] = self.values[root] = regs
        return regs

    def fragment_regs(self, ty: FragmentType, role: str) -> list[Reg]:
        cls = "b32" if packed(ty) else "f32"
        count = ty.registers_per_thread() if packed(ty) else ty.values_per_thread()
        return [self.b.new(cls, role) for _ in range(count)]

    def reg(self, value: SSAValue) -> Reg:
        regs = self.regs_for(value)
        if isinstance(regs, list):
            raise EmitError(f"emit-ptx: expected a scalar, got {value.type}")
        return regs

    def frag(self, value: SSAValue) -> list[Reg]:
        regs = self.regs_for(value)
        if not isinstance(regs, list):
            raise EmitError(f"emit-ptx: expected a fragment, got {value.type}")
        return regs

    def operand(self, value: SSAValue) -> Reg | int:
        """An immediate for an integer constant (not i1), else the value's register."""
        const = self.consts.get(value)
        is_pred = isinstance(value.type, IntegerType) and value.type.width.data == 1
        if isinstance(const, int) and not is_pred:
            return const
        return self.reg(value)

    def addr_reg(self, addr: Reg | str) -> Reg:
        """An address operand (`%r` or `%r+imm`) in a register of its own."""
        out = self.b.new("b32")
        if isinstance(addr, str) and "+" in addr:
            base, offset = addr.split("+")
            self.b.binary("add.u32", out, base, offset)
        else:
            self.b.mov("b32", out, addr)
        return out

    def const_int(self, value: SSAValue) -> int | None:
        const = self.consts.get(value)
        return const if isinstance(const, int) else None

    def copy(self, dst: Values, src: Values) -> None:
        """dst = src, register by register (nothing for registers they share)."""
        if isinstance(dst, list):
            assert isinstance(src, list)
            for d, s in zip(dst, src, strict=True):
                if d != s:
                    self.b.mov("f32" if d.cls == "f32" else "b32", d, s)
        elif dst != src:
            assert isinstance(src, Reg)
            self.b.mov(dst.cls, dst, src)

    # ------------------------------------------------------------------ entry

    def print(self) -> str:
        threads = self.kernel.attributes.get(THREADS_ATTR)
        if not isinstance(threads, IntegerAttr):
            raise EmitError(
                f"emit-ptx: kernel @{self.kernel.sym_name.data} has no '{THREADS_ATTR}' "
                "attribute; run lower-to-nvgpu first"
            )
        self._prologue()
        self.block(self.kernel.body.block)
        uses_setmaxnreg = any(isinstance(op, nvgpu.SetMaxNRegOp) for op in self.kernel.walk())
        return KernelText(
            name=self.kernel.sym_name.data,
            params=[Param(p.name, p.ptx_type) for p in self.params],
            max_threads=threads.value.data,
            body=self.b,
            uses_setmaxnreg=uses_setmaxnreg,
            ctas_per_sm=ctas_per_sm(self.kernel),
        ).render()

    def _prologue(self) -> None:
        b = self.b
        if self.smem.offsets:
            base = self.smem_base = b.new("b32", "smem")
            b.comment("dynamic smem base, aligned to 1024 bytes by hand")
            b.mov("u32", base, "smem")
            b.binary("add.u32", base, base, SMEM_ALIGN - 1)
            b.binary("and.b32", base, base, -SMEM_ALIGN)
        for arg in self.kernel.body.block.args:
            name = arg_name(arg)
            if isinstance(arg.type, DescType):
                tmap = self.tmaps[arg] = b.new("b64", "tmap")
                b.comment(f"generic address of the tensor map of %{name}")
                b.mov("b64", tmap, f"{name}_tmap")
                b.emit(f"cvta.param.u64 {tmap}, {tmap}")
            else:
                reg = self.reg(arg)
                ptx_type = "f32" if isinstance(arg.type, Float32Type) else "u32"
                b.emit(f"ld.param.{ptx_type} {reg}, [{name}]")

    def block(self, block: Block) -> None:
        for op in block.ops:
            handler = self.handlers.table.get(type(op))
            if handler is None:
                raise fail(op, "is not at the nvgpu level; run lower-to-nvgpu first")
            handler(self, op)

    # ------------------------------------------------------------- arith, scf

    def constant(self, op: Operation) -> None:
        assert isinstance(op, arith.ConstantOp)
        value, result = op.value, op.result
        if isinstance(value, IntegerAttr):
            number = value.value.data
            self.consts[result] = number
            if isinstance(result.type, IntegerType) and result.type.width.data == 1:
                self.b.emit(f"setp.ne.u32 {self.reg(result)}, {number & 1}, 0")
            else:
                self.b.mov("b32", self.reg(result), number)
        elif isinstance(value, FloatAttr):
            number = float(value.value.data)
            self.consts[result] = number
            if not isinstance(result.type, Float32Type):
                raise fail(op, f"of type {result.type} is not supported (only f32 floats)")
            self.b.mov("f32", self.reg(result), f32_hex(number))
        else:
            raise fail(op, f"with value {value} is not supported")

    def int_binary(self, op: Operation) -> None:
        lhs, rhs, result = op.operands[0], op.operands[1], op.results[0]
        mnemonic, pred_mnemonic = INT_BINARY[type(op)]
        if isinstance(result.type, IntegerType) and result.type.width.data == 1:
            if pred_mnemonic is None:
                raise fail(op, "on i1 is not supported")
            self.b.binary(pred_mnemonic, self.reg(result), self.reg(lhs), self.reg(rhs))
            return
        divisor = self.const_int(rhs) if isinstance(op, arith.DivUIOp | arith.RemUIOp) else None
        if divisor is not None and divisor > 1 and divisor & (divisor - 1) == 0:
            self.udiv_by_power_of_two(op, divisor)
            return
        magic = udiv_magic(divisor) if divisor is not None else None
        if magic is not None:
            self.udiv_by_constant(op, divisor, *magic)
            return
        self.b.binary(mnemonic, self.reg(result), self.reg(lhs), self.operand(rhs))

    def udiv_by_power_of_two(self, op: Operation, divisor: int) -> None:
        """x / 2^k and x % 2^k as a shift and a mask: ptxas 13.0 kept div.u32 by 4 (a 4-deep
        ring's slot and phase) as a reciprocal on the MUFU unit inside the attention loop,
        6% more instructions than 3-deep rings (bench/NOTES.md, round 13)."""
        x, out = self.reg(op.operands[0]), self.reg(op.results[0])
        if isinstance(op, arith.DivUIOp):
            self.b.binary("shr.u32", out, x, divisor.bit_length() - 1)
        else:
            self.b.binary("and.b32", out, x, divisor - 1)

    def udiv_by_constant(self, op: Operation, divisor: int, magic: int, shift: int) -> None:
        """x / d and x % d for a constant d (a ring's slot and phase from its use counter)
        by a multiply-high: ptxas prints div.u32 by 3 as a reciprocal on the MUFU unit, ~18
        instructions of the attention loop per ring op."""
        x, out = self.reg(op.operands[0]), self.reg(op.results[0])
        quotient = out if isinstance(op, arith.DivUIOp) else self.b.new("b32")
        self.b.binary("mul.hi.u32", quotient, x, magic)
        self.b.binary("shr.u32", quotient, quotient, shift)
        if isinstance(op, arith.RemUIOp):
            self.b.emit(f"mad.lo.s32 {out}, {quotient}, {-divisor}, {x}")

    def float_binary(self, op: Operation) -> None:
        mnemonic = FLOAT_BINARY[type(op)]
        lhs, rhs, result = op.operands[0], op.operands[1], op.results[0]
        self.b.binary(mnemonic, self.reg(result), self.reg(lhs), self.reg(rhs))

    def ceildiv(self, op: Operation) -> None:
        """ceil(a / b) for a >= 0, b > 0 (tile counts): (a + b - 1) / b."""
        lhs, rhs, result = op.operands[0], op.operands[1], op.results[0]
        out = self.reg(result)
        self.b.binary("add.s32", out, self.reg(lhs), self.operand(rhs))
        self.b.binary("sub.s32", out, out, 1)
        self.b.binary("div.s32", out, out, self.operand(rhs))

    def cmpi(self, op: Operation) -> None:
        assert isinstance(op, arith.CmpiOp)
        cmp, ty = CMP[CMPI_NAMES[op.predicate.value.data]]
        self.b.setp(cmp, ty, self.reg(op.result), self.reg(op.lhs), self.operand(op.rhs))

    def select(self, op: Operation) -> None:
        assert isinstance(op, arith.SelectOp)
        out = self.reg(op.result)
        ty = {"b32": "b32", "f32": "f32", "b64": "b64"}.get(out.cls)
        if ty is None:
            raise fail(op, f"of {op.result.type} is not supported")
        self.b.selp(ty, out, self.operand(op.lhs), self.operand(op.rhs), self.reg(op.cond))

    def cast(self, op: Operation) -> None:
        self.b.mov("b32", self.reg(op.results[0]), self.reg(op.operands[0]))

    def sitofp(self, op: Operation) -> None:
        self.b.cvt("f32", "s32", self.reg(op.results[0]), self.reg(op.operands[0]), "rn")

    def grid_query(self, op: Operation, sreg: str) -> None:
        assert isinstance(op, tile.ProgramIdOp | tile.NumProgramsOp)
        axis = "xyz"[op.axis.value.data]
        self.b.special(self.reg(op.results[0]), f"{sreg}.{axis}")

    def for_(self, op: Operation) -> None:
        assert isinstance(op, scf.ForOp)
        b, body = self.b, op.body.block
        iv = self.reg(body.args[0])
        for init, arg in zip(op.iter_args, body.args[1:], strict=True):
            self.copy(
                self.regs_for(arg, "acc" if isinstance(arg.type, FragmentType) else ""),
                self.regs_for(init),
            )
        self._define_undefined(op)
        b.mov("b32", iv, self.operand(op.lb))
        head, end = b.new_label("for"), b.new_label("end_for")
        done = b.new("pred")
        b.label(head)
        b.setp("ge", "s32", done, iv, self.operand(op.ub))
        b.bra(end, pred=str(done))
        self.block(body)
        yield_op = body.last_op
        assert isinstance(yield_op, scf.YieldOp)
        self._parallel_copy(list(body.args[1:]), list(yield_op.operands))
        b.binary("add.s32", iv, iv, self.operand(op.step))
        b.bra(head, uni=True)
        b.label(end)
        for result, arg in zip(op.results, body.args[1:], strict=True):
            self.values.setdefault(result, self.regs_for(arg))

    def _define_undefined(self, op: scf.ForOp) -> None:
        """Zero, in front of the loop, the registers of each undefined fragment of its body
        (outside nested loops) that the loop does not carry. Such a fragment is yielded on a
        path no one reads it on (the lookahead's last iteration), but ptxas cannot tell, so
        without a definition its registers are live into the loop; under a loop around this
        one (a persistent kernel's tile loop) they stay live across that loop's back edge, and
        ptxas spills and serializes every wgmma (C7512). In front of the loop nothing is in
        flight in them: they belong to no value the loop carries. (An undefined accumulator
        is zeroed in front of its branch instead, `_define_undefined_branches`.)"""
        body = op.body.block
        carried = {self.coalesce.find(arg) for arg in body.args[1:]}
        for inner in _walk_outside_loops(body):
            if isinstance(inner, nvgpu.FragmentUndefOp) and not _accumulator(inner):
                if self.coalesce.find(inner.result) not in carried:
                    self._zero(inner.result)

    def _define_undefined_branches(self, op: scf.IfOp) -> None:
        """Zero, in front of the branch, the registers of each undefined fragment a branch
        yields (the lookahead's else: no QK^T(j+1) in the last iteration). They are the
        registers the other branch's wgmma accumulates into, and left undefined on one path
        they hold the previous iteration's value for all ptxas knows: live around the loop's
        back edge, beside every copy made of them (the 192-row kernel's masked scores: 592
        bytes spilled at 160 registers). Zeroed in a branch, after the other branch's wgmma
        in the program text, they would be a write into an accumulator in flight (C7515).
        Not when a value the branches read from outside shares those registers."""
        inside = {id(o) for o in op.walk()}
        read = {
            self.coalesce.find(value)
            for inner in op.walk()
            for value in inner.operands
            if not (isinstance(value.owner, Operation) and id(value.owner) in inside)
        }
        for region in op.regions:
            for block in region.blocks:
                for inner in _walk_outside_loops(block):
                    if (
                        isinstance(inner, nvgpu.FragmentUndefOp)
                        and _accumulator(inner)
                        and self.coalesce.find(inner.result) not in read
                    ):
                        self._zero(inner.result)

    def _zero(self, value: SSAValue) -> None:
        for reg in self.frag(value):
            self.b.mov(reg.cls, reg, f32_hex(0.0) if reg.cls == "f32" else "0")

    def _parallel_copy(self, dsts: Sequence[SSAValue], srcs: Sequence[SSAValue]) -> None:
        """dst_i = src_i for all i at once: through temporaries when a source is a destination."""
        dst_regs = [self.regs_for(d) for d in dsts]
        src_regs = [self.regs_for(s) for s in srcs]
        clobbered = any(s in dst_regs and dst_regs.index(s) != i for i, s in enumerate(src_regs))
        if clobbered:
            temps: list[Values] = []
            for s, src in zip(srcs, src_regs, strict=True):
                tmp = (
                    self.fragment_regs(frag_type(s), "tmp")
                    if isinstance(src, list)
                    else self.b.new(src.cls)
                )
                self.copy(tmp, src)
                temps.append(tmp)
            src_regs = temps
        for dst, src in zip(dst_regs, src_regs, strict=True):
            self.copy(dst, src)

    def if_(self, op: Operation) -> None:
        assert isinstance(op, scf.IfOp)
        b = self.b
        cond = self.reg(op.cond)
        self._define_undefined_branches(op)
        else_label, end = b.new_label("else"), b.new_label("end_if")
        has_else = bool(op.false_region.blocks)
        b.bra(else_label if has_else else end, pred=f"!{cond}")
        self._branch(op, op.true_region.block)
        if has_else:
            b.bra(end, uni=True)
            b.label(else_label)
            self._branch(op, op.false_region.block)
        b.label(end)

    def _branch(self, op: scf.IfOp, block: Block) -> None:
        self.block(block)
        yield_op = block.last_op
        if isinstance(yield_op, scf.YieldOp) and yield_op.operands:
            self._parallel_copy(list(op.results), list(yield_op.operands))

    # ------------------------------------------------------ shared by the families

    def slot_addr(self, base: SSAValue, slot: SSAValue) -> Reg | str:
        """`base + slot * stride` as an address operand (folded when the slot is constant),
        with the stride `legalize-nvgpu` placed the buffer's slots at."""
        stride = self.smem.strides.get(base)
        if stride is None:
            raise EmitError(f"emit-ptx: {base.type} is not the result of a placed allocation")
        index = self.const_int(slot)
        if index is not None:
            return f"{self.reg(base)}+{index * stride}" if index else str(self.reg(base))
        addr = self.b.new("b32")
        self.b.emit(f"mad.lo.u32 {addr}, {self.reg(slot)}, {stride}, {self.reg(base)}")
        return addr

    def lane_origin(self, ty: FragmentType) -> tuple[Reg, Reg]:
        """(row, col) of the thread's value 0 in fragment type `ty`, as registers: the
        layout's own origin formula, evaluated on `%tid.x & 127`."""
        tid = self.b.new("b32")
        self.b.special(tid, "%tid.x")
        self.b.binary("and.b32", tid, tid, WARPGROUP_THREADS - 1)
        return ty.layout_object.thread_origin(tid, PtxArith(self.b))

    def fragment_constant(self, value: SSAValue) -> Reg | str:
        """An f32 scalar operand: its hex immediate when it is a constant, else its register."""
        const = self.consts.get(value)
        return f32_hex(const) if isinstance(const, float) else self.reg(value)


class PtxArith:
    """`IndexArith` on registers: each operation prints one instruction into a new register."""

    def __init__(self, b: PtxBuilder):
        self.b = b

    def _op(self, mnemonic: str, x: Reg, y: Reg | int) -> Reg:
        out = self.b.new("b32")
        self.b.binary(mnemonic, out, x, y)
        return out

    def shr(self, x: Reg, bits: int) -> Reg:
        return self._op("shr.u32", x, bits)

    def shl(self, x: Reg, bits: int) -> Reg:
        return self._op("shl.b32", x, bits)

    def mask(self, x: Reg, bits: int) -> Reg:
        return self._op("and.b32", x, bits)

    def add(self, x: Reg, y: Reg) -> Reg:
        return self._op("add.u32", x, y)


# ------------------------------------------------------------------- arith, scf, func

CONTROL = Handlers()
CONTROL.on(arith.ConstantOp)(KernelPrinter.constant)
CONTROL.on(arith.CmpiOp)(KernelPrinter.cmpi)
CONTROL.on(arith.SelectOp)(KernelPrinter.select)
CONTROL.on(arith.IndexCastOp)(KernelPrinter.cast)
CONTROL.on(arith.CeilDivSIOp)(KernelPrinter.ceildiv)
CONTROL.on(arith.SIToFPOp)(KernelPrinter.sitofp)
CONTROL.on(*INT_BINARY)(KernelPrinter.int_binary)
CONTROL.on(*FLOAT_BINARY)(KernelPrinter.float_binary)
CONTROL.on(scf.ForOp)(KernelPrinter.for_)
CONTROL.on(scf.IfOp)(KernelPrinter.if_)
CONTROL.on(scf.YieldOp)(lambda p, op: None)  # printed by the parent op
CONTROL.on(func.ReturnOp)(lambda p, op: p.b.emit("ret"))
CONTROL.on(tile.ProgramIdOp)(lambda p, op: p.grid_query(op, "%ctaid"))
CONTROL.on(tile.NumProgramsOp)(lambda p, op: p.grid_query(op, "%nctaid"))
