"""`nvgpu.fragment_convert` between every pair of the language's float types (f32, f16, bf16,
e4m3, e5m2), both ways, on each fragment kind the lowering makes from a tile: a 2-D tile
(`wgmma_acc`), a row vector (`wgmma_row`, a reduction along axis 1) and a column vector
(`wgmma_col`, a reduction along axis 0). Each pair is one kernel, written as a user writes it
(`x.to(SOURCE).to(RESULT)` of an f32 tile, of its row maxima or of its column sums), compiled
with default launch options to PTX that ptxas assembles without a warning, and run in the
nvgpu interpreter against numpy: the source rounded once to SOURCE, then once to the result
type (fp8 saturating). The GPU half is tests/gpu/test_fragment_converts_gpu.py."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import lower_to_nvgpu_level
from tawa_xdsl.descriptor import TensorDescriptor
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.runtime.dispatch import host_descriptor

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")

ROWS, COLS = 64, 64
TYPES = {
    "f32": (tl.float32, np.dtype(np.float32)),
    "f16": (tl.float16, np.dtype(np.float16)),
    "bf16": (tl.bfloat16, np.dtype(ml_dtypes.bfloat16)),
    "e4m3": (tl.float8e4nv, np.dtype(ml_dtypes.float8_e4m3fn)),
    "e5m2": (tl.float8e5, np.dtype(ml_dtypes.float8_e5m2)),
}
PAIRS = [(a, b) for a, b in itertools.product(TYPES, TYPES) if a != b]


@tawa_xdsl.jit
def convert_tile(x_desc, y_desc, SOURCE: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr):  # fmt: skip
    x = x_desc.load([0, 0])
    y_desc.store([0, 0], x.to(SOURCE).to(y_desc.dtype))


@tawa_xdsl.jit
def convert_rows(x_desc, y_desc, SOURCE: tl.constexpr, RESULT: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    x = x_desc.load([0, 0])
    rows = tl.max(x, axis=1).to(SOURCE).to(RESULT)
    y_desc.store([0, 0], rows.reshape(1, BLOCK_M))


@tawa_xdsl.jit
def convert_columns(x_desc, y_desc, SOURCE: tl.constexpr, RESULT: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    x = x_desc.load([0, 0])
    columns = tl.sum(x, axis=0).to(SOURCE).to(RESULT)
    y_desc.store([0], columns.to(y_desc.dtype))


# kernel, its numpy answer before the conversions, the output's shape
KINDS = {
    "tile": (convert_tile, lambda x: x, (ROWS, COLS)),
    "rows": (convert_rows, lambda x: x.max(axis=1)[None, :], (1, ROWS)),
    "columns": (convert_columns, lambda x: x.sum(axis=0, dtype=np.float32), (COLS,)),
}


def rounded(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """numpy's round to nearest even, fp8 saturating to its largest finite value (cvt's
    `.satfinite`), f16 overflowing to infinity (cvt.rn.f16)."""
    wide = x.astype(np.float32)
    if dtype.itemsize == 1:
        limit = float(ml_dtypes.finfo(dtype).max)
        wide = np.clip(wide, -limit, limit)
    with np.errstate(over="ignore"):
        return wide.astype(dtype)


def inputs(rng: np.random.Generator) -> np.ndarray:
    """Values that exercise rounding in every type, some past fp8's largest finite value
    (e4m3: 448, e5m2: 57344) and past f16's, where saturation and infinity differ."""
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32) * 4
    x[0, :8] = [500.0, -500.0, 6e4, -6e4, 7e4, 1e-3, 0.0, -0.0]
    return x


@dataclass
class Conversion:
    """One pair's kernel launch: the kernel, its arguments and constexprs, the output array
    it writes and that output's numpy answer."""

    kernel: Any
    args: list[TensorDescriptor]
    constants: dict[str, Any]
    out: np.ndarray
    expected: np.ndarray

    def check(self) -> None:
        np.testing.assert_array_equal(self.out.astype(np.float32), self.expected.astype(np.float32))


def conversion(kind: str, source: str, result: str) -> Conversion:
    kernel, reduce, shape = KINDS[kind]
    x = inputs(np.random.default_rng(0))
    stored = TYPES[result][1]
    if kind == "columns" and stored.itemsize == 1:
        stored = np.dtype(np.float32)  # fp8 column vectors are not stored (widened exactly)
    y = np.full(shape, np.nan, stored)  # an element the kernel does not write shows
    args = [
        TensorDescriptor.from_tensor(x, [ROWS, COLS]),
        TensorDescriptor.from_tensor(y, list(shape)),
    ]
    constants = {"SOURCE": TYPES[source][0], "BLOCK_M": ROWS, "BLOCK_N": COLS}
    if kind != "tile":
        constants["RESULT"] = TYPES[result][0]
    expected = rounded(rounded(reduce(x), TYPES[source][1]), TYPES[result][1])
    return Conversion(kernel, args, constants, y, expected)


CONVERSIONS = [(kind, a, b) for kind in KINDS for a, b in PAIRS]
IDS = [f"{kind}-{a}-{b}" for kind, a, b in CONVERSIONS]


@needs_ptxas
@pytest.mark.parametrize(("kind", "source", "result"), CONVERSIONS, ids=IDS)
def test_every_float_conversion_assembles_and_matches_numpy(
    kind: str, source: str, result: str
) -> None:
    run = conversion(kind, source, result)
    compiled = run.kernel.compile(*run.args, **run.constants)
    assembled = assemble(compiled.gpu_kernel().ptx)
    assert assembled.ok and "warning" not in assembled.log.lower(), assembled.log
    nvgpu = lower_to_nvgpu_level(compiled.module, replace(compiled.options, verify=False))
    run_nvgpu_kernel(nvgpu, (1,), [host_descriptor(a) for a in run.args])
    run.check()
