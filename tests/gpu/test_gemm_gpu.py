"""The generated warp-specialized GEMM on the GPU against a float32 reference.

The library GEMM `tawa_xdsl.kernels.gemm` (C = A @ B^T, f16 and bf16) -> compile_to_ptx for several
(D, P, consumers, persistent) combinations -> runtime launch on fresh random data with a
NaN-poisoned output. Shapes cover square and non-square problems, K not a multiple of
BLOCK_K (TMA zero-fill) and M, N not multiples of the 128x128 tile (clipped stores).
FP8: e4m3 A and B (BLOCK_K = 128), bf16 C, against the float32 product of the
dequantized inputs.

Kernels are compiled with `verify=False`: the ring proofs of these options run on the CPU
(tests/unit/test_ptx_assembles.py) and would only spend the GPU lease here.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest

import tawa_xdsl.language as tl
from tawa_xdsl.compiler import CompiledKernel, CompileOptions, compile_to_ptx
from tawa_xdsl.kernels.gemm import gemm_tile_ir

torch = pytest.importorskip("torch")

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
LANGUAGE_DTYPES = {"f16": tl.float16, "bf16": tl.bfloat16}
COMBOS = [
    CompileOptions(stages=4, mma_depth=2, consumers=2, persistent=False),
    CompileOptions(stages=4, mma_depth=2, consumers=2, persistent=True),
    CompileOptions(stages=3, mma_depth=1, consumers=1, persistent=False),
    CompileOptions(stages=2, mma_depth=2, consumers=1, persistent=True),
    CompileOptions(stages=1, mma_depth=1, consumers=2, persistent=False),
    CompileOptions(stages=4, mma_depth=3, consumers=1, persistent=False),
    # st.shared + TMA-store epilogue
    CompileOptions(stages=4, mma_depth=2, consumers=2, persistent=True, epilogue="tma"),
    CompileOptions(stages=3, mma_depth=1, consumers=1, persistent=False, epilogue="tma"),
    CompileOptions(stages=2, mma_depth=1, consumers=2, persistent=False, epilogue="tma"),
    # two CTAs per SM, one consumer each (persistent: 2 programs per SM)
    CompileOptions(
        stages=2, mma_depth=1, consumers=1, persistent=True, epilogue="tma", ctas_per_sm=2
    ),
    CompileOptions(stages=3, mma_depth=1, consumers=1, persistent=True, ctas_per_sm=2),
    CompileOptions(stages=2, mma_depth=1, consumers=1, persistent=False, ctas_per_sm=2),
]
# 128x256 tiles (as bench/gemm.py tunes): two cooperating 64x256 consumers
WIDE = [
    CompileOptions(stages=3, mma_depth=2, consumers=2, persistent=True, epilogue="tma"),
    CompileOptions(stages=3, mma_depth=1, consumers=2, persistent=False, epilogue="tma"),
    CompileOptions(stages=4, mma_depth=2, consumers=2, persistent=True, epilogue="global"),
]
SHAPES = [(256, 256, 256), (384, 640, 1024), (300, 200, 136), (129, 1000, 72), (1024, 256, 4096)]


@functools.cache
def compiled(dtype: str, options: CompileOptions, block_n: int = 128) -> CompiledKernel:
    options = dataclasses.replace(options, verify=False)
    return compile_to_ptx(gemm_tile_ir(128, block_n, 64, LANGUAGE_DTYPES[dtype]), options)


def run_gemm(
    kernel: CompiledKernel, m: int, n: int, k: int, dtype, block_n: int = 128, out_dtype=None
) -> tuple[float, int]:
    """(relative error vs float32, count of unwritten outputs) on fresh random inputs."""
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(n, k, device="cuda").to(dtype)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=out_dtype or dtype)
    grid = (-(-m // 128) * -(-n // block_n), 1, 1)
    kernel.launch(grid, a, b, c, m, n, k)
    torch.cuda.synchronize()
    ref = a.float() @ b.float().T
    err = ((c.float() - ref).norm() / ref.norm()).item()
    return err, int(torch.isnan(c).sum().item())


@pytest.mark.gpu
@pytest.mark.parametrize(
    "options",
    COMBOS,
    ids=lambda o: (
        f"D{o.stages}P{o.mma_depth}C{o.consumers}{'p' if o.persistent else ''}-{o.epilogue}"
        f"{f'-x{o.ctas_per_sm}' if o.ctas_per_sm > 1 else ''}"
    ),
)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_matches_reference(shape, dtype, options):
    err, unwritten = run_gemm(compiled(dtype, options), *shape, DTYPES[dtype])
    assert unwritten == 0
    assert err < 1e-2, f"relative error {err:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize(
    "options",
    WIDE,
    ids=lambda o: f"D{o.stages}P{o.mma_depth}{'p' if o.persistent else ''}-{o.epilogue}",
)
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_wide_gemm_matches_reference(shape, dtype, options):
    kernel = compiled(dtype, options, block_n=256)
    err, unwritten = run_gemm(kernel, *shape, DTYPES[dtype], block_n=256)
    assert unwritten == 0
    assert err < 1e-2, f"relative error {err:.2e}"


# FP8 e4m3 -> bf16 (BLOCK_K = 128). TMA needs 16-byte row strides: K is a multiple of 16 here
# (80 and 144 are not multiples of BLOCK_K: the K tail is zero-filled).
FP8 = [
    (128, CompileOptions(stages=4, mma_depth=1, consumers=2, persistent=True, epilogue="tma")),
    (128, CompileOptions(stages=4, mma_depth=2, consumers=2, persistent=False)),
    (256, CompileOptions(stages=3, mma_depth=1, consumers=2, persistent=True, epilogue="tma")),
    (256, CompileOptions(stages=3, mma_depth=2, consumers=2, persistent=True, epilogue="tma")),
    (
        128,
        CompileOptions(
            stages=2, mma_depth=1, consumers=1, persistent=True, epilogue="tma", ctas_per_sm=2
        ),
    ),
]
FP8_SHAPES = [
    (256, 256, 256),
    (384, 640, 1024),
    (300, 200, 144),
    (129, 1000, 80),
    (1024, 512, 4096),
]


@functools.cache
def compiled_fp8(block_n: int, options: CompileOptions) -> CompiledKernel:
    options = dataclasses.replace(options, verify=False)
    return compile_to_ptx(gemm_tile_ir(128, block_n, 128, tl.float8e4nv), options)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("block_n", "options"),
    FP8,
    ids=lambda v: (
        f"D{v.stages}P{v.mma_depth}{'p' if v.persistent else ''}-{v.epilogue}"
        f"{f'-x{v.ctas_per_sm}' if v.ctas_per_sm > 1 else ''}"
        if isinstance(v, CompileOptions)
        else f"BN{v}"
    ),
)
@pytest.mark.parametrize("shape", FP8_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fp8_gemm_matches_reference(shape, block_n, options):
    kernel = compiled_fp8(block_n, options)
    err, unwritten = run_gemm(
        kernel, *shape, torch.float8_e4m3fn, block_n=block_n, out_dtype=torch.bfloat16
    )
    assert unwritten == 0
    assert err < 1e-2, f"relative error {err:.2e}"


# Every combination of the warp-specialization options (the st.global epilogue, whose smem
# fits every ring depth), on one shape that is ragged in M, N and K.
EVERY_COMBO = [
    CompileOptions(stages=d, mma_depth=p, consumers=c, persistent=persistent, epilogue="global")
    for d in range(1, 7)
    for p in (1, 2, 3)
    for c in (1, 2)
    for persistent in (False, True)
]


@pytest.mark.gpu
@pytest.mark.parametrize(
    "options",
    EVERY_COMBO,
    ids=lambda o: f"D{o.stages}P{o.mma_depth}C{o.consumers}{'p' if o.persistent else ''}",
)
def test_every_option_combination(options):
    err, unwritten = run_gemm(compiled("f16", options), 300, 200, 136, DTYPES["f16"])
    assert unwritten == 0
    assert err < 1e-2, f"relative error {err:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", ["tma", "global"])
def test_two_ctas_share_each_sm(epilogue):
    """A kernel compiled for two CTAs per SM gets them: the driver's occupancy calculator
    places two blocks of its threads and shared memory on one SM (one without the option,
    the same tile with the 232-register consumer of a single CTA), and the persistent
    launch starts two programs per SM."""
    from tawa_xdsl.runtime.driver import require_gpu
    from tawa_xdsl.runtime.launch import device_sms
    from tawa_xdsl.runtime.module import load_kernel

    shared = CompileOptions(stages=2, mma_depth=1, consumers=1, persistent=True,
                            epilogue=epilogue, ctas_per_sm=2)  # fmt: skip
    alone = dataclasses.replace(shared, ctas_per_sm=1, stages=4)
    for options, blocks in ((shared, 2), (alone, 1)):
        kernel = compiled("bf16", options)
        loaded = load_kernel(kernel.ptx, kernel.name)
        assert loaded.resident_blocks(kernel.threads, kernel.smem_bytes) == blocks
    sms = device_sms(require_gpu())
    assert compiled("bf16", shared).grid(4096)[0] == (2 * sms, 1, 1)
