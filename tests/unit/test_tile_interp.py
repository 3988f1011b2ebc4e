"""The tile-level interpreter, one op handler at a time, against numpy.

Each test writes a small kernel, runs it with `run_kernel` and compares what it stored with a
numpy computation of the intended semantics: results rounded to their IR type after every op,
i32 arithmetic wrapping, signed division truncating toward zero, fp8 conversions saturating,
TMA loads reading zeros and TMA stores dropping elements outside the global tensor.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.interp.dtypes import InterpreterError
from tawa_xdsl.interp.tile import Descriptor, run_kernel

BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
IR_NAME = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float16): "f16",
    BF16: "bf16",
    E4M3: "f8E4M3FN",
    E5M2: "f8E5M2",
}
RNG = np.random.default_rng(0)


def run(params: str, body: str, args: list, grid: tuple[int, ...] | int = 1) -> list[np.ndarray]:
    """Run `func.func @k(params) { %c0 = 0; body; return }` and return the written arrays."""
    text = f"func.func @k({params}) {{\n  %c0 = arith.constant 0 : i32\n{body}\n  func.return\n}}"
    return run_kernel(parse_module(make_context(), text, "snippet.mlir"), grid, args)


def unary_kernel(op_line: str, n: int, in_type: str, out_type: str) -> tuple[str, str]:
    """A kernel that loads %x (n elements), computes `%r = op_line` on `%a`, stores %r."""
    params = f"%x: !tile.desc<{n}x{in_type}>, %o: !tile.desc<{n}x{out_type}>"
    body = f"""
  %a = tile.load %x[%c0] : !tile.desc<{n}x{in_type}> -> tensor<{n}x{in_type}>
  %r = {op_line}
  tile.store %o[%c0], %r : !tile.desc<{n}x{out_type}>, tensor<{n}x{out_type}>"""
    return params, body


def run_unary(op: str, x: np.ndarray, out_dtype: np.dtype | None = None) -> np.ndarray:
    """`op` is the text after `%r = `, with {t} for the tile type."""
    out_dtype = np.dtype(out_dtype or x.dtype)
    t = f"tensor<{x.size}x{IR_NAME[x.dtype]}>"
    params, body = unary_kernel(
        op.format(t=t, n=x.size), x.size, IR_NAME[x.dtype], IR_NAME[out_dtype]
    )
    out = np.zeros(x.size, out_dtype)
    run(params, body, [x, out])
    return out


def run_binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`%r = {op} %a, %b : tensor<n x T>` on two loaded 1-D tiles."""
    n, t = a.size, IR_NAME[a.dtype]
    params = f"%x: !tile.desc<{n}x{t}>, %y: !tile.desc<{n}x{t}>, %o: !tile.desc<{n}x{t}>"
    body = f"""
  %a = tile.load %x[%c0] : !tile.desc<{n}x{t}> -> tensor<{n}x{t}>
  %b = tile.load %y[%c0] : !tile.desc<{n}x{t}> -> tensor<{n}x{t}>
  %r = {op} %a, %b : tensor<{n}x{t}>
  tile.store %o[%c0], %r : !tile.desc<{n}x{t}>, tensor<{n}x{t}>"""
    out = np.zeros(n, a.dtype)
    run(params, body, [a, b, out])
    return out


def run_scalar_i32(body: str, x: int, y: int = 0) -> int:
    """Run scalar i32 code computing `%r` from `%x`, `%y`; returns %r as a Python int.

    An i32 does not fit an f32 exactly, so %r leaves through two f32 outputs: its high 16 bits
    (arithmetic shift) and its low 16 bits."""
    params = "%x: i32, %y: i32, %hi_out: !tile.desc<1xf32>, %lo_out: !tile.desc<1xf32>"
    body += """
  %c16 = arith.constant 16 : i32
  %mask = arith.constant 65535 : i32
  %hi = arith.shrsi %r, %c16 : i32
  %lo = arith.andi %r, %mask : i32
  %hi_t = tile.splat %hi : i32 -> tensor<1xi32>
  %lo_t = tile.splat %lo : i32 -> tensor<1xi32>
  %hi_f = tile.convert %hi_t : tensor<1xi32> -> tensor<1xf32>
  %lo_f = tile.convert %lo_t : tensor<1xi32> -> tensor<1xf32>
  tile.store %hi_out[%c0], %hi_f : !tile.desc<1xf32>, tensor<1xf32>
  tile.store %lo_out[%c0], %lo_f : !tile.desc<1xf32>, tensor<1xf32>"""
    hi, lo = np.zeros(1, np.float32), np.zeros(1, np.float32)
    run(params, body, [x, y, hi, lo])
    return int(hi[0]) * 65536 + int(lo[0])


def wrap32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


