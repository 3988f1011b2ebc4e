"""Bad input never gets a misleading answer: the reliability catalogue, one row per bad input.

Every command-line row runs a tool's `main` in this process on a bad input and asserts the exit
status, that stderr is exactly one line naming the place (`file:line:col`, the file, the option
or the argument) with the expected message, that no traceback was printed, and, where the tool
was asked to write a file, that nothing was written. The API rows do the same for exceptions of
the jit API, descriptors, the runtime and the autotune cache. Refusals that depend only on the
options (a ring too deep for shared memory) must come before the barrier-protocol proof.
"""

from __future__ import annotations

import io
import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.frontend import CompilationError
from tawa_xdsl.frontend.signature import DescriptorArg
from tawa_xdsl.tools import tawa, tawa_opt, tawa_run, tawa_verify

ROOT = Path(__file__).resolve().parents[2]
GEMM = str(ROOT / "examples" / "gemm.mlir")
ATTENTION = str(ROOT / "examples" / "attention.mlir")
REGRESSIONS = ROOT / "tests" / "regressions"
AREF_REPRO = str(REGRESSIONS / "repro-aref-e37511652c.json")
GPU_REPRO = str(REGRESSIONS / "gpu" / "repro-gpu-08be846894.json")
THIS_FILE = str(Path(__file__).resolve())
SMEM_LIMIT = "an sm_90 block may use at most 232448"
GEMM_RUN_ARGS = [
    "a_desc=randn:300x100",
    "b_desc=randn:200x100",
    "c_desc=zeros:300x200",
    "m=300",
    "n=200",
    "k=100",
]


# ------------------------------------------------------------------------ bad kernels


@tawa_xdsl.jit
def matmul(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BK)):
        a = a_desc.load([0, k * BK])
        b = b_desc.load([0, k * BK])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([0, 0], acc.to(tl.float16))


@tawa_xdsl.jit
def column_max(a_desc, c_desc):
    a = a_desc.load([0, 0])
    c_desc.store([0, 0], a - tl.max(a, axis=0)[None, :])  # RELIABILITY: column-max


@tawa_xdsl.jit
def runtime_shape(c_desc, BM):
    c_desc.store([0, 0], tl.zeros((BM, 64), dtype=tl.float32))  # RELIABILITY: shape


@tawa_xdsl.jit
def recursive(x):
    return recursive(x) + 1  # RELIABILITY: recursion


@tawa_xdsl.jit
def calls_recursive(c_desc, BLOCK: tl.constexpr):
    recursive(BLOCK)


def line_of(tag: str) -> int:
    lines = Path(THIS_FILE).read_text().splitlines()
    (line,) = [i + 1 for i, text in enumerate(lines) if text.endswith(f"# RELIABILITY: {tag}")]
    return line


def desc(shape: tuple[int, int], dtype=tl.float16) -> DescriptorArg:
    return DescriptorArg(dtype, shape)


def matmul_ir(block: int, k_block: int = 64) -> str:
    """Tile IR of `matmul` with `block` x `block` output tiles."""
    compiled = matmul.compile(
        desc((block, k_block)), desc((block, k_block)), desc((block, block)), 1024,
        BM=block, BN=block, BK=k_block,
    )  # fmt: skip
    return compiled.ir["tile"]


def column_max_ir() -> str:
    return column_max.compile(desc((64, 64)), desc((64, 64))).ir["tile"]


# ------------------------------------------------------------------------ the catalogue


@dataclass(frozen=True)
class Row:
    """One bad input: the tool, how to build its argv in `tmp` and what it must say."""

    name: str
    tool: str  # tawa-opt, tawa-verify, tawa-run, tawa
    argv: Callable[[Path], list[str]]
    status: int
    message: str  # a regex the single stderr line must match from its start
    writes: str | None = None  # a file the command was asked to write (must not exist)
    stdin: bytes | None = None


MAINS = {
    "tawa-opt": tawa_opt.main,
    "tawa-verify": tawa_verify.main,
    "tawa-run": tawa_run.main,
    "tawa": tawa.main,
}


def write(tmp: Path, name: str, data: str | bytes) -> str:
    path = tmp / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return str(path)


