"""split-masked-loops: a loop whose masks hold for a prefix of its iterations becomes two loops
that compute exactly what the one loop computed.

Checked on the tile interpreter (the reference semantics), bit for bit: the attention's key
loop (the unmasked key blocks split off, causal and not), and Hypothesis-drawn loops over
masks of every comparison direction, conjunctions of two, bounds that put the split before
the loop, inside it or after it, empty loops and steps of 1 to 16. Masks the pass cannot read
as a prefix (the induction variable growing toward truth, scaled, or a mask from data) leave
the loop whole.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.compiler import CompileOptions, compile_to_ptx, lower_to_nvgpu_level
from tawa_xdsl.dialects import make_context
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.kernels import attention
from tawa_xdsl.transforms.split_masked_loops import SplitMaskedLoopsPass

ROWS, COLS = 4, 8


def split(module: ModuleOp) -> ModuleOp:
    result = module.clone()
    SplitMaskedLoopsPass().apply(make_context(), result)
    result.verify()
    return result


def loops(module: ModuleOp) -> int:
    return sum(isinstance(op, scf.ForOp) for op in module.walk())


def wheres(module: ModuleOp) -> int:
    return sum(op.name == "tile.where" for op in module.walk())


# ------------------------------------------------------------------------------ attention


HEADS, HEAD_DIM, SCALE = 2, 64, 0.125


def attention_out(module: ModuleOp, seq: int) -> np.ndarray:
    rng = np.random.default_rng(seq)
    q, k, v = (rng.standard_normal((HEADS, seq, HEAD_DIM)).astype(np.float16) for _ in "qkv")
    o = np.zeros_like(q)
    run_kernel(module, attention.grid(seq, HEADS), [q, k, v, o, seq, SCALE])
    return o


# 100: no unmasked block; 256: every block unmasked (non-causal); 257 and 300: a ragged block
@pytest.mark.parametrize("seq", [100, 256, 257, 300])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_the_attention_key_loop_splits_and_computes_the_same(causal: bool, seq: int) -> None:
    single = attention.tile_module(HEAD_DIM, "f16", causal)
    two = split(single)
    assert (loops(single), wheres(single)) == (1, 1)
    assert (loops(two), wheres(two)) == (2, 1)  # the first loop has no select
    np.testing.assert_array_equal(attention_out(two, seq), attention_out(single, seq))


@pytest.mark.parametrize(("causal", "seq"), [(False, 256), (False, 300), (True, 300)])
def test_the_split_attention_matches_at_the_nvgpu_level(causal: bool, seq: int) -> None:
    module = attention.tile_module(HEAD_DIM, "f16", causal)
    expected = attention_out(module, seq)
    options = CompileOptions(stages=3, mma_depth=1, consumers=2, verify=False, rotate=True)
    rng = np.random.default_rng(seq)
    q, k, v = (rng.standard_normal((HEADS, seq, HEAD_DIM)).astype(np.float16) for _ in "qkv")
    o = np.zeros_like(q)
    run_nvgpu_kernel(lower_to_nvgpu_level(module, options), attention.grid(seq, HEADS),
                     [q, k, v, o, seq, SCALE])  # fmt: skip
    np.testing.assert_allclose(o.astype(np.float32), expected.astype(np.float32),
                               rtol=2**-10, atol=2**-12)  # fmt: skip


def test_split_loops_false_keeps_one_key_loop() -> None:
    """CompileOptions.split_loops: the rotated loop's `wait_group 1` once per key loop."""
    options = CompileOptions(stages=3, mma_depth=1, consumers=2, rotate=True)
    module = attention.tile_module(HEAD_DIM, "f16", True)
    ptx = {s: compile_to_ptx(module, dataclasses.replace(options, split_loops=s)).ptx
           for s in (True, False)}  # fmt: skip
    assert [ptx[s].count("wgmma.wait_group.sync.aligned 1;") for s in (True, False)] == [2, 1]


# ------------------------------------------------------------------------- drawn masks

# Each condition compares the loop's columns `i + SHIFT + arange(COLS)` with a bound; the
# first four hold for a prefix of the iterations, the last two for a suffix.
CONDITIONS = ("cols < x", "cols <= x", "x > cols", "x >= cols", "cols > x", "x <= cols")
PREFIX = 4


