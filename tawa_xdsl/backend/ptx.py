"""PTX text emission: registers declared from counters, helpers named after the PTX they print.

`PtxBuilder` collects the body of one kernel. Every helper prints exactly the instruction its
name spells (`mbarrier_try_wait_parity` prints the `mbarrier.try_wait.parity` loop,
`cp_async_bulk_tensor` the TMA load), so a line of generated PTX can be found from its helper
and vice versa. Registers are `%{role}_{type}_{n}`; `declarations()` derives the `.reg` lines
from the counters, so no register list is kept by hand. Float immediates are hex bit
patterns (`0f3F800000`). All output is ASCII (ptxas rejects any other byte, even in comments).
Section numbers refer to `reference/hopper-ptx.md`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

PTX_VERSION = "8.0"
PTX_TARGET = "sm_90a"

# mbarrier.try_wait's suspend-time hint, ns: how long a waiting thread may sleep before the
# wait returns false and loops (CUTLASS's barrier waits use the same 10 ms).
TRY_WAIT_SUSPEND_NS = 10_000_000

# Register classes: the `.reg` type and the short tag used in register names.
REG_CLASSES = {"pred": "p", "b16": "h", "b32": "r", "b64": "rd", "f32": "f"}


def f32_hex(value: float) -> str:
    """A float as PTX's exact hex immediate: 1.0 -> `0f3F800000`."""
    return "0f" + struct.pack(">f", value).hex().upper()


