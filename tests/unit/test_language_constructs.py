"""Each construct of the kernel language, compiled to tile IR and run on the interpreter
against a numpy oracle (and, where the IR shape is the point, checked in the IR text)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl import TensorDescriptor
from tawa_xdsl.frontend import CompilationError
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg

D = TensorDescriptor.from_tensor


def f32(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------- grid, scalars


@tawa_xdsl.jit
def grid_kernel(out_desc, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    col = tl.program_id(1)
    blocks = tl.cdiv(n, BLOCK)
    value = pid * 100 + col * 10 + blocks + tl.num_programs(0) * 1000
    out_desc.store([pid, col], tl.full([1, 1], value, tl.float32))


def test_program_id_num_programs_cdiv_and_tuple_grid() -> None:
    out = np.zeros((3, 2), np.float32)
    grid_kernel[(3, 2)](D(out, [1, 1]), 10, BLOCK=4)
    rows, cols = np.meshgrid(np.arange(3), np.arange(2), indexing="ij")
    np.testing.assert_array_equal(out, rows * 100 + cols * 10 + 3 + 3000)


def test_grid_callable_receives_the_meta_parameters() -> None:
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (meta["n"] // meta["BLOCK"], 1)

    out = np.zeros((2, 1), np.float32)
    grid_kernel[grid](D(out, [1, 1]), 8, BLOCK=4)
    assert seen["BLOCK"] == 4 and seen["n"] == 8
    np.testing.assert_array_equal(out[:, 0], [2002, 2102])


# ---------------------------------------------------------------------- elementwise tiles


@tawa_xdsl.jit
def elementwise_kernel(x_desc, y_desc, out_desc, scale, BLOCK: tl.constexpr):
    x = x_desc.load([0, 0])
    y = y_desc.load([0, 0])
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK)
    upper = rows[:, None] <= cols[None, :]  # broadcasting to BLOCK x BLOCK
    z = tl.where(upper, x * scale + y, x - y / 2)
    z = tl.maximum(z, -1.0) + tl.minimum(x, y)
    z = z + tl.exp(x * 0.1) + tl.exp2(y * 0.1) + tl.log2(tl.abs(x) + 1)
    out_desc.store([0, 0], z)


def test_elementwise_broadcasting_where_min_max_and_math() -> None:
    x, y = f32(8, 8, seed=1), f32(8, 8, seed=2)
    out = np.zeros((8, 8), np.float32)
    elementwise_kernel[(1,)](D(x, [8, 8]), D(y, [8, 8]), D(out, [8, 8]), 3.0, BLOCK=8)
    upper = np.arange(8)[:, None] <= np.arange(8)[None, :]
    z = np.where(upper, x * 3 + y, x - y / 2)
    z = np.maximum(z, -1) + np.minimum(x, y)
    z = z + np.exp(x * 0.1) + np.exp2(y * 0.1) + np.log2(np.abs(x) + 1)
    np.testing.assert_allclose(out, z, rtol=1e-5, atol=1e-5)


@tawa_xdsl.jit
def scalar_ops_kernel(out_desc, a, b):
    q = a // b  # truncates toward zero, as C and Triton
    r = a % b
    f = a / b  # int / int is fp32
    bits = (a & 6) | (b << 1) ^ (a >> 1)
    big = (a > b) & (b != 0)
    neg = -a
    values = tl.zeros([1, 8], tl.float32)
    cols = tl.arange(0, 8)[None, :]
    values = tl.where(cols == 0, q, values)
    values = tl.where(cols == 1, r, values)
    values = tl.where(cols == 2, f, values)
    values = tl.where(cols == 3, bits, values)
    values = tl.where(cols == 4, big.to(tl.float32), values)
    values = tl.where(cols == 5, neg, values)
    values = tl.where(cols == 6, tl.maximum(a, b), values)
    values = tl.where(cols == 7, a * 1.5, values)  # int scalar with float literal is fp32
    out_desc.store([0, 0], values)


@pytest.mark.parametrize("a,b", [(7, 2), (-7, 2), (3, 5)])
def test_scalar_arithmetic_follows_triton(a: int, b: int) -> None:
    out = np.zeros((1, 8), np.float32)
    scalar_ops_kernel[(1,)](D(out, [1, 8]), a, b)
    trunc_div = int(a / b)
    expected = [
        trunc_div, a - trunc_div * b, a / b, (a & 6) | ((b << 1) ^ (a >> 1)),
        float(a > b and b != 0), -a, max(a, b), a * 1.5,
    ]  # fmt: skip
    np.testing.assert_allclose(out[0], np.float32(expected), rtol=1e-6)


@tawa_xdsl.jit
def promotion_kernel(h_desc, out_desc):
    h = h_desc.load([0, 0])  # f16
    doubled = h * 2  # int literal keeps f16
    tl.static_assert(doubled.dtype == tl.float16, "f16 * int literal is f16")
    wide = doubled + tl.full([4, 4], 1.0, tl.float32)  # f16 + f32 -> f32
    tl.static_assert(wide.dtype == tl.float32)
    counts = tl.arange(0, 4)[None, :] + h.to(tl.int32)  # int tile + int tile
    mixed = counts * 0.5  # int tile with float literal is f32
    out_desc.store([0, 0], wide + mixed)


def test_type_promotion() -> None:
    h = (np.arange(16).reshape(4, 4) / 4).astype(np.float16)
    out = np.zeros((4, 4), np.float32)
    promotion_kernel[(1,)](D(h, [4, 4]), D(out, [4, 4]))
    counts = np.arange(4)[None, :] + np.trunc(h.astype(np.float32)).astype(np.int32)
    np.testing.assert_allclose(out, h.astype(np.float32) * 2 + 1 + counts * 0.5)


# ------------------------------------------------------------------ reductions, dot, types


@tawa_xdsl.jit
def reduce_kernel(x_desc, max_desc, sum_desc, min_desc):
    x = x_desc.load([0, 0])
    max_desc.store([0], tl.max(x, axis=1))
    sum_desc.store([0], tl.sum(x, 0))
    min_desc.store([0, 0], tl.min(x, 1, keep_dims=True))


def test_reductions_along_an_axis() -> None:
    x = f32(4, 8)
    mx, sm, mn = np.zeros(4, np.float32), np.zeros(8, np.float32), np.zeros((4, 1), np.float32)
    reduce_kernel[(1,)](D(x, [4, 8]), D(mx, [4]), D(sm, [8]), D(mn, [4, 1]))
    np.testing.assert_allclose(mx, x.max(1))
    np.testing.assert_allclose(sm, x.sum(0), rtol=1e-5)
    np.testing.assert_allclose(mn, x.min(1, keepdims=True))


@tawa_xdsl.jit
def dot_kernel(a_desc, b_desc, c_desc, TRANSPOSE_WITH_T: tl.constexpr):
    a = a_desc.load([0, 0])
    b = b_desc.load([0, 0])  # N x K
    if TRANSPOSE_WITH_T:
        acc = tl.dot(a, b.T)
    else:
        acc = tl.dot(a, tl.trans(b), tl.full([16, 8], 1.0, tl.float32))
    c_desc.store([0, 0], acc.to(c_desc.dtype))


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16"])
@pytest.mark.parametrize("use_t", [True, False])
def test_dot_with_transposed_operand(dtype, use_t: bool) -> None:
    import ml_dtypes

    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    a, b = f32(16, 32, seed=3).astype(np_dtype), f32(8, 32, seed=4).astype(np_dtype)
    c = np.zeros((16, 8), np.float32)
    dot_kernel[(1,)](D(a, [16, 32]), D(b, [8, 32]), D(c, [16, 8]), TRANSPOSE_WITH_T=use_t)
    expected = a.astype(np.float32) @ b.astype(np.float32).T + (0 if use_t else 1)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-4)


@tawa_xdsl.jit
def convert_kernel(x_desc, out_desc, DTYPE: tl.constexpr):
    x = x_desc.load([0, 0])
    out_desc.store([0, 0], x.to(DTYPE).to(tl.float32))


@pytest.mark.parametrize("dtype", [tl.float16, tl.bfloat16, tl.float8e4nv, tl.float32])
def test_to_rounds_through_each_element_type(dtype: tl.dtype) -> None:
    import ml_dtypes

    numpy_type = {
        tl.float16: np.float16,
        tl.bfloat16: ml_dtypes.bfloat16,
        tl.float8e4nv: ml_dtypes.float8_e4m3fn,
        tl.float32: np.float32,
    }[dtype]
    x = f32(4, 4, seed=5) * 3
    out = np.zeros((4, 4), np.float32)
    compiled = convert_kernel[(1,)](D(x, [4, 4]), D(out, [4, 4]), DTYPE=dtype)
    np.testing.assert_array_equal(out, x.astype(numpy_type).astype(np.float32))
    if dtype == tl.float8e4nv:
        assert "tile.convert %x : tensor<4x4xf32> -> tensor<4x4xf8E4M3FN>" in compiled.ir["tile"]


# ------------------------------------------------------------------------ control flow


@tawa_xdsl.jit
def loop_kernel(out_desc, n, STEP: tl.constexpr, USE_TL_RANGE: tl.constexpr):
    total = 0  # a Python int becomes a loop-carried i32
    acc = tl.zeros([1, 4], tl.float32)
    unused = 5.0  # reassigned in the loop but never read: not carried
    if USE_TL_RANGE:
        for i in tl.range(0, n, STEP, num_stages=3):
            total += i
            acc = acc + i
            unused = 1.0  # noqa: F841
    else:
        for i in range(n):
            total = total + i
            acc += i
            unused = 1.0  # noqa: F841
    out_desc.store([0, 0], acc + total)


@pytest.mark.parametrize("use_tl_range", [True, False])
def test_for_loops_carry_reassigned_names(use_tl_range: bool) -> None:
    out = np.zeros((1, 4), np.float32)
    step = 2 if use_tl_range else 1
    compiled = loop_kernel[(1,)](D(out, [1, 4]), 7, STEP=step, USE_TL_RANGE=use_tl_range)
    total = sum(range(0, 7, step))
    np.testing.assert_array_equal(out, np.full((1, 4), 2 * total, np.float32))
    ir = compiled.ir["tile"]
    # total and acc are carried; `unused` is not (dead after the loop and not read in it).
    carried = (
        r"%total, %acc_\d = scf.for %i = %\w+ to %n step %\w+ "
        r"iter_args\(%total_1 = %\w+, %acc_\d = %acc\) -> \(i32, tensor<1x4xf32>\)"
    )
    assert re.search(carried, ir), ir
    assert ir.count("scf.yield") == 1
    assert ("{tl.num_stages = 3 : i32}" in ir) == use_tl_range


@tawa_xdsl.jit
def nested_loop_kernel(out_desc, n, m):
    acc = tl.zeros([1, 1], tl.float32)
    for i in range(n):
        row = tl.zeros([1, 1], tl.float32)
        for j in range(m):
            row += i * 10 + j
        acc += row
    out_desc.store([0, 0], acc)


def test_nested_loops() -> None:
    out = np.zeros((1, 1), np.float32)
    nested_loop_kernel[(1,)](D(out, [1, 1]), 3, 4)
    assert out[0, 0] == sum(i * 10 + j for i in range(3) for j in range(4))


@tawa_xdsl.jit
def if_kernel(out_desc, n, threshold):
    value = 1.0
    scale = 2.0
    if n > threshold:
        value = n * 3.0
        only_then = 7  # noqa: F841 -- defined on one path only: not a result
    else:
        value = value - n
    if n == 0:
        scale = 10.0
    out_desc.store([0, 0], tl.full([1, 1], value * scale, tl.float32))


@pytest.mark.parametrize("n,threshold", [(5, 2), (1, 2), (0, 2)])
def test_if_on_runtime_scalars_yields_reassigned_names(n: int, threshold: int) -> None:
    out = np.zeros((1, 1), np.float32)
    compiled = if_kernel[(1,)](D(out, [1, 1]), n, threshold)
    value = n * 3.0 if n > threshold else 1.0 - n
    scale = 10.0 if n == 0 else 2.0
    assert out[0, 0] == value * scale
    assert compiled.ir["tile"].count("scf.if") == 2


@tawa_xdsl.jit
def constexpr_if_kernel(out_desc, MODE: tl.constexpr):
    if MODE == "exp":
        x = tl.exp(tl.zeros([1, 1], tl.float32))
    elif MODE == "neg" and True:
        x = -tl.full([1, 1], 3.0, tl.float32)
    else:
        x = tl.full([1, 1], 42.0, tl.float32)
    out_desc.store([0, 0], x if MODE != "twice" else x * 2)


def test_constexpr_if_keeps_one_branch_and_specializes() -> None:
    results = {}
    for mode in ("exp", "neg", "other", "twice"):
        out = np.zeros((1, 1), np.float32)
        compiled = constexpr_if_kernel[(1,)](D(out, [1, 1]), MODE=mode)
        results[mode] = (out[0, 0], compiled)
    assert {m: r[0] for m, r in results.items()} == {"exp": 1, "neg": -3, "other": 42, "twice": 84}
    assert "scf.if" not in results["exp"][1].ir["tile"]
    assert "math.exp" in results["exp"][1].ir["tile"]
    assert "math.exp" not in results["neg"][1].ir["tile"]
    assert len(constexpr_if_kernel.cache) == 4  # one specialization per MODE


@tawa_xdsl.jit
def static_range_kernel(out_desc, N: tl.constexpr):
    acc = tl.zeros([1, 1], tl.float32)
    for i in tl.static_range(N):
        acc = acc + (i + 1)
    out_desc.store([0, 0], acc)


def test_static_range_unrolls() -> None:
    out = np.zeros((1, 1), np.float32)
    compiled = static_range_kernel[(1,)](D(out, [1, 1]), N=4)
    assert out[0, 0] == 10
    assert "scf.for" not in compiled.ir["tile"]


# ---------------------------------------------------------------------------- helpers


@tawa_xdsl.jit
def scaled_sum(x, factor, AXIS: tl.constexpr):
    return tl.sum(x * factor, AXIS)


@tawa_xdsl.jit
def two_results(x):
    return x + 1, x * 2


@tawa_xdsl.jit
def helper_kernel(x_desc, out_desc, factor):
    x = x_desc.load([0, 0])
    plus, times = two_results(x)
    out_desc.store([0], scaled_sum(plus + times, factor, AXIS=1))


def test_jit_helpers_are_inlined() -> None:
    x = f32(4, 8)
    out = np.zeros(4, np.float32)
    compiled = helper_kernel[(1,)](D(x, [4, 8]), D(out, [4]), 0.5)
    np.testing.assert_allclose(out, ((x + 1 + x * 2) * 0.5).sum(1), rtol=1e-5)
    assert "func.call" not in compiled.ir["tile"]
    assert compiled.ir["tile"].count("func.func") == 1


# ------------------------------------------------------------------ compile API and cache


def test_compile_cache_key_is_constexprs_and_argument_types() -> None:
    kernel = tawa_xdsl.jit(grid_kernel.fn)
    out32 = np.zeros((2, 2), np.float32)
    first = kernel.compile(D(out32, [1, 1]), 3, BLOCK=4)
    assert kernel.compile(D(out32, [1, 1]), 99, BLOCK=4) is first  # same types and constexprs
    assert kernel.compile(D(out32, [1, 1]), 3, BLOCK=8) is not first
    with pytest.raises(CompilationError, match="descriptor of tl.float32\\[2, 2\\] blocks"):
        kernel.compile(D(out32, [2, 2]), 3, BLOCK=4)  # another block shape compiles anew
    assert kernel.compile(D(out32, [1, 1]), True, BLOCK=4) is not first  # i1 scalar
    assert len(kernel.cache) == 3
    typed = kernel.compile(DescriptorArg(tl.float32, (1, 1)), ScalarArg(tl.int32), BLOCK=4)
    assert typed is first
    assert first.ir["tile"].startswith("builtin.module")
    assert "@grid_kernel(%out_desc: !tile.desc<1x1xf32>, %n: i32)" in first.ir["tile"]
    assert first.module.ops.first is not None


def test_interpret_true_and_env_var_select_the_interpreter(monkeypatch) -> None:
    from tawa_xdsl import jit as jit_module

    assert jit_module.select_backend(True) is jit_module.interpret_launch
    monkeypatch.setenv("TAWA_INTERPRET", "1")
    assert jit_module.select_backend(None) is jit_module.interpret_launch
    monkeypatch.setenv("TAWA_INTERPRET", "0")
    monkeypatch.setattr(jit_module, "gpu_backend", lambda: None)  # as on a machine with no GPU
    assert jit_module.select_backend(None) is jit_module.interpret_launch
    with pytest.raises(RuntimeError, match="no usable GPU was found"):
        jit_module.select_backend(False)
    gpu = object()
    monkeypatch.setattr(jit_module, "gpu_backend", lambda: gpu)
    assert jit_module.select_backend(None) is gpu
    assert jit_module.select_backend(True) is jit_module.interpret_launch
    kernel = tawa_xdsl.jit(interpret=True)(grid_kernel.fn)
    out = np.zeros((1, 1), np.float32)
    kernel[(1,)](D(out, [1, 1]), 4, BLOCK=4)
    assert out[0, 0] == 1001


def test_jit_function_cannot_be_called_directly() -> None:
    with pytest.raises(RuntimeError, match=r"launch it with grid_kernel\[grid\]"):
        grid_kernel(None, 1, BLOCK=1)
    with pytest.raises(RuntimeError, match="only be called inside"):
        tl.program_id(0)


def test_tensor_descriptor_from_tensor() -> None:
    a = np.zeros((6, 10), np.float16)
    desc = TensorDescriptor.from_tensor(a, [2, 8])
    assert desc.base is a and desc.shape == (6, 10) and desc.strides == (10, 1)
    assert desc.block_shape == (2, 8)
    with pytest.raises(ValueError, match="one dim per tensor dim"):
        TensorDescriptor.from_tensor(a, [8])
    with pytest.raises(TypeError, match="element type"):
        TensorDescriptor.from_tensor(np.zeros((2, 2), np.int64), [1, 1])
    with pytest.raises(ValueError, match="contiguous"):
        TensorDescriptor.from_tensor(a.T, [2, 2])


def test_descriptor_loads_zero_fill_and_stores_clip() -> None:
    x = f32(5, 3)
    out = np.full((5, 3), -1, np.float32)
    copy = tawa_xdsl.jit(_copy_kernel)
    copy[(2, 1)](D(x, [4, 4]), D(out, [4, 4]))
    np.testing.assert_array_equal(out, x + 1)


def _copy_kernel(x_desc, out_desc):
    row = tl.program_id(0) * 4
    out_desc.store([row, 0], x_desc.load([row, 0]) + 1)
