"""Translation validation of the PTX (`verify.ptx_skeleton`): mutations of the printed PTX text
of the GEMM, the attention and the causal attention, persistent and not, each a real protocol
bug, are rejected with both sides named; the unmutated PTX of every option combination the
tests compile is accepted (`compile_to_ptx` validates every kernel it prints).

Each mutation edits one or two lines of today's printed PTX (found by pattern: a mutation that
finds nothing to edit fails the test, it is never skipped) and says why the mutated kernel is
wrong on the hardware (for some inputs: a missing release deadlocks once a loop runs more
than D iterations, a dropped store wait matters once a program has a second tile). The
mutated texts still assemble (`test_mutated_ptx_still_assembles`): each is rejected for what
it does, not for being unreadable.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

import tawa_xdsl.language as tl
from tawa_xdsl.backend.emit_ptx import emit_ptx
from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
from tawa_xdsl.kernels import attention
from tawa_xdsl.kernels.gemm import gemm_tile_ir
from tawa_xdsl.verify.ptx_skeleton import PtxSkeleton, PtxValidationError, validate_ptx


def attention_options(**changes) -> CompileOptions:
    return CompileOptions(stages=3, mma_depth=1, consumers=2, **changes)


KERNELS = {
    "gemm": (lambda: gemm_tile_ir(128, 128, 64, tl.float16), CompileOptions(2, 2, 2, False)),
    "gemm-persistent-tma": (
        lambda: gemm_tile_ir(128, 128, 64, tl.float16),
        CompileOptions(2, 2, 2, True, "tma"),
    ),
    "gemm-persistent-p1": (
        lambda: gemm_tile_ir(128, 128, 64, tl.float16),
        CompileOptions(3, 1, 1, True),
    ),
    "attention": (lambda: attention.tile_module(64, "f16", False), attention_options()),
    "attention-causal-persistent": (
        lambda: attention.tile_module(64, "f16", True),
        attention_options(persistent=True),
    ),
    "attention-causal-pingpong": (
        lambda: attention.tile_module(64, "f16", True),
        attention_options(pingpong=True),
    ),
    # 4-deep K/V rings: slot and phase printed as a shift and a mask, not a division
    "attention-ring4": (
        lambda: attention.tile_module(64, "f16", False),
        CompileOptions(stages=4, mma_depth=1, consumers=2),
    ),
}


@functools.cache
def kernel(name: str):
    """(nvgpu-level module, its PTX) of one kernel of `KERNELS`."""
    build, options = KERNELS[name]
    lowered = lower_to_nvgpu_level(build(), options)
    return lowered, emit_ptx(lowered)


# ----------------------------------------------------------------------- PTX text edits


def lines_matching(ptx: str, pattern: str) -> list[int]:
    lines = ptx.splitlines()
    found = [n for n, line in enumerate(lines) if re.search(pattern, line)]
    assert found, f"no PTX line matches {pattern!r}"
    return found


def edit(ptx: str, pattern: str, change: Callable[[str], str | None], nth: int = 0) -> str:
    """`ptx` with the nth line matching `pattern` replaced by `change(line)` (None: dropped)."""
    lines = ptx.splitlines()
    n = lines_matching(ptx, pattern)[nth]
    new = change(lines[n])
    assert new != lines[n], f"the edit of line {n} changed nothing"
    lines[n : n + 1] = [] if new is None else [new]
    return "\n".join(lines) + "\n"


def drop(pattern: str, nth: int = 0) -> Callable[[str], str]:
    return lambda ptx: edit(ptx, pattern, lambda line: None, nth)


def replace_in(pattern: str, old: str, new: str, nth: int = 0) -> Callable[[str], str]:
    """Replace the regex `old` by `new` (once) in the nth line matching `pattern`."""
    return lambda ptx: edit(ptx, pattern, lambda line: re.sub(old, new, line, count=1), nth)


def replace_every(old: str, new: str) -> Callable[[str], str]:
    """Replace the regex `old` by `new` on every line matching it."""

    def mutate(ptx: str) -> str:
        lines_matching(ptx, old)
        return re.sub(old, new, ptx)

    return mutate


def next_slot(pattern: str, stride: int, nth: int = 0) -> Callable[[str], str]:
    """The nth matching instruction's first `[%reg]` address moved by one slot."""
    return replace_in(pattern, r"\[(%\w+)\]", rf"[\1+{stride}]", nth)


