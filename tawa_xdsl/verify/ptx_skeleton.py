"""Translation validation of the PTX: its protocol skeleton parsed back and matched to the IR.

After `emit_ptx`, `validate_ptx(module, ptx)` reads every protocol instruction of the PTX text
back with its operands and compares it, in program order, with the nvgpu-level IR that was
printed. The skeleton of either side is a list of `Entry`: the instruction kind (mbarrier init /
arrive / arrive.expect_tx / try_wait.parity, the mbarrier-init and proxy fences, TMA loads and
stores with their groups, wgmma fence / mma_async / commit / wait, bar.sync / bar.arrive), its
shared-memory addresses, parity, tx bytes, counts and wait depths, and its thread guard: the
conditions of every branch around it (an `scf.if` or `scf.for` in the IR, a forward
conditional branch in the PTX).

Values are compared as expressions, not as text. On the PTX side a register's value is the
expression its one definition computes (registers written in one basic block only are
followed through that block); a register written in several blocks (a loop counter, a
coalesced iteration argument) is an opaque register. On the IR side a value is the expression
of its arith ops; any other value (block arguments, warpgroup and thread indices, kernel
arguments) is a variable, bound to the PTX expression where it is first met and required to be
that expression everywhere after ("register provenance"). Sums are compared as linear forms,
so `base + slot * stride` matches however the printer folds it. An IR address is
`smem + offset + slot * stride` with the placement `legalize-nvgpu` wrote into the
allocation's `offset` property and the slot's own expression: a PTX address that computes
another barrier, buffer or slot, a parity that is not the IR's, other tx bytes, a dropped,
added or reordered instruction, a missing guard, or a wait that does not spin fails with
`PtxValidationError` naming both sides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from tawa_xdsl.backend.emit_ptx.kernel import CMP, CMPI_NAMES, arg_name
from tawa_xdsl.backend.ptx import exact_udiv
from tawa_xdsl.diagnostics import TawaError, op_location
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import CTA_BARRIER_ID, MBARRIER_BYTES, MBarrierType, SmemType


class PtxValidationError(TawaError):
    """The printed PTX's protocol skeleton differs from the nvgpu-level IR it was printed from."""


# ------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Var:
    """An IR value the expression language does not look into (bound to a PTX expression)."""

    key: int
    name: str

    def __str__(self) -> str:
        return self.name


Term = Var | tuple  # Var (IR only), ("reg", name), ("undef", name), or (op, *Lin)


