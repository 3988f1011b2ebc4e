"""Property tests: random broadcasting expressions and GEMM shapes agree with numpy, and the
`tawa compile` CLI prints the IR or one clear error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl import TensorDescriptor
from tawa_xdsl.tools import tawa as tawa_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
D = TensorDescriptor.from_tensor
FAST = settings(max_examples=12, deadline=None, derandomize=True)


@tawa_xdsl.jit
def broadcast_kernel(x_desc, y_desc, out_desc, OP: tl.constexpr, X_ROW: tl.constexpr):
    x = x_desc.load([0])
    y = y_desc.load([0])
    x2 = x[None, :] if X_ROW else x[:, None]  # 1xN or Nx1
    y2 = y[:, None]  # Mx1
    if OP == "add":
        z = x2 + y2
    elif OP == "mul":
        z = x2 * y2
    elif OP == "max":
        z = tl.maximum(x2, y2)
    else:
        z = tl.where(x2 < y2, x2, y2 - 1)
    out_desc.store([0, 0], z)


@FAST
@given(
    n=st.sampled_from([1, 2, 4, 8]),
    op=st.sampled_from(["add", "mul", "max", "where"]),
    x_row=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_broadcasting_matches_numpy(n: int, op: str, x_row: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    x2 = x[None, :] if x_row else x[:, None]
    y2 = y[:, None]
    expected = {
        "add": lambda: x2 + y2,
        "mul": lambda: x2 * y2,
        "max": lambda: np.maximum(x2, y2),
        "where": lambda: np.where(x2 < y2, x2, y2 - 1),
    }[op]()
    out = np.zeros(expected.shape, np.float32)
    broadcast_kernel[(1,)](D(x, [n]), D(y, [n]), D(out, list(expected.shape)), OP=op, X_ROW=x_row)
    np.testing.assert_allclose(out, np.broadcast_to(expected, out.shape), rtol=1e-6)


@FAST
@given(m=st.integers(1, 70), n=st.integers(1, 40), k=st.integers(1, 50), seed=st.integers(0, 99))
def test_gemm_example_matches_numpy_for_ragged_shapes(m: int, n: int, k: int, seed: int) -> None:
    import sys

    sys.path.insert(0, str(EXAMPLES))
    try:
        import gemm
    finally:
        sys.path.pop(0)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    c = gemm.matmul(a, b, block_m=32, block_n=16, block_k=16, group_m=2)
    expected = a.astype(np.float32) @ b.astype(np.float32).T
    np.testing.assert_allclose(c.astype(np.float32), expected, rtol=1e-2, atol=2e-2)


# ------------------------------------------------------------------------------------ CLI

GEMM_ARGS = [
    "compile", str(EXAMPLES / "gemm.py"), "--kernel", "gemm",
    "--constexpr", "BLOCK_M=64", "--constexpr", "BLOCK_N=32", "--constexpr", "BLOCK_K=16",
    "--constexpr", "GROUP_M=4",
]  # fmt: skip


GEMM_TYPES = "desc<64x16xf16>,desc<32x16xf16>,desc<64x32xf16>,i32,i32,i32"


def test_cli_compile_prints_the_tile_ir(capsys: pytest.CaptureFixture[str]) -> None:
    signature = "a_desc=desc<64x16xf16>,b_desc=desc<32x16xf16>,c_desc=desc<64x32xf16>,i32,i32,i32"
    # A named entry types its parameter; an unnamed one the parameter at its position.
    assert tawa_cli.main([*GEMM_ARGS, "--signature", signature, "--stage", "tile"]) == 0
    out = capsys.readouterr().out
    assert "func.func @gemm(%a_desc: !tile.desc<64x16xf16>" in out
    assert "%k: i32)" in out
    assert "tensor<64x16xf16>, tensor<16x32xf16> -> tensor<64x32xf32>" in out  # a @ b.T


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--signature", "i32"], "no type for run-time parameter(s) b_desc, c_desc, m, n, k"),
        (["--signature", "desc<64x16xf99>"], "unknown element type 'f99'"),
        (["--signature", "Q=i32"], "'Q' is not a run-time parameter"),
        (["--constexpr", "BLOCK_M"], "--constexpr expects NAME=VALUE"),
        (["--stage", "sass", "--signature", GEMM_TYPES], "stage 'sass' is not available"),
    ],
)  # fmt: skip
def test_cli_errors_are_one_clear_line(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tawa_cli.main([*GEMM_ARGS, *extra]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_reports_compilation_errors_with_the_source_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel = tmp_path / "bad.py"
    kernel.write_text(
        "import tawa_xdsl\nimport tawa_xdsl.language as tl\n\n\n@tawa_xdsl.jit\n"
        "def k(out_desc):\n    x = tl.nope(1)\n"
    )
    assert (
        tawa_cli.main(["compile", str(kernel), "--kernel", "k", "--signature", "desc<4xf32>"]) == 1
    )
    err = capsys.readouterr().err
    assert f"{kernel}:7: error: unknown function tl.nope" in err
    assert err.rstrip().endswith("x = tl.nope(1)")