def flip_parity(nth: int) -> Callable[[str], str]:
    """`xor 1` on the parity register of the nth try_wait, just before its wait loop."""

    def mutate(ptx: str) -> str:
        lines = ptx.splitlines()
        n = lines_matching(ptx, r"mbarrier\.try_wait\.parity")[nth]
        parity = lines[n].rstrip(";").split(",")[2].strip()  # pred, [addr], parity, hint
        assert parity.startswith("%"), lines[n]
        lines.insert(n - 1, f"    xor.b32 {parity}, {parity}, 1;")  # before the wait's label
        return "\n".join(lines) + "\n"

    return mutate


def producer_waits_on_full(ptx: str) -> str:
    """The producer's empty wait reads the address of the full barrier it arrives on next."""
    lines = ptx.splitlines()
    n = lines_matching(ptx, r"mbarrier\.try_wait\.parity")[0]
    m = next(k for k in range(n, len(lines)) if "arrive.expect_tx" in lines[k])
    full = re.search(r"\[([^\]]+)\]", lines[m]).group(1)
    lines[n] = re.sub(r"\[[^\]]+\]", f"[{full}]", lines[n], count=1)
    return "\n".join(lines) + "\n"


def copy_completes_on_empty(ptx: str) -> str:
    """The first TMA load completes on the empty barrier the producer waited on."""
    lines = ptx.splitlines()
    n = lines_matching(ptx, r"mbarrier\.try_wait\.parity")[0]
    empty = re.search(r"\[([^\]]+)\]", lines[n]).group(1)
    m = lines_matching(ptx, r"mbarrier::complete_tx")[0]
    lines[m] = re.sub(r"\[[^\]]+\];$", f"[{empty}];", lines[m])
    return "\n".join(lines) + "\n"


def unguarded_release(ptx: str) -> str:
    """The elected-thread branch around the consumer's first release dropped."""
    lines = ptx.splitlines()
    release = lines_matching(ptx, r"mbarrier\.arrive\.shared")[0]
    guard = next(k for k in range(release, 0, -1) if re.search(r"@!%p\w+ bra ", lines[k]))
    del lines[guard]
    return "\n".join(lines) + "\n"


def release_before_wgmma_retires(ptx: str) -> str:
    """The consumer's in-loop release moved above the wgmma.wait_group that retires the reads."""
    lines = ptx.splitlines()
    wait = lines_matching(ptx, r"wgmma\.wait_group")[0]
    release = next(k for k in range(wait, len(lines)) if "mbarrier.arrive.shared" in lines[k])
    moved = lines.pop(release)
    lines.insert(wait, moved)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Mutation:
    name: str
    kernel: str
    apply: Callable[[str], str]
    why: str  # what goes wrong on the hardware


