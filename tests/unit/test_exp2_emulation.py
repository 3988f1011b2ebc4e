"""exp2 on the FMA units (`emulate-exp2`, `nvgpu.fragment_unary exp2 emulated N`): the
polynomial's accuracy and edge values as the nvgpu interpreter computes them (the printer's
steps; tests/gpu/test_exp2_emulation_gpu.py compares the two on the H200), the op's verifier,
the printed instructions, the choice per kernel, and attention through the nvgpu interpreter
with every exp2 emulated."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import f32
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException

import tawa_xdsl.language as tl
from tawa_xdsl.compiler import CompileOptions, compile_to_ptx
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import FragmentLayout, FragmentType, UnaryKind
from tawa_xdsl.interp.fragments import exp2_polynomial
from tawa_xdsl.kernels import attention, gemm


def test_polynomial_is_within_its_bound_over_the_range() -> None:
    x = np.linspace(-125.99, 127.99, 400_001, dtype=np.float32)
    got, exact = exp2_polynomial(x).astype(np.float64), np.exp2(x.astype(np.float64))
    assert np.max(np.abs(got - exact) / exact) < 7.6e-5


def test_polynomial_edges() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 128.0, 300.0, -127.0, -126.5, -1e30, 0.0, 1.0, -1.0],
                 np.float32)  # fmt: skip
    got = exp2_polynomial(x)
    assert np.isnan(got[0])
    assert np.all(np.isposinf(got[[1, 3, 4]]))
    assert np.all(got[[2, 5, 6, 7]] == 0)  # 2^-126.5 is subnormal: flushed, as ex2.approx.ftz
    np.testing.assert_allclose(got[8:], [1.0, 2.0, 0.5], rtol=7.6e-5)


def fragment() -> Block:
    return Block(arg_types=[FragmentType(FragmentLayout.WGMMA_ACC, (64, 64), f32)])


@pytest.mark.parametrize(
    ("kind", "share", "message"),
    [
        (UnaryKind.LOG2, 2, "emulates exp2 only"),
        (UnaryKind.EXP2, 9, "emulated must be 1..8, got 9"),
    ],
)
def test_verifier_refuses(kind: UnaryKind, share: int, message: str) -> None:
    op = nvgpu.FragmentUnaryOp(kind, fragment().args[0], share)
    with pytest.raises(VerifyException, match=message):
        op.verify()


def test_printer_takes_every_eighth_value_of_the_share_off_the_mufu_unit() -> None:
    """d = 64 with 2 of 8 given; the printed polynomial is the interpreter's, step for step
    (clamp keeping NaN, floor by the magic add, cubic, exponent bits shifted into place)."""
    ptx = attention.compile_attention(64, "f16", False, exp2_emulation=2).ptx
    forced = attention.compile_attention(64, "f16", False, exp2_emulation=0).ptx
    polynomials = ptx.count("max.NaN.f32")
    assert polynomials > 0 and "max.NaN.f32" not in forced
    assert forced.count("ex2.approx") - ptx.count("ex2.approx") == polynomials
    steps = ["max.NaN.f32", "min.NaN.f32", "add.rm.f32", "sub.f32", "sub.f32", "fma.rn.f32",
             "fma.rn.f32", "fma.rn.f32", "shl.b32", "mul.ftz.f32"]  # fmt: skip
    lines = ptx.splitlines()
    start = next(i for i, line in enumerate(lines) if "max.NaN.f32" in line)
    assert [line.split()[0] for line in lines[start : start + len(steps)]] == steps


def test_chosen_only_where_the_mufu_unit_limits() -> None:
    """d = 64 (balanced: emulating measured slower), d = 128 (twice the flops a score) and the
    GEMM with a silu epilogue (its exp2 after the K loop, once a tile) keep ex2; the same
    GEMM with a share given emulates it."""
    assert "max.NaN.f32" not in attention.compile_attention(64, "f16", False).ptx
    assert "max.NaN.f32" not in attention.compile_attention(128, "f16", True).ptx
    module = gemm.gemm_tile_ir(128, 128, 64, tl.float16, activation="silu")
    chosen = compile_to_ptx(module, CompileOptions(verify=False)).ptx
    assert "max.NaN.f32" not in chosen and "ex2.approx" in chosen
    forced = compile_to_ptx(module, CompileOptions(verify=False, exp2_emulation=8)).ptx
    assert "max.NaN.f32" in forced and "ex2.approx" not in forced


def test_option_is_checked() -> None:
    with pytest.raises(TypeError, match="exp2_emulation"):
        CompileOptions(exp2_emulation="half")  # type: ignore[arg-type]
