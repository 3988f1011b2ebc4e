"""Compilation errors name the kernel file and line and quote the source line, as Triton's do.

Each bad kernel marks its offending line with a `# ERROR: <tag>` comment; the tests find the
line by its tag, so they stay right when this file changes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl import TensorDescriptor
from tawa_xdsl.frontend import CompilationError
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg

THIS_FILE = Path(__file__).resolve()


def line_of(tag: str) -> int:
    lines = THIS_FILE.read_text().splitlines()
    matches = [i + 1 for i, line in enumerate(lines) if line.rstrip().endswith(f"# ERROR: {tag}")]
    assert len(matches) == 1, tag
    return matches[0]


def compile_error(kernel, *args, **kwargs) -> CompilationError:
    with pytest.raises(CompilationError) as info:
        kernel.compile(*args, **kwargs)
    return info.value


def assert_error(error: CompilationError, tag: str, message: str) -> None:
    text = str(error)
    first, source = text.split("\n")
    assert first.startswith(f"{THIS_FILE}:{line_of(tag)}: error: "), text
    assert message in first, text
    assert source.strip().endswith(f"# ERROR: {tag}"), text
    assert error.line == line_of(tag)


F16_64x32 = DescriptorArg(tl.float16, (64, 32))
F16_32x64 = DescriptorArg(tl.float16, (32, 64))
F32_64x64 = DescriptorArg(tl.float32, (64, 64))


@tawa_xdsl.jit
def bad_dot(a_desc, b_desc, c_desc):
    a = a_desc.load([0, 0])
    b = b_desc.load([0, 0])
    c_desc.store([0, 0], tl.dot(a, b))  # ERROR: dot


def test_mismatched_dot_shapes() -> None:
    error = compile_error(bad_dot, F16_64x32, F16_64x32, F32_64x64)
    assert_error(
        error,
        "dot",
        "First input shape ((64, 32)) and second input shape (64, 32) are not compatible for "
        "matmul (second index of first shape (32) must be equal to first index of second "
        "shape (64)",
    )


@tawa_xdsl.jit
def bad_dot_acc(a_desc, b_desc):
    acc = tl.zeros([32, 32], tl.float32)
    acc = tl.dot(a_desc.load([0, 0]), b_desc.load([0, 0]), acc)  # ERROR: acc
    b_desc.store([0, 0], acc.to(tl.float16))


def test_mismatched_dot_accumulator() -> None:
    error = compile_error(bad_dot_acc, F16_64x32, F16_32x64)
    assert_error(error, "acc", "tl.dot accumulator shape (32, 32) must be (64, 64)")


@tawa_xdsl.jit
def runtime_shape(out_desc, n):
    x = tl.zeros([n, 16], tl.float32)  # ERROR: shape
    out_desc.store([0, 0], x)


def test_tile_shape_must_be_a_compile_time_constant() -> None:
    error = compile_error(runtime_shape, DescriptorArg(tl.float32, (16, 16)), ScalarArg(tl.int32))
    assert_error(error, "shape", "tile shape must be a compile-time constant tuple of ints")


@tawa_xdsl.jit
def runtime_arange(out_desc, n):
    x = tl.arange(0, n)  # ERROR: arange
    out_desc.store([0], x.to(tl.float32))


def test_arange_bounds_must_be_constant() -> None:
    error = compile_error(runtime_arange, DescriptorArg(tl.float32, (16,)), ScalarArg(tl.int32))
    assert_error(error, "arange", "tl.arange bounds must be compile-time constant ints")


@tawa_xdsl.jit
def unknown_function(out_desc):
    x = tl.zeros([16], tl.float32)
    out_desc.store([0], tl.softmax_fast(x))  # ERROR: unknown


def test_unknown_tl_function() -> None:
    error = compile_error(unknown_function, DescriptorArg(tl.float32, (16,)))
    assert_error(error, "unknown", "unknown function tl.softmax_fast")


@tawa_xdsl.jit
def while_loop(out_desc, n):
    i = 0
    while i < n:  # ERROR: while
        i += 1


@tawa_xdsl.jit
def lambda_kernel(out_desc):
    f = lambda v: v + 1  # noqa: E731, F841  # ERROR: lambda


@tawa_xdsl.jit
def store_into_tile(out_desc):
    x = tl.zeros([16], tl.float32)
    x[0] = 1.0  # ERROR: setitem


@pytest.mark.parametrize(
    "kernel,tag,message",
    [
        (while_loop, "while", "unsupported Python construct: While"),
        (lambda_kernel, "lambda", "unsupported Python construct: Lambda"),
        (store_into_tile, "setitem", "assignment to Subscript is not supported"),
    ],
)
def test_unsupported_python_constructs(kernel, tag: str, message: str) -> None:
    args = [DescriptorArg(tl.float32, (16,))]
    if kernel is while_loop:
        args.append(ScalarArg(tl.int32))
    assert_error(compile_error(kernel, *args), tag, message)


@tawa_xdsl.jit
def type_changing_loop(out_desc, n):
    acc = tl.zeros([16], tl.float32)
    for _ in range(n):  # ERROR: carried
        acc = acc.to(tl.float16)
    out_desc.store([0], acc.to(tl.float32))


def test_loop_carried_type_must_not_change() -> None:
    error = compile_error(type_changing_loop, DescriptorArg(tl.float32, (16,)), ScalarArg(tl.int32))
    assert_error(
        error,
        "carried",
        "loop-carried variable 'acc' is tile tl.float32[16] before the loop but tile "
        "tl.float16[16] at the end of its body",
    )


@tawa_xdsl.jit
def helper_with_error(x):
    return x + undefined_name  # noqa: F821  # ERROR: helper


@tawa_xdsl.jit
def calls_bad_helper(out_desc):
    out_desc.store([0], helper_with_error(tl.zeros([16], tl.float32)))


def test_errors_in_helpers_point_into_the_helper() -> None:
    error = compile_error(calls_bad_helper, DescriptorArg(tl.float32, (16,)))
    assert_error(error, "helper", "name 'undefined_name' is not defined")


@tawa_xdsl.jit
def broadcast_mismatch(out_desc):
    x = tl.zeros([16, 8], tl.float32) + tl.zeros([4], tl.float32)  # ERROR: broadcast
    out_desc.store([0, 0], x)


def test_broadcast_mismatch() -> None:
    error = compile_error(broadcast_mismatch, DescriptorArg(tl.float32, (16, 8)))
    assert_error(error, "broadcast", "cannot broadcast shapes [16, 8] and [1, 4]")


@tawa_xdsl.jit
def tile_condition(out_desc):
    x = tl.zeros([16], tl.float32)
    if x > 0:  # ERROR: tile-if
        x = x + 1


def test_if_on_a_tile() -> None:
    error = compile_error(tile_condition, DescriptorArg(tl.float32, (16,)))
    assert_error(error, "tile-if", "if condition must be a scalar, got a tile; use tl.where")


@tawa_xdsl.jit
def failing_static_assert(out_desc, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")  # ERROR: static


def test_static_assert() -> None:
    error = compile_error(failing_static_assert, DescriptorArg(tl.float32, (16,)), BLOCK=8)
    assert_error(error, "static", "static_assert failed: BLOCK must be a multiple of 16")


def test_launch_argument_errors_are_clear() -> None:
    with pytest.raises(TypeError, match="wrap them with tawa_xdsl.TensorDescriptor.from_tensor"):
        bad_dot.compile(np.zeros((4, 4), np.float16), None, None)
    with pytest.raises(TypeError, match="missing a required argument: 'BLOCK'"):
        failing_static_assert.compile(TensorDescriptor.from_tensor(np.zeros(16, np.float32), [16]))