def exact_udiv(magic: int, shift: int) -> int | None:
    """The divisor d for which `(x * magic) >> (32 + shift)` is `x / d` for every u32 x, or
    None. Granlund and Montgomery (1994), theorem 4.2: exact when 2^(32+s) <= m d <=
    2^(32+s) + 2^s."""
    if not 0 < magic < 1 << 32 or not 0 <= shift < 32:
        return None
    low = 1 << (32 + shift)
    divisor = -(-low // magic)  # the least d with m d >= 2^(32+s)
    return divisor if magic * divisor <= low + (1 << shift) else None


def udiv_magic(divisor: int) -> tuple[int, int] | None:
    """(magic, shift) with `exact_udiv(magic, shift) == divisor`, the smallest shift; None
    for powers of two (the printer shifts and masks: `udiv_by_power_of_two`) and divisors with
    no 32-bit magic (7: div.u32)."""
    if divisor < 3 or divisor & (divisor - 1) == 0:
        return None
    for shift in range(32):
        magic = -(-(1 << (32 + shift)) // divisor)
        if magic >= 1 << 32:
            return None
        if exact_udiv(magic, shift) == divisor:
            return magic, shift
    return None


@dataclass(frozen=True)
class Reg:
    """A PTX virtual register."""

    name: str
    cls: str  # a key of REG_CLASSES

    def __str__(self) -> str:
        return self.name


Operand = Reg | int | str


@dataclass
class RegisterFile:
    """Hands out registers; one counter per (role, class) prefix."""

    counters: dict[tuple[str, str], int] = field(default_factory=dict)

    def new(self, cls: str, role: str = "") -> Reg:
        if cls not in REG_CLASSES:
            raise ValueError(f"unknown PTX register class '{cls}'")
        key = (role, cls)
        n = self.counters.get(key, 0)
        self.counters[key] = n + 1
        return Reg(f"%{self._prefix(role, cls)}{n}", cls)

    def declarations(self) -> list[str]:
        return [
            f"    .reg .{cls} %{self._prefix(role, cls)}<{n}>;"
            for (role, cls), n in sorted(self.counters.items(), key=lambda kv: kv[0][::-1])
        ]

    @staticmethod
    def _prefix(role: str, cls: str) -> str:
        return f"{role}_{cls}_" if role else REG_CLASSES[cls]


@dataclass(frozen=True)
class Param:
    """One `.param` of a kernel entry."""

    name: str
    ptx_type: str  # "u32", "u64", "f32", or "tensormap" (128 bytes, 64-aligned)

    def declaration(self) -> str:
        if self.ptx_type == "tensormap":
            return f".param .align 64 .b8 {self.name}[128]"
        return f".param .{self.ptx_type} {self.name}"


def _ops(operands: Sequence[Operand]) -> str:
    return ", ".join(map(str, operands))


def _vec(operands: Sequence[Operand]) -> str:
    return "{" + _ops(operands) + "}"


@dataclass
class PtxBuilder:
    """The body of one kernel: instructions, labels and the registers they use."""

    regs: RegisterFile = field(default_factory=RegisterFile)
    lines: list[str] = field(default_factory=list)
    label_counter: int = 0

    # ------------------------------------------------------------------- plumbing

    def new(self, cls: str, role: str = "") -> Reg:
        return self.regs.new(cls, role)

    def emit(self, text: str, pred: str | None = None) -> None:
        guard = f"@{pred} " if pred else ""
        self.lines.append(f"    {guard}{text};")

    def comment(self, text: str) -> None:
        self.lines.append(f"    // {text.encode('ascii', 'replace').decode()}")

    def new_label(self, hint: str) -> str:
        self.label_counter += 1
        return f"$L_{hint}_{self.label_counter}"

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    # ------------------------------------------------------------ scalar integer ops

    def mov(self, ty: str, dst: Reg, src: Operand, pred: str | None = None) -> None:
        self.emit(f"mov.{ty} {dst}, {src}", pred)

    def binary(self, mnemonic: str, dst: Reg, a: Operand, b: Operand) -> None:
        """`add.s32`, `mul.lo.s32`, `and.b32`, `max.f32`, ... : `mnemonic dst, a, b;`."""
        self.emit(f"{mnemonic} {dst}, {a}, {b}")

    def setp(self, cmp: str, ty: str, dst: Reg, a: Operand, b: Operand) -> None:
        self.emit(f"setp.{cmp}.{ty} {dst}, {a}, {b}")

    def selp(self, ty: str, dst: Reg, a: Operand, b: Operand, p: Reg) -> None:
        self.emit(f"selp.{ty} {dst}, {a}, {b}, {p}")

    def cvt(self, dst_ty: str, src_ty: str, dst: Reg, src: Operand, rnd: str = "") -> None:
        self.emit(f"cvt{'.' + rnd if rnd else ''}.{dst_ty}.{src_ty} {dst}, {src}")

    def bra(self, label: str, pred: str | None = None, uni: bool = False) -> None:
        self.emit(f"bra{'.uni' if uni else ''} {label}", pred)

    def special(self, dst: Reg, sreg: str) -> None:
        """Read a special register (`%tid.x`, `%ctaid.x`, `%nctaid.x`, ...)."""
        self.emit(f"mov.u32 {dst}, {sreg}")

    # -------------------------------------------------------------------- mbarrier §2

    def mbarrier_init(self, addr: Operand, count: int) -> None:
        self.emit(f"mbarrier.init.shared::cta.b64 [{addr}], {count}")

    def fence_mbarrier_init(self) -> None:
        self.emit("fence.mbarrier_init.release.cluster")

    def mbarrier_arrive(self, addr: Operand, pred: str | None = None) -> None:
        self.emit(f"mbarrier.arrive.shared::cta.b64 _, [{addr}]", pred)

    def mbarrier_arrive_expect_tx(
        self, addr: Operand, nbytes: int, pred: str | None = None
    ) -> None:
        self.emit(f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [{addr}], {nbytes}", pred)

    def mbarrier_try_wait_parity(self, addr: Operand, parity: Operand) -> None:
        """The wait loop: `try_wait` may time out and return false, so it always loops. The
        suspend-time hint lets the thread sleep until the phase completes (or the hint's
        nanoseconds pass) instead of the system's short default: without it the producer's
        waits for free slots spun ~100 times a load, 8% of the attention kernel's
        instructions on the H200 (its time did not change with the hint: bench/NOTES.md,
        round 16)."""
        label = self.new_label("wait")
        done = self.new("pred")
        self.label(label)
        self.emit(
            f"mbarrier.try_wait.parity.shared::cta.b64 {done}, [{addr}], {parity}, "
            f"{TRY_WAIT_SUSPEND_NS:#x}"
        )
        self.bra(label, pred=f"!{done}")

    def bar_sync(self, barrier_id: int, threads: int | None = None) -> None:
        self.emit(f"bar.sync {barrier_id}" + (f", {threads}" if threads is not None else ""))

    # ------------------------------------------------------------------------- TMA §3

    def cp_async_bulk_tensor(
        self, dst: Operand, tmap: Operand, coords: Sequence[Operand], mbar: Operand
    ) -> None:
        """TMA load global -> shared, completing on `mbar`; coords innermost first."""
        self.emit(
            f"cp.async.bulk.tensor.{len(coords)}d.shared::cluster.global.tile."
            f"mbarrier::complete_tx::bytes [{dst}], [{tmap}, {_vec(coords)}], [{mbar}]"
        )

    def cp_async_bulk_tensor_store(
        self, tmap: Operand, coords: Sequence[Operand], src: Operand
    ) -> None:
        """TMA store shared -> global (bulk-group completion); coords innermost first."""
        self.emit(
            f"cp.async.bulk.tensor.{len(coords)}d.global.shared::cta.tile.bulk_group "
            f"[{tmap}, {_vec(coords)}], [{src}]"
        )

    def cp_async_bulk_commit_group(self) -> None:
        self.emit("cp.async.bulk.commit_group")

    def cp_async_bulk_wait_group_read(self, pending: int) -> None:
        self.emit(f"cp.async.bulk.wait_group.read {pending}")

    def fence_proxy_async(self) -> None:
        self.emit("fence.proxy.async.shared::cta")

    # ------------------------------------------------------------------------ wgmma §4

    def wgmma_fence(self) -> None:
        self.emit("wgmma.fence.sync.aligned")

    def wgmma_commit_group(self) -> None:
        self.emit("wgmma.commit_group.sync.aligned")

    def wgmma_wait_group(self, pending: int) -> None:
        self.emit(f"wgmma.wait_group.sync.aligned {pending}")

    def wgmma_mma_async(
        self,
        shape: str,
        types: str,
        acc: Sequence[Reg],
        a: Operand | Sequence[Reg],
        b_desc: Operand,
        scale_d: Operand = 1,
        trans_a: int | None = 0,
        trans_b: int | None = 0,
    ) -> None:
        """`wgmma.mma_async.sync.aligned.{shape}.{types}`: SS form when `a` is a descriptor,
        RS form when it is four registers. fp8 has no transpose operands (pass None)."""
        register_a = isinstance(a, list | tuple)
        a_text = _vec(a) if register_a else str(a)
        tail: list[Operand] = [scale_d, 1, 1]
        if trans_a is not None and not register_a:
            tail.append(trans_a)
        if trans_b is not None:
            tail.append(trans_b)
        self.emit(
            f"wgmma.mma_async.sync.aligned.{shape}.{types} {_vec(acc)}, {a_text}, {b_desc}, "
            f"{_ops(tail)}"
        )

    # ------------------------------------------------------------------ registers §5

    def setmaxnreg(self, action: str, registers: int) -> None:
        self.emit(f"setmaxnreg.{action}.sync.aligned.u32 {registers}")

    def elect_sync(self, dst: Reg) -> None:
        self.emit(f"elect.sync _|{dst}, 0xffffffff")

    # ------------------------------------------------------------ data movement §6

    def st_global(
        self,
        ty: str,
        addr: Operand,
        values: Sequence[Operand],
        offset: int = 0,
        pred: str | None = None,
    ) -> None:
        vec = f".v{len(values)}" if len(values) > 1 else ""
        data = _vec(values) if len(values) > 1 else str(values[0])
        self.emit(f"st.global{vec}.{ty} [{addr}+{offset}], {data}", pred)

    def st_shared(self, ty: str, addr: Operand, values: Sequence[Operand], offset: int = 0) -> None:
        vec = f".v{len(values)}" if len(values) > 1 else ""
        data = _vec(values) if len(values) > 1 else str(values[0])
        self.emit(f"st.shared{vec}.{ty} [{addr}+{offset}], {data}")

    def cvt_rn_x2_f32(self, half_type: str, dst: Reg, hi: Operand, lo: Operand) -> None:
        """`cvt.rn.{bf16x2,f16x2}.f32 d, hi, lo;` : the first source goes to the upper half."""
        self.emit(f"cvt.rn.{half_type}x2.f32 {dst}, {hi}, {lo}")

    def shfl_sync_bfly(self, dst: Reg, src: Operand, lane_mask: int) -> None:
        self.emit(f"shfl.sync.bfly.b32 {dst}, {src}, {lane_mask}, 0x1f, 0xffffffff")

    def ex2_approx_ftz_f32(self, dst: Reg, src: Operand) -> None:
        self.emit(f"ex2.approx.ftz.f32 {dst}, {src}")

    def lg2_approx_ftz_f32(self, dst: Reg, src: Operand) -> None:
        self.emit(f"lg2.approx.ftz.f32 {dst}, {src}")


@dataclass
class KernelText:
    """Everything around the body: header, params, directives, register declarations."""

    name: str
    params: list[Param]
    max_threads: int
    body: PtxBuilder
    uses_setmaxnreg: bool = True
    ctas_per_sm: int = 1

    def render(self) -> str:
        header = [
            f".version {PTX_VERSION}",
            f".target {PTX_TARGET}",
            ".address_size 64",
            "",
            ".extern .shared .align 1024 .b8 smem[];",
            "",
            f".visible .entry {self.name}(",
            ",\n".join(f"    {p.declaration()}" for p in self.params),
            ")",
            f".maxntid {self.max_threads}, 1, 1",
        ]
        if self.uses_setmaxnreg or self.ctas_per_sm > 1:
            # setmaxnreg needs a defined register count at entry (§5, C7508 otherwise); with
            # N CTAs per SM ptxas keeps the entry count within 1/N of the register file.
            header.append(f".minnctapersm {self.ctas_per_sm}")
        text = "\n".join(
            header + ["{"] + self.body.regs.declarations() + [""] + self.body.lines + ["}", ""]
        )
        text.encode("ascii")  # ptxas rejects any non-ASCII byte; fail here instead
        return text
