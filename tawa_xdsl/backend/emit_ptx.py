"""emit-ptx: print an nvgpu-level kernel (nvgpu + arith/scf on scalars) as PTX text.

This module only prints: every SSA value becomes PTX virtual registers (a fragment becomes one
register per 32 bits it holds), every op becomes the instructions its docstring names, and
ptxas allocates the real registers. Anything above the nvgpu level (tensor values, aref ops)
is refused with an error naming the op: run `lower-to-nvgpu` first.

Input contract (what `lower-to-nvgpu` produces):

* one `func.func` per kernel, with the discardable attribute `nvgpu.threads` (the CTA size);
* arguments `!tile.desc<...>` (a tensor map plus pointer, dims and row stride; see
  `kernel_params`), `i32` and `f32` scalars;
* smem comes from `nvgpu.smem_alloc` / `nvgpu.mbarrier_alloc` (placed by `SmemPlan`);
* loops are `scf.for` on i32; single-thread work is guarded explicitly (`scf.if`).

Loop-carried values share registers with their loop's block arguments whenever the value is
dead after the update (`coalesce`), so a wgmma accumulates in place and a loop carries its
accumulator without a single copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from tawa_xdsl.backend.emit_attention import attention_handlers
from tawa_xdsl.backend.emit_epilogue import epilogue_handlers
from tawa_xdsl.backend.layout import WGMMA_ROW
from tawa_xdsl.backend.ptx import (
    KernelText,
    Param,
    PtxBuilder,
    Reg,
    f32_hex,
    wgmma_descriptor_constant,
)
from tawa_xdsl.dialects import nvgpu, tile
from tawa_xdsl.dialects.nvgpu import FragmentLayout, FragmentType, MBarrierType, SmemType
from tawa_xdsl.dialects.tile import DescType
from tawa_xdsl.transforms.smem_budget import SM90_MAX_SMEM_BYTES

THREADS_ATTR = "nvgpu.threads"
SMEM_ALIGN = 1024  # every buffer starts on the 128B-swizzle repeat (hopper-ptx.md §3.1)


class EmitError(ValueError):
    """The IR is not at the level emit-ptx prints, or uses a form it does not support."""


def _fail(op: Operation, message: str) -> EmitError:
    return EmitError(f"emit-ptx: '{op.name}' {message}")


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


def _arg_name(arg: BlockArgument) -> str:
    hint = arg.name_hint or f"arg{arg.index}"
    return "".join(c if c.isalnum() or c == "_" else "_" for c in hint)


def kernel_params(kernel: func.FuncOp) -> list[KernelParam]:
    """The kernel's `.param` list, in order, derived from its argument types."""
    params: list[KernelParam] = []
    for arg in kernel.body.block.args:
        name, ty = _arg_name(arg), arg.type
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
    """Offsets of every buffer and barrier array in the dynamic smem window.

    Buffers come first, each 1024-byte aligned; the 8-byte mbarriers follow. The kernel aligns
    the window base by hand, so the launch must pass `bytes` (which includes 1 KiB of slack)."""

    offsets: dict[SSAValue, int] = field(default_factory=dict)
    end: int = 0

    @staticmethod
    def of(kernel: func.FuncOp) -> SmemPlan:
        plan = SmemPlan()
        allocs = [op for op in kernel.walk() if isinstance(op, nvgpu.SmemAllocOp)]
        for op in allocs:
            ty = op.buf.type
            assert isinstance(ty, SmemType)
            plan.end = -(-plan.end // SMEM_ALIGN) * SMEM_ALIGN
            plan.offsets[op.buf] = plan.end
            plan.end += ty.slot_count * ty.slot_bytes()
        for op in kernel.walk():
            if isinstance(op, nvgpu.MBarrierAllocOp):
                assert isinstance(op.bars.type, MBarrierType)
                plan.end = -(-plan.end // 8) * 8
                plan.offsets[op.bars] = plan.end
                plan.end += 8 * op.bars.type.num_barriers
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


def _half_name(ty: Attribute) -> str:
    if isinstance(ty, BFloat16Type):
        return "bf16"
    if isinstance(ty, Float16Type):
        return "f16"
    raise EmitError(f"emit-ptx: expected an f16 or bf16 element type, got {ty}")


def _frag(value: SSAValue) -> FragmentType:
    assert isinstance(value.type, FragmentType)
    return value.type


def _fragment_role(ty: FragmentType) -> str:
    """Register names tell accumulators (`%acc_f32_7`) from other fragments (`%frag_b32_3`)."""
    return "acc" if ty.kind == FragmentLayout.WGMMA_ACC and not _packed(ty) else "frag"


def _packed(ty: FragmentType) -> bool:
    """Whether two values share one 32-bit register (16-bit elements)."""
    return not isinstance(ty.element_type, Float32Type)


Values = Reg | list[Reg]


class KernelPrinter:
    """Prints one kernel. `print()` returns the PTX text of the whole module entry."""

    def __init__(self, kernel: func.FuncOp):
        self.kernel = kernel
        self.b = PtxBuilder()
        self.values: dict[SSAValue, Values] = {}
        self.consts: dict[SSAValue, int | float] = {}
        self.coalesce = Coalescer(kernel)
        self.smem = SmemPlan.of(kernel)
        self.params = kernel_params(kernel)
        self.tmaps: dict[SSAValue, Reg] = {}
        self.smem_base: Reg | None = None
        self.dispatch: dict[type[Operation], Callable[[Operation], None]] = self._table()

    # ----------------------------------------------------------------- values

    def regs_for(self, value: SSAValue, role: str = "") -> Values:
        """The registers of `value`, allocated on first request (shared by coalesced values)."""
        if value in self.values:
            return self.values[value]
        root = self.coalesce.find(value)
        if root in self.values:
            regs = self.values[root]
        elif isinstance(value.type, FragmentType):
            regs = self._fragment_regs(value.type, role or _fragment_role(value.type))
        else:
            regs = self.b.new(_reg_class(value.type), role)
        self.values[value] = self.values[root] = regs
        return regs

    def _fragment_regs(self, ty: FragmentType, role: str) -> list[Reg]:
        cls = "b32" if _packed(ty) else "f32"
        count = ty.registers_per_thread() if _packed(ty) else ty.values_per_thread()
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
            name = _arg_name(arg)
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
            handler = self.dispatch.get(type(op))
            if handler is None:
                raise _fail(op, "is not at the nvgpu level; run lower-to-nvgpu first")
            handler(op)

    def _table(self) -> dict[type[Operation], Callable[[Operation], None]]:
        table: dict[type[Operation], Callable[[Operation], None]] = {
            arith.ConstantOp: self.constant,
            arith.CmpiOp: self.cmpi,
            arith.SelectOp: self.select,
            arith.IndexCastOp: self.cast,
            arith.CeilDivSIOp: self.ceildiv,
            arith.SIToFPOp: self.sitofp,
            scf.ForOp: self.for_,
            scf.IfOp: self.if_,
            scf.YieldOp: lambda op: None,  # handled by the parent
            func.ReturnOp: lambda op: self.b.emit("ret"),
            tile.ProgramIdOp: lambda op: self.grid_query(op, "%ctaid"),
            tile.NumProgramsOp: lambda op: self.grid_query(op, "%nctaid"),
            nvgpu.SmemAllocOp: self.alloc,
            nvgpu.MBarrierAllocOp: self.alloc,
            nvgpu.MBarrierInitOp: self.mbarrier_init,
            nvgpu.MBarrierArriveOp: self.mbarrier_arrive,
            nvgpu.MBarrierArriveExpectTxOp: self.mbarrier_arrive_expect_tx,
            nvgpu.MBarrierWaitOp: self.mbarrier_wait,
            nvgpu.FenceMBarrierInitOp: lambda op: self.b.fence_mbarrier_init(),
            nvgpu.CtaBarrierOp: lambda op: self.b.bar_sync(0),
            nvgpu.TmaLoadOp: self.tma_load,
            nvgpu.TmaStoreOp: self.tma_store,
            nvgpu.TmaStoreCommitOp: lambda op: self.b.cp_async_bulk_commit_group(),
            nvgpu.TmaStoreWaitOp: self.tma_store_wait,
            nvgpu.FenceProxyAsyncOp: lambda op: self.b.fence_proxy_async(),
            nvgpu.WgmmaFenceOp: lambda op: self.b.wgmma_fence(),
            nvgpu.WgmmaCommitGroupOp: lambda op: self.b.wgmma_commit_group(),
            nvgpu.WgmmaWaitGroupOp: self.wgmma_wait_group,
            nvgpu.WgmmaMmaAsyncOp: self.wgmma_mma_async,
            nvgpu.SetMaxNRegOp: self.setmaxnreg,
            nvgpu.NamedBarrierSyncOp: self.named_barrier_sync,
            nvgpu.NamedBarrierArriveOp: lambda op: self.b.emit(
                f"bar.arrive {op.barrier_id.value.data}, {op.threads.value.data}"  # type: ignore[attr-defined]
            ),
            nvgpu.ElectSyncOp: lambda op: self.b.elect_sync(self.reg(op.results[0])),
            nvgpu.WarpgroupIndexOp: self.warpgroup_index,
            nvgpu.ThreadIndexOp: self.thread_index,
            nvgpu.FragmentSplatOp: self.fragment_splat,
            nvgpu.FragmentUndefOp: self.fragment_undef,
            nvgpu.FragmentBinaryOp: self.fragment_binary,
            nvgpu.FragmentUnaryOp: self.fragment_unary,
            nvgpu.FragmentConvertOp: self.fragment_convert,
            nvgpu.FragmentRowReduceOp: self.fragment_row_reduce,
            nvgpu.ShuffleXorOp: self.shuffle_xor,
            nvgpu.FragmentBroadcastRowsOp: self.fragment_broadcast_rows,
            nvgpu.FragmentStoreOp: self.fragment_store,
            nvgpu.FragmentStoreGlobalOp: self.fragment_store_global,
        }
        for cls in INT_BINARY:
            table[cls] = self.int_binary
        for cls in FLOAT_BINARY:
            table[cls] = self.float_binary
        table.update(attention_handlers(self, dict(table)))  # slabs, RS wgmma, masks, rank 3
        table.update(epilogue_handlers(self))  # selects, bias columns
        return table

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
                raise _fail(op, f"of type {result.type} is not supported (only f32 floats)")
            self.b.mov("f32", self.reg(result), f32_hex(number))
        else:
            raise _fail(op, f"with value {value} is not supported")

    def int_binary(self, op: Operation) -> None:
        lhs, rhs, result = op.operands[0], op.operands[1], op.results[0]
        mnemonic, pred_mnemonic = INT_BINARY[type(op)]
        if isinstance(result.type, IntegerType) and result.type.width.data == 1:
            if pred_mnemonic is None:
                raise _fail(op, "on i1 is not supported")
            self.b.binary(pred_mnemonic, self.reg(result), self.reg(lhs), self.reg(rhs))
            return
        self.b.binary(mnemonic, self.reg(result), self.reg(lhs), self.operand(rhs))

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
            raise _fail(op, f"of {op.result.type} is not supported")
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

    def _parallel_copy(self, dsts: Sequence[SSAValue], srcs: Sequence[SSAValue]) -> None:
        """dst_i = src_i for all i at once: through temporaries when a source is a destination."""
        dst_regs = [self.regs_for(d) for d in dsts]
        src_regs = [self.regs_for(s) for s in srcs]
        clobbered = any(s in dst_regs and dst_regs.index(s) != i for i, s in enumerate(src_regs))
        if clobbered:
            temps: list[Values] = []
            for s, src in zip(srcs, src_regs, strict=True):
                tmp = (
                    self._fragment_regs(_frag(s), "tmp")
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

    # -------------------------------------------------------------- mbarriers

    def alloc(self, op: Operation) -> None:
        result = op.results[0]
        assert self.smem_base is not None
        self.b.binary("add.u32", self.reg(result), self.smem_base, self.smem.offsets[result])

    def _slot_addr(self, base: SSAValue, slot: SSAValue, stride: int) -> Reg | str:
        """`base + slot * stride` as an address operand (folded when the slot is constant)."""
        index = self.const_int(slot)
        if index is not None:
            return f"{self.reg(base)}+{index * stride}" if index else str(self.reg(base))
        addr = self.b.new("b32")
        self.b.emit(f"mad.lo.u32 {addr}, {self.reg(slot)}, {stride}, {self.reg(base)}")
        return addr

    def mbarrier_init(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.MBarrierInitOp) and isinstance(op.bars.type, MBarrierType)
        for i in range(op.bars.type.num_barriers):
            addr = f"{self.reg(op.bars)}+{8 * i}" if i else str(self.reg(op.bars))
            self.b.mbarrier_init(addr, op.count.value.data)

    def mbarrier_arrive(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.MBarrierArriveOp)
        self.b.mbarrier_arrive(self._slot_addr(op.bars, op.slot, 8))

    def mbarrier_arrive_expect_tx(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.MBarrierArriveExpectTxOp)
        self.b.mbarrier_arrive_expect_tx(
            self._slot_addr(op.bars, op.slot, 8), op.tx_bytes.value.data
        )

    def mbarrier_wait(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.MBarrierWaitOp)
        self.b.mbarrier_try_wait_parity(
            self._slot_addr(op.bars, op.slot, 8), self.operand(op.parity)
        )

    # -------------------------------------------------------------------- TMA

    def _check_tma_slot(self, op: Operation, buf: SmemType) -> None:
        row_bytes = buf.slot_shape[-1] * nvgpu.element_bytes(buf.element_type)
        if buf.swizzle_bytes and row_bytes != buf.swizzle_bytes:
            raise _fail(
                op,
                f"needs slot rows of exactly the swizzle span ({buf.swizzle_bytes} bytes), got "
                f"{row_bytes}: one TMA box per slot",
            )

    def tma_load(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.TmaLoadOp) and isinstance(op.buf.type, SmemType)
        buf = op.buf.type
        self._check_tma_slot(op, buf)
        coords = [self.reg(o) for o in reversed(op.offsets)]  # innermost first
        dst = self._slot_addr(op.buf, op.slot, buf.slot_bytes())
        mbar = self._slot_addr(op.bars, op.bar_slot, 8)
        self.b.cp_async_bulk_tensor(dst, self.tmaps[op.desc], coords, mbar)

    def tma_store(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.TmaStoreOp) and isinstance(op.buf.type, SmemType)
        buf = op.buf.type
        self._check_tma_slot(op, buf)
        coords = [self.reg(o) for o in reversed(op.offsets)]
        src = self._slot_addr(op.buf, op.slot, buf.slot_bytes())
        self.b.cp_async_bulk_tensor_store(self.tmaps[op.desc], coords, src)

    def tma_store_wait(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.TmaStoreWaitOp)
        self.b.cp_async_bulk_wait_group_read(op.pending.value.data)

    # ------------------------------------------------------------------ wgmma

    def wgmma_wait_group(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.WgmmaWaitGroupOp)
        self.b.wgmma_wait_group(op.pending.value.data)

    def _descriptor(
        self, op: Operation, buf_value: SSAValue, slot: SSAValue, row: SSAValue | None
    ) -> Reg:
        """The smem descriptor of row `row` (or 0) of slot `slot` (hopper-ptx.md §4.3)."""
        buf = buf_value.type
        assert isinstance(buf, SmemType)
        row_bytes = buf.slot_shape[-1] * nvgpu.element_bytes(buf.element_type)
        if buf.swizzle_bytes == 0 or row_bytes != buf.swizzle_bytes:
            raise _fail(
                op,
                f"needs K-major slots whose rows are exactly the swizzle span, got {buf} "
                f"({row_bytes}-byte rows)",
            )
        b = self.b
        start = self.addr_reg(self._slot_addr(buf_value, slot, buf.slot_bytes()))
        if row is not None:
            b.emit(f"mad.lo.u32 {start}, {self.operand(row)}, {row_bytes}, {start}")
        b.binary("shr.u32", start, start, 4)
        b.binary("and.b32", start, start, 0x3FFF)
        desc = b.new("b64", "desc")
        b.cvt("u64", "u32", desc, start)
        b.binary("or.b64", desc, desc, f"0x{wgmma_descriptor_constant(buf.swizzle_bytes):016X}")
        return desc

    def wgmma_mma_async(self, op: Operation) -> None:
        """K/k x M/64 SS wgmmas; A advances 32 B (+2) per k16 step and 64 rows per block."""
        assert isinstance(op, nvgpu.WgmmaMmaAsyncOp)
        if op.transpose_b is not None:
            raise _fail(op, "with transpose_b is not supported by emit-ptx yet")
        a_buf, b_buf, acc_ty = op.a_buf.type, op.b_buf.type, _frag(op.acc)
        assert isinstance(a_buf, SmemType) and isinstance(b_buf, SmemType)
        et = a_buf.element_type
        rows, n = acc_ty.get_shape()
        k = a_buf.slot_shape[1]
        k_step = nvgpu.mma_k(et)
        step_bytes = k_step * nvgpu.element_bytes(et)
        ptx_et = {
            "f16": "f16", "bf16": "bf16", "f8E4M3FN": "e4m3", "f8E5M2": "e5m2"
        }[str(et)]  # fmt: skip
        fp8 = ptx_et in ("e4m3", "e5m2")
        ptx_bt = {"f16": "f16", "bf16": "bf16", "f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}[
            str(b_buf.element_type)
        ]
        acc_in = self.frag(op.acc)
        acc = self.frag(op.result)
        if acc is not acc_in:
            # Not coalesced: copy first (the wgmma below must read and write one register set).
            self.copy(acc, acc_in)
        desc_a = self._descriptor(op, op.a_buf, op.a_slot, op.a_row)
        desc_b = self._descriptor(op, op.b_buf, op.b_slot, None)
        per_block = n // 2
        row_bytes = a_buf.swizzle_bytes
        for block in range(rows // 64):
            for kk in range(k // k_step):
                da = self._desc_plus(desc_a, (block * 64 * row_bytes + kk * step_bytes) >> 4)
                db = self._desc_plus(desc_b, (kk * step_bytes) >> 4)
                self.b.wgmma_mma_async(
                    f"m64n{n}k{k_step}",
                    f"f32.{ptx_et}.{ptx_bt}",
                    acc[block * per_block : (block + 1) * per_block],
                    da,
                    db,
                    scale_d=1,
                    trans_a=None if fp8 else 0,
                    trans_b=None if fp8 else 0,
                )

    def _desc_plus(self, desc: Reg, delta: int) -> Reg:
        if delta == 0:
            return desc
        out = self.b.new("b64", "desc")
        self.b.binary("add.s64", out, desc, delta)
        return out

    # ----------------------------------------------------------- threads, regs

    def setmaxnreg(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.SetMaxNRegOp)
        action = "inc" if op.action.data == nvgpu.RegisterAction.INCREASE else "dec"
        self.b.setmaxnreg(action, op.registers.value.data)

    def named_barrier_sync(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.NamedBarrierSyncOp)
        self.b.bar_sync(op.barrier_id.value.data, op.threads.value.data)

    def warpgroup_index(self, op: Operation) -> None:
        out = self.reg(op.results[0])
        self.b.special(out, "%tid.x")
        self.b.binary("shr.u32", out, out, 7)

    def thread_index(self, op: Operation) -> None:
        out = self.reg(op.results[0])
        self.b.special(out, "%tid.x")
        self.b.binary("and.b32", out, out, 127)

    def _lane_coords(self) -> tuple[Reg, Reg]:
        """(row, col) of the thread's first accumulator value: (16w + l/4, 2(l & 3))."""
        b = self.b
        tid, row, col = b.new("b32"), b.new("b32"), b.new("b32")
        b.special(tid, "%tid.x")
        b.binary("and.b32", tid, tid, 127)
        b.binary("shr.u32", row, tid, 5)
        b.binary("shl.b32", row, row, 4)
        b.binary("and.b32", col, tid, 31)
        b.binary("shr.u32", tid, col, 2)
        b.binary("add.u32", row, row, tid)
        b.binary("and.b32", col, col, 3)
        b.binary("shl.b32", col, col, 1)
        return row, col

    # -------------------------------------------------------------- fragments

    def fragment_splat(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.FragmentSplatOp)
        ty = _frag(op.result)
        if _packed(ty):
            raise _fail(op, f"of 16-bit elements is not supported ({ty})")
        source = self.consts.get(op.value)
        src: Reg | str = f32_hex(source) if isinstance(source, float) else self.reg(op.value)
        for r in self.frag(op.result):
            self.b.mov("f32", r, src)

    def fragment_undef(self, op: Operation) -> None:
        self.frag(op.results[0])  # declared, never written

    def fragment_binary(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.FragmentBinaryOp)
        if _packed(_frag(op.result)):
            raise _fail(op, "of 16-bit elements is not supported (compute in f32)")
        mnemonic = FRAGMENT_BINARY[op.kind.data]
        for d, x, y in zip(self.frag(op.result), self.frag(op.lhs), self.frag(op.rhs), strict=True):
            self.b.binary(mnemonic, d, x, y)

    def fragment_unary(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.FragmentUnaryOp)
        if _packed(_frag(op.result)):
            raise _fail(op, "of 16-bit elements is not supported (compute in f32)")
        for d, x in zip(self.frag(op.result), self.frag(op.source), strict=True):
            if op.kind.data == nvgpu.UnaryKind.EXP2:
                self.b.ex2_approx_ftz_f32(d, x)
            elif op.kind.data == nvgpu.UnaryKind.LOG2:
                self.b.lg2_approx_ftz_f32(d, x)
            else:
                self.b.emit(f"neg.f32 {d}, {x}")

    def fragment_convert(self, op: Operation) -> None:
        """f32 -> f16/bf16 pairs: register k packs values 2k (low) and 2k + 1 (high);
        f16/bf16 -> f32 unpacks them again (exact)."""
        assert isinstance(op, nvgpu.FragmentConvertOp)
        src_ty, dst_ty = _frag(op.source), _frag(op.result)
        src, dst = self.frag(op.source), self.frag(op.result)
        if src_ty.element_type == dst_ty.element_type:
            self.copy(dst, src)
            return
        if _packed(src_ty) and isinstance(dst_ty.element_type, Float32Type):
            self._unpack_halves(_half_name(src_ty.element_type), dst, src)
            return
        if not isinstance(src_ty.element_type, Float32Type) or not _packed(dst_ty):
            raise _fail(op, f"from {src_ty} to {dst_ty} is not supported (f32 <-> f16/bf16 only)")
        half = _half_name(dst_ty.element_type)
        for k, d in enumerate(dst):
            self.b.cvt_rn_x2_f32(half, d, src[2 * k + 1], src[2 * k])

    def _unpack_halves(self, half: str, dst: list[Reg], src: list[Reg]) -> None:
        """dst[2k], dst[2k + 1] = the low and high half of src[k], widened to f32."""
        for k, packed in enumerate(src):
            lo, hi = self.b.new("b16"), self.b.new("b16")
            self.b.emit(f"mov.b32 {{{lo}, {hi}}}, {packed}")
            self.b.cvt("f32", half, dst[2 * k], lo)
            self.b.cvt("f32", half, dst[2 * k + 1], hi)

    def fragment_row_reduce(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.FragmentRowReduceOp)
        src_ty = _frag(op.source)
        if _packed(src_ty):
            raise _fail(op, "of 16-bit elements is not supported")
        mnemonic = "max.f32" if str(op.kind.data) == "max" else "add.f32"
        src, dst = self.frag(op.source), self.frag(op.result)
        cols = src_ty.get_shape()[1]
        started: set[int] = set()
        for i, r in enumerate(src):
            j = WGMMA_ROW.acc_value_row(i, cols)
            if j in started:
                self.b.binary(mnemonic, dst[j], dst[j], r)
            else:
                self.b.mov("f32", dst[j], r)
                started.add(j)

    def shuffle_xor(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.ShuffleXorOp)
        for d, s in zip(self.frag(op.result), self.frag(op.source), strict=True):
            tmp = self.b.new("b32")
            self.b.mov("b32", tmp, s)
            self.b.shfl_sync_bfly(tmp, tmp, op.mask.value.data)
            self.b.mov("b32", d, tmp)

    def fragment_broadcast_rows(self, op: Operation) -> None:
        assert isinstance(op, nvgpu.FragmentBroadcastRowsOp)
        src, dst = self.frag(op.source), self.frag(op.result)
        cols = _frag(op.result).get_shape()[1]
        for i, d in enumerate(dst):
            self.b.mov("f32", d, src[WGMMA_ROW.acc_value_row(i, cols)])

    def _pairs(self, ty: FragmentType, regs: list[Reg]) -> list[tuple[int, list[Reg]]]:
        """(first value index, registers) of each adjacent-column pair of an accumulator."""
        if _packed(ty):
            return [(2 * k, [r]) for k, r in enumerate(regs)]
        return [(2 * k, [regs[2 * k], regs[2 * k + 1]]) for k in range(len(regs) // 2)]

    def fragment_store_global(self, op: Operation) -> None:
        """st.global of each column pair, dropping pairs outside the tensor. Through a rank > 2
        descriptor the leading offsets select the 2-D plane (the base pointer moves by
        offset_d * stride_d); rows and columns of that plane are clipped.

        Pairs never straddle the last column: a TMA-describable tensor has rows of a multiple
        of 16 bytes, hence an even column count (and pair columns are even)."""
        assert isinstance(op, nvgpu.FragmentStoreGlobalOp)
        ty, desc = _frag(op.value), op.desc.type
        assert isinstance(desc, DescType)
        if ty.kind not in (FragmentLayout.WGMMA_ACC, FragmentLayout.WGMMA_ROW):
            raise _fail(op, f"needs a wgmma_acc or wgmma_row fragment, got {ty}")
        if not isinstance(op.desc, BlockArgument) or op.desc.owner is not self.kernel.body.block:
            raise _fail(op, "needs a descriptor that is a kernel argument")
        if ty.kind == FragmentLayout.WGMMA_ROW:
            self._store_rows(op, ty)
            return
        b, name, lead = self.b, _arg_name(op.desc), desc.rank - 2
        eb = nvgpu.element_bytes(ty.element_type)
        rows, cols = ty.get_shape()
        b.comment(f"store the {rows}x{cols} fragment to %{name}, clipped to its extent")
        dim0, dim1, stride, ptr = self._plane(op, eb)
        row, col = self._lane_coords()
        b.binary("add.s32", row, row, self.operand(op.offsets[lead]))
        b.binary("add.s32", col, col, self.operand(op.offsets[lead + 1]))
        col_ok = []
        for j in range(cols // 8):
            p = b.new("pred")
            b.setp("lt", "s32", p, col, dim1 if j == 0 else self._minus(dim1, 8 * j))
            col_ok.append(p)
        ptx_ty = "f32" if eb == 4 else "b32"
        regs = self.frag(op.value)
        for block in range(rows // 64):
            for half in (0, 8):
                r = b.new("b32")
                b.binary("add.s32", r, row, 64 * block + half)
                row_ok = b.new("pred")
                b.setp("lt", "s32", row_ok, r, dim0)
                addr = b.new("b64")
                lin = b.new("b32")
                b.emit(f"mad.lo.s32 {lin}, {r}, {stride}, {col}")
                b.emit(f"mul.wide.s32 {addr}, {lin}, {eb}")
                b.binary("add.s64", addr, addr, ptr)
                for first, pair in self._pairs(ty, regs):
                    i = first - block * (cols // 2)
                    if not 0 <= i < cols // 2 or ((i >> 1) & 1) * 8 != half:
                        continue
                    j = i >> 2
                    ok = b.new("pred")
                    b.binary("and.pred", ok, row_ok, col_ok[j])
                    b.st_global(ptx_ty, addr, pair, offset=8 * j * eb, pred=str(ok))

    def _plane(self, op: nvgpu.FragmentStoreGlobalOp, eb: int) -> tuple[Reg, Reg, Reg, Reg]:
        """(rows, columns, row stride, base pointer) of the 2-D plane of the descriptor's
        tensor that the leading offsets select (the pointer moves by offset_d * stride_d)."""
        b, name, lead = self.b, _arg_name(op.desc), len(op.offsets) - 2  # type: ignore[arg-type]
        dim0, dim1, stride, ptr = b.new("b32"), b.new("b32"), b.new("b32"), b.new("b64")
        b.emit(f"ld.param.u32 {dim0}, [{name}_dim{lead}]")
        b.emit(f"ld.param.u32 {dim1}, [{name}_dim{lead + 1}]")
        b.emit(f"ld.param.u32 {stride}, [{name}_stride{lead}]")
        b.emit(f"ld.param.u64 {ptr}, [{name}_ptr]")
        b.emit(f"cvta.to.global.u64 {ptr}, {ptr}")
        for d in range(lead):  # ptr += offset_d * stride_d * eb
            lead_stride, wide = b.new("b32"), b.new("b64")
            b.emit(f"ld.param.u32 {lead_stride}, [{name}_stride{d}]")
            b.emit(f"mul.lo.s32 {lead_stride}, {lead_stride}, {self.operand(op.offsets[d])}")
            b.emit(f"mul.wide.s32 {wide}, {lead_stride}, {eb}")
            b.binary("add.s64", ptr, ptr, wide)
        return dim0, dim1, stride, ptr

    def _store_rows(self, op: nvgpu.FragmentStoreGlobalOp, ty: FragmentType) -> None:
        """A row vector along the plane's row `offsets[-2]`, value of query row i at column
        `offsets[-1] + i`; the four lanes of a quad hold the same rows, the first stores."""
        b, eb = self.b, nvgpu.element_bytes(ty.element_type)
        if eb != 4:
            raise _fail(op, f"of a {ty.element_type} row vector is not supported (store f32)")
        b.comment(f"store the {ty.get_shape()[0]}-row vector to %{_arg_name(op.desc)}")
        dim0, dim1, stride, ptr = self._plane(op, eb)
        row, col = self._lane_coords()
        plane_row = self.operand(op.offsets[-2])
        lead_ok, first_lane = b.new("pred"), b.new("pred")
        b.setp("lt", "s32", lead_ok, plane_row, dim0)
        b.setp("eq", "s32", first_lane, col, 0)
        b.binary("and.pred", lead_ok, lead_ok, first_lane)
        base = b.new("b32")
        b.emit(f"mad.lo.s32 {base}, {plane_row}, {stride}, {self.operand(op.offsets[-1])}")
        for value, reg in enumerate(self.frag(op.value)):
            block, half = divmod(value, 2)
            target = b.new("b32")
            b.binary("add.s32", target, row, self.operand(op.offsets[-1]))
            b.binary("add.s32", target, target, 64 * block + 8 * half)
            ok = b.new("pred")
            b.setp("lt", "s32", ok, target, dim1)
            b.binary("and.pred", ok, ok, lead_ok)
            lin, addr = b.new("b32"), b.new("b64")
            b.binary("add.s32", lin, base, row)
            b.binary("add.s32", lin, lin, 64 * block + 8 * half)
            b.emit(f"mul.wide.s32 {addr}, {lin}, {eb}")
            b.binary("add.s64", addr, addr, ptr)
            b.st_global("f32", addr, [reg], pred=str(ok))

    def _minus(self, reg: Reg, amount: int) -> Reg:
        out = self.b.new("b32")
        self.b.binary("sub.s32", out, reg, amount)
        return out

    def fragment_store(self, op: Operation) -> None:
        """st.shared of each column pair into a (swizzled) smem slot, from row `row` on.

        Byte x of a row lies in slab x // span; within the slab, 16-byte chunk c of row r is
        stored at chunk c ^ (r mod span/16) (the layout TMA reads, hopper-ptx.md §3.2)."""
        assert isinstance(op, nvgpu.FragmentStoreOp)
        ty, buf = _frag(op.value), op.buf.type
        assert isinstance(buf, SmemType)
        b = self.b
        eb = nvgpu.element_bytes(ty.element_type)
        rows, cols = ty.get_shape()
        slot_rows = buf.slot_shape[0]
        row_bytes = cols * eb
        span = buf.swizzle_bytes or row_bytes
        slab_bytes = slot_rows * span
        base_reg = self.addr_reg(self._slot_addr(op.buf, op.slot, buf.slot_bytes()))
        row, col = self._lane_coords()
        if op.row is not None:
            b.binary("add.s32", row, row, self.operand(op.row))
        if buf.swizzle_bytes and eb == 2:
            self._fragment_store_swizzled(op, base_reg, row, col)
            return
        col_bytes = b.new("b32")
        b.binary("mul.lo.u32", col_bytes, col, eb)  # byte of the first pair in an 8-col group
        ptx_ty = "f32" if eb == 4 else "b32"
        regs = self.frag(op.value)
        for first, pair in self._pairs(ty, regs):
            block, i = divmod(first, cols // 2)
            j, half = i >> 2, ((i >> 1) & 1) * 8
            r = b.new("b32")
            b.binary("add.u32", r, row, 64 * block + half)
            x = b.new("b32")  # byte within the row
            b.binary("add.u32", x, col_bytes, 8 * j * eb)
            addr = b.new("b32")
            if buf.swizzle_bytes:
                slab, chunk, rmod = b.new("b32"), b.new("b32"), b.new("b32")
                b.binary("div.u32", slab, x, span)
                b.binary("rem.u32", x, x, span)
                b.binary("shr.u32", chunk, x, 4)
                b.binary("and.b32", rmod, r, span // 16 - 1)
                b.binary("xor.b32", chunk, chunk, rmod)
                b.binary("and.b32", x, x, 15)
                b.emit(f"mad.lo.u32 {x}, {chunk}, 16, {x}")
                b.emit(f"mad.lo.u32 {x}, {slab}, {slab_bytes}, {x}")
            b.emit(f"mad.lo.u32 {addr}, {r}, {span}, {x}")
            b.binary("add.u32", addr, addr, base_reg)
            b.st_shared(ptx_ty, addr, pair)

    def _fragment_store_swizzled(self, op: nvgpu.FragmentStoreOp, base: Reg, row: Reg, col: Reg):
        """`fragment_store` of 16-bit values into a swizzled slot, with the address
        arithmetic hoisted: a thread's pairs lie in rows row + 8h (h = 0..R/8-1), all with the
        same r mod 8 (hence the same XOR), and its column bytes stay inside one 16-byte chunk
        (2 (l & 3) eb < 16 - (8 j eb mod 16) for eb = 2). So each of the span/16 chunks gets
        one address register, `base + row * span + col * eb + ((c * 16) ^ (row mod 8) * 16)`,
        and every st.shared is that register plus an immediate."""
        ty, buf = _frag(op.value), op.buf.type
        assert isinstance(buf, SmemType)
        b = self.b
        eb = nvgpu.element_bytes(ty.element_type)
        rows, cols = ty.get_shape()
        span = buf.swizzle_bytes
        slab_bytes = buf.slot_shape[0] * span
        lane = b.new("b32")
        b.emit(f"mad.lo.u32 {lane}, {row}, {span}, {base}")
        b.emit(f"mad.lo.u32 {lane}, {col}, {eb}, {lane}")
        rmod = b.new("b32")
        b.binary("and.b32", rmod, row, span // 16 - 1)
        b.binary("shl.b32", rmod, rmod, 4)
        chunks: dict[int, Reg] = {}
        regs = self.frag(op.value)
        for first, pair in self._pairs(ty, regs):
            block, i = divmod(first, cols // 2)
            j, half = i >> 2, ((i >> 1) & 1) * 8
            x0 = 8 * j * eb
            slab, chunk, within = x0 // span, (x0 % span) // 16, x0 % 16
            if chunk not in chunks:
                reg = chunks[chunk] = b.new("b32")
                b.binary("xor.b32", reg, rmod, chunk * 16)
                b.binary("add.u32", reg, reg, lane)
            offset = (64 * block + half) * span + slab * slab_bytes + within
            b.st_shared("b32", chunks[chunk], pair, offset=offset)


def emit_ptx(module: ModuleOp) -> str:
    """The PTX text of every kernel of `module` (normally one)."""
    kernels = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if not kernels:
        raise EmitError("emit-ptx: the module has no func.func kernel")
    for kernel in kernels:
        need = SmemPlan.of(kernel).bytes
        if need > SM90_MAX_SMEM_BYTES:
            raise EmitError(
                f"emit-ptx: @{kernel.sym_name.data} needs {need} bytes of shared memory; an "
                f"sm_90 block may use at most {SM90_MAX_SMEM_BYTES}"
            )
    texts = [KernelPrinter(kernel).print() for kernel in kernels]
    header_end = texts[0].index(".visible")
    return texts[0] + "".join(t[header_end:] for t in texts[1:])
