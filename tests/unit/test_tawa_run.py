"""`tawa-run`: argument specs, the report, --save, and one-line errors with exit status 1."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tawa_xdsl.tools.tawa_run import ArgSpec, SpecError, main, parse_grid, parse_spec

GEMM = str(Path(__file__).parents[2] / "examples" / "gemm.mlir")
GEMM_ARGS = [
    "a_desc=randn:300x100:f16",
    "b_desc=randn:200x100",
    "c_desc=zeros:300x200",
    "m=300",
    "n=200",
    "k=100",
]

BF16_KERNEL = """func.func @copy(%x: !tile.desc<4x8xbf16>, %o: !tile.desc<4x8xbf16>) {
  %c0 = arith.constant 0 : i32
  %v = tile.load %x[%c0, %c0] : !tile.desc<4x8xbf16> -> tensor<4x8xbf16>
  tile.store %o[%c0, %c0], %v : !tile.desc<4x8xbf16>, tensor<4x8xbf16>
  func.return
}
"""


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=randn:300x100:f16", ArgSpec("a", "randn", (300, 100), "f16")),
        ("c=zeros:300x200", ArgSpec("c", "zeros", (300, 200), None)),
        ("ones:7", ArgSpec("arg3", "ones", (7,), None)),
        ("x=arange:2x3x4:bf16", ArgSpec("x", "arange", (2, 3, 4), "bf16")),
        ("w=rand:8x8:f8E4M3FN", ArgSpec("w", "rand", (8, 8), "f8E4M3FN")),
        ("m=300", ArgSpec("m", "scalar", text="300")),
        ("-0.125", ArgSpec("arg3", "scalar", text="-0.125")),
        ("neg=-inf", ArgSpec("neg", "scalar", text="-inf")),
        ("q=npy:data/q.npy", ArgSpec("q", "npy", text="data/q.npy")),
    ],
)
def test_parse_spec(text: str, expected: ArgSpec) -> None:
    assert parse_spec(text, 3) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a=randn:300xq:f16", "bad shape '300xq' (expected sizes joined by 'x', such as 300x100)"),
        ("a=randn::f16", "bad shape ''"),
        ("a=randn:4:f17", "unknown dtype 'f17' (expected f16, bf16, f32, f64, f8E4M3FN"),
        ("a=normal:4", "unknown array kind 'normal' (expected zeros, ones, randn, rand, arange"),
        ("m=three", "bad scalar 'three' (expected a number, or KIND:SHAPE[:DTYPE])"),
        ("1a=5", "bad argument name '1a'"),
    ],
)
def test_parse_spec_errors(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=f"^{re.escape(message)}"):
        parse_spec(text, 0)


@pytest.mark.parametrize(("text", "grid"), [("4", (4,)), ("4,2", (4, 2)), ("6,1,1", (6, 1, 1))])
def test_parse_grid(text: str, grid: tuple[int, ...]) -> None:
    assert parse_grid(text) == grid


@pytest.mark.parametrize("text", ["", "4,", "a", "1,2,3,4", "-1"])
def test_parse_grid_errors(text: str) -> None:
    with pytest.raises(SpecError, match="^--grid: bad grid"):
        parse_grid(text)


# -------------------------------------------------------------------------------- runs


def test_gemm_report_and_save(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "out.npz"
    argv = [GEMM, "--grid", "6", "--seed", "3", "--save", str(out_file), "--args", *GEMM_ARGS]
    status, out, err = run_main(argv, capsys)
    assert (status, err) == (0, "")
    # Only the stored array is reported, and its numbers match a numpy GEMM on the same inputs.
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 100)).astype(np.float32).astype(np.float16)
    b = rng.standard_normal((200, 100)).astype(np.float32).astype(np.float16)
    reference = a.astype(np.float32) @ b.astype(np.float32).T
    saved = np.load(out_file)
    assert list(saved) == ["c_desc"]
    c = saved["c_desc"]
    assert c.dtype == np.float16 and c.shape == (300, 200)
    np.testing.assert_allclose(c.astype(np.float32), reference, rtol=2**-10, atol=2e-3)
    (line,) = out.splitlines()
    assert line.startswith("c_desc: 300x200 float16 sum=")
    assert f"max={c.astype(np.float64).max():.6g}" in line
    assert line.endswith(" nan=0 sha256=" + hashlib.sha256(c.tobytes()).hexdigest()[:16])


def test_seed_changes_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    small = ["randn:16x8", "randn:4x8", "zeros:16x4", "16", "4", "8"]
    outputs = []
    for seed in ("0", "0", "1"):
        status, out, _ = run_main([GEMM, "--grid", "1", "--seed", seed, "--args", *small], capsys)
        assert status == 0
        outputs.append(out)
    assert outputs[0] == outputs[1] != outputs[2]
    assert outputs[0].startswith("arg2: 16x4 float16 ")


def test_npy_input_and_bf16_save(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = tmp_path / "copy.mlir"
    kernel.write_text(BF16_KERNEL)
    x = (np.arange(32).reshape(4, 8) / 4).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", x)
    out_file = tmp_path / "o.npz"
    argv = [str(kernel), "--grid", "1", "--save", str(out_file)]
    argv += ["--args", f"x=npy:{tmp_path / 'x.npy'}", "o=zeros:4x8"]
    status, out, err = run_main(argv, capsys)
    assert (status, err) == (0, "")
    assert out.startswith("o: 4x8 bfloat16 sum=124 mean=3.875 min=0 max=7.75 nan=0 ")
    # bf16 is not a numpy type: the .npz holds the values as float32.
    saved = np.load(out_file)["o"]
    assert saved.dtype == np.float32
    np.testing.assert_array_equal(saved, x.astype(np.float32))


# ------------------------------------------------------------------------------ errors


def with_arg(position: int, spec: str) -> list[str]:
    args = list(GEMM_ARGS)
    args[position] = spec
    return args


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (GEMM_ARGS[:5], f"{GEMM}:5:1: error: @gemm takes 6 arguments, got 5"),
        (
            with_arg(0, "a_desc=randn:300x100:f32"),
            f"{GEMM}:5:1: error: @gemm argument 0 (!tile.desc<128x64xf16>): "
            "expected a float16 array, got float32",
        ),
        (
            with_arg(2, "c_desc=zeros:300"),
            f"{GEMM}:5:1: error: @gemm argument 2 (!tile.desc<128x128xf16>): "
            "expected a 2-D array, got shape (300,)",
        ),
        (
            with_arg(3, "m=zeros:3:i32"),
            f"{GEMM}:5:1: error: @gemm argument 3 (i32): expected a scalar, "
            "got an array of shape (3,)",
        ),
        (
            with_arg(1, "b_desc=7"),
            f"{GEMM}:5:1: error: @gemm argument 1 (!tile.desc<128x64xf16>): "
            "expected a numpy array, got int",
        ),
        (
            with_arg(5, "k=2.5"),
            f"{GEMM}:5:1: error: @gemm argument 5 (i32): expected an integer, got 2.5",
        ),
        (
            with_arg(4, "n=zeros:3"),
            "error: --args: argument 4 ('n=zeros:3'): give a dtype: the parameter is i32, "
            "not a descriptor",
        ),
        (
            with_arg(0, "a_desc=randn:300by100"),
            "error: --args: argument 0 ('a_desc=randn:300by100'): bad shape '300by100' "
            "(expected sizes joined by 'x', such as 300x100)",
        ),
        (
            with_arg(0, "a_desc=npy:/no/such/file.npy"),
            "error: --args: argument 0 ('a_desc=npy:/no/such/file.npy'): cannot load",
        ),
    ],
)
def test_argument_errors(args: list[str], message: str, capsys) -> None:
    status, out, err = run_main([GEMM, "--grid", "6", "--args", *args], capsys)
    assert status == 1 and out == ""
    assert err.startswith(f"tawa-run: {message}")
    assert err.count("\n") == 1, "the error is one line"


def test_bad_grid_and_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run_main([GEMM, "--grid", "6,x", "--args", *GEMM_ARGS], capsys)
    assert status == 1
    assert err == "tawa-run: error: --grid: bad grid '6,x' (expected 1 to 3 sizes such as 4,1,1)\n"
    status, _, err = run_main([GEMM, "--grid", "6", "--kernel", "mm", "--args"], capsys)
    assert (status, err) == (1, f"tawa-run: {GEMM}: error: no kernel named @mm in the module\n")


def test_parse_and_verify_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @k() {\n  %p = tile.program_id 3 : i32\n  func.return\n}\n")
    status, _, err = run_main([str(bad), "--grid", "1"], capsys)
    assert (status, err) == (
        1,
        f"tawa-run: {bad}:2:3: error: 'tile.program_id' axis must be 0, 1 or 2, got 3\n",
    )
    bad.write_text("func.func @k() {\n  %p = tile.nonsense : i32\n}\n")
    status, _, err = run_main([str(bad), "--grid", "1"], capsys)
    assert status == 1
    assert err == f"tawa-run: {bad}:2:22: error: Operation tile.nonsense is not registered\n"
    status, _, err = run_main([str(tmp_path / "missing.mlir"), "--grid", "1"], capsys)
    assert status == 1 and err.startswith(
        f"tawa-run: {tmp_path / 'missing.mlir'}: error: cannot read"
    )


def test_interpreter_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernel = tmp_path / "div.mlir"
    kernel.write_text(
        "func.func @k(%x: i32) {\n  %q = arith.divsi %x, %x : i32\n  func.return\n}\n"
    )
    status, _, err = run_main([str(kernel), "--grid", "1", "--args", "0"], capsys)
    assert (status, err) == (
        1,
        f"tawa-run: error: {kernel}:2:3: 'arith.divsi' (in @k): integer division by zero\n",
    )


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    with pytest.raises(SpecError):
        main([GEMM, "--grid", "x", "--debug", "--args"])


# ------------------------------------------------------------------ the console script


def test_console_script() -> None:
    # The installed entry point: exit status 1 and one line on stderr, no traceback.
    script = Path(sys.executable).parent / "tawa-run"
    argv = [str(script), GEMM, "--grid", "6", "--args", *GEMM_ARGS[:2]]
    result = subprocess.run(argv, capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr == f"tawa-run: {GEMM}:5:1: error: @gemm takes 6 arguments, got 2\n"
    assert result.stdout == ""


# ----------------------------------------------------------------------- the nvgpu level


def test_nvgpu_level_reports_what_the_tile_level_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--level nvgpu` compiles the tile kernel (D3 P2, two consumers) and runs it thread by
    thread; GEMM is exact at that level, so the report is the same line."""
    status, tile_out, _ = run_main([GEMM, "--grid", "6", "--args", *GEMM_ARGS], capsys)
    argv = [GEMM, "--grid", "6", "--level", "nvgpu", "--stages", "3", "--consumers", "2"]
    status_nvgpu, nvgpu_out, err = run_main([*argv, "--args", *GEMM_ARGS], capsys)
    assert (status, status_nvgpu, err) == (0, 0, "")
    assert nvgpu_out == tile_out


def test_nvgpu_level_runs_lowered_ir_and_refuses_what_cannot_lower(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lowered = tmp_path / "gemm_nvgpu.mlir"
    pipeline = (
        "tawa-warp-specialize{stages=2 mma-depth=1 consumers=1},lower-aref,lower-to-nvgpu,"
        "legalize-nvgpu"
    )
    text = subprocess.run(
        [sys.executable, "-m", "tawa_xdsl.tools.tawa_opt", GEMM, "-p", pipeline],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    lowered.write_text(text)
    status, out, err = run_main(
        [str(lowered), "--grid", "6", "--level", "nvgpu", "--args", *GEMM_ARGS], capsys
    )
    assert (status, err) == (0, "") and out.startswith("c_desc: 300x200 float16")
    bad = tmp_path / "copy.mlir"
    bad.write_text(BF16_KERNEL)
    status, _, err = run_main(
        [str(bad), "--grid", "1", "--level", "nvgpu", "--args", "randn:4x8", "zeros:4x8"], capsys
    )
    assert status == 1 and err.startswith(f"tawa-run: {bad}: error: cannot compile to the nvgpu")
    assert len(err.splitlines()) == 1
