"""One truth for both paths (issue 14, item 7): a kernel the GPU backend refuses still runs in
the interpreter (the reference), with a `GpuRefusalWarning` that carries the GPU's one-line
refusal naming the line; a kernel the GPU compiles runs without one."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.descriptor import TensorDescriptor
from tawa_xdsl.jit import GpuRefusalWarning


@tawa_xdsl.jit
def column_max(x_desc, y_desc):  # 64 rows: refused over 2 consumers
    x = x_desc.load([0, 0])
    y_desc.store([0, 0], x - tl.max(x, axis=0)[None, :])


@tawa_xdsl.jit
def row_max(x_desc, y_desc):
    x = x_desc.load([0, 0])
    y_desc.store([0, 0], x - tl.max(x, axis=1)[:, None])


def descriptors(rows: int = 128) -> tuple[np.ndarray, np.ndarray, list[TensorDescriptor]]:
    x = np.random.default_rng(0).standard_normal((rows, 64)).astype(np.float32)
    y = np.zeros_like(x)
    return x, y, [TensorDescriptor.from_tensor(a, [rows, 64]) for a in (x, y)]


def test_a_kernel_the_gpu_refuses_runs_with_the_refusal_as_a_warning():
    x, y, args = descriptors(64)
    with pytest.warns(GpuRefusalWarning) as record:
        column_max[(1,)](*args, interpret=True, num_consumer_groups=2)
    np.testing.assert_array_equal(y, x - x.max(axis=0, keepdims=True))
    (warning,) = [w for w in record if issubclass(w.category, GpuRefusalWarning)]
    line = column_max.fn.__code__.co_firstlineno + 1  # the kernel: its rows cannot be split
    assert re.match(
        rf".*test_language_gpu_refusal\.py:{line}:\d+: error: cooperative-consumers: cannot "
        r"split rows \[64\] into 2 warpgroups .*\(the GPU backend refuses this kernel\)$",
        str(warning.message),
    ), str(warning.message)
    assert "\n" not in str(warning.message)


def test_a_kernel_the_gpu_compiles_runs_without_a_warning():
    x, y, args = descriptors()
    with warnings.catch_warnings():
        warnings.simplefilter("error", GpuRefusalWarning)
        row_max[(1,)](*args, interpret=True)
    np.testing.assert_array_equal(y, x - x.max(axis=1, keepdims=True))


def test_a_column_reduction_over_two_consumers_runs_without_a_warning():
    """128 rows split over two consumer warpgroups: the reduction along them spans both."""
    x, y, args = descriptors()
    with warnings.catch_warnings():
        warnings.simplefilter("error", GpuRefusalWarning)
        column_max[(1,)](*args, interpret=True, num_consumer_groups=2)
    np.testing.assert_array_equal(y, x - x.max(axis=0, keepdims=True))


# ------------------------------------------ what the GPU path still refuses, in one line

ROWS = 64


@tawa_xdsl.jit
def row_sums_1d(x_desc, s_desc):
    s_desc.store([0], tl.sum(x_desc.load([0, 0]), axis=1))


@tawa_xdsl.jit
def row_sums_down_a_column(x_desc, s_desc):
    s_desc.store([0, 0], tl.sum(x_desc.load([0, 0]), axis=1)[:, None])


@tawa_xdsl.jit
def row_and_column(x_desc, y_desc, M, BLOCK: tl.constexpr):
    v = tl.zeros([BLOCK], dtype=tl.float32)
    for r in tl.range(0, M, BLOCK):
        x = x_desc.load([r, 0])
        v = v + tl.max(x, axis=0) + tl.max(x, axis=1)
    y_desc.store([0, 0], v[None, :])


def test_a_row_vector_through_a_rank_1_descriptor_compiles_and_runs_without_a_warning():
    """Once refused: the vector's rows run along the descriptor's one dim (the GPU form is
    tested on the H200 by the corpus kernel `row_rstd_rank1`, tests/corpus/gaps.py)."""
    x = np.random.default_rng(0).standard_normal((ROWS, ROWS)).astype(np.float32)
    sums = np.zeros(ROWS, np.float32)
    args = [
        TensorDescriptor.from_tensor(x, [ROWS, ROWS]),
        TensorDescriptor.from_tensor(sums, [ROWS]),
    ]
    assert "st.global.f32" in row_sums_1d.compile(*args).gpu_kernel().ptx
    with warnings.catch_warnings():
        warnings.simplefilter("error", GpuRefusalWarning)
        row_sums_1d[(1,)](*args, interpret=True)
    np.testing.assert_allclose(sums, x.sum(axis=1), rtol=1e-5)


def refused_cases() -> list:
    x = np.random.default_rng(0).standard_normal((ROWS, ROWS)).astype(np.float32)
    tile = TensorDescriptor.from_tensor(x, [ROWS, ROWS])
    column = TensorDescriptor.from_tensor(np.zeros((ROWS, 1), np.float32), [ROWS, 1])
    row = TensorDescriptor.from_tensor(np.zeros((1, ROWS), np.float32), [1, ROWS])
    return [
        (row_sums_down_a_column, [tile, column], {}, 2,
         "'tile.store' stores a row vector down a column (block [64, 1]; not supported: "
         "store it through a rank-1 descriptor, or v.reshape(1, BLOCK_M) through a descriptor "
         "of block [1, BLOCK_M])"),
        (row_and_column, [tile, row, ROWS], {"BLOCK": ROWS}, 3,
         "'scf.for' carries a vector that is both a row and a column vector"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kernel", "args", "constants", "line", "message"),
    refused_cases(),
    ids=["row_vector_down_a_column", "row_and_column_vector"],
)
def test_what_the_gpu_path_refuses_is_one_line_naming_the_kernel_line_in_both_modes(
    kernel, args, constants, line, message
) -> None:
    """Each refusal names the line at compile time; the interpreter runs the kernel with the
    same line as its warning (a row vector stored down a column was written along a row by
    the GPU before: refused now, never a wrong answer)."""
    place = f"{__file__}:{kernel.fn.__code__.co_firstlineno + line}:"
    with pytest.raises(Exception) as refused:
        kernel.compile(*args, **constants).gpu_kernel()
    text = str(refused.value)
    assert "\n" not in text and text.startswith(place) and message in text, text
    with pytest.warns(GpuRefusalWarning) as record:
        kernel[(1,)](*args, **constants, interpret=True)
    (warning,) = [w for w in record if issubclass(w.category, GpuRefusalWarning)]
    assert str(warning.message).startswith(place) and message in str(warning.message)


# ------------------------------ a protocol the verifier cannot model is a GPU refusal too


@tawa_xdsl.jit
def column_max_past_the_first_block(x_desc, y_desc, K, BLOCK: tl.constexpr):
    m = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK):
        x = x_desc.load([k, 0])
        if k > 0:
            m = tl.maximum(m, tl.max(x, axis=0))
    y_desc.store([0, 0], m[None, :])


def test_a_kernel_only_the_verifier_refuses_warns_in_the_interpreter():
    """The interpreter's GPU check proves the rings as the GPU compile does: a kernel that
    lowers to PTX but whose barrier protocol the verifier cannot model (the column maxima's
    partials barrier under `if k > 0` in the loop, a condition on the induction variable)
    warns with the verifier's line (issue 14 item 7), and still computes the right answer.
    (The GEMM that also sums the rows of A and a column maximum under a uniform `if` were
    refused so too; they are proved now: tests/corpus/proved.py.)"""
    x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32)
    y = np.zeros((1, 64), np.float32)
    args = [TensorDescriptor.from_tensor(x, [64, 64]), TensorDescriptor.from_tensor(y, [1, 64]),
            256]  # fmt: skip
    message = "(the barrier protocol cannot be verified) (the GPU backend refuses this kernel)"
    with pytest.warns(GpuRefusalWarning) as record:
        column_max_past_the_first_block[(1,)](*args, BLOCK=64, interpret=True)
    (warning,) = [w for w in record if issubclass(w.category, GpuRefusalWarning)]
    text = str(warning.message)
    assert text.startswith(f"{__file__}:") and text.endswith(message) and "\n" not in text, text
    assert "under a condition the model does not cover" in text, text
    with pytest.raises(Exception, match=r"the barrier protocol cannot be verified"):
        column_max_past_the_first_block.compile(*args, BLOCK=64).gpu_kernel()
    np.testing.assert_array_equal(y, x[64:].max(axis=0, keepdims=True))