# ------------------------------------------------------------------------- program grid


def test_program_id_and_num_programs() -> None:
    # Program (i, j) of a 3x2 grid writes i + 10 j + 100 * nx + 1000 * ny at [j, i].
    params = "%o: !tile.desc<1x1xf32>"
    body = """
  %i = tile.program_id 0 : i32
  %j = tile.program_id 1 : i32
  %k = tile.program_id 2 : i32
  %nx = tile.num_programs 0 : i32
  %ny = tile.num_programs 1 : i32
  %nz = tile.num_programs 2 : i32
  %c10 = arith.constant 10 : i32
  %c100 = arith.constant 100 : i32
  %c1000 = arith.constant 1000 : i32
  %j10 = arith.muli %j, %c10 : i32
  %nx100 = arith.muli %nx, %c100 : i32
  %ny1000 = arith.muli %ny, %c1000 : i32
  %s0 = arith.addi %i, %j10 : i32
  %s1 = arith.addi %s0, %nx100 : i32
  %s2 = arith.addi %s1, %ny1000 : i32
  %s3 = arith.addi %s2, %k : i32
  %s4 = arith.addi %s3, %nz : i32
  %t = tile.splat %s4 : i32 -> tensor<1x1xi32>
  %f = tile.convert %t : tensor<1x1xi32> -> tensor<1x1xf32>
  tile.store %o[%j, %i], %f : !tile.desc<1x1xf32>, tensor<1x1xf32>"""
    out = np.zeros((2, 3), np.float32)
    run(params, body, [out], grid=(3, 2))
    i, j = np.meshgrid(np.arange(3), np.arange(2))
    np.testing.assert_array_equal(out, i + 10 * j + 300 + 2000 + 1)


# ------------------------------------------------------------------------- tile creation


def test_arange_and_splat() -> None:
    params = "%s: f32, %o: !tile.desc<8xf32>, %p: !tile.desc<8xf32>"
    body = """
  %r = tile.arange 5, 13 : tensor<8xi32>
  %rf = tile.convert %r : tensor<8xi32> -> tensor<8xf32>
  tile.store %o[%c0], %rf : !tile.desc<8xf32>, tensor<8xf32>
  %t = tile.splat %s : f32 -> tensor<8xf32>
  tile.store %p[%c0], %t : !tile.desc<8xf32>, tensor<8xf32>"""
    out, splat = np.zeros(8, np.float32), np.zeros(8, np.float32)
    run(params, body, [2.5, out, splat])
    np.testing.assert_array_equal(out, np.arange(5, 13))
    np.testing.assert_array_equal(splat, np.full(8, 2.5))


# ------------------------------------------------------------------------ layout changes


def test_expand_dims_and_broadcast() -> None:
    params = "%x: !tile.desc<8xf32>, %rows: !tile.desc<4x8xf32>, %cols: !tile.desc<8x4xf32>"
    body = """
  %v = tile.load %x[%c0] : !tile.desc<8xf32> -> tensor<8xf32>
  %row = tile.expand_dims %v, 0 : tensor<8xf32> -> tensor<1x8xf32>
  %col = tile.expand_dims %v, 1 : tensor<8xf32> -> tensor<8x1xf32>
  %rb = tile.broadcast %row : tensor<1x8xf32> -> tensor<4x8xf32>
  %cb = tile.broadcast %col : tensor<8x1xf32> -> tensor<8x4xf32>
  tile.store %rows[%c0, %c0], %rb : !tile.desc<4x8xf32>, tensor<4x8xf32>
  tile.store %cols[%c0, %c0], %cb : !tile.desc<8x4xf32>, tensor<8x4xf32>"""
    x = RNG.standard_normal(8).astype(np.float32)
    rows, cols = np.zeros((4, 8), np.float32), np.zeros((8, 4), np.float32)
    run(params, body, [x, rows, cols])
    np.testing.assert_array_equal(rows, np.broadcast_to(x[None, :], (4, 8)))
    np.testing.assert_array_equal(cols, np.broadcast_to(x[:, None], (8, 4)))


def test_reshape_and_trans() -> None:
    params = "%x: !tile.desc<1x4x8xf16>, %flat: !tile.desc<32xf16>, %t: !tile.desc<8x4xf16>"
    body = """
  %v = tile.load %x[%c0, %c0, %c0] : !tile.desc<1x4x8xf16> -> tensor<1x4x8xf16>
  %m = tile.reshape %v : tensor<1x4x8xf16> -> tensor<4x8xf16>
  %f = tile.reshape %m : tensor<4x8xf16> -> tensor<32xf16>
  %mt = tile.trans %m : tensor<4x8xf16> -> tensor<8x4xf16>
  tile.store %flat[%c0], %f : !tile.desc<32xf16>, tensor<32xf16>
  tile.store %t[%c0, %c0], %mt : !tile.desc<8x4xf16>, tensor<8x4xf16>"""
    x = RNG.standard_normal((1, 4, 8)).astype(np.float16)
    flat, t = np.zeros(32, np.float16), np.zeros((8, 4), np.float16)
    run(params, body, [x, flat, t])
    np.testing.assert_array_equal(flat, x.reshape(32))
    np.testing.assert_array_equal(t, x[0].T)