MUTATIONS = [
    Mutation(
        "drop-wgmma-wait-group",
        "gemm",
        drop(r"wgmma\.wait_group\.sync\.aligned 1;"),
        "the slot is released while the wgmma reading it may still be in flight (WAR)",
    ),
    Mutation(
        "deeper-wgmma-wait",
        "gemm",
        replace_in(r"wgmma\.wait_group\.sync\.aligned 1;", r" 1;", " 2;"),
        "wait_group 2 leaves the wgmma of the released slot in flight (WAR)",
    ),
    Mutation(
        "p1-no-wgmma-wait",
        "gemm-persistent-p1",
        drop(r"wgmma\.wait_group\.sync\.aligned 0;"),
        "with MMA depth 1 the release follows the wgmma at once: released while read (WAR)",
    ),
    Mutation(
        "flip-producer-parity",
        "gemm",
        flip_parity(0),
        "the producer waits for the phase before the one that frees the slot: it overwrites a "
        "slot the consumers still read, or never passes",
    ),
    Mutation(
        "flip-consumer-parity",
        "gemm-persistent-tma",
        flip_parity(1),
        "the consumer passes its first full wait before any copy landed (stale read)",
    ),
    Mutation(
        "constant-consumer-parity",
        "gemm-persistent-p1",
        replace_in(r"mbarrier\.try_wait\.parity", r", %\w+(, \w+;)$", r", 0\1", 1),
        "parity 0 in every round: from the second ring turn on the wait passes at once",
    ),
    Mutation(
        "halve-expect-tx",
        "gemm",
        replace_in(r"arrive\.expect_tx", r"32768;$", "16384;"),
        "the full phase completes when half the bytes landed: the consumer reads a partial tile",
    ),
    Mutation(
        "halve-expect-tx-attention-k",
        "attention",
        replace_in(r"arrive\.expect_tx", r"16384;$", "8192;", 1),
        "the K tile's phase completes with half of it in shared memory (partial read)",
    ),
    Mutation(
        "release-next-slot",
        "gemm",
        next_slot(r"mbarrier\.arrive\.shared", 8),
        "the consumer frees the slot after the one it read: the producer overwrites data in "
        "use, and the slot it read is never freed (deadlock)",
    ),
    Mutation(
        "copy-into-next-slot",
        "gemm-persistent-tma",
        next_slot(r"mbarrier::complete_tx", 16384),
        "the A tile lands in the other slot, which a consumer may still read; the slot waited "
        "for keeps stale data",
    ),
    Mutation(
        "producer-waits-on-full",
        "gemm",
        producer_waits_on_full,
        "the producer waits on the full barrier (swapped with empty): it refills a slot the "
        "consumers have not released",
    ),
    Mutation(
        "copy-completes-on-empty",
        "attention-causal-persistent",
        copy_completes_on_empty,
        "the copy's bytes are counted on the empty barrier: the full phase never completes "
        "(deadlock) and the empty barrier's tx-count goes wrong",
    ),
    Mutation(
        "drop-consumer-release",
        "attention",
        drop(r"mbarrier\.arrive\.shared", 1),
        "one release missing: the producer waits for that slot forever (deadlock)",
    ),
    Mutation(
        "drop-drain-release",
        "gemm-persistent-tma",
        drop(r"mbarrier\.arrive\.shared", 1),
        "the lagged last use of a tile is never released: the next tile's producer deadlocks",
    ),
    Mutation(
        "release-by-every-thread",
        "gemm",
        unguarded_release,
        "128 threads arrive on an empty barrier of count 2: it completes early and over-counts",
    ),
    Mutation(
        "release-before-wgmma-retires",
        "gemm",
        release_before_wgmma_retires,
        "the release precedes the wait_group: the wgmma may still read the slot (WAR)",
    ),
    Mutation(
        "lag-guard-from-zero",
        "gemm",
        replace_in(r"setp\.ge\.s32 %p\w+, %r\w+, 1;", r", 1;$", ", 0;"),
        "the lagged release runs in the first iteration too: it frees slot -1, never acquired",
    ),
    Mutation(
        "wait-without-spin",
        "attention-causal-pingpong",
        drop(r"@!%p\w+ bra \$L_wait", 2),
        "try_wait may return false (time out): without its loop the consumer reads unlanded data",
    ),
    Mutation(
        "empty-count-one",
        "gemm",
        replace_in(r"mbarrier\.init.*, 2;", r", 2;$", ", 1;"),
        "two consumer warpgroups release each slot; count 1 frees it after the first (WAR)",
    ),
    Mutation(
        "drop-init-fence",
        "attention",
        drop(r"fence\.mbarrier_init"),
        "the inits are not made visible to the async proxy that TMA completes through",
    ),
    Mutation(
        "drop-init-barrier",
        "gemm-persistent-p1",
        drop(r"bar\.sync 0;"),
        "other warps may wait on or arrive at barriers not yet initialized",
    ),
    Mutation(
        "drop-tma-store-wait",
        "gemm-persistent-tma",
        drop(r"cp\.async\.bulk\.wait_group\.read", 0),
        "the next tile's accumulator overwrites the staging buffer the last TMA store still reads",
    ),
    Mutation(
        "drop-tma-commit",
        "gemm-persistent-tma",
        drop(r"cp\.async\.bulk\.commit_group"),
        "uncommitted stores are not waited for by wait_group.read: staging reused while read",
    ),
    Mutation(
        "drop-proxy-fence",
        "gemm-persistent-tma",
        drop(r"fence\.proxy\.async"),
        "the st.shared writes of the staging tile are not visible to the TMA store",
    ),
    Mutation(
        "staging-barrier-count",
        "gemm-persistent-tma",
        replace_in(r"bar\.sync 2, 128;", r"128;$", "64;", 1),
        "the first warpgroup's staging barrier completes on any two of its warps: its elected "
        "thread may issue its TMA store before its other warps wrote the staging tile",
    ),
    Mutation(
        "staging-barriers-merged",
        "gemm-persistent-tma",
        replace_every(r"bar\.sync 7, 128;", "bar.sync 2, 128;"),
        "the second warpgroup meets the first one's staging barrier, before and after its "
        "writes: one phase may complete with warps of both, before either wrote its whole tile",
    ),
    Mutation(
        "pingpong-arrive-wrong-barrier",
        "attention-causal-pingpong",
        replace_in(r"bar\.arrive 4, 256;", r"bar\.arrive 4", "bar.arrive 3"),
        "the turn is handed to the wrong barrier: the other warpgroup waits on 4 forever",
    ),
    Mutation(
        "pingpong-drop-arrive",
        "attention-causal-pingpong",
        drop(r"bar\.arrive 3, 256;"),
        "the first turn is never handed over: the second warpgroup's bar.sync 3 never completes",
    ),
    Mutation(
        "drop-wgmma-fence",
        "attention",
        drop(r"wgmma\.fence"),
        "the accumulator registers written before the wgmma are not fenced (undefined result)",
    ),
    Mutation(
        "drop-wgmma-commit",
        "attention-causal-persistent",
        drop(r"wgmma\.commit_group", 2),
        "the P V wgmmas join no group: wait_group 0 does not wait for them before V's slot is "
        "released and O is rescaled",
    ),
    Mutation(
        "slot-magic-of-another-depth",
        "attention",
        replace_in(r"mul\.hi\.u32", r", 2863311531;", ", 3435973837;"),
        "the ring of 3 slots indexed by a division by 5 (the multiply-high of 5): after five "
        "uses a wait lands on another use's slot (stale read or deadlock)",
    ),
    Mutation(
        "slot-magic-shift-off-by-one",
        "attention-causal-persistent",
        replace_in(r"shr\.u32 (%\w+), \1, 1;", r", 1;$", ", 2;"),
        "the quotient halved: slot and parity repeat every 6 uses of a 3-slot ring",
    ),
    Mutation(
        "slot-shift-of-another-depth",
        "attention-ring4",
        replace_in(r"shr\.u32 (%\w+), (%\w+), 2;", r", 2;$", ", 3;"),
        "a ring of 4 slots indexed by use / 8: two uses share a slot and a wait lands on "
        "another use's barrier",
    ),
    Mutation(
        "slot-mask-of-the-depth",
        "attention-ring4",
        replace_in(r"and\.b32 (%\w+), (%\w+), 3;", r", 3;$", ", 4;"),
        "use & 4 for use % 4: slot 0 or slot 4, past the ring, never slots 1 to 3",
    ),
    Mutation(
        "slot-shift-signed",
        "attention-ring4",
        replace_in(r"shr\.u32 (%\w+), (%\w+), 2;", r"shr\.u32", "shr.s32"),
        "an arithmetic shift: a different quotient once the counter's top bit is set (not the "
        "unsigned division the IR proved)",
    ),
]


