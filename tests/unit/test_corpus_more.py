"""The `more` corpus (tests/corpus/more.py) on the CPU, with default launch options: each
kernel compiles to PTX that ptxas assembles without a warning, and the tile interpreter and
the nvgpu-level interpreter (the IR emit-ptx prints, thread by thread) match numpy, also
through the TMA-store epilogue. Then what stays refused: each refusal is one line naming the
kernel line, at compile time and as the interpreter's `GpuRefusalWarning`. The GPU half is
tests/gpu/test_corpus_more_gpu.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from xdsl.utils.exceptions import PassFailedException

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import compile_to_ptx, lower_to_nvgpu_level
from tawa_xdsl.descriptor import TensorDescriptor
from tawa_xdsl.diagnostics import TawaError
from tawa_xdsl.frontend.errors import CompilationError
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.jit import GpuRefusalWarning
from tawa_xdsl.runtime.dispatch import host_descriptor, is_descriptor
from tests.corpus import more
from tests.corpus.case import Case, check

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")
CASES = {case.name: case for case in more.CASES}


def assert_assembles(ptx: str) -> None:
    result = assemble(ptx)
    assert result.returncode == 0, result.log
    assert "warning" not in result.log.lower(), result.log


def run_nvgpu(case: Case, module, options, seed: int) -> None:
    lowered = lower_to_nvgpu_level(module, replace(options, verify=False))
    run = case.launch(np.random.default_rng(seed))
    run_nvgpu_kernel(
        lowered, run.grid, [host_descriptor(a) if is_descriptor(a) else a for a in run.args]
    )
    check(run)


@needs_ptxas
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_compiles_and_matches_numpy_in_both_interpreters(name: str) -> None:
    case = CASES[name]
    run = case.launch(np.random.default_rng(0))
    compiled = case.kernel.compile(*run.args, **run.kwargs)
    assert_assembles(compiled.gpu_kernel().ptx)
    case.kernel[run.grid](*run.args, **run.kwargs, interpret=True)
    check(run)
    run_nvgpu(case, compiled.module, compiled.options, seed=1)


@needs_ptxas
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_with_the_tma_store_epilogue(name: str) -> None:
    case = CASES[name]
    compiled = case.compile(np.random.default_rng(0))
    options = replace(compiled.options, epilogue="tma", verify=False)
    assert_assembles(compile_to_ptx(compiled.module, options).ptx)
    run_nvgpu(case, compiled.module, options, seed=2)


@pytest.mark.parametrize(
    ("name", "consumers"),
    [("softmax_rows_split", 2), ("softmax_rows_split_256", 2), ("row_scale_rows_split", 2)],
)
def test_kernels_without_a_dot_split_their_rows_over_the_default_consumers(
    name: str, consumers: int
) -> None:
    """The consumer count is chosen from the rows, as for a GEMM, and written into the IR:
    each warpgroup reads its own rows of the slot and stores them."""
    case = CASES[name]
    compiled = case.compile(np.random.default_rng(0))
    aref = compiled.ir["aref"]
    rows = case.launch(np.random.default_rng(0)).kwargs["BLOCK_M"] // consumers
    assert f"consumer warpgroups({consumers})" in aref
    assert f"tensor<{rows}x64xf32>" in aref and "tile.store_slice" in aref


def test_a_subtile_split_is_register_moves() -> None:
    """EPILOGUE_SUBTILE's halves are `fragment_gather`s of the accumulator (register moves
    the layout plans: the right half reads the second half of each 64-row block's values)."""
    compiled = CASES["gemm_epilogue_subtile"].compile(np.random.default_rng(0))
    nvgpu = compiled.ir["nvgpu"]
    assert nvgpu.count("nvgpu.fragment_gather") == 2
    assert not any(f"tile.{name}" in nvgpu for name in ("reshape", "permute", "split"))


# ------------------------------------------------------------------ what stays refused

ROWS, COLS = 128, 64