@dataclass(frozen=True)
class Lin:
    """`const + sum(coef * term)`: the normal form of every integer or predicate value."""

    const: int = 0
    terms: tuple[tuple[Term, int], ...] = ()

    @staticmethod
    def of(term: Term) -> Lin:
        return Lin(0, ((term, 1),))

    def is_const(self) -> bool:
        return not self.terms

    def __add__(self, other: Lin) -> Lin:
        merged: dict[Term, int] = dict(self.terms)
        for term, coef in other.terms:
            merged[term] = merged.get(term, 0) + coef
        # Sorted, so that equal sums are equal however they were built.
        terms = sorted(((t, c) for t, c in merged.items() if c != 0), key=repr)
        return Lin(self.const + other.const, tuple(terms))

    def scale(self, k: int) -> Lin:
        if k == 0:
            return Lin()
        return Lin(self.const * k, tuple((t, c * k) for t, c in self.terms))

    def __sub__(self, other: Lin) -> Lin:
        return self + other.scale(-1)

    def __str__(self) -> str:
        parts = [_term_text(t) if c == 1 else f"{c}*{_term_text(t)}" for t, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


def _term_text(term: Term) -> str:
    if isinstance(term, Var):
        return str(term)
    if term[0] in ("reg", "undef", "sym", "sreg", "param"):
        return f"{term[1]}" if term[0] != "undef" else f"<undefined {term[1]}>"
    return f"{term[0]}({', '.join(str(a) for a in term[1:])})"


def mul(a: Lin, b: Lin) -> Lin:
    if a.is_const():
        return b.scale(a.const)
    if b.is_const():
        return a.scale(b.const)
    return Lin.of(("mul", a, b))


FOLD = {
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "and": lambda x, y: x & y,
    "or": lambda x, y: x | y,
    "xor": lambda x, y: x ^ y,
}


def node(op: str, *args: Lin) -> Lin:
    """`op(args)` as a term, folded when every argument is a constant and `op` is bitwise or
    an (in)equality (the forms both sides print constants in)."""
    kind = op.split(".")[1] if op.startswith("setp.") else op
    if kind in FOLD and all(a.is_const() for a in args):
        return Lin(int(FOLD[kind](*(a.const for a in args))))
    if op in ("div.u", "rem.u") and all(a.is_const() for a in args) and args[1].const > 0:
        # on constants both sides print differently (a use counter's first value): fold them
        x, d = args[0].const % (1 << 32), args[1].const
        return Lin(x // d if op == "div.u" else x % d)
    if op == "shr.u" and args[1].is_const() and 0 <= args[1].const < 32:
        # x >> k = x / 2^k on unsigned values: the printer's slot of a ring of 2^k slots
        return node("div.u", args[0], Lin(1 << args[1].const))
    mask = args[1].const if len(args) == 2 and args[1].is_const() else 0
    if op == "and" and mask > 0 and mask & (mask + 1) == 0 and not args[0].is_const():
        # x & (2^k - 1) = x % 2^k on 32-bit patterns: the printer's phase of such a ring
        return node("rem.u", args[0], Lin(mask + 1))
    if op == "rem.u" and args[1].is_const() and args[1].const > 0:
        # x % d = x - d (x / d) on unsigned values: one form for rem.u32 and for the
        # multiply-high quotient the printer folds it into
        return args[0] - node("div.u", *args).scale(args[1].const)
    return Lin.of((op, *args))


def udiv_of(high: Lin, shift: Lin) -> Lin | None:
    """`div.u(x, d)` for `mul.hi.u(x, m) >> s` when (m, s) divides every u32 x by d exactly
    (the printer's division by a constant), else None."""
    if not shift.is_const() or high.const or len(high.terms) != 1 or high.terms[0][1] != 1:
        return None
    term = high.terms[0][0]
    if isinstance(term, Var) or term[0] != "mul.hi.u" or not term[2].is_const():
        return None
    divisor = exact_udiv(term[2].const, shift.const)
    return None if divisor is None else node("div.u", term[1], Lin(divisor))


Bindings = dict[Var, Lin]


def _resolve(ir: Lin, bound: Bindings) -> tuple[Lin, list[tuple[Term, int]]]:
    """(the part of `ir` that is PTX-concrete under `bound`, the terms still symbolic)."""
    concrete, symbolic = Lin(ir.const), []
    for term, coef in ir.terms:
        if isinstance(term, Var) and term in bound:
            concrete = concrete + bound[term].scale(coef)
        elif not has_var(term):
            concrete = concrete + Lin(0, ((term, coef),))
        else:
            symbolic.append((term, coef))
    return concrete, symbolic


def has_var(term: Term) -> bool:
    """Whether an IR variable occurs in `term`."""
    if isinstance(term, Var):
        return True
    return any(isinstance(a, Lin) and any(has_var(t) for t, _ in a.terms) for a in term[1:])


def symbols(value: Lin) -> list[str]:
    """The PTX symbols (`.param` names, `smem`) `value` is computed from."""
    out = []
    for term, _ in value.terms:
        if isinstance(term, Var):
            continue
        if term[0] == "sym":
            out.append(term[1])
        out += [s for a in term[1:] if isinstance(a, Lin) for s in symbols(a)]
    return out


def unify(ir: Lin, ptx: Lin, bound: Bindings) -> Bindings | None:
    """Bindings extended so that `ir` is `ptx`, or None when it cannot be."""
    concrete, symbolic = _resolve(ir, bound)
    rest = ptx - concrete
    bound = dict(bound)
    for term, coef in [s for s in symbolic if not isinstance(s[0], Var)]:
        for other, other_coef in rest.terms:
            if other_coef != coef or isinstance(other, Var) or other[0] != term[0]:
                continue
            trial = _unify_terms(term, other, bound)
            if trial is not None:
                bound = trial
                rest = rest - Lin(0, ((other, coef),))
                break
        else:
            return None
    for var, coef in [s for s in symbolic if isinstance(s[0], Var) and s[0] in bound]:
        rest = rest - bound[var].scale(coef)  # bound inside a term (x beside x % d's x - d (x/d))
    free = [(t, c) for t, c in symbolic if isinstance(t, Var) and t not in bound]
    if not free:
        return bound if rest == Lin() else None
    if len(free) == 1:
        var, coef = free[0]
        if rest.const % coef or any(c % coef for _, c in rest.terms):
            return None
        bound[var] = Lin(rest.const // coef, tuple((t, c // coef) for t, c in rest.terms))
        return bound
    for var, coef in free:
        match = next(((t, c) for t, c in rest.terms if c == coef), None)
        if match is None:
            return None
        bound[var] = Lin.of(match[0])
        rest = rest - Lin(0, ((match[0], coef),))
    return bound if rest == Lin() else None


def _unify_terms(ir: tuple, ptx: tuple, bound: Bindings) -> Bindings | None:
    if len(ir) != len(ptx) or ir[0] != ptx[0]:
        return None
    for a, b in zip(ir[1:], ptx[1:], strict=True):
        if isinstance(a, Lin) and isinstance(b, Lin):
            result = unify(a, b, bound)
            if result is None:
                return None
            bound = result
        elif a != b:
            return None
    return bound


# --------------------------------------------------------------------------- skeletons


@dataclass(frozen=True)
class Guard:
    """The branch around an instruction: it runs when `cond` is `taken` ("if" or "loop")."""

    kind: str
    cond: Lin
    taken: bool


@dataclass
class Entry:
    """One protocol instruction: kind, addresses (`smem + offset + slot * stride`), values."""

    kind: str
    addrs: tuple[Lin, ...] = ()
    values: tuple[Lin, ...] = ()  # parity (wait)
    ints: tuple[int, ...] = ()  # count, tx bytes, depth, barrier id / threads
    symbol: str = ""  # the tensor map of a TMA op
    guards: tuple[Guard, ...] = ()
    where: str = ""  # the IR op's location or the PTX line
    text: str = ""  # what it says, for the message
    problem: str = ""  # a PTX instruction that is malformed as a protocol instruction


# ------------------------------------------------------------------------------ IR side


INT_OPS: dict[type[Operation], str] = {
    arith.DivSIOp: "div.s", arith.DivUIOp: "div.u", arith.RemSIOp: "rem.s",
    arith.RemUIOp: "rem.u", arith.MinSIOp: "min.s", arith.MaxSIOp: "max.s",
    arith.MinUIOp: "min.u", arith.MaxUIOp: "max.u", arith.AndIOp: "and", arith.OrIOp: "or",
    arith.XOrIOp: "xor", arith.ShLIOp: "shl", arith.ShRSIOp: "shr.s", arith.ShRUIOp: "shr.u",
}  # fmt: skip


class IrSkeleton:
    """The skeleton of one kernel of the nvgpu-level IR (the printer's input)."""

    def __init__(self, kernel: func.FuncOp):
        self.kernel = kernel
        self.memo: dict[SSAValue, Lin] = {}
        self.smem = Var(-1, "smem")
        self.entries: list[Entry] = []
        self.offsets: dict[SSAValue, int] = {}
        for op in kernel.walk():
            if isinstance(op, nvgpu.SmemAllocOp | nvgpu.MBarrierAllocOp):
                if op.offset is None:
                    raise PtxValidationError(
                        f"{op_location(op)}: error: '{op.name}' has no smem offset"
                    )
                self.offsets[op.results[0]] = op.offset.value.data
        self.block(kernel.body.block, ())

    def value(self, value: SSAValue) -> Lin:
        if value not in self.memo:
            self.memo[value] = self._value(value)
        return self.memo[value]

    def _value(self, value: SSAValue) -> Lin:
        op = value.owner
        if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
            number = op.value.value.data
            width = getattr(value.type, "width", None)
            return Lin(number & 1 if width is not None and width.data == 1 else number)
        if isinstance(op, arith.AddiOp):
            return self.value(op.lhs) + self.value(op.rhs)
        if isinstance(op, arith.SubiOp):
            return self.value(op.lhs) - self.value(op.rhs)
        if isinstance(op, arith.MuliOp):
            return mul(self.value(op.lhs), self.value(op.rhs))
        if isinstance(op, arith.IndexCastOp):
            return self.value(op.input)
        if type(op) in INT_OPS:
            return node(INT_OPS[type(op)], self.value(op.operands[0]), self.value(op.operands[1]))
        if isinstance(op, arith.CmpiOp):
            cmp, ty = CMP[CMPI_NAMES[op.predicate.value.data]]
            return node(f"setp.{cmp}.{ty}", self.value(op.lhs), self.value(op.rhs))
        if isinstance(op, arith.SelectOp):
            return node("selp", self.value(op.lhs), self.value(op.rhs), self.value(op.cond))
        name = value.name_hint or (op.name if isinstance(op, Operation) else "arg")
        return Lin.of(Var(id(value), f"%{name}"))

    def addr(self, base: SSAValue, slot: SSAValue, stride: int, extra: int = 0) -> Lin:
        """`smem + offset(base) + slot * stride + extra`."""
        return Lin.of(self.smem) + Lin(self.offsets[base] + extra) + self.value(slot).scale(stride)

    def block(self, block: Block, guards: tuple[Guard, ...]) -> None:
        for op in block.ops:
            if isinstance(op, scf.ForOp):
                iv = op.body.block.args[0]
                cond = node("setp.ge.s32", self.value(iv), self.value(op.ub))
                self.block(op.body.block, (*guards, Guard("loop", cond, False)))
            elif isinstance(op, scf.IfOp):
                cond = self.value(op.cond)
                self.block(op.true_region.block, (*guards, Guard("if", cond, True)))
                if op.false_region.blocks:
                    self.block(op.false_region.block, (*guards, Guard("if", cond, False)))
            else:
                for entry in self.entries_of(op):
                    entry.guards, entry.where = guards, op_location(op)
                    entry.text = entry.text or op.name
                    self.entries.append(entry)

    def entries_of(self, op: Operation) -> list[Entry]:
        bar = MBARRIER_BYTES
        if isinstance(op, nvgpu.MBarrierInitOp):
            assert isinstance(op.bars.type, MBarrierType)
            base = Lin.of(self.smem) + Lin(self.offsets[op.bars])
            return [
                Entry("mbarrier.init", (base + Lin(bar * i),), ints=(op.count.value.data,))
                for i in range(op.bars.type.num_barriers)
            ]
        if isinstance(op, nvgpu.MBarrierArriveExpectTxOp):
            addr = self.addr(op.bars, op.slot, bar)
            return [Entry("mbarrier.arrive.expect_tx", (addr,), ints=(op.tx_bytes.value.data,))]
        if isinstance(op, nvgpu.MBarrierArriveOp):
            return [Entry("mbarrier.arrive", (self.addr(op.bars, op.slot, bar),))]
        if isinstance(op, nvgpu.MBarrierWaitOp):
            addr = self.addr(op.bars, op.slot, bar)
            return [Entry("mbarrier.try_wait.parity", (addr,), (self.value(op.parity),))]
        if isinstance(op, nvgpu.TmaLoadOp):
            return self.tma_load(op)
        if isinstance(op, nvgpu.TmaStoreOp):
            assert isinstance(op.buf.type, SmemType)
            src = self.addr(op.buf, op.slot, op.buf.type.slot_bytes())
            return [Entry("tma.store", (src,), symbol=f"{arg_name(op.desc)}_tmap")]  # type: ignore[arg-type]
        if isinstance(op, nvgpu.TmaStoreWaitOp | nvgpu.WgmmaWaitGroupOp):
            kind = (
                "tma.wait_group.read"
                if isinstance(op, nvgpu.TmaStoreWaitOp)
                else "wgmma.wait_group"
            )
            return [Entry(kind, ints=(op.pending.value.data,))]
        if isinstance(op, nvgpu.NamedBarrierSyncOp | nvgpu.NamedBarrierArriveOp):
            kind = "bar.sync" if isinstance(op, nvgpu.NamedBarrierSyncOp) else "bar.arrive"
            return [Entry(kind, ints=(op.barrier_id.value.data, op.threads.value.data))]
        if isinstance(op, nvgpu.CtaBarrierOp):
            return [Entry("bar.sync", ints=(CTA_BARRIER_ID,))]
        if isinstance(op, nvgpu.WgmmaMmaAsyncOp | nvgpu.WgmmaMmaAsyncRsOp):
            return [Entry("wgmma.mma_async") for _ in range(wgmma_instructions(op))]
        simple = {
            nvgpu.FenceMBarrierInitOp: "fence.mbarrier_init",
            nvgpu.FenceProxyAsyncOp: "fence.proxy.async",
            nvgpu.TmaStoreCommitOp: "tma.commit_group",
            nvgpu.WgmmaFenceOp: "wgmma.fence",
            nvgpu.WgmmaCommitGroupOp: "wgmma.commit_group",
        }
        kind = simple.get(type(op))
        return [Entry(kind)] if kind else []

    def tma_load(self, op: nvgpu.TmaLoadOp) -> list[Entry]:
        assert isinstance(op.buf.type, SmemType)
        if op.box_smem_offsets is None:
            raise PtxValidationError(f"{op_location(op)}: error: '{op.name}' has no box plan")
        mbar = self.addr(op.bars, op.bar_slot, MBARRIER_BYTES)
        symbol = f"{arg_name(op.desc)}_tmap"  # type: ignore[arg-type]
        return [
            Entry(
                "tma.load",
                (self.addr(op.buf, op.slot, op.buf.type.slot_bytes(), int(box)), mbar),
                symbol=symbol,
            )
            for box in op.box_smem_offsets.get_values()
        ]


def wgmma_instructions(op: nvgpu.WgmmaMmaAsyncOp | nvgpu.WgmmaMmaAsyncRsOp) -> int:
    """How many `wgmma.mma_async` instructions one op prints (M/64 blocks x K steps)."""
    blocks, k_steps = op.instructions()
    return blocks * k_steps


# ----------------------------------------------------------------------------- PTX side


@dataclass
class Line:
    """One instruction of the PTX body: predicate guard, opcode, operands, source line."""

    number: int
    text: str
    guard: str | None  # "%p3" or "!%p3"
    opcode: str
    operands: list[str]


LABEL = re.compile(r"^([$\w.]+):$")
INTEGER = re.compile(r"^-?(0[xX][0-9a-fA-F]+|\d+)$")
ADDRESS = re.compile(r"^\[(.+)\]$")


def split_operands(text: str) -> list[str]:
    """Top-level comma-separated operands (brackets and braces kept whole)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_body(ptx: str) -> list[Line | str]:
    """The entry's body: instructions and label names in order (declarations dropped)."""
    items: list[Line | str] = []
    start = ptx.index("{", ptx.index(".entry"))
    for number, raw in enumerate(ptx[start + 1 :].splitlines(), ptx[: start + 1].count("\n") + 1):
        text = raw.split("//")[0].strip()
        if not text or text.startswith(".") or text == "}":
            continue
        label = LABEL.match(text)
        if label:
            items.append(label.group(1))
            continue
        body = text.rstrip(";").strip()
        guard = None
        if body.startswith("@"):
            guard, body = body[1:].split(None, 1)
        opcode, _, rest = body.partition(" ")
        items.append(Line(number, text, guard, opcode, split_operands(rest)))
    return items


PROTOCOL = ("mbarrier.", "fence.", "cp.async.bulk", "wgmma.", "bar.", "barrier.")
WRITES_NOTHING = ("st.", "bra", "ret", "mbarrier.", "cp.async.bulk", "fence.", "bar.", "wgmma.")


class PtxSkeleton:
    """The skeleton of one PTX entry (module docstring): values as expressions of registers."""

    def __init__(self, ptx: str):
        self.items = parse_body(ptx)
        self.labels = {item: n for n, item in enumerate(self.items) if isinstance(item, str)}
        self.block_of: list[int] = []
        block = 0
        for item in self.items:
            if isinstance(item, str):
                block += 1
            self.block_of.append(block)
            if isinstance(item, Line) and item.opcode.startswith("bra"):
                block += 1
        self.writes: dict[str, list[int]] = {}
        for n, item in enumerate(self.items):
            if (
                isinstance(item, Line)
                and item.operands
                and not item.opcode.startswith(WRITES_NOTHING)
            ):
                self.writes.setdefault(item.operands[0], []).append(n)
            if isinstance(item, Line) and item.opcode.startswith("mbarrier.try_wait"):
                self.writes.setdefault(item.operands[0], []).append(n)
        self.memo: dict[tuple[str, int], Lin] = {}
        self.regions = self.find_regions()
        self.entries = [e for n, item in enumerate(self.items) for e in self.entries_of(n, item)]

    # ------------------------------------------------------------------ values

    def operand(self, text: str, at: int) -> Lin:
        """The value of operand `text` read by item `at`."""
        text = text.strip()
        if INTEGER.match(text):
            return Lin(int(text, 0))
        if "+" in text:
            base, _, offset = text.rpartition("+")
            return self.operand(base, at) + self.operand(offset, at)
        if text.startswith("%") and "." in text:
            return Lin.of(("sreg", text))
        if text.startswith("%"):
            return self.register(text, at)
        return Lin.of(("sym", text))

    def register(self, reg: str, at: int) -> Lin:
        writes = self.writes.get(reg, [])
        if not writes:
            return Lin.of(("undef", reg))
        if len({self.block_of[w] for w in writes}) > 1:
            return Lin.of(("reg", reg))  # a value merged from several blocks (a phi)
        before = [w for w in writes if w < at and self.block_of[w] == self.block_of[at]]
        if self.block_of[at] == self.block_of[writes[0]] and not before:
            return Lin.of(("reg", reg))  # read before its block writes it: loop-carried
        write = before[-1] if before else writes[-1]
        key = (reg, write)
        if key not in self.memo:
            self.memo[key] = self.definition(write)
        return self.memo[key]

    def definition(self, n: int) -> Lin:
        line = self.items[n]
        assert isinstance(line, Line)
        op, args = line.opcode, [self.operand(a, n) for a in line.operands[1:]]
        head = op.split(".")[0]
        if op.startswith("mbarrier.try_wait"):
            return Lin.of(("try_wait", Lin(n)))
        if head == "mov" and len(args) == 1:
            return args[0]
        if head == "add" and len(args) == 2:
            return args[0] + args[1]
        if head == "sub" and len(args) == 2:
            return args[0] - args[1]
        if op.startswith("mul.lo") and len(args) == 2:
            return mul(args[0], args[1])
        if op.startswith("mad.lo") and len(args) == 3:
            return mul(args[0], args[1]) + args[2]
        if head == "setp" and len(args) == 2:
            return node(op, *args)
        if head == "selp" and len(args) == 3:
            return node("selp", *args)
        if head == "ld" and ".param" in op:
            return Lin.of(("param", line.operands[1].strip("[]")))
        if op == "mul.hi.u32" and len(args) == 2:
            return node("mul.hi.u", *args)
        if op == "shr.u32" and len(args) == 2 and (quotient := udiv_of(*args)) is not None:
            return quotient
        if head in ("div", "rem", "min", "max", "shr") and len(args) == 2:
            return node(f"{head}.{'s' if op.endswith('s32') else 'u'}", *args)
        if head in ("and", "or", "xor", "shl") and len(args) == 2:
            return node(head, *args)
        if head == "cvta" and len(args) == 1:
            return node("cvta", *args)
        return Lin.of(("def", line.text))

    # ------------------------------------------------------------------ control flow

    def find_regions(self) -> list[tuple[int, int, Guard]]:
        """(first, last) item ranges run under a guard: the then-part of a forward
        conditional branch, the else-part after it, and loop bodies (a forward exit branch
        whose target follows the loop's backward branch)."""
        regions = []
        for n, item in enumerate(self.items):
            if not (isinstance(item, Line) and item.opcode.startswith("bra") and item.guard):
                continue
            target = self.labels.get(item.operands[0], -1)
            if target <= n:
                continue  # backward: a wait's spin loop (checked at the wait)
            negated = item.guard.startswith("!")
            cond = self.operand(item.guard.lstrip("!"), n)
            last = self.items[target - 1]
            back = isinstance(last, Line) and last.opcode.startswith("bra") and not last.guard
            back_target = self.labels.get(last.operands[0], -1) if back else -1  # type: ignore[union-attr]
            kind = "loop" if back and back_target < n else "if"
            regions.append((n + 1, target - 1, Guard(kind, cond, negated)))
            if back and back_target > target:  # if-else: the else-part runs otherwise
                regions.append((target + 1, back_target - 1, Guard("if", cond, not negated)))
        return regions

    def guards_at(self, n: int) -> tuple[Guard, ...]:
        inside = [r for r in self.regions if r[0] <= n <= r[1]]
        return tuple(g for _, _, g in sorted(inside, key=lambda r: (r[0], -r[1])))

    # ------------------------------------------------------------------ entries

    def entries_of(self, n: int, item: Line | str) -> list[Entry]:
        if isinstance(item, str) or not item.opcode.startswith(PROTOCOL):
            return []
        entry = self.entry(n, item)
        entry.guards = self.guards_at(n)
        if item.guard:
            entry.guards = (
                *entry.guards,
                Guard(
                    "pred", self.operand(item.guard.lstrip("!"), n), not item.guard.startswith("!")
                ),
            )
        entry.where, entry.text = f"line {item.number}", item.text
        return [entry]

    def address(self, text: str, n: int) -> Lin:
        match = ADDRESS.match(text.strip())
        if match is None:
            return Lin.of(("not-an-address", text))
        return self.operand(match.group(1), n)

    def entry(self, n: int, line: Line) -> Entry:
        op, ops = line.opcode, line.operands
        try:
            if op.startswith("mbarrier.init"):
                return Entry("mbarrier.init", (self.address(ops[0], n),), ints=(int(ops[1], 0),))
            if op.startswith("mbarrier.arrive.expect_tx"):
                addr = self.address(ops[1], n)
                return Entry("mbarrier.arrive.expect_tx", (addr,), ints=(int(ops[2], 0),))
            if op.startswith("mbarrier.arrive"):
                return Entry("mbarrier.arrive", (self.address(ops[1], n),))
            if op.startswith("mbarrier.try_wait.parity"):
                entry = Entry(
                    "mbarrier.try_wait.parity",
                    (self.address(ops[1], n),),
                    (self.operand(ops[2], n),),
                )
                entry.problem = self.spin_problem(n, line)
                return entry
            if op.startswith("cp.async.bulk.tensor") and ".shared::cluster.global" in op:
                tmap = self.symbol(ops[1].strip("[]").split(",")[0], n)
                return Entry(
                    "tma.load", (self.address(ops[0], n), self.address(ops[2], n)), symbol=tmap
                )
            if op.startswith("cp.async.bulk.tensor") and ".global.shared" in op:
                tmap = self.symbol(ops[0].strip("[]").split(",")[0], n)
                return Entry("tma.store", (self.address(ops[1], n),), symbol=tmap)
            if op == "cp.async.bulk.commit_group":
                return Entry("tma.commit_group")
            if op == "cp.async.bulk.wait_group.read":
                return Entry("tma.wait_group.read", ints=(int(ops[0], 0),))
            if op.startswith("wgmma.wait_group"):
                return Entry("wgmma.wait_group", ints=(int(ops[0], 0),))
            if op in ("bar.sync", "bar.arrive", "barrier.sync", "barrier.arrive"):
                return Entry(op.replace("barrier.", "bar."), ints=tuple(int(x, 0) for x in ops))
        except (ValueError, IndexError):
            return Entry(op, problem="operands not understood")
        for prefix, kind in (
            ("fence.mbarrier_init", "fence.mbarrier_init"),
            ("fence.proxy.async", "fence.proxy.async"),
            ("wgmma.fence", "wgmma.fence"),
            ("wgmma.mma_async", "wgmma.mma_async"),
            ("wgmma.commit_group", "wgmma.commit_group"),
        ):
            if op.startswith(prefix):
                return Entry(kind)
        return Entry(op, problem="not a protocol instruction the IR can print")

    def symbol(self, reg: str, n: int) -> str:
        """The parameter symbol a tensor-map operand's value is made from."""
        value = self.operand(reg, n)
        names = symbols(value)
        return names[0] if len(names) == 1 else f"<{value}>"

    def spin_problem(self, n: int, line: Line) -> str:
        """A try_wait may time out: it must loop back to itself until its predicate is set."""
        nxt = self.items[n + 1] if n + 1 < len(self.items) else None
        done = line.operands[0] if line.operands else ""
        ok = (
            isinstance(nxt, Line)
            and nxt.opcode.startswith("bra")
            and nxt.guard == f"!{done}"
            and self.labels.get(nxt.operands[0], -2) == n - 1
        )
        return "" if ok else "the wait does not branch back to itself until its predicate is set"


# ------------------------------------------------------------------------- comparison


def describe(entry: Entry, guards: bool = True) -> str:
    """The entry in words: kind, addresses, parity, integers, tensor map (and guards)."""
    parts = [entry.kind]
    parts += [f"[{a}]" for a in entry.addrs]
    parts += [f"parity {v}" for v in entry.values]
    parts += [str(i) for i in entry.ints]
    if entry.symbol:
        parts.append(entry.symbol)
    if guards and entry.guards:
        parts.append(
            "under "
            + " and ".join(f"{g.kind} {'' if g.taken else 'not '}({g.cond})" for g in entry.guards)
        )
    return " ".join(parts)


def match(ir: Entry, ptx: Entry, bound: Bindings) -> tuple[Bindings | None, str]:
    """Bindings under which `ptx` does what `ir` says, or None and the first difference."""
    if ptx.problem:
        return None, ptx.problem
    if ir.kind != ptx.kind:
        return None, "another instruction"
    if ir.ints != ptx.ints:
        return None, "other counts, bytes, depths or barrier ids"
    if ir.symbol != ptx.symbol:
        return None, "another tensor map"
    for what, mine, theirs in (("address", ir.addrs, ptx.addrs), ("parity", ir.values, ptx.values)):
        for a, b in zip(mine, theirs, strict=True):
            result = unify(a, b, bound)
            if result is None:
                return None, f"another {what}"
            bound = result
    if len(ir.guards) != len(ptx.guards):
        return None, "another thread guard (a branch around it added or removed)"
    for g, h in zip(ir.guards, ptx.guards, strict=True):
        result = unify(g.cond, h.cond, bound) if (g.kind, g.taken) == (h.kind, h.taken) else None
        if result is None:
            return None, "another thread guard"
        bound = result
    return bound, ""


@dataclass
class Validation:
    """What `validate_ptx` compared: entry counts per side."""

    instructions: int = 0
    bindings: Bindings = field(default_factory=dict)


def validate_kernel(kernel: func.FuncOp, ptx: str) -> Validation:
    ir = IrSkeleton(kernel).entries
    text = PtxSkeleton(ptx).entries
    bound: Bindings = {}
    name = kernel.sym_name.data
    for n in range(max(len(ir), len(text))):
        mine = ir[n] if n < len(ir) else None
        theirs = text[n] if n < len(text) else None
        if mine is None or theirs is None:
            reason = "the PTX has more protocol instructions" if mine is None else "missing"
        else:
            result, reason = match(mine, theirs, bound)
            if result is not None:
                bound = result
                continue
        guards = "guard" in reason
        ir_side = f"{describe(mine, guards)} @ {mine.where}" if mine else "nothing"
        ptx_side = (
            f"'{theirs.text}' ({describe(theirs, guards)}) @ {theirs.where}"
            if theirs
            else "nothing"
        )
        raise PtxValidationError(
            f"@{name}: error: the PTX does not do what the proved IR says at protocol "
            f"instruction {n + 1} ({reason}): IR: {ir_side}; PTX: {ptx_side}"
        )
    return Validation(len(ir), bound)


def validate_ptx(module: ModuleOp, ptx: str) -> Validation:
    """Check the PTX of `module`'s one kernel against it (module docstring)."""
    kernels = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(kernels) != 1 or ptx.count(".entry") != 1:
        raise PtxValidationError("ptx validation: expected one kernel and one .entry")
    return validate_kernel(kernels[0], ptx)