def test_there_are_enough_mutations_over_every_kernel():
    assert len(MUTATIONS) >= 20
    assert {m.kernel for m in MUTATIONS} == set(KERNELS)


@pytest.mark.parametrize("name", KERNELS)
def test_the_printed_ptx_is_accepted(name: str):
    module, ptx = kernel(name)
    checked = validate_ptx(module, ptx)
    assert checked.instructions == len(PtxSkeleton(ptx).entries) > 10


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_a_mutated_ptx_is_rejected(mutation: Mutation):
    module, ptx = kernel(mutation.kernel)
    mutated = mutation.apply(ptx)
    assert mutated != ptx
    with pytest.raises(PtxValidationError) as error:
        validate_ptx(module, mutated)
    message = str(error.value)
    assert "\n" not in message
    assert " IR: " in message and "; PTX: " in message  # both sides shown


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not on PATH")
def test_mutated_ptx_still_assembles():
    """Every mutation is valid PTX: the validation rejects what it does, not its syntax."""
    texts = {m.name: m.apply(kernel(m.kernel)[1]) for m in MUTATIONS}
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(texts, pool.map(assemble, texts.values()), strict=True))
    failed = {name: r.log[-500:] for name, r in results.items() if r.returncode != 0}
    assert not failed, failed


def test_a_changed_parity_shows_both_sides():
    module, ptx = kernel("gemm")
    with pytest.raises(PtxValidationError, match=r"another parity.*IR: mbarrier\.try_wait"):
        validate_ptx(module, flip_parity(0)(ptx))


@pytest.mark.parametrize("name", ["gemm-persistent-tma", "attention-causal-pingpong"])
def test_register_names_and_address_folding_do_not_matter(name: str):
    """Values are compared, not text: registers renamed (in reverse order) and every
    `mad` of an address split into `mul` + `add` still validate."""
    module, ptx = kernel(name)
    count = len(set(re.findall(r"%r(\d+)\b", ptx)))
    renamed = re.sub(r"%r(\d+)\b", lambda m: f"%r{count - 1 - int(m.group(1))}", ptx)
    split = re.sub(
        r"mad\.lo\.u32 (%\w+), (%\w+), (\d+), (%\w+);",
        lambda m: (
            f"mul.lo.u32 {m[1]}, {m[2]}, {m[3]};\n    add.u32 {m[1]}, {m[1]}, {m[4]};"
            if m[1] != m[4]
            else m[0]
        ),
        renamed,
    )
    assert split != renamed and renamed != ptx
    validate_ptx(module, split)
