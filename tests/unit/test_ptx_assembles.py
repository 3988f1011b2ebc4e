"""Every option combination of the GEMM pipeline compiles to PTX that ptxas accepts cleanly.

tile IR (the library GEMM `tawa_xdsl.kernels.gemm`, 128x128x64 blocks, f16 and bf16) ->
tawa-warp-specialize{D, P, consumers, persistent} -> lower-aref -> lower-to-nvgpu -> emit-ptx
-> `ptxas -arch=sm_90a -v`. A test fails when ptxas rejects the PTX or warns that it
serialized wgmma (any reason, C7509-C7520) or ignored setmaxnreg (C7508), DESIGN §7. Skipped
only when ptxas is absent (CI machines have it).
"""

from __future__ import annotations

import itertools
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

import tawa_xdsl.language as tl
from tawa_xdsl.backend.emit_ptx import EmitError, emit_ptx
from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.compiler import CompileOptions, compile_to_ptx, lower_to_nvgpu_level
from tawa_xdsl.dialects import make_context, nvgpu
from tawa_xdsl.kernels.gemm import gemm_tile_ir
from tawa_xdsl.transforms.legalize_nvgpu import LegalizeNvgpuPass

# D in {1, 2, 4} (P <= D: P uses held at once need P slots), P in 1..3, 1 or 2 consumer
# warpgroups, persistent or not: 24 kernels, assembled in parallel.
COMBOS = [
    CompileOptions(stages=d, mma_depth=p, consumers=c, persistent=persistent)
    for d, p, c, persistent in itertools.product((1, 2, 4), (1, 2, 3), (1, 2), (False, True))
    if p <= d
]
# The st.shared + TMA-store epilogue over D, P, consumers and persistence.
TMA_COMBOS = [
    CompileOptions(stages=d, mma_depth=p, consumers=c, persistent=persistent, epilogue="tma")
    for d, p, c, persistent in itertools.product((2, 4), (1, 2), (1, 2), (False, True))
]
BF16_COMBOS = [
    CompileOptions(4, 2, 2, False),
    CompileOptions(3, 1, 1, True),
    CompileOptions(4, 2, 2, True, "tma"),
]

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")


def compile_gemm(dtype: tl.dtype, options: CompileOptions) -> str:
    """The PTX of the 128x128x64 library GEMM on `dtype` inputs."""
    return compile_to_ptx(gemm_tile_ir(128, 128, 64, dtype), options).ptx


def _name(o: CompileOptions) -> str:
    return (
        f"D{o.stages}-P{o.mma_depth}-C{o.consumers}{'-persistent' if o.persistent else ''}"
        f"-{o.epilogue}"
    )


def test_ptx_is_ascii_with_the_required_header():
    ptx = compile_gemm(tl.float16, CompileOptions())
    ptx.encode("ascii")
    assert ptx.startswith(".version 8.0\n.target sm_90a\n.address_size 64\n")
    assert ".maxntid 384, 1, 1" in ptx and ".minnctapersm 1" in ptx


@needs_ptxas
@pytest.mark.parametrize(
    ("dtype", "combos"),
    [(tl.float16, COMBOS), (tl.float16, TMA_COMBOS), (tl.bfloat16, BF16_COMBOS)],
    ids=["f16", "f16-tma", "bf16"],
)
def test_every_combination_assembles_without_serialization(dtype: tl.dtype, combos):
    ptxs = {_name(o): compile_gemm(dtype, o) for o in combos}
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = dict(zip(ptxs, pool.map(assemble, ptxs.values()), strict=True))
    failures = {name: r.log for name, r in results.items() if not r.ok or r.registers is None}
    assert not failures, "\n\n".join(f"{n}:\n{log}" for n, log in failures.items())


# 128x256 tiles (two cooperating consumers of 64x256 accumulators, 128 registers each), from
# the library GEMM; D = 3 leaves room for the 64 KiB TMA-store staging.
WIDE_COMBOS = [
    CompileOptions(3, 2, 2, True, "tma"),
    CompileOptions(3, 1, 2, False, "tma"),
    CompileOptions(4, 2, 2, True, "global"),
]


@needs_ptxas
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_wide_tiles_assemble_without_spills(dtype: str):
    module = gemm_tile_ir(128, 256, 64, getattr(tl, dtype))
    for options in WIDE_COMBOS:
        kernel = compile_to_ptx(module, options)
        result = assemble(kernel.ptx)
        assert result.ok and result.registers is not None, f"{_name(options)}:\n{result.log}"
        assert "0 bytes spill stores" in result.log, result.log
        assert kernel.smem_bytes <= 227 * 1024


# FP8 (e4m3 in, fp32 accumulation, bf16 out) with BLOCK_K = 128: k32 wgmmas on both K-major
# operands, 128-element (128-byte) swizzled slot rows; the same smem budget as bf16 BLOCK_K 64.
FP8_COMBOS = [
    (128, CompileOptions(4, 1, 2, True, "tma")),
    (128, CompileOptions(4, 2, 2, False, "global")),
    (256, CompileOptions(3, 1, 2, True, "tma")),
    (256, CompileOptions(3, 2, 2, True, "tma")),
]


@needs_ptxas
@pytest.mark.parametrize(("block_n", "options"), FP8_COMBOS, ids=lambda v: str(v))
def test_fp8_gemm_assembles_without_spills(block_n: int, options: CompileOptions):
    kernel = compile_to_ptx(gemm_tile_ir(128, block_n, 128, tl.float8e4nv), options)
    assert f"wgmma.mma_async.sync.aligned.m64n{block_n}k32.f32.e4m3.e4m3" in kernel.ptx
    # one stage: A 128x128 + B block_n x 128 bytes, delivered on one full barrier
    stage_bytes = {
        int(b) for b in re.findall(r"expect_tx\.shared::cta\.b64 _, \[%r\d+\], (\d+);", kernel.ptx)
    }
    assert stage_bytes == {128 * 128 + block_n * 128}, stage_bytes
    assert kernel.tensor_maps[0].box == (128, 128) and kernel.tensor_maps[0].swizzle == 128
    result = assemble(kernel.ptx)
    assert result.ok and result.registers is not None, f"{_name(options)}:\n{result.log}"
    assert "0 bytes spill stores" in result.log, result.log
    assert kernel.smem_bytes <= 227 * 1024


def test_the_printer_refuses_ir_that_legalize_nvgpu_has_not_seen():
    module = lower_to_nvgpu_level(gemm_tile_ir(), CompileOptions())
    legalized = emit_ptx(module)
    for op in module.walk():
        if isinstance(op, nvgpu.WgmmaMmaAsyncOp):
            op.a_desc_bits = op.a_desc_steps = None  # as lower-to-nvgpu leaves it
    with pytest.raises(EmitError, match="has no descriptor plan; run legalize-nvgpu first"):
        emit_ptx(module)
    LegalizeNvgpuPass().apply(make_context(), module)
    assert emit_ptx(module) == legalized  # the plans are a function of the op: idempotent
