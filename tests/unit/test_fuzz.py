"""The whole-program fuzzer: a bounded deterministic CPU profile, the numpy references catch
wrong programs, reproducers round-trip through `tawa repro`, and the `tawa fuzz` CLI (the
program families one by one: test_fuzz_families.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tawa_xdsl.fuzz.check import Case, FuzzFailure, Options, check_case
from tawa_xdsl.fuzz.programs import AttentionProgram, Bounds, EpilogueOp, GemmProgram
from tawa_xdsl.fuzz.repro import load_reproducer, write_reproducer
from tawa_xdsl.fuzz.runner import Summary, run_round
from tawa_xdsl.tools.tawa import main as tawa_main

GEMM = GemmProgram(
    dtype="f16",
    out_dtype="f16",
    block_m=128,
    block_n=64,
    block_k=32,
    epilogue=(EpilogueOp("scale", 0), EpilogueOp("relu"), EpilogueOp("bias")),
)


def gemm_case(**changes: object) -> Case:
    case = Case(
        program=GEMM,
        shape={"m": 150, "n": 70, "k": 45},
        seed=3,
        values="special",
        scalars=(-1.5,),
        options=Options(stages=2, mma_depth=2, consumers=2, persistent=True, sms=2),
        aref_schedule=[1, 0, 1],
        mbarrier_schedule="consumer-first",
    )
    return replace(case, **changes)  # type: ignore[arg-type]


# --------------------------------------------------------------------- the property


@pytest.mark.parametrize("kind", ["gemm", "rows", "attention"])
def test_bounded_deterministic_profile(kind: str, tmp_path: Path) -> None:
    """A derandomized Hypothesis run per program kind: every case passes every CPU level."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tawa_xdsl.fuzz.strategies import cases

    ran: list[str] = []

    # drawing warp-specializes (the depth must fit shared memory): slow on a loaded machine
    @settings(
        max_examples=6,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(case=cases(kind=kind), data=st.data())
    def prop(case: Case, data: st.DataObject) -> None:
        ran.extend(check_case(case).ran)

    prop()
    assert {"tile", "compile", "aref", "mbarrier", "nvgpu"} <= set(ran)


def test_run_round_summary(tmp_path: Path) -> None:
    summary = Summary()
    failure = run_round(summary, 0, tmp_path, max_examples=4, derandomize=True, kind="rows")
    assert failure is None and not summary.failures
    assert summary.cases >= 4 and set(summary.kinds) == {"rows"}
    text = summary.render()
    assert "programs tried" in text and "options covered" in text and "failures: none" in text
    assert "features:" in text and "not drawn" not in text


def test_good_cases_pass() -> None:
    check_case(gemm_case())
    attention = AttentionProgram("bf16", 128, 128, causal=True)
    check_case(Case(attention, {"heads": 1, "seq": 129}, 0, "large", (0.125,), Options(3, 2, 1)))


# ------------------------------------------------------------ the references catch bugs


def test_nvgpu_level_catches_a_register_layout_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wgmma A-register layout that disagrees with the accumulator's (values 1 and 2 of each
    quartet swapped): attention's P, converted register by register, feeds P @ V the wrong
    probabilities. Every level before nvgpu passes."""
    from tawa_xdsl.dialects.nvgpu import FragmentLayout
    from tawa_xdsl.interp import fragments

    acc = fragments.FRAGMENT_LAYOUTS[FragmentLayout.WGMMA_ACC]

    class SwappedOperandA:
        def values_per_thread(self, shape: tuple[int, ...]) -> int:
            return acc.values_per_thread(shape)

        def coords(self, shape: tuple[int, ...], thread: int, value: int) -> tuple[int, int]:
            return acc.coords(shape, thread, value ^ 3 if value & 3 in (1, 2) else value)

    layouts = {**fragments.FRAGMENT_LAYOUTS, FragmentLayout.WGMMA_OPERAND_A: SwappedOperandA()}
    monkeypatch.setattr(fragments, "FRAGMENT_LAYOUTS", layouts)
    fragments.coordinates.cache_clear()
    attention = AttentionProgram("f16", 128, 128, causal=False)
    case = Case(attention, {"heads": 1, "seq": 100}, 0, "normal", (0.125,), Options(2, 1, 2))
    try:
        with pytest.raises(FuzzFailure) as caught:
            check_case(case)
    finally:
        fragments.coordinates.cache_clear()
    assert caught.value.level == "nvgpu", caught.value.message


def mutate(text: str, old: str, new: str) -> str:
    """`text` with its one `old` replaced (the generated kernel must have exactly one)."""
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def test_numpy_reference_catches_a_missing_epilogue_op() -> None:
    """The IR has a min where the description's relu is a max: the tile level disagrees
    with numpy."""
    case = gemm_case()
    mutated = mutate(GEMM.tile_ir(), "arith.maximumf", "arith.minimumf")
    with pytest.raises(FuzzFailure) as caught:
        check_case(case.with_ir(mutated))
    assert caught.value.level == "tile"
    assert "outside the numpy bounds" in caught.value.message


def test_nan_never_passes_and_unwritten_outputs_are_caught() -> None:
    bounds = Bounds(np.full(3, -np.inf), np.full(3, np.inf))
    assert bounds.violations(np.array([0.0, np.nan, np.inf])).tolist() == [False, True, False]
    # a kernel that stores nothing leaves the NaN poison: caught at the tile level
    no_store = "\n".join(line for line in GEMM.tile_ir().splitlines() if "tile.store" not in line)
    with pytest.raises(FuzzFailure, match="NaN"):
        check_case(gemm_case().with_ir(no_store))


# --------------------------------------------------------------- reproducer round trip


def test_reproducer_round_trip_with_a_mutated_program(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mutated = mutate(GEMM.tile_ir(), "arith.mulf", "arith.addf")  # the scale
    case = gemm_case().with_ir(mutated)
    with pytest.raises(FuzzFailure) as caught:
        check_case(case)
    path = write_reproducer(caught.value, tmp_path)
    loaded, data = load_reproducer(path)
    assert data["level"] == "tile" and loaded.tile_ir == mutated
    assert loaded.program == GEMM and loaded.aref_schedule == [1, 0, 1]
    assert tawa_main(["repro", str(path)]) == 1
    out = capsys.readouterr().out
    assert "REPRODUCED at tile" in out and "D2 P2 C2 persistent" in out


def test_reproducer_round_trip_with_a_wrong_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cooperative consumers on 64-row tiles: the pipeline refuses, at the compile level."""
    program = replace(GEMM, block_m=64)
    case = gemm_case(program=program)
    with pytest.raises(FuzzFailure) as caught:
        check_case(case)
    assert caught.value.level == "compile"
    path = write_reproducer(caught.value, tmp_path)
    assert tawa_main(["repro", str(path)]) == 1
    assert "REPRODUCED at compile" in capsys.readouterr().out
    # fixed option: the same file with one consumer passes
    data = json.loads(path.read_text())
    data["case"]["options"]["consumers"] = 1
    path.write_text(json.dumps(data))
    assert tawa_main(["repro", str(path)]) == 0
    assert "passes now" in capsys.readouterr().out