BINARY = bytes(range(128, 256)) * 4
TYPE_CLASH = """func.func @k(%x: !tile.desc<64x64xf16>) {
  %c0 = arith.constant 0 : i32
  %v = tile.load %x[%c0, %c0] : !tile.desc<64x64xf16> -> tensor<64x64xf16>
  tile.store %x[%c0, %c0], %v : !tile.desc<64x64xf16>, tensor<64x32xf16>
  func.return
}
"""
BAD_DESC = "func.func @k(%x: !tile.desc<0x4xf16>) {\n  func.return\n}\n"
NOT_JSON = "{ this is not json"
WS = "tawa-warp-specialize{stages=3 mma-depth=2 consumers=2}"
P = re.escape

ROWS = [
    # tawa-opt: files
    Row("opt-missing-file", "tawa-opt", lambda t: [str(t / "nope.mlir")], 1,
        r".*nope\.mlir: error: No such file or directory"),
    Row("opt-binary-file", "tawa-opt", lambda t: [write(t, "b.mlir", BINARY)], 1,
        r".*b\.mlir: error: not UTF-8 text \(byte 0x80 at offset 0\)"),
    Row("opt-type-clash", "tawa-opt", lambda t: [write(t, "k.mlir", TYPE_CLASH)], 1,
        r".*k\.mlir:4:\d+: error: .*tensor<64x32xf16>"),
    Row("opt-bad-type", "tawa-opt", lambda t: [write(t, "k.mlir", BAD_DESC)], 1,
        r".*k\.mlir:1:\d+: error: "),
    Row("opt-unwritable-output", "tawa-opt", lambda t: [GEMM, "-o", str(t / "no" / "x.mlir")],
        1, r".*x\.mlir: error: No such file or directory"),
    # tawa-opt: the pass pipeline
    Row("opt-unknown-pass", "tawa-opt", lambda t: [GEMM, "-p", "nope", "-o", str(t / "o")], 1,
        P("-p: error: unknown pass 'nope'"), writes="o"),
    Row("opt-int-option", "tawa-opt", lambda t: [GEMM, "-p", "tawa-warp-specialize{stages=abc}"],
        1, P("-p: error: tawa-warp-specialize: option 'stages' expects int | None, got 'abc'")),
    Row("opt-bool-option", "tawa-opt",
        lambda t: [GEMM, "-p", "tawa-warp-specialize{persistent=maybe}"], 1,
        P("-p: error: tawa-warp-specialize: option 'persistent' expects bool, got 'maybe'")),
    Row("opt-unknown-option", "tawa-opt", lambda t: [GEMM, "-p", "ring-depth{depth=3}"], 1,
        P("-p: error: ring-depth: no option 'depth' (options: stages")),
    Row("opt-malformed-pipeline", "tawa-opt", lambda t: [GEMM, "-p", "insert-aref{"], 1,
        P("-p: error: at column 13 of 'insert-aref{': ")),
    Row("opt-depth-zero", "tawa-opt",
        lambda t: [GEMM, "-p", "partition,insert-aref,ring-depth{stages=0}"], 1,
        r".*gemm\.mlir:5:1: error: ring-depth: stages must be at least 1, got 0"),
    Row("opt-four-consumers", "tawa-opt",
        lambda t: [GEMM, "-p", "tawa-warp-specialize{consumers=4}"], 1,
        r".*gemm\.mlir:5:1: error: cooperative-consumers: consumers must be 1, 2 or 3 "
        r"warpgroups, got 4"),
    Row("opt-three-consumers-128-rows", "tawa-opt",
        lambda t: [GEMM, "-p", "tawa-warp-specialize{consumers=3}"], 1,
        r".*error: cooperative-consumers: cannot split rows \[128\] into 3 warpgroups of a "
        r"multiple of 64 rows"),
    Row("opt-pingpong-one-slot", "tawa-opt",
        lambda t: [ATTENTION, "-p", "tawa-warp-specialize{stages=1 consumers=2 pingpong=true}"],
        1, r".*attention\.mlir:\d+:\d+: error: ring-depth: stages=1 with pingpong: one-slot "
        r"rings deadlock the ping-pong turns .*; use stages >= 2"),
    Row("opt-mma-depth-zero", "tawa-opt",
        lambda t: [GEMM, "-p", "tawa-warp-specialize{mma-depth=0}"], 1,
        r".*gemm\.mlir:5:1: error: mma-lag: mma-depth must be at least 1, got 0"),
    Row("opt-lower-aref-on-tile-ir", "tawa-opt", lambda t: [GEMM, "-p", "lower-aref"], 1,
        r".*gemm\.mlir:5:1: error: lower-aref: no aref ops to lower: run tawa-warp-specialize"),
    Row("opt-lower-to-nvgpu-on-tile-ir", "tawa-opt", lambda t: [GEMM, "-p", "lower-to-nvgpu"], 1,
        P("lower-to-nvgpu: @gemm needs exactly one aref.warp_specialize")),
    Row("opt-column-max-two-consumers", "tawa-opt",
        lambda t: [write(t, "colmax.mlir", column_max_ir()), "-p",
                   "tawa-warp-specialize{consumers=2},lower-aref,lower-to-nvgpu"], 1,
        r".*colmax\.mlir:\d+:\d+: error: cooperative-consumers: cannot split rows \[64\] into "
        r"2 warpgroups of a multiple of 64 rows"),
    # tawa-opt: shared memory, refused before lowering and before any PTX is written
    Row("opt-ring-1000-deep", "tawa-opt",
        lambda t: [GEMM, "-p", "tawa-warp-specialize{stages=1000},lower-aref,lower-to-nvgpu",
                   "-t", "ptx", "-o", str(t / "k.ptx")], 1,
        r".*gemm\.mlir:\d+:\d+: error: @gemm: needs 32785024 bytes of shared memory for ring "
        r"a_b_ring \(1000 slots of tensor<128x64xf16> \+ tensor<128x64xf16>, 32768 bytes each\); "
        + SMEM_LIMIT, writes="k.ptx"),
    Row("opt-pipeline-stages-1000", "tawa-opt",
        lambda t: [GEMM, "-p", "partition,insert-aref,ring-depth{stages=1000},distribute,"
                   "lower-aref,verify-pipeline"], 1,
        r".*gemm\.mlir:\d+:\d+: error: @gemm: needs 32785024 bytes of shared memory for ring "
        r"a_b_ring \(1000 slots "),
    Row("opt-256-tile-4-deep", "tawa-opt",
        lambda t: [write(t, "mm256.mlir", matmul_ir(256)), "-p",
                   "tawa-warp-specialize{stages=4},lower-aref,lower-to-nvgpu", "-t", "ptx",
                   "-o", str(t / "k.ptx")], 1,
        r".*: error: @matmul: needs 263232 bytes of shared memory for ring a_b_ring \(4 slots "
        r"of .*\); " + SMEM_LIMIT, writes="k.ptx"),
    # tawa-verify
    Row("verify-unknown-pass", "tawa-verify", lambda t: ["-p", "nope", GEMM], 2,
        P("-p: error: unknown pass 'nope'")),
    Row("verify-int-option", "tawa-verify",
        lambda t: ["-p", "tawa-warp-specialize{stages=abc}", GEMM], 2,
        P("-p: error: tawa-warp-specialize: option 'stages' expects int | None, got 'abc'")),
    Row("verify-pass-fails", "tawa-verify", lambda t: ["-p", "lower-to-nvgpu", GEMM], 2,
        P("-p: error: lower-to-nvgpu: @gemm needs exactly one aref.warp_specialize")),
    Row("verify-missing-file", "tawa-verify", lambda t: [str(t / "nope.mlir")], 2,
        r".*nope\.mlir: error: cannot read: No such file or directory"),
    Row("verify-binary-file", "tawa-verify", lambda t: [write(t, "b.mlir", BINARY)], 2,
        r".*b\.mlir: error: not UTF-8 text"),
    Row("verify-binary-stdin", "tawa-verify", lambda t: ["-"], 2,
        P("<stdin>: error: not UTF-8 text"), stdin=BINARY),
    Row("verify-type-clash", "tawa-verify", lambda t: [write(t, "k.mlir", TYPE_CLASH)], 2,
        r".*k\.mlir:4:\d+: error: "),
    Row("verify-tile-ir", "tawa-verify", lambda t: [GEMM], 2,
        r".*gemm\.mlir: error: no rings to verify: give the IR after lower-aref"),
    Row("verify-ring-1000-deep", "tawa-verify",
        lambda t: ["-p", "tawa-warp-specialize{stages=1000},lower-aref", GEMM], 2,
        r".*gemm\.mlir:\d+:\d+: error: @gemm: needs 32785024 bytes of shared memory for ring "
        r"a_b_ring .*; " + SMEM_LIMIT),
    # tawa-run
    Row("run-grid-zero", "tawa-run",
        lambda t: [GEMM, "--grid", "0", "--save", str(t / "o.npz"), "--args", *GEMM_RUN_ARGS], 1,
        P("error: --grid: every size must be at least 1, got '0'"), writes="o.npz"),
    Row("run-grid-text", "tawa-run", lambda t: [GEMM, "--grid", "4x2", "--args"], 1,
        P("error: --grid: bad grid '4x2'")),
    Row("run-swapped-names", "tawa-run",
        lambda t: [GEMM, "--grid", "6", "--save", str(t / "o.npz"), "--args",
                   *GEMM_RUN_ARGS[:3], "n=300", "m=200", "k=100"], 1,
        r".*gemm\.mlir:5:1: error: --args: argument 3 is named 'n', but parameter 3 of @gemm "
        r"is 'm'", writes="o.npz"),
    Row("run-wrong-name", "tawa-run",
        lambda t: [GEMM, "--grid", "6", "--args", "a=randn:300x100", *GEMM_RUN_ARGS[1:]], 1,
        r".*gemm\.mlir:5:1: error: --args: argument 0 is named 'a', but parameter 0 of @gemm "
        r"is 'a_desc'"),
    Row("run-huge-array", "tawa-run",
        lambda t: [GEMM, "--grid", "6", "--args", "a_desc=zeros:1048576x1048576:f16",
                   *GEMM_RUN_ARGS[1:]], 1,
        P("error: --args: argument 0 ('a_desc=zeros:1048576x1048576:f16'): cannot allocate a "
          "1048576x1048576 float16 array (2048.0 GiB)")),
    Row("run-count", "tawa-run", lambda t: [GEMM, "--grid", "6", "--args", *GEMM_RUN_ARGS[:5]],
        1, r".*gemm\.mlir:5:1: error: @gemm takes 6 arguments, got 5"),
    Row("run-unknown-kernel", "tawa-run", lambda t: [GEMM, "--grid", "1", "--kernel", "nope"], 1,
        r".*gemm\.mlir: error: no kernel named @nope in the module"),
    Row("run-missing-file", "tawa-run", lambda t: [str(t / "nope.mlir"), "--grid", "1"], 1,
        r".*nope\.mlir: error: cannot read: No such file or directory"),
    Row("run-binary-file", "tawa-run", lambda t: [write(t, "b.mlir", BINARY), "--grid", "1"], 1,
        r".*b\.mlir: error: not UTF-8 text"),
    Row("run-bad-kind", "tawa-run",
        lambda t: [GEMM, "--grid", "6", "--args", "a_desc=normal:4", *GEMM_RUN_ARGS[1:]], 1,
        P("error: --args: argument 0 ('a_desc=normal:4'): unknown array kind 'normal'")),
    # tawa repro, tawa fuzz, tawa compile
    Row("repro-unknown-level", "tawa", lambda t: ["repro", AREF_REPRO, "--level", "tile,gpx"], 1,
        P("tawa repro: error: --level: unknown level 'gpx' (levels: tile, compile, verify, "
          "aref, mbarrier, nvgpu, gpu)")),
    Row("repro-no-level", "tawa", lambda t: ["repro", AREF_REPRO, "--level", ""], 1,
        P("tawa repro: error: --level: no level given")),
    Row("repro-gpu-case-without-gpu", "tawa", lambda t: ["repro", GPU_REPRO], 2,
        r"tawa repro: .*repro-gpu-08be846894\.json: error: the case runs on the GPU \(level gpu\)"
        r" and no sm_90 \(H100/H200\) GPU is usable here"),
    Row("repro-gpu-level-without-gpu", "tawa", lambda t: ["repro", AREF_REPRO, "--level", "gpu"],
        2, r"tawa repro: .*: error: the case runs on the GPU"),
    Row("repro-not-json", "tawa", lambda t: ["repro", write(t, "r.json", NOT_JSON)], 1,
        r"tawa repro: .*r\.json: error: cannot read the reproducer: "),
    Row("repro-missing-file", "tawa", lambda t: ["repro", str(t / "r.json")], 1,
        r"tawa repro: .*r\.json: error: cannot read the reproducer: "),
    Row("repro-not-a-reproducer", "tawa", lambda t: ["repro", write(t, "r.json", '{"a": 1}')],
        1, r"tawa repro: .*r\.json: error: cannot read the reproducer: .*not a tawa fuzz "),
    Row("fuzz-no-minutes", "tawa", lambda t: ["fuzz", "--minutes", "0", "--out", str(t / "f")],
        1, P("tawa fuzz: --minutes must be positive"), writes="f"),
    Row("fuzz-gpu-without-gpu", "tawa",
        lambda t: ["fuzz", "--gpu", "--minutes", "1", "--out", str(t / "f")], 2,
        P("tawa fuzz: error: --gpu needs an sm_90 (H100/H200) GPU"), writes="f"),
    Row("compile-missing-file", "tawa", lambda t: ["compile", str(t / "k.py"), "--kernel", "k"],
        1, r"tawa compile: .*k\.py: error: no such file"),
    Row("compile-no-such-kernel", "tawa",
        lambda t: ["compile", str(ROOT / "examples" / "gemm.py"), "--kernel", "nope"], 1,
        r"tawa compile: .*gemm\.py: error: no @jit function named 'nope' \(found: "),
    Row("compile-bad-constexpr", "tawa",
        lambda t: ["compile", str(ROOT / "examples" / "gemm.py"), "--kernel", "gemm",
                   "--constexpr", "BLOCK_M"], 1,
        P("tawa compile: --constexpr expects NAME=VALUE, got 'BLOCK_M'")),
]  # fmt: skip