# ------------------------------------------------------------------------------- convert

CONVERT = "tile.convert %a : {t} -> tensor<{n}x{out}>"


def convert(x: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    return run_unary(CONVERT.replace("{out}", IR_NAME[np.dtype(out_dtype)]), x, out_dtype)


@pytest.mark.parametrize("out_dtype", [np.float16, BF16, E4M3, E5M2])
def test_convert_rounds_to_nearest_even(out_dtype: np.dtype) -> None:
    x = RNG.standard_normal(64).astype(np.float32) * 4
    got = convert(x, out_dtype)
    np.testing.assert_array_equal(got.astype(np.float32), x.astype(out_dtype).astype(np.float32))


def test_convert_f16_ties_to_even() -> None:
    # 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: the tie goes to the even mantissa (1);
    # 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 and 1 + 2^-9: it goes to 1 + 2^-9.
    x = np.array([1 + 2**-11, 1 + 3 * 2**-11, 65520.0, -65519.0], np.float32)
    got = convert(x, np.float16)
    np.testing.assert_array_equal(got, np.array([1, 1 + 2**-9, np.inf, -65504], np.float16))


@pytest.mark.parametrize(("out_dtype", "limit"), [(E4M3, 448.0), (E5M2, 57344.0)])
def test_convert_fp8_saturates(out_dtype: np.dtype, limit: float) -> None:
    x = np.array([1e6, -1e6, np.inf, -np.inf, np.nan, limit, 1.0, -0.5], np.float32)
    got = convert(x, out_dtype).astype(np.float32)
    expected = np.array([limit, -limit, limit, -limit, np.nan, limit, 1.0, -0.5], np.float32)
    np.testing.assert_array_equal(got, expected)


def test_convert_float_to_int_truncates_and_saturates() -> None:
    # f32 -> i32 -> f32: truncation toward zero, saturation at the i32 range, NaN -> 0.
    x = np.array([2.7, -2.7, 0.5, -0.5, 3e9, -3e9, np.nan, 7.0], np.float32)
    params, body = unary_kernel(
        "tile.convert %a : tensor<8xf32> -> tensor<8xi32>\n"
        "  %rf = tile.convert %r : tensor<8xi32> -> tensor<8xf32>",
        8,
        "f32",
        "f32",
    )
    out = np.zeros(8, np.float32)
    run(params, body.replace("tile.store %o[%c0], %r", "tile.store %o[%c0], %rf"), [x, out])
    # (2^31 - 1 reads back as the f32 2^31.)
    expected = np.array([2, -2, 0, 0, 2**31 - 1, -(2**31), 0, 7]).astype(np.float32)
    np.testing.assert_array_equal(out, expected)


# ---------------------------------------------------------------------- compare and where

PREDICATES = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


@pytest.mark.parametrize("predicate", PREDICATES)
def test_cmp_with_nan(predicate: str) -> None:
    # Floats compare ordered (false on NaN), except ne, which is true on NaN.
    a = np.array([1, 2, 3, np.nan, np.nan, 0.0, -0.0, np.inf], np.float32)
    b = np.array([2, 2, 2, 1, np.nan, -0.0, 0.0, np.inf], np.float32)
    params = "%x: !tile.desc<8xf32>, %y: !tile.desc<8xf32>, %o: !tile.desc<8xf32>"
    body = f"""
  %a = tile.load %x[%c0] : !tile.desc<8xf32> -> tensor<8xf32>
  %b = tile.load %y[%c0] : !tile.desc<8xf32> -> tensor<8xf32>
  %m = tile.cmp {predicate}, %a, %b : tensor<8xf32> -> tensor<8xi1>
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %ones = tile.splat %one : f32 -> tensor<8xf32>
  %zeros = tile.splat %zero : f32 -> tensor<8xf32>
  %r = tile.where %m, %ones, %zeros : tensor<8xi1>, tensor<8xf32>
  tile.store %o[%c0], %r : !tile.desc<8xf32>, tensor<8xf32>"""
    out = np.full(8, -1, np.float32)
    with np.errstate(invalid="ignore"):
        expected = PREDICATES[predicate](a, b)
    run(params, body, [a, b, out])
    np.testing.assert_array_equal(out, expected.astype(np.float32))
    assert out[3] == out[4] == (predicate == "ne")


@pytest.mark.parametrize("predicate", PREDICATES)
def test_cmp_integers_signed(predicate: str) -> None:
    # arange(-4, 4) against 0: the comparison is signed.
    params = "%o: !tile.desc<8xf32>"
    body = f"""
  %a = tile.arange -4, 4 : tensor<8xi32>
  %zeros = tile.splat %c0 : i32 -> tensor<8xi32>
  %m = tile.cmp {predicate}, %a, %zeros : tensor<8xi32> -> tensor<8xi1>
  %r = tile.where %m, %a, %zeros : tensor<8xi1>, tensor<8xi32>
  %rf = tile.convert %r : tensor<8xi32> -> tensor<8xf32>
  tile.store %o[%c0], %rf : !tile.desc<8xf32>, tensor<8xf32>"""
    out = np.full(8, 99, np.float32)
    run(params, body, [out])
    a = np.arange(-4, 4)
    np.testing.assert_array_equal(out, np.where(PREDICATES[predicate](a, 0), a, 0))


def test_where_selects_elementwise() -> None:
    params = "%x: !tile.desc<4x8xbf16>, %y: !tile.desc<4x8xbf16>, %o: !tile.desc<4x8xbf16>"
    body = """
  %a = tile.load %x[%c0, %c0] : !tile.desc<4x8xbf16> -> tensor<4x8xbf16>
  %b = tile.load %y[%c0, %c0] : !tile.desc<4x8xbf16> -> tensor<4x8xbf16>
  %m = tile.cmp gt, %a, %b : tensor<4x8xbf16> -> tensor<4x8xi1>
  %r = tile.where %m, %a, %b : tensor<4x8xi1>, tensor<4x8xbf16>
  tile.store %o[%c0, %c0], %r : !tile.desc<4x8xbf16>, tensor<4x8xbf16>"""
    a, b = (RNG.standard_normal((4, 8)).astype(BF16) for _ in range(2))
    out = np.zeros((4, 8), BF16)
    run(params, body, [a, b, out])
    np.testing.assert_array_equal(out, np.where(a > b, a, b))


# ---------------------------------------------------------------------------------- dot


def run_dot(in_dtype: np.dtype, acc_dtype: np.dtype, m: int = 16, n: int = 8, k: int = 32):
    ti, ta = IR_NAME[np.dtype(in_dtype)], IR_NAME[np.dtype(acc_dtype)]
    params = (
        f"%x: !tile.desc<{m}x{k}x{ti}>, %y: !tile.desc<{k}x{n}x{ti}>, "
        f"%z: !tile.desc<{m}x{n}x{ta}>, %o: !tile.desc<{m}x{n}x{ta}>"
    )
    body = f"""
  %a = tile.load %x[%c0, %c0] : !tile.desc<{m}x{k}x{ti}> -> tensor<{m}x{k}x{ti}>
  %b = tile.load %y[%c0, %c0] : !tile.desc<{k}x{n}x{ti}> -> tensor<{k}x{n}x{ti}>
  %c = tile.load %z[%c0, %c0] : !tile.desc<{m}x{n}x{ta}> -> tensor<{m}x{n}x{ta}>
  %r = tile.dot %a, %b, %c : tensor<{m}x{k}x{ti}>, tensor<{k}x{n}x{ti}> -> tensor<{m}x{n}x{ta}>
  tile.store %o[%c0, %c0], %r : !tile.desc<{m}x{n}x{ta}>, tensor<{m}x{n}x{ta}>"""
    a = RNG.standard_normal((m, k)).astype(in_dtype)
    b = RNG.standard_normal((k, n)).astype(in_dtype)
    c = RNG.standard_normal((m, n)).astype(acc_dtype)
    out = np.zeros((m, n), acc_dtype)
    run(params, body, [a, b, c, out])
    exact = a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)
    return out, exact