# ----------------------------------------------------------------------------- the CLI


def test_tawa_fuzz_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = tawa_main(
        ["fuzz", "--minutes", "0.02", "--seed", "5", "--out", str(tmp_path), "--examples", "3"]
    )
    captured = capsys.readouterr()
    out = captured.out
    assert rc == 0, out
    assert "tawa fuzz (cpu, seed 5)" in out and "programs tried" in out
    assert "options covered" in out and "failures: none" in out
    # one progress line per round on stderr, so a killed run still leaves a trace
    assert "tawa fuzz: round 1: " in captured.err, captured.err


def test_tawa_fuzz_cli_one_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--kind rows` draws no-dot programs only."""
    args = ["fuzz", "--minutes", "0.01", "--seed", "2", "--out", str(tmp_path), "--examples"]
    assert tawa_main([*args, "2", "--kind", "rows"]) == 0
    out = capsys.readouterr().out
    assert "kinds:        rows " in out and "gemm" not in out.split("kinds:")[1].split("\n")[0]


def test_tawa_fuzz_gpu_without_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    from tawa_xdsl.runtime import gpu_available

    if gpu_available():
        pytest.skip("a GPU is present")
    assert tawa_main(["fuzz", "--gpu", "--minutes", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--gpu needs an sm_90" in err


def test_tawa_repro_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    assert tawa_main(["repro", str(bad)]) == 1
    assert "not a tawa fuzz reproducer" in capsys.readouterr().err


# ----------------------------------------------------------------- GPU mode, CPU side


def test_gpu_mode_compiles_or_says_why() -> None:
    """GPU cases compile to PTX (launched only on a GPU: tests/gpu/test_fuzz_gpu.py);
    programs the backend refuses (here: rings too deep for shared memory) are skipped with
    the reason."""
    from tawa_xdsl.fuzz.check import gpu_kernel

    plain = gpu_kernel(GemmProgram().tile_ir(), Options(3, 2, 2, persistent=True))
    assert not isinstance(plain, str) and ".target sm_90a" in plain.ptx
    epilogue = gpu_kernel(GEMM.tile_ir(), Options(3, 2, 1))
    assert not isinstance(epilogue, str), epilogue
    too_deep = AttentionProgram("f16", 128, 128).tile_ir()
    refused = gpu_kernel(too_deep, Options(6, 1, 1, persistent=True))
    assert isinstance(refused, str) and "GPU backend refuses" in refused
    assert "bytes of shared memory" in refused


def test_gpu_mode_a_failed_proof_is_a_failure_not_a_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    """compile_to_ptx proves the protocol; its ProtocolError must not be counted as a refusal."""
    import tawa_xdsl.verify.check as verify_check
    from tawa_xdsl import compiler
    from tawa_xdsl.fuzz.check import gpu_kernel

    def broken(module: object) -> None:
        raise verify_check.ProtocolError("ring r0: deadlock (planted)")

    monkeypatch.setattr(compiler, "check_module", broken)  # the proof compile_to_ptx runs
    gpu_kernel.cache_clear()
    with pytest.raises(verify_check.ProtocolError, match="planted"):
        gpu_kernel(GemmProgram(block_n=128).tile_ir(), Options(2, 1, 2))


def test_a_failure_that_does_not_repeat_is_reported_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen on the H200: a GPU failure that passed on Hypothesis's replay crashed the run."""
    import tawa_xdsl.fuzz.runner as runner

    calls = {"n": 0}

    def fails_once(case: Case, outcome: object = None) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise FuzzFailure("gpu", "LaunchError: once", case)

    monkeypatch.setattr(runner, "check_case", fails_once)
    summary = Summary()
    failure = run_round(summary, 0, tmp_path, max_examples=5, derandomize=True)
    assert failure is not None and failure.level == "gpu"
    assert summary.failures[0].message == "LaunchError: once (did not fail again on replay)"
    assert Path(summary.failures[0].path).exists()
