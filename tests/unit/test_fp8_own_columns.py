"""P V in fp8 without moving P between lanes: wgmma's fp8 A layout finds every accumulator
value in its own thread once the columns are permuted by `WGMMA_OPERAND_A8.own_columns`
(`fp8_key_order` in the language; `fp8_v` puts V's keys in the same order).

The lowering turns a convert of permuted columns into the fp8 A operand into one
`nvgpu.fragment_convert` with `columns`, whose verifier accepts only maps that keep every
value in its thread; the printer then packs each thread's own values (no shuffles). A
permutation that would move values between lanes, or permuted columns into a 16-bit dot, is
refused in one line naming the kernel's line. Both interpreters and numpy agree on what the
permuted kernel computes.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest
from xdsl.utils.exceptions import PassFailedException

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import lower_to_nvgpu_level
from tawa_xdsl.descriptor import TensorDescriptor
from tawa_xdsl.diagnostics import TawaError
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.nvgpu import WGMMA_ACC, WGMMA_OPERAND_A8, FragmentLayout
from tawa_xdsl.dialects.nvgpu.layout import column_gather
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.kernels import attention
from tawa_xdsl.kernels.attention import fp8_key_order
from tawa_xdsl.runtime.dispatch import host_descriptor

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)


@pytest.mark.parametrize("shape", [(64, 32), (128, 128), (192, 64), (64, 256)])
def test_own_columns_keep_every_value_in_its_thread(shape: tuple[int, int]) -> None:
    cols = shape[1]
    own = WGMMA_OPERAND_A8.own_columns(cols)
    assert sorted(own) == list(range(cols))  # a permutation
    plan = column_gather(
        WGMMA_OPERAND_A8, shape, shape, [0] * cols, own, source_layout=WGMMA_ACC
    )  # fmt: skip
    # each packed register takes two of the accumulator's column pairs, whole
    values = [value for _, value in plan]
    for first in range(0, len(values), 2):
        assert values[first] % 2 == 0 and values[first + 1] == values[first] + 1


@pytest.mark.parametrize(
    "columns",
    [list(range(32)), [c ^ 2 for c in WGMMA_OPERAND_A8.own_columns(32)]],
    ids=["in-order", "lanes-swapped"],
)
def test_other_orders_need_other_lanes(columns: list[int]) -> None:
    with pytest.raises(ValueError, match="held by other threads"):
        column_gather(WGMMA_OPERAND_A8, (64, 32), (64, 32), [0] * 32, columns, WGMMA_ACC)


def test_fp8_v_transposes_pads_and_orders_the_keys() -> None:
    v = np.arange(2 * 40 * 3, dtype=np.float32).reshape(2, 40, 3).astype(E4M3)
    laid_out = attention.fp8_v(v)
    assert laid_out.shape == (2, 3, 64) and laid_out.flags.c_contiguous
    keys = attention.fp8_key_positions(64)
    for column, key in enumerate(keys):
        expected = v[:, key, :] if key < 40 else np.zeros((2, 3), E4M3)
        np.testing.assert_array_equal(laid_out[:, :, column], expected)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_library_fp8_kernel_moves_no_value_between_lanes(head_dim: int, causal: bool):
    options = attention.compile_options(head_dim, causal=causal)
    lowered = lower_to_nvgpu_level(attention.tile_module(head_dim, "e4m3", causal), options)
    into_a8 = [
        op
        for op in lowered.walk()
        if isinstance(op, nvgpu.FragmentConvertOp)
        and op.result.type.kind == FragmentLayout.WGMMA_OPERAND_A8
    ]
    assert into_a8 and all(op.column_map() is not None for op in into_a8)
    fp8 = attention.compile_attention(head_dim, "e4m3", causal).ptx
    bf16 = attention.compile_attention(head_dim, "bf16", causal).ptx
    # the only lane shuffles left are those the 16-bit kernel has too (a warp-uniform index)
    assert fp8.count("shfl.sync.idx") == bf16.count("shfl.sync.idx")
    assert "prmt.b32" not in fp8


ROWS, KEYS, DIM = 64, 64, 32


@tawa_xdsl.jit
def weighted_sum(p_desc, vt_desc, o_desc, M: tl.constexpr, N: tl.constexpr, ORDER: tl.constexpr):
    """O = P V with P's columns (and V's rows, laid out so by the caller) in another order:
    ORDER 0 their own, 1 the fp8 A layout's own, 2 an order that needs other lanes, 3 the
    fp8 A layout's own into a 16-bit dot."""
    p = p_desc.load([0, 0]).to(tl.float32)
    if ORDER == 1 or ORDER == 3:
        p = fp8_key_order(p, M, N)
    if ORDER == 2:
        p = tl.permute(p.reshape([M, N // 4, 2, 2]), 0, 1, 3, 2).reshape([M, N])
    v = vt_desc.load([0, 0]).T
    if ORDER == 3:
        o_desc.store([0, 0], tl.dot(p.to(tl.float16), v))
    else:
        o_desc.store([0, 0], tl.dot(p.to(tl.float8e4nv), v))


def _args(
    dtype: np.dtype = E4M3, ordered: bool = True, magnitudes: bool = False
) -> tuple[np.ndarray, np.ndarray, list]:
    """(P V in f32 from P rounded to `dtype`, or with `magnitudes` |P| |V|; O; descriptors)."""
    rng = np.random.default_rng(7)
    p = rng.standard_normal((ROWS, KEYS)).astype(np.float16)
    v = rng.standard_normal((KEYS, DIM)).astype(dtype)
    positions = attention.fp8_key_positions(KEYS) if ordered else np.arange(KEYS)
    vt = np.ascontiguousarray(v.T[:, positions])  # V's rows in P's new column order
    o = np.full((ROWS, DIM), np.nan, np.float32)
    descs = [
        TensorDescriptor.from_tensor(p, [ROWS, KEYS]),
        TensorDescriptor.from_tensor(vt, [DIM, KEYS]),
        TensorDescriptor.from_tensor(o, [ROWS, DIM]),
    ]
    p8 = p.astype(E4M3).astype(np.float32) if dtype == E4M3 else p.astype(np.float32)
    if magnitudes:
        return np.abs(p8) @ np.abs(v.astype(np.float32)), o, descs
    return p8 @ v.astype(np.float32), o, descs


SIZES = {"M": ROWS, "N": KEYS}


@pytest.mark.parametrize("order", [1, 0], ids=["own-order", "in-order"])
def test_p_into_fp8_a_matches_numpy_in_both_interpreters(order: int) -> None:
    expected, o, descs = _args(ordered=order == 1)
    weighted_sum[(1,)](*descs, **SIZES, ORDER=order, interpret=True)
    np.testing.assert_allclose(o, expected, rtol=1e-5, atol=1e-4)
    compiled = weighted_sum.compile(*descs, **SIZES, ORDER=order)
    options = dataclasses.replace(compiled.options, verify=False)
    lowered = lower_to_nvgpu_level(compiled.module, options)
    (convert,) = [op for op in lowered.walk() if isinstance(op, nvgpu.FragmentConvertOp)
                  and op.result.type.kind == FragmentLayout.WGMMA_OPERAND_A8]  # fmt: skip
    own = WGMMA_OPERAND_A8.own_columns(KEYS)
    assert convert.column_map() == (own if order == 1 else None)
    o[...] = np.nan
    run_nvgpu_kernel(lowered, (1,), [host_descriptor(d) for d in descs])
    np.testing.assert_allclose(o, expected, rtol=1e-5, atol=1e-4)
    # the quad exchange (shuffles and byte permutes) only where P keeps its order
    ptx = compiled.gpu_kernel().ptx
    assert ("prmt.b32" in ptx) == (order == 0)
    if find_ptxas() is not None:
        assembled = assemble(ptx)
        assert assembled.returncode == 0 and "warning" not in assembled.log, assembled.log


@pytest.mark.parametrize(
    ("order", "dtype", "message"),
    [
        (2, E4M3, "'tile.convert' cannot be register moves: 'nvgpu.fragment_convert' column 4 "
         "would come from column 4, held by other threads"),
        (3, np.dtype(np.float16), "'tile.convert' cannot be register moves: "
         "'nvgpu.fragment_gather' column 2 would come from column 8, held by other threads"),
    ],
    ids=["other-lanes", "16-bit-dot"],
)  # fmt: skip
def test_orders_the_layout_cannot_take_are_refused_in_one_line(order, dtype, message) -> None:
    _, _, descs = _args(dtype)
    with pytest.raises((TawaError, PassFailedException)) as refused:
        weighted_sum.compile(*descs, **SIZES, ORDER=order).gpu_kernel()
    text = str(refused.value)
    assert "\n" not in text and message in text, text
    assert text.startswith(f"{__file__}:"), text