@pytest.mark.parametrize("in_dtype", [np.float16, BF16, E4M3, E5M2])
def test_dot_f32_accumulator(in_dtype: np.dtype) -> None:
    # Products of the rounded inputs are exact in f32; 32 of them summed in f32 stay within
    # a few f32 ulps of the exact (f64) result.
    out, exact = run_dot(in_dtype, np.float32)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, exact, rtol=1e-5, atol=1e-5)


def test_dot_f16_accumulator_rounds_once() -> None:
    # f32 accumulation, then one rounding to f16: the result is the f16 nearest to the f32
    # sum, so it is within half an f16 ulp (2^-11 relative) of the exact value.
    out, exact = run_dot(np.float16, np.float16)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), exact, rtol=2**-11, atol=2**-24 * 64)
    np.testing.assert_array_equal(out, exact.astype(np.float32).astype(np.float16))


# ------------------------------------------------------------------------------- reduce


@pytest.mark.parametrize(("kind", "function"), [("max", np.max), ("sum", np.sum)])
@pytest.mark.parametrize("axis", [0, 1])
def test_reduce(kind: str, function, axis: int) -> None:
    shape = (4, 8)
    out_n = shape[1 - axis]
    params = f"%x: !tile.desc<4x8xf32>, %o: !tile.desc<{out_n}xf32>"
    body = f"""
  %a = tile.load %x[%c0, %c0] : !tile.desc<4x8xf32> -> tensor<4x8xf32>
  %r = tile.reduce {kind} %a, {axis} : tensor<4x8xf32> -> tensor<{out_n}xf32>
  tile.store %o[%c0], %r : !tile.desc<{out_n}xf32>, tensor<{out_n}xf32>"""
    x = RNG.standard_normal(shape).astype(np.float32)
    out = np.zeros(out_n, np.float32)
    run(params, body, [x, out])
    np.testing.assert_allclose(out, function(x, axis=axis), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_reduce_sum_accumulates_in_f32(dtype: np.dtype) -> None:
    # 1024 ones: a running bf16 sum would stop at 256 (256 + 1 rounds back to 256), an f16
    # one at 2048. Accumulated in f32 and rounded once, the sum is exactly 1024.
    t = IR_NAME[np.dtype(dtype)]
    params = f"%x: !tile.desc<1x1024x{t}>, %o: !tile.desc<1x{t}>"
    body = f"""
  %a = tile.load %x[%c0, %c0] : !tile.desc<1x1024x{t}> -> tensor<1x1024x{t}>
  %r = tile.reduce sum %a, 1 : tensor<1x1024x{t}> -> tensor<1x{t}>
  tile.store %o[%c0], %r : !tile.desc<1x{t}>, tensor<1x{t}>"""
    out = np.zeros(1, dtype)
    run(params, body, [np.ones((1, 1024), dtype), out])
    assert float(out[0]) == 1024.0


def test_reduce_max_of_integers() -> None:
    params = "%o: !tile.desc<1xf32>"
    body = """
  %a = tile.arange -8, 8 : tensor<16xi32>
  %a2 = tile.reshape %a : tensor<16xi32> -> tensor<1x16xi32>
  %r = tile.reduce max %a2, 1 : tensor<1x16xi32> -> tensor<1xi32>
  %rf = tile.convert %r : tensor<1xi32> -> tensor<1xf32>
  tile.store %o[%c0], %rf : !tile.desc<1xf32>, tensor<1xf32>"""
    out = np.zeros(1, np.float32)
    run(params, body, [out])
    assert out[0] == 7


# ------------------------------------------------------------------- TMA loads and stores

COPY_PARAMS = "%x: !tile.desc<4x8xf32>, %o: !tile.desc<4x8xf32>, %i: i32, %j: i32"
COPY = """
  %a = tile.load %x[%i, %j] : !tile.desc<4x8xf32> -> tensor<4x8xf32>
  tile.store %o[%c0, %c0], %a : !tile.desc<4x8xf32>, tensor<4x8xf32>"""


def reference_load(x: np.ndarray, i: int, j: int, shape: tuple[int, int]) -> np.ndarray:
    """The block at (i, j) with zeros outside x, by padding x."""
    pad = max(shape) + max(abs(i), abs(j))
    padded = np.pad(x, pad)
    return padded[pad + i : pad + i + shape[0], pad + j : pad + j + shape[1]]


@pytest.mark.parametrize(
    ("i", "j"), [(0, 0), (-2, 0), (0, -3), (-2, -3), (8, 4), (9, 12), (-4, 0), (100, -100)]
)
def test_load_zero_fills_outside(i: int, j: int) -> None:
    x = RNG.standard_normal((10, 14)).astype(np.float32)
    out = np.full((4, 8), np.nan, np.float32)
    run(COPY_PARAMS, COPY, [x, out, i, j])
    np.testing.assert_array_equal(out, reference_load(x, i, j, (4, 8)))


@pytest.mark.parametrize(("i", "j"), [(0, 0), (-2, -3), (8, 10), (-1, 12), (20, 0), (-4, -8)])
def test_store_clips_outside(i: int, j: int) -> None:
    params = "%x: !tile.desc<4x8xf32>, %o: !tile.desc<4x8xf32>, %i: i32, %j: i32"
    body = """
  %a = tile.load %x[%c0, %c0] : !tile.desc<4x8xf32> -> tensor<4x8xf32>
  tile.store %o[%i, %j], %a : !tile.desc<4x8xf32>, tensor<4x8xf32>"""
    block = RNG.standard_normal((4, 8)).astype(np.float32)
    out = np.full((10, 14), -7, np.float32)
    (written,) = run(params, body, [block, out, i, j])
    assert written is out
    expected = np.full((10 + 40, 14 + 40), -7, np.float32)
    expected[20 + i : 24 + i, 20 + j : 28 + j] = block
    np.testing.assert_array_equal(out, expected[20:30, 20:34])


def test_descriptor_load_store_directly() -> None:
    d = Descriptor(np.arange(12, dtype=np.float32).reshape(3, 4), (2, 2))
    np.testing.assert_array_equal(d.load([2, 3]), [[11, 0], [0, 0]])
    d.store([-1, -1], np.array([[1, 2], [3, 4]], np.float32))
    assert d.array[0, 0] == 4 and d.array[0, 1] == 1


def test_only_written_arrays_are_returned() -> None:
    x, out = np.ones((4, 8), np.float32), np.zeros((4, 8), np.float32)
    written = run(COPY_PARAMS, COPY, [x, out, 0, 0])
    assert len(written) == 1 and written[0] is out


# ------------------------------------------------------------------ arith on float tiles

FLOAT_BINARY = {
    "arith.addf": np.add,
    "arith.subf": np.subtract,
    "arith.mulf": np.multiply,
    "arith.divf": np.divide,
    "arith.maximumf": np.maximum,
    "arith.minimumf": np.minimum,
    "arith.maxnumf": np.fmax,
    "arith.minnumf": np.fmin,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("op", FLOAT_BINARY)
def test_float_binary(op: str, dtype: np.dtype) -> None:
    # The result is the exact result rounded once to the tile's type: computing in f64 and
    # rounding gives the same value for f16/bf16 (and f32 for +-*/ since f64 has > 2*24+2 bits).
    a = RNG.standard_normal(64).astype(dtype)
    b = RNG.standard_normal(64).astype(dtype)
    got = run_binary(op, a, b)
    with np.errstate(all="ignore"):
        expected = FLOAT_BINARY[op](a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, expected)


def test_float_min_max_nan() -> None:
    # maximumf/minimumf propagate NaN; maxnumf/minnumf return the other operand.
    a = np.array([np.nan, 1, np.nan, -0.0], np.float32)
    b = np.array([2, np.nan, np.nan, 0.0], np.float32)
    np.testing.assert_array_equal(run_binary("arith.maximumf", a, b), [np.nan, np.nan, np.nan, 0])
    np.testing.assert_array_equal(
        run_binary("arith.minimumf", a, b), [np.nan, np.nan, np.nan, -0.0]
    )
    np.testing.assert_array_equal(run_binary("arith.maxnumf", a, b), [2, 1, np.nan, 0])
    np.testing.assert_array_equal(run_binary("arith.minnumf", a, b), [2, 1, np.nan, -0.0])


@pytest.mark.parametrize(("dtype", "tiny"), [(np.float16, 2.0**-12), (BF16, 2.0**-9)])
def test_each_op_rounds_to_its_type(dtype: np.dtype, tiny: float) -> None:
    # (1 + tiny) - 1: tiny is below half an ulp of 1, so 1 + tiny rounds to 1 in the tile's
    # type and the difference is 0. Carried in f32 between ops, it would be `tiny`.
    t = IR_NAME[np.dtype(dtype)]
    params = f"%x: !tile.desc<4x{t}>, %y: !tile.desc<4x{t}>, %o: !tile.desc<4x{t}>"
    body = f"""
  %a = tile.load %x[%c0] : !tile.desc<4x{t}> -> tensor<4x{t}>
  %b = tile.load %y[%c0] : !tile.desc<4x{t}> -> tensor<4x{t}>
  %s = arith.addf %a, %b : tensor<4x{t}>
  %r = arith.subf %s, %a : tensor<4x{t}>
  tile.store %o[%c0], %r : !tile.desc<4x{t}>, tensor<4x{t}>"""
    out = np.full(4, -1, dtype)
    run(params, body, [np.ones(4, dtype), np.full(4, tiny, dtype), out])
    np.testing.assert_array_equal(out.astype(np.float32), np.zeros(4))


def test_scalar_float_arith() -> None:
    # sm_scale * log2(e) as attention computes it, in f32.
    params = "%s: f32, %o: !tile.desc<1xf32>"
    body = """
  %log2e = arith.constant 1.44269504 : f32
  %m = arith.mulf %s, %log2e : f32
  %n = arith.negf %m : f32
  %t = tile.splat %n : f32 -> tensor<1xf32>
  tile.store %o[%c0], %t : !tile.desc<1xf32>, tensor<1xf32>"""
    out = np.zeros(1, np.float32)
    run(params, body, [0.125, out])
    assert out[0] == -(np.float32(0.125) * np.float32(1.44269504))


# ---------------------------------------------------------------------------- math ops

UNARY = {
    "arith.negf": np.negative,
    "math.exp2": np.exp2,
    "math.exp": np.exp,
    "math.log2": np.log2,
    "math.log": np.log,
    "math.sqrt": np.sqrt,
    "math.rsqrt": lambda x: 1 / np.sqrt(x),
    "math.absf": np.abs,
    "math.tanh": np.tanh,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("op", UNARY)
def test_unary(op: str, dtype: np.dtype) -> None:
    positive = op in ("math.log2", "math.log", "math.sqrt", "math.rsqrt")
    x = RNG.standard_normal(64).astype(np.float32) * 3
    x = (np.abs(x) + 0.01 if positive else x).astype(dtype)
    got = run_unary(f"{op} %a : {{t}}", x)
    expected = UNARY[op](x.astype(np.float64))
    assert got.dtype == np.dtype(dtype)
    if dtype == np.float32:
        np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-30)
    else:
        # A correctly rounded result is the exact one rounded to the type.
        np.testing.assert_array_equal(got, expected.astype(dtype))


def test_exp2_of_minus_infinity_is_zero() -> None:
    # Masked attention scores are -inf; exp2 must turn them into exact zeros.
    x = np.array([-np.inf, 0, 1, -1], np.float32)
    np.testing.assert_array_equal(run_unary("math.exp2 %a : {t}", x), [0, 1, 2, 0.5])


# ------------------------------------------------------------------- integer arithmetic

INT_BINARY = {
    "addi": lambda a, b: wrap32(a + b),
    "subi": lambda a, b: wrap32(a - b),
    "muli": lambda a, b: wrap32(a * b),
    "maxsi": max,
    "minsi": min,
    "andi": lambda a, b: a & b,
    "ori": lambda a, b: a | b,
    "xori": lambda a, b: a ^ b,
}
INT_PAIRS = [
    (7, 2),
    (-7, 2),
    (7, -2),
    (-7, -2),
    (2**31 - 1, 1),
    (-(2**31), -1),
    (65537, 65536),
    (-123456789, 987654),
    (0, 5),
]


@pytest.mark.parametrize(("x", "y"), INT_PAIRS)
@pytest.mark.parametrize("op", INT_BINARY)
def test_int_binary_wraps(op: str, x: int, y: int) -> None:
    got = run_scalar_i32(f"  %r = arith.{op} %x, %y : i32", x, y)
    assert got == INT_BINARY[op](x, y)


def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return wrap32(q if (a < 0) == (b < 0) else -q)


@pytest.mark.parametrize(("x", "y"), [p for p in INT_PAIRS if p[1] != 0])
def test_divsi_remsi_ceildivsi(x: int, y: int) -> None:
    # divsi truncates toward zero (-7 / 2 = -3), remsi takes the dividend's sign (-7 % 2 =
    # -1), ceildivsi rounds up (7 / 2 = 4, -7 / 2 = -3). INT_MIN / -1 wraps to INT_MIN.
    assert run_scalar_i32("  %r = arith.divsi %x, %y : i32", x, y) == trunc_div(x, y)
    assert run_scalar_i32("  %r = arith.remsi %x, %y : i32", x, y) == wrap32(
        x - trunc_div(x, y) * y
    )
    assert run_scalar_i32("  %r = arith.ceildivsi %x, %y : i32", x, y) == wrap32(-((-x) // y))


def test_division_examples() -> None:
    assert run_scalar_i32("  %r = arith.divsi %x, %y : i32", -7, 2) == -3
    assert run_scalar_i32("  %r = arith.remsi %x, %y : i32", -7, 2) == -1
    assert run_scalar_i32("  %r = arith.ceildivsi %x, %y : i32", 7, 2) == 4
    assert run_scalar_i32("  %r = arith.ceildivsi %x, %y : i32", -7, 2) == -3
    assert run_scalar_i32("  %r = arith.ceildivsi %x, %y : i32", 300, 128) == 3


@pytest.mark.parametrize("op", ["divsi", "remsi", "ceildivsi"])
def test_division_by_zero_names_the_op(op: str) -> None:
    with pytest.raises(
        InterpreterError,
        match=rf"^\S+:\d+:\d+: 'arith.{op}' \(in @k\): integer division by zero$",
    ):
        run_scalar_i32(f"  %r = arith.{op} %x, %y : i32", 1, 0)


@pytest.mark.parametrize(("x", "y"), [(1, 31), (3, 30), (-1, 4), (12345, 7), (-(2**31), 0)])
def test_shifts(x: int, y: int) -> None:
    assert run_scalar_i32("  %r = arith.shli %x, %y : i32", x, y) == wrap32(x << y)
    assert run_scalar_i32("  %r = arith.shrsi %x, %y : i32", x, y) == x >> y


def test_int_tile_arith_wraps() -> None:
    # arange * 2^30 on a tile: 2 * 2^30 and 3 * 2^30 wrap to negative values.
    params = "%s: i32, %o: !tile.desc<4xf32>"
    body = """
  %a = tile.arange 0, 4 : tensor<4xi32>
  %st = tile.splat %s : i32 -> tensor<4xi32>
  %p = arith.muli %a, %st : tensor<4xi32>
  %q = arith.addi %p, %st : tensor<4xi32>
  %f = tile.convert %q : tensor<4xi32> -> tensor<4xf32>
  tile.store %o[%c0], %f : !tile.desc<4xf32>, tensor<4xf32>"""
    out = np.zeros(4, np.float32)
    run(params, body, [2**30, out])
    np.testing.assert_array_equal(out, [wrap32((i + 1) * 2**30) for i in range(4)])


# ------------------------------------------------------------------- scalar casts and cmp


def test_scalar_casts() -> None:
    body = """
  %f = arith.sitofp %x : i32 to f32
  %h = arith.truncf %f : f32 to f16
  %e = arith.extf %h : f16 to f32
  %back = arith.fptosi %e : f32 to i32
  %w = arith.extsi %back : i32 to i64
  %n = arith.trunci %w : i64 to i32
  %ix = arith.index_cast %n : i32 to index
  %r = arith.index_cast %ix : index to i32"""
    # 2049 is not an f16: it rounds to 2048 (ties to even) on the way through truncf.
    assert run_scalar_i32(body, 2049) == 2048
    assert run_scalar_i32(body, -3) == -3


def test_trunci_wraps() -> None:
    body = """
  %w = arith.extsi %x : i32 to i64
  %c = arith.constant 4294967296 : i64
  %big = arith.addi %w, %c : i64
  %r = arith.trunci %big : i64 to i32"""
    assert run_scalar_i32(body, 5) == 5


@pytest.mark.parametrize(
    ("predicate", "x", "y", "expected"),
    [("slt", -1, 0, True), ("sgt", -1, 0, False), ("eq", 3, 3, True), ("ne", 3, 3, False),
     ("sle", 3, 3, True), ("sge", 2, 3, False)],
)  # fmt: skip
def test_cmpi_select(predicate: str, x: int, y: int, expected: bool) -> None:
    body = f"""
  %m = arith.cmpi {predicate}, %x, %y : i32
  %r = arith.select %m, %x, %y : i32"""
    assert run_scalar_i32(body, x, y) == (x if expected else y)


@pytest.mark.parametrize(
    ("predicate", "expected_nan", "expected_lt"),
    [("olt", False, True), ("ult", True, True), ("une", True, True), ("oeq", False, False),
     ("uno", True, False), ("ord", False, True), ("false", False, False), ("true", True, True)],
)  # fmt: skip
def test_cmpf(predicate: str, expected_nan: bool, expected_lt: bool) -> None:
    # Ordered predicates are false when an operand is NaN, unordered ones true.
    params = "%a: f32, %b: f32, %o: !tile.desc<1xf32>"
    body = f"""
  %m = arith.cmpf {predicate}, %a, %b : f32
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  %r = arith.select %m, %one, %zero : f32
  %t = tile.splat %r : f32 -> tensor<1xf32>
  tile.store %o[%c0], %t : !tile.desc<1xf32>, tensor<1xf32>"""
    for a, b, expected in [(np.nan, 1.0, expected_nan), (1.0, 2.0, expected_lt)]:
        out = np.zeros(1, np.float32)
        run(params, body, [a, b, out])
        assert out[0] == float(expected), (predicate, a, b)


# ------------------------------------------------------------------------ control flow


def test_scf_for_and_if() -> None:
    # Sum of 0..9 in steps of 3 (0 + 3 + 6 + 9), plus 100 only when the sum is odd.
    body = """
  %c1 = arith.constant 1 : i32
  %c3 = arith.constant 3 : i32
  %c10 = arith.constant 10 : i32
  %c100 = arith.constant 100 : i32
  %s = scf.for %i = %c0 to %c10 step %c3 iter_args(%acc = %x) -> (i32) : i32 {
    %next = arith.addi %acc, %i : i32
    scf.yield %next : i32
  }
  %bit = arith.andi %s, %c1 : i32
  %odd = arith.cmpi eq, %bit, %c1 : i32
  %r = scf.if %odd -> (i32) {
    %t = arith.addi %s, %c100 : i32
    scf.yield %t : i32
  } else {
    scf.yield %s : i32
  }"""
    assert run_scalar_i32(body, 0) == 18
    assert run_scalar_i32(body, 1) == 119
