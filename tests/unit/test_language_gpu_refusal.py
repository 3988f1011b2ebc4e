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