def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the machine look GPU-less, so the GPU refusals are tested on every machine."""
    from tawa_xdsl import runtime

    monkeypatch.setattr(runtime, "gpu_available", lambda: False)


def test_the_catalogue_is_large_enough() -> None:
    assert len(ROWS) >= 40
    assert len({row.name for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_bad_input_gets_one_line_naming_the_place(
    row: Row, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    no_gpu(monkeypatch)
    argv = row.argv(tmp_path)
    if row.stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(row.stdin)))
    status = MAINS[row.tool](argv)
    out, err = capsys.readouterr()
    assert status == row.status, (status, out, err)
    assert "Traceback" not in out + err
    lines = err.splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    if row.tool != "tawa":  # `tawa` prefixes its subcommand: `tawa repro: ...`
        assert line.startswith(f"{row.tool}: "), line
        line = line[len(row.tool) + 2 :]
    assert re.match(row.message, line), line
    if row.writes is not None:
        assert not (tmp_path / row.writes).exists()


# ---------------------------------------------------------------- refusals before the proof


def forbid_the_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any call of the barrier-protocol proof fails the test."""
    import tawa_xdsl.verify.check as check

    def proof(*args: object, **kwargs: object):
        raise AssertionError("the proof ran before the shared-memory refusal")

    monkeypatch.setattr(check, "check_module", proof)
    monkeypatch.setattr(check, "verify_module", proof)
    monkeypatch.setattr(tawa_verify, "prove_module", proof)