@tawa_xdsl.jit
def holds(cols, x, FORM: tl.constexpr):
    if FORM == 0:
        mask = cols < x
    elif FORM == 1:
        mask = cols <= x
    elif FORM == 2:
        mask = x > cols
    elif FORM == 3:
        mask = x >= cols
    elif FORM == 4:
        mask = cols > x
    else:
        mask = x <= cols
    return mask


@tawa_xdsl.jit
def masked_sums(
    o_desc, lo, hi, bound, row0,
    STEP: tl.constexpr, SHIFT: tl.constexpr, FIRST: tl.constexpr, SECOND: tl.constexpr,
):  # fmt: skip
    """acc[r, c] sums, over the loop, cols + rows where the mask holds and -1 elsewhere;
    the mask: FIRST against `bound`, and (SECOND >= 0) SECOND against the rows."""
    rows = (row0 + tl.arange(0, ROWS))[:, None]
    acc = tl.zeros([ROWS, COLS], tl.float32)
    for i in tl.range(lo, hi, STEP):
        cols = (i + SHIFT + tl.arange(0, COLS))[None, :]
        mask = holds(cols, bound, FIRST)
        if SECOND >= 0:
            mask = mask & holds(cols, rows, SECOND)
        acc = acc + tl.where(mask, (cols + rows).to(tl.float32), -1.0)
    o_desc.store([0, 0], acc)


@functools.cache
def drawn_kernel(step: int, shift: int, first: int, second: int) -> ModuleOp:
    kernel = masked_sums.compile(
        DescriptorArg(tl.float32, (ROWS, COLS)),
        *[ScalarArg(tl.int32)] * 4,
        STEP=step, SHIFT=shift, FIRST=first, SECOND=second,
    )  # fmt: skip
    return kernel.module.clone()


def sums(module: ModuleOp, lo: int, hi: int, bound: int, row0: int) -> np.ndarray:
    out = np.zeros((ROWS, COLS), np.float32)
    run_kernel(module, (1, 1, 1), [out, lo, hi, bound, row0])
    return out


values = st.integers(-60, 60)


@settings(max_examples=120, deadline=None)
@given(
    step=st.sampled_from([1, 3, 16]),
    shift=st.integers(-9, 9),
    first=st.integers(0, len(CONDITIONS) - 1),
    second=st.integers(-1, len(CONDITIONS) - 1),
    lo=values, hi=values, bound=values, row0=values,
)  # fmt: skip
def test_drawn_masks_split_and_compute_the_same(step, shift, first, second, lo, hi, bound, row0):
    single = drawn_kernel(step, shift, first, second)
    two = split(single)
    prefix = first < PREFIX and second < PREFIX
    assert loops(two) == (2 if prefix else 1), (CONDITIONS[first], second)
    args = (lo, hi, bound, row0)
    np.testing.assert_array_equal(sums(two, *args), sums(single, *args))


@tawa_xdsl.jit
def unreadable(o_desc, m_desc, lo, hi, bound, FORM: tl.constexpr):
    """Masks that are not lane-affine in the induction variable: scaled, or loaded."""
    acc = tl.zeros([ROWS, COLS], tl.float32)
    for i in tl.range(lo, hi, 1):
        cols = (i + tl.arange(0, COLS))[None, :]
        if FORM == 0:
            mask = cols * 2 < bound
        else:
            mask = m_desc.load([0, 0]) < cols.to(tl.float32)
        acc = acc + tl.where(mask, cols.to(tl.float32), -1.0)
    o_desc.store([0, 0], acc)


@pytest.mark.parametrize("form", [0, 1], ids=["scaled", "loaded"])
def test_masks_it_cannot_read_leave_the_loop_whole(form: int) -> None:
    kernel = unreadable.compile(
        DescriptorArg(tl.float32, (ROWS, COLS)), DescriptorArg(tl.float32, (ROWS, COLS)),
        *[ScalarArg(tl.int32)] * 3, FORM=form,
    )  # fmt: skip
    assert loops(split(kernel.module)) == 1