@tawa_xdsl.jit
def interleave(x_desc, y_desc, z_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Columns of x and y interleaved: column 2j of z is x's column j (another thread's)."""
    x = x_desc.load([0, 0])
    y = y_desc.load([0, 0])
    z_desc.store([0, 0], tl.join(x, y).reshape(BLOCK_M, 2 * BLOCK_N))


@tawa_xdsl.jit
def rows_moved(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    x = x_desc.load([0, 0]).to(tl.float32)
    y = tl.permute(x.reshape(BLOCK_M, 2, BLOCK_N // 2), (1, 0, 2))
    a, b = tl.split(tl.permute(y, (1, 2, 0)))
    y_desc.store([0, 0], a + b)


@tawa_xdsl.jit
def math_on_3d(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    x = x_desc.load([0, 0]).to(tl.float32).reshape(BLOCK_M, 2, BLOCK_N // 2)
    y_desc.store([0, 0], (x * x).reshape(BLOCK_M, BLOCK_N))


@tawa_xdsl.jit
def column_sum(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    x = x_desc.load([0, 0]).to(tl.float32)
    y_desc.store([0, 0], x - tl.sum(x, axis=0)[None, :])


def _args(kernel, *out_cols: int) -> list:
    x = np.ones((ROWS, COLS), np.float16)
    descs = [TensorDescriptor.from_tensor(x, [ROWS, COLS])]
    if kernel is interleave:
        descs.append(TensorDescriptor.from_tensor(x.copy(), [ROWS, COLS]))
    for cols in out_cols:
        out = np.zeros((ROWS, cols), np.float32 if kernel is not interleave else np.float16)
        descs.append(TensorDescriptor.from_tensor(out, [ROWS, cols]))
    return descs


REFUSED = [
    (interleave, (2 * COLS,), "'tile.reshape' cannot be register moves: 'nvgpu.fragment_gather' "
     "column 2 would come from column 1, held by other threads"),
    (rows_moved, (COLS // 2,), "'tile.permute' must keep dim 0 (the rows) first"),
    (math_on_3d, (COLS,), "'arith.mulf' takes a tile of rank 3 or more"),
]  # fmt: skip


@pytest.mark.parametrize(("kernel", "out_cols", "message"), REFUSED, ids=lambda v: str(v)[:20])
def test_what_the_layout_does_not_allow_is_refused_in_one_line(kernel, out_cols, message) -> None:
    assert_refused(kernel, _args(kernel, *out_cols), message)


@needs_ptxas
def test_a_reduction_along_rows_split_over_two_warpgroups_matches_numpy() -> None:
    """Two cooperative consumers split the 128 rows; the column sums span both (their 8
    warps' partials, one named barrier over 256 threads) in every interpreter and in PTX."""
    args = _args(column_sum, COLS)
    compiled = column_sum.compile(*args, BLOCK_M=ROWS, BLOCK_N=COLS, num_consumer_groups=2)
    assert_assembles(compiled.gpu_kernel().ptx)
    x = np.ones((ROWS, COLS), np.float32)
    expected = x - x.sum(axis=0, keepdims=True)
    column_sum[(1,)](*args, BLOCK_M=ROWS, BLOCK_N=COLS, interpret=True, num_consumer_groups=2)
    np.testing.assert_array_equal(args[1].base, expected)
    lowered = lower_to_nvgpu_level(compiled.module, replace(compiled.options, verify=False))
    (combine,) = [op for op in lowered.walk() if op.name == "nvgpu.fragment_column_combine"]
    assert combine.partial_rows.value.data == 8
    args[1].base[...] = 0
    run_nvgpu_kernel(lowered, (1,), [host_descriptor(a) for a in args])
    np.testing.assert_array_equal(args[1].base, expected)


def assert_refused(kernel, args: list, message: str, **options) -> None:
    with pytest.raises((TawaError, PassFailedException)) as refused:
        kernel.compile(*args, BLOCK_M=ROWS, BLOCK_N=COLS, **options).gpu_kernel()
    text = str(refused.value)
    assert "\n" not in text and message in text, text
    assert text.startswith(f"{__file__}:"), text  # the kernel line
    with pytest.warns(GpuRefusalWarning, match="the GPU backend refuses this kernel"):
        kernel[(1,)](*args, BLOCK_M=ROWS, BLOCK_N=COLS, interpret=True, **options)


@tawa_xdsl.jit
def split_odd(x_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    a, b = tl.split(x_desc.load([0, 0]))


@tawa_xdsl.jit
def permute_bad(x_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    x_desc.load([0, 0]).permute(0, 0)


@tawa_xdsl.jit
def join_mismatch(x_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    x = x_desc.load([0, 0])
    tl.join(x, x.to(tl.float32))


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        (split_odd, "tl.split needs a tile whose last dim is 2, got tile tl.float16[128, 64]"),
        (permute_bad, "tl.permute dims [0, 0] must be a permutation of 0..1"),
        (join_mismatch, "tl.join needs two tiles of one shape and type"),
    ],
    ids=["split", "permute", "join"],
)
def test_ill_formed_shape_changes_are_refused_by_the_frontend(kernel, message) -> None:
    args = _args(kernel)
    with pytest.raises(CompilationError) as refused:
        kernel.compile(*args, BLOCK_M=ROWS, BLOCK_N=COLS)
    first = str(refused.value).splitlines()[0]
    assert first.startswith(f"{__file__}:") and message in first, first