def test_a_1000_deep_ring_is_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from tawa_xdsl.diagnostics import parse_file
    from tawa_xdsl.dialects import make_context
    from tawa_xdsl.transforms.smem_budget import SharedMemoryError
    from tawa_xdsl.transforms.warp_specialize import warp_specialize

    forbid_the_proof(monkeypatch)
    module = parse_file(make_context(), GEMM)
    start = time.perf_counter()
    with pytest.raises(SharedMemoryError, match="needs 32785024 bytes") as info:
        warp_specialize(module, stages=1000)
    assert time.perf_counter() - start < 1.0
    assert info.value.need == 32785024


@pytest.mark.parametrize("tool", ["tawa-opt", "tawa-verify"])
def test_tools_refuse_deep_rings_before_the_proof(
    tool: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    forbid_the_proof(monkeypatch)
    passes = "tawa-warp-specialize{stages=32},lower-aref"
    argv = [GEMM, "-p", f"{passes},verify-pipeline"] if tool == "tawa-opt" else ["-p", passes, GEMM]
    assert MAINS[tool](argv) in (1, 2)
    assert "needs 1050112 bytes of shared memory" in capsys.readouterr().err


def test_python_api_refuses_big_tiles_before_the_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    from tawa_xdsl.compiler import CompileOptions, compile_to_ptx
    from tawa_xdsl.diagnostics import TawaError, parse_module
    from tawa_xdsl.dialects import make_context

    forbid_the_proof(monkeypatch)
    module = parse_module(make_context(), matmul_ir(256), "mm256.mlir")
    with pytest.raises(
        TawaError, match=f"needs 263232 bytes of shared memory for ring .*; {SMEM_LIMIT}"
    ):
        compile_to_ptx(module, CompileOptions(stages=4))
    deep = matmul.compile(desc((128, 64)), desc((128, 64)), desc((128, 128)), 1024,
                          BM=128, BN=128, BK=64, num_stages=1000)  # fmt: skip
    with pytest.raises(TawaError, match="needs 32785024 bytes of shared memory for ring a_b_ring"):
        deep.ir["aref"]


def test_pingpong_never_gets_one_slot_rings() -> None:
    """Ping-pong turns deadlock with one-slot rings (test_mutation_named_barriers): a given
    `stages=1` is refused in one line naming the options; a fitted depth is at least 2, so a
    kernel whose rings fit one slot only is refused for shared memory instead."""
    from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
    from tawa_xdsl.diagnostics import TawaError
    from tawa_xdsl.kernels import attention

    small = attention.tile_module(64)
    given = CompileOptions(stages=1, consumers=2, pingpong=True, verify=False)
    with pytest.raises(TawaError) as info:
        lower_to_nvgpu_level(small, given)
    assert re.fullmatch(r".*attention\.py:\d+:\d+: error: ring-depth: stages=1 with pingpong: "
                        r"[^\n]*; use stages >= 2", str(info.value)), info.value  # fmt: skip
    wide = attention.tile_module(256, block_n=128, block_m=128)  # K and V: 64 KiB a slot each
    for pingpong, depth in ((False, 1), (True, None)):
        options = CompileOptions(consumers=2, pingpong=pingpong, verify=False)
        ir: dict[str, str] = {}
        if depth is None:
            with pytest.raises(TawaError, match=r"2 slots of tensor<1x128x256xf16>") as info:
                lower_to_nvgpu_level(wide, options, ir)
            assert "\n" not in str(info.value)
        else:
            lower_to_nvgpu_level(wide, options, ir)
            assert set(re.findall(r"!aref\.ring<.*?, (\d+)>", ir["aref"])) == {str(depth)}


def test_the_early_count_equals_the_backend_plan() -> None:
    """The aref-level count is the backend's SmemPlan for a kernel without a staging buffer."""
    from xdsl.dialects import func

    from tawa_xdsl.backend.emit_ptx import SmemPlan
    from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
    from tawa_xdsl.diagnostics import parse_file
    from tawa_xdsl.dialects import make_context
    from tawa_xdsl.transforms.smem_budget import ring_needs, shared_memory_need
    from tawa_xdsl.transforms.warp_specialize import warp_specialize

    for path in (GEMM, str(ROOT / "examples" / "attention.mlir")):
        module = parse_file(make_context(), path)
        for stages in (1, 3):
            opts = CompileOptions(stages=stages, consumers=2, verify=False)
            ws = warp_specialize(module, stages=stages, mma_depth=2, consumers=2)
            nvgpu_level = lower_to_nvgpu_level(module, opts)
            kernel, lowered = (next(o for o in m.ops if isinstance(o, func.FuncOp))
                               for m in (ws, nvgpu_level))  # fmt: skip
            plan = SmemPlan.of(lowered).bytes
            assert shared_memory_need(ring_needs(kernel)) == plan, (path, stages)
            assert shared_memory_need(ring_needs(lowered)) == plan, (path, stages)


def test_emit_ptx_refuses_a_plan_over_the_limit() -> None:
    """emit-ptx checks the plan itself: IR lowered for a smaller limit is still refused."""
    from tawa_xdsl.backend.emit_ptx import EmitError, emit_ptx
    from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level, pipeline
    from tawa_xdsl.diagnostics import parse_module
    from tawa_xdsl.dialects import make_context
    from tawa_xdsl.transforms.lower_to_nvgpu import LowerToNvgpuPass
    from tawa_xdsl.transforms.smem_budget import SharedMemoryError

    module = parse_module(make_context(), matmul_ir(256), "mm256.mlir")
    opts = CompileOptions(stages=3, consumers=2, epilogue="tma", verify=False)
    # 3 x 64 KiB rings + the 128 KiB staging: ring-depth counts the staging and refuses
    with pytest.raises(SharedMemoryError, match=r"c_stage \(1 slots of tensor<256x256xf16>"):
        lower_to_nvgpu_level(module, opts)
    # lowered as if the rings were planned for the st.global epilogue: emit-ptx refuses
    planned = CompileOptions(stages=3, consumers=2, verify=False)
    ctx, lowered = make_context(), module.clone()
    for _, step in pipeline(planned):
        tma = LowerToNvgpuPass(epilogue="tma")
        (tma if isinstance(step, LowerToNvgpuPass) else step).apply(ctx, lowered)
    with pytest.raises(EmitError, match=r"^emit-ptx: @matmul needs \d+ bytes of shared memory"):
        emit_ptx(lowered)


# ------------------------------------------------------------------------------ the jit API


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "Traceback" not in text
    return text


def test_api_non_constexpr_block_shape() -> None:
    with pytest.raises(CompilationError) as info:
        runtime_shape.compile(desc((64, 64), tl.float32), 64)
    first, source = one_line(info.value).split("\n")
    assert first == (
        f"{THIS_FILE}:{line_of('shape')}: error: tile shape must be a compile-time constant "
        "tuple of ints, got (BM, 64): 'BM' is a run-time tl.int32 value (a shape takes "
        "literals and tl.constexpr parameters)"
    )
    assert source.strip().endswith("# RELIABILITY: shape")


def test_api_recursion() -> None:
    with pytest.raises(CompilationError) as info:
        calls_recursive.compile(desc((64, 64)), BLOCK=64)
    first, _ = one_line(info.value).split("\n")
    assert first == (
        f"{THIS_FILE}:{line_of('recursion')}: error: @jit calls nest deeper than 32 (recursion?)"
    )


def test_api_column_max_over_two_consumers_names_the_line() -> None:
    """Two consumer warpgroups cannot split the 64 rows of the kernel's tile (a reduction
    along them would span both): the kernel is named."""
    from xdsl.utils.exceptions import DiagnosticException

    compiled = column_max.compile(desc((64, 64)), desc((64, 64)), num_consumer_groups=2)
    with pytest.raises(DiagnosticException) as info:
        compiled.ir["nvgpu"]
    assert re.match(
        rf"{re.escape(THIS_FILE)}:{column_max.fn.__code__.co_firstlineno + 1}:\d+: error: "
        r"cooperative-consumers: cannot split rows \[64\] into 2 warpgroups",
        one_line(info.value),
    ), str(info.value)


def test_api_512_wide_box_names_the_line() -> None:
    from tawa_xdsl.diagnostics import TawaError

    compiled = matmul.compile(
        desc((64, 512)), desc((64, 512)), desc((64, 64)), 1024,
        BM=64, BN=64, BK=512, num_stages=1, num_consumer_groups=1,
    )  # fmt: skip
    with pytest.raises(TawaError) as info:
        compiled.ir["nvgpu"]
    text = one_line(info.value)
    assert re.match(rf"{re.escape(THIS_FILE)}:\d+:\d+: error: .*box dims must be at most 256", text)
    assert "\n" not in text


# ------------------------------------------------------------------- descriptors, runtime


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: tawa_xdsl.TensorDescriptor.from_tensor(np.zeros((4, 4), np.float16), [4]),
         ValueError, "block_shape [4] must have one dim per tensor dim"),
        (lambda: tawa_xdsl.TensorDescriptor.from_tensor(np.zeros((4, 4), np.float16), [0, 4]),
         ValueError, "block_shape dims must be positive"),
        (lambda: tawa_xdsl.TensorDescriptor.from_tensor(np.zeros((4, 4), np.int64), [4, 4]),
         TypeError, "TensorDescriptor element type must be one of float16"),
        (lambda: tawa_xdsl.TensorDescriptor.from_tensor([1, 2], [4]),
         TypeError, "TensorDescriptor.from_tensor: expected a numpy array, a torch tensor, or an "
                    "object with __cuda_array_interface__ or __dlpack__; got list"),
    ],
)  # fmt: skip
def test_descriptor_errors(make: Callable[[], object], error: type, message: str) -> None:
    with pytest.raises(error) as info:
        make()
    text = one_line(info.value)
    assert text.startswith(message) and "\n" not in text


