"""The library GEMM's vector epilogues (`kernels.gemm`: f32 scales per row and per column of C,
a bias per row or per column), as `ops.scaled_mm` and `ops.matmul` compile them, without
torch: the tile interpreter against numpy for every form, and the nvgpu-level interpreter
(the IR emit-ptx prints, thread by thread) against the tile level with the library's own
persistent, TMA-store configs, f16 and fp8."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import tawa_xdsl.language as tl
from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import lower_to_nvgpu_level, options_from_launch
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.kernels import gemm
from tawa_xdsl.transforms.persistent import persistent_launch

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
BF16 = np.dtype(ml_dtypes.bfloat16)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def operands(rng: np.random.Generator, m: int, n: int, k: int, dtype: np.dtype):
    a = (rng.standard_normal((m, k)) / 2).astype(dtype)
    b = (rng.standard_normal((n, k)) / 2).astype(dtype)
    return a, b, a.astype(np.float64) @ b.astype(np.float64).T


# (name, gemm_tile_ir keywords, which vectors): every form the ops use, and all at once.
FORMS = [
    ("row_scale", {"row_scale": True}, ("row_scale",)),
    ("col_scale", {"col_scale": True}, ("col_scale",)),
    ("row_and_col_scale", {"row_scale": True, "col_scale": True}, ("row_scale", "col_scale")),
    ("row_bias_f32", {"bias_dtype": tl.float32, "bias_rows": True}, ("row_bias",)),
    ("col_bias_f32", {"bias_dtype": tl.float32}, ("bias",)),
    (
        "scales_row_bias_relu",
        {
            "row_scale": True,
            "col_scale": True,
            "bias_dtype": tl.bfloat16,
            "bias_rows": True,
            "activation": "relu",
        },
        ("row_bias", "row_scale", "col_scale"),
    ),  # fmt: skip
]


def vectors(rng: np.random.Generator, m: int, n: int, names: tuple[str, ...], bias_dtype):
    """The named vectors (scales in [0.5, 2), f32; biases of `bias_dtype`)."""
    made = {}
    for name in names:
        length = n if name in ("bias", "col_scale") else m
        if name.endswith("scale"):
            made[name] = rng.uniform(0.5, 2.0, length).astype(np.float32)
        else:
            made[name] = rng.standard_normal(length).astype(bias_dtype)
    return made


def reference(acc: np.ndarray, made: dict, activation: str | None) -> np.ndarray:
    x = acc.copy()
    if "row_scale" in made:
        x *= made["row_scale"].astype(np.float64)[:, None]
    if "col_scale" in made:
        x *= made["col_scale"].astype(np.float64)[None, :]
    if "row_bias" in made:
        x += made["row_bias"].astype(np.float64)[:, None]
    if "bias" in made:
        x += made["bias"].astype(np.float64)[None, :]
    return np.maximum(x, 0.0) if activation == "relu" else x


@pytest.mark.parametrize(("name", "keywords", "names"), FORMS, ids=[f[0] for f in FORMS])
@pytest.mark.parametrize("dtype", [tl.float16, tl.float8e4nv], ids=str)
def test_each_epilogue_form_matches_numpy_in_the_tile_interpreter(name, keywords, names, dtype):
    """Ragged M and N (the last blocks of every vector zero-filled, stores clipped); C bf16."""
    m, n, k, block = 70, 40, 64, (32, 16, 32)
    rng = np.random.default_rng(len(name))
    a, b, acc = operands(rng, m, n, k, np.float16 if dtype == tl.float16 else E4M3)
    bias_dtype = {tl.float32: np.float32, tl.bfloat16: BF16}.get(keywords.get("bias_dtype"))
    made = vectors(rng, m, n, names, bias_dtype)
    module = gemm.gemm_tile_ir(*block, dtype, group_m=2, out_dtype=tl.bfloat16, **keywords)
    c = np.full((m, n), np.nan, BF16)
    args = [a, b, c, m, n, k, *gemm.epilogue_arguments(**made)]
    run_kernel(module, (cdiv(m, block[0]) * cdiv(n, block[1]),), args)
    expected = reference(acc, made, keywords.get("activation"))
    np.testing.assert_allclose(c.astype(np.float64), expected, rtol=2**-7, atol=1e-2)


def test_the_vectors_follow_the_matrices_in_one_order() -> None:
    assert gemm.epilogue_arguments(col_scale="s", bias="b") == ["b", "s"]
    assert gemm.epilogue_arguments("b", "rb", "rs", "cs") == ["b", "rb", "rs", "cs"]


def test_a_bias_of_another_type_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="^gemm: bias_dtype must be float16, bfloat16 or float32"):
        gemm.gemm_tile_ir(bias_dtype=tl.float8e4nv)


@pytest.mark.parametrize(
    ("config", "dtype"),
    [(gemm.GEMM_CONFIGS[0], tl.float16), (gemm.FP8_GEMM_CONFIGS[0], tl.float8e4nv)],
    ids=["f16_128x128", "fp8_128x128"],
)
def test_all_vectors_at_the_nvgpu_level_match_the_tile_level(config, dtype) -> None:
    """Row and column scales, a row bias and a ReLU, persistent with the TMA-store epilogue
    and two consumer warpgroups (each reads its 64 rows of the row vectors), as ops compiles
    them: every thread's fragments equal the tile program's values."""
    m, n, k = 200, 136, 128
    rng = np.random.default_rng(9)
    a, b, _ = operands(rng, m, n, k, np.float16 if dtype == tl.float16 else E4M3)
    made = vectors(rng, m, n, ("row_bias", "row_scale", "col_scale"), np.float32)
    module = gemm.config_tile_ir(config, dtype, tl.bfloat16, tl.float32, "relu",
                                 bias_rows=True, row_scale=True, col_scale=True)  # fmt: skip
    grid = (cdiv(m, 128) * cdiv(n, config.kwargs["BLOCK_N"]),)
    expected, c = (np.zeros((m, n), BF16) for _ in range(2))
    vector_args = gemm.epilogue_arguments(**made)
    run_kernel(module, grid, [a, b, expected, m, n, k, *vector_args])
    options = dataclasses.replace(options_from_launch(config.options()), verify=False)
    persistent_grid, extra = persistent_launch(grid, 2)
    nvgpu = lower_to_nvgpu_level(module, options)
    run_nvgpu_kernel(nvgpu, persistent_grid, [a, b, c, m, n, k, *vector_args, *extra])
    np.testing.assert_array_equal(c.astype(np.float32), expected.astype(np.float32))


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")
@pytest.mark.parametrize("config", [2, 3], ids=["fp8_128x256_p1", "fp8_128x256_p2"])
def test_the_scaled_fp8_gemms_assemble(config: int) -> None:
    """Both scales and a row bias on the 128x256 fp8 tiles (a 256-element f32 column vector,
    one TMA box) pass ptxas without a warning."""
    kernel = gemm.compile_gemm(gemm.FP8_GEMM_CONFIGS[config], tl.float8e4nv, tl.bfloat16,
                               verify=False, bias_dtype=tl.bfloat16, bias_rows=True,
                               row_scale=True, col_scale=True)  # fmt: skip
    result = assemble(kernel.ptx)
    assert result.ok, result.log[-2000:]
    assert "warning" not in result.log.lower(), result.log