def test_runtime_without_a_gpu_says_so_in_one_line() -> None:
    from tawa_xdsl import runtime as rt

    if rt.gpu_available():
        pytest.skip("a GPU is present; the GPU-less refusal cannot be observed here")
    with pytest.raises(rt.NoGPUError) as info:
        rt.require_gpu()
    assert "\n" not in one_line(info.value)


def test_tensor_map_box_over_256_names_the_argument() -> None:
    from tawa_xdsl.runtime.errors import TensorMapError
    from tawa_xdsl.runtime.tensormap import TensorMapSpec

    spec = TensorMapSpec(0x7F0000000000, "float16", (128, 1024), (1024, 1), (64, 512), name="A")
    with pytest.raises(TensorMapError) as info:
        spec.validate()
    assert one_line(info.value).startswith("A: box: dim 1 is 512; the TMA needs 1..256")


# ------------------------------------------------------------------------ the autotune cache


@tawa_xdsl.jit(interpret=True)
def double(x_desc, y_desc, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    y_desc.store([pid * BLOCK], x_desc.load([pid * BLOCK]) * 2.0)


def unwritable_cache(tmp_path: Path, kind: str) -> Path:
    if kind == "file":
        path = tmp_path / "cache"
        path.write_text("not a directory")
        return path
    if os.geteuid() == 0:  # root writes through permission bits: use a read-only file system
        return Path("/proc/tawa-cache")
    path = tmp_path / "ro"
    path.mkdir()
    path.chmod(0o500)
    return path


@pytest.mark.parametrize("kind", ["file", "read-only"])
def test_autotune_with_an_unwritable_cache_launches_the_winner(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tawa_xdsl.autotune import Config

    cache = unwritable_cache(tmp_path, kind)
    before = sorted(p.name for p in cache.iterdir()) if cache.is_dir() else None
    monkeypatch.setenv("TAWA_CACHE_DIR", str(cache))
    configs = [Config({"BLOCK": 16}, num_stages=2), Config({"BLOCK": 16}, num_stages=3)]
    times = iter([2.0, 1.0])

    def timer(run: Callable[[], None]) -> float:
        run()
        return next(times)

    tuned = tawa_xdsl.autotune(configs=configs, key=["n"], timer=timer, rounds=1)(double)
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    descs = [tawa_xdsl.TensorDescriptor.from_tensor(a, [16]) for a in (x, y)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned[(4,)](*descs, 64)
    (warning,) = [w for w in caught if "autotune" in str(w.message)]
    text = str(warning.message)
    assert "\n" not in text and f"cannot save the winner under {cache}" in text
    key = tuned.key_of({"x_desc": descs[0], "y_desc": descs[1], "n": 64})
    assert tuned.best[key] == configs[1]
    np.testing.assert_array_equal(y, 2 * x)
    assert (sorted(p.name for p in cache.iterdir()) if cache.is_dir() else None) == before


# ----------------------------------------------------------------------------- tawa repro


def test_repro_level_runs_the_levels_it_needs(capsys: pytest.CaptureFixture[str]) -> None:
    """`--level aref` runs the tile reference, the compile that builds the aref program and
    the aref interpreter (it used to run the tile level alone and call that a pass)."""
    assert tawa.main(["repro", AREF_REPRO, "--level", "aref"]) == 0
    out = capsys.readouterr().out
    assert "levels tile, compile, aref;" in out
    assert "passes now (ran: tile, compile, aref)" in out


def test_levels_to_run() -> None:
    from tawa_xdsl.fuzz.repro import LevelError, levels_to_run

    assert levels_to_run("aref") == ("tile", "compile", "aref")
    assert levels_to_run("mbarrier,tile") == ("tile", "compile", "mbarrier")
    assert levels_to_run("gpu") == ("tile", "gpu")
    with pytest.raises(LevelError, match="unknown level 'x'"):
        levels_to_run("tile,x")


@pytest.mark.parametrize("tool", ["tawa", "tawa-opt"])
def test_a_reader_that_closes_the_pipe_gets_no_traceback(
    tool: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tawa compile ... | head`: the printers stop quietly with the shell's SIGPIPE status."""
    attention = ["--kernel", "attn_fwd", "--constexpr", "HEAD_DIM=64", "--constexpr",
                 "BLOCK_M=128", "--constexpr", "BLOCK_N=64", "--constexpr", "CAUSAL=False",
                 "--signature", "desc<1x128x64xf16>,desc<1x64x64xf16>,desc<1x64x64xf16>,"
                 "desc<1x128x64xf16>,i32,f32"]  # fmt: skip
    argv = {
        "tawa": ["compile", str(ROOT / "examples" / "attention.py"), *attention],
        "tawa-opt": [GEMM, "-p", "tawa-warp-specialize"],
    }[tool]
    main = {"tawa": tawa.main, "tawa-opt": tawa_opt.main}[tool]
    read, write = os.pipe()
    os.close(read)  # the reader is gone: the first write fails with EPIPE
    saved = sys.stdout
    sys.stdout = os.fdopen(write, "w", buffering=1)
    try:
        assert main(argv) == 141
        print("x" * 100_000)  # stdout now goes nowhere, without an error
    finally:
        sys.stdout.close()
        sys.stdout = saved
    assert "Traceback" not in capsys.readouterr().err
