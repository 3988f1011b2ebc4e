"""C = A @ B^T with fp32 accumulation, written in `tawa_xdsl.language`, and its tuning space.

A is MxK and B is NxK (both K-major, as the tensor cores like them), C is MxN. One program
per BLOCK_M x BLOCK_N tile of C; programs walk the tiles in groups of GROUP_M tile rows, so
that neighbouring programs share B tiles in L2 (Triton's grouped ordering). The element types
are the descriptors': f16 or bf16 in and the same out, or fp8 (e4m3, e5m2) in and bf16 or
f16 out; the accumulator is rounded once, to C's type. Launch on
grid = (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), 1, 1) with arguments (a, b, c, M, N, K).

The epilogue works on the f32 accumulator before C is rounded, each step compiled out when its
argument is None: it multiplies by an f32 scale per row (`row_scale_desc`, M elements, block
[BLOCK_M]) and per column (`col_scale_desc`, N elements, block [BLOCK_N]), adds a bias per
row (`row_bias_desc`, M elements) and per column (`bias_desc`, N elements; f16, bf16 or f32),
and applies an activation (`ACTIVATION`: None, "relu", "silu", or "gelu" in its tanh form):
C = act(A @ B^T * row_scale[:, None] * col_scale[None, :] + row_bias[:, None] + bias[None, :]).
The vectors follow (a, b, c, m, n, k) in that order (`epilogue_arguments`).

FP8 takes BLOCK_K = 128 (wgmma k32, both operands K-major): one slot row is then exactly the
128-byte swizzle span. TMA needs 16-byte row strides, so K must be a multiple of 16 for fp8.

    from tawa_xdsl.kernels.gemm import GEMM_CONFIGS, compile_gemm, gemm_tile_ir
    module = gemm_tile_ir(128, 256, 64, tl.bfloat16)        # tile IR of one specialization
    kernel = compile_gemm(GEMM_CONFIGS[0], tl.bfloat16)     # PTX, ready to launch

`GEMM_CONFIGS` (f16/bf16) and `FP8_GEMM_CONFIGS` are the `tawa_xdsl.autotune.Config`s that
bench/gemm.py tunes over; `configs_for(dtype)` picks the list.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from xdsl.dialects.builtin import ModuleOp

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.autotune import Config
from tawa_xdsl.compiler import CompiledKernel, compile_to_ptx, options_from_launch
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg

INPUT_DTYPES = (tl.float16, tl.bfloat16, tl.float8e4nv, tl.float8e5)
OUTPUT_DTYPES = (tl.float16, tl.bfloat16)
BIAS_DTYPES = (tl.float16, tl.bfloat16, tl.float32)
ACTIVATIONS = (None, "relu", "gelu", "silu")


@tawa_xdsl.jit
def grouped_tile(pid, m, n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """The (row, column) output tile of program `pid` in grouped ordering."""
    tiles_m = tl.cdiv(m, BLOCK_M)
    tiles_n = tl.cdiv(n, BLOCK_N)
    tiles_per_group = GROUP_M * tiles_n
    first_m = (pid // tiles_per_group) * GROUP_M
    group_size = tl.minimum(tiles_m - first_m, GROUP_M)
    in_group = pid % tiles_per_group
    pid_m = first_m + in_group % group_size
    pid_n = in_group // group_size
    return pid_m, pid_n


# exp(x) = exp2(x * LOG2E), as the SFU computes it (math.exp on tiles is not lowered).
LOG2E = 1.4426950408889634
SQRT_2_OVER_PI = 0.7978845608028654


@tawa_xdsl.jit
def activate(x, ACTIVATION: tl.constexpr):
    """`ACTIVATION` (None, "relu", "gelu" in its tanh form, or "silu") of an f32 tile."""
    if ACTIVATION == "relu":
        x = tl.maximum(x, 0.0)
    if ACTIVATION == "silu":
        x = x / (1.0 + tl.exp2(x * -LOG2E))
    if ACTIVATION == "gelu":  # x/2 (1 + tanh(u)) = x - x / (1 + exp(2u))
        u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        x = x - x / (1.0 + tl.exp2(u * (2.0 * LOG2E)))
    return x


@tawa_xdsl.jit
def gemm(
    a_desc, b_desc, c_desc, m, n, k,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, bias_desc=None, ACTIVATION: tl.constexpr = None,
    row_bias_desc=None, row_scale_desc=None, col_scale_desc=None,
):  # fmt: skip
    pid = tl.program_id(0)
    pid_m, pid_n = grouped_tile(pid, m, n, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    k_tiles = tl.cdiv(k, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in tl.range(0, k_tiles):
        off_k = kt * BLOCK_K
        a = a_desc.load([off_m, off_k])
        b = b_desc.load([off_n, off_k])
        acc = tl.dot(a, b.T, acc)
    if row_scale_desc is not None:  # an f32 scale per row of C (fp8 per-token)
        acc = acc * row_scale_desc.load([off_m])[:, None]
    if col_scale_desc is not None:  # an f32 scale per column of C (fp8 per-channel)
        acc = acc * col_scale_desc.load([off_n])[None, :]
    if row_bias_desc is not None:  # a bias per row of C
        acc = acc + row_bias_desc.load([off_m]).to(tl.float32)[:, None]
    if bias_desc is not None:  # a bias per column of C
        acc = acc + tl.expand_dims(bias_desc.load([off_n]).to(tl.float32), 0)
    acc = activate(acc, ACTIVATION)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


def default_out_dtype(dtype: tl.dtype) -> tl.dtype:
    """C's type when not given: the input type, and bf16 for fp8 inputs."""
    return tl.bfloat16 if dtype.is_fp8 else dtype


def gemm_tile_ir(
    block_m: int = 128,
    block_n: int = 128,
    block_k: int = 64,
    dtype: tl.dtype = tl.float16,
    group_m: int = 8,
    out_dtype: tl.dtype | None = None,
    bias_dtype: tl.dtype | None = None,
    activation: str | None = None,
    bias_rows: bool = False,
    row_scale: bool = False,
    col_scale: bool = False,
) -> ModuleOp:
    """The tile IR of `gemm` for one tile shape and input type (a fresh module); C is
    `out_dtype`, by default `default_out_dtype(dtype)`. With `bias_dtype` the kernel takes a
    bias vector of that type, of M elements (`bias_rows`) or N; with `row_scale` / `col_scale`
    f32 scale vectors of M / N elements; the vectors are its last arguments, in the order of
    `epilogue_arguments`. `activation` is applied last."""
    if dtype not in INPUT_DTYPES:
        raise ValueError(f"gemm: dtype must be float16, bfloat16 or fp8, got {dtype}")
    out = out_dtype or default_out_dtype(dtype)
    if out not in OUTPUT_DTYPES:
        raise ValueError(f"gemm: out_dtype must be float16 or bfloat16, got {out}")
    if bias_dtype is not None and bias_dtype not in BIAS_DTYPES:
        raise ValueError(f"gemm: bias_dtype must be float16, bfloat16 or float32, got {bias_dtype}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"gemm: activation must be one of {ACTIVATIONS}, got {activation!r}")
    rows, cols = DescriptorArg(tl.float32, (block_m,)), DescriptorArg(tl.float32, (block_n,))
    bias = (
        None
        if bias_dtype is None
        else DescriptorArg(bias_dtype, (block_m if bias_rows else block_n,))
    )
    kernel = gemm.compile(
        DescriptorArg(dtype, (block_m, block_k)),
        DescriptorArg(dtype, (block_n, block_k)),
        DescriptorArg(out, (block_m, block_n)),
        ScalarArg(tl.int32),
        ScalarArg(tl.int32),
        ScalarArg(tl.int32),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        GROUP_M=group_m,
        bias_desc=None if bias_rows else bias,
        ACTIVATION=activation,
        row_bias_desc=bias if bias_rows else None,
        row_scale_desc=rows if row_scale else None,
        col_scale_desc=cols if col_scale else None,
    )
    return kernel.module.clone()


def epilogue_arguments(
    bias: Any = None, row_bias: Any = None, row_scale: Any = None, col_scale: Any = None
) -> list[Any]:
    """The epilogue's vectors that are given, in the order `gemm` takes them after (a, b, c,
    m, n, k): the column bias, the row bias, the row scale, the column scale."""
    return [v for v in (bias, row_bias, row_scale, col_scale) if v is not None]


def config_tile_ir(
    config: Config,
    dtype: tl.dtype,
    out_dtype: tl.dtype | None = None,
    bias_dtype: tl.dtype | None = None,
    activation: str | None = None,
    **vectors: bool,
) -> ModuleOp:
    """`gemm_tile_ir` for the block sizes (and GROUP_M) of `config`; `vectors` are its
    `bias_rows`, `row_scale` and `col_scale`."""
    kw = config.kwargs
    return gemm_tile_ir(
        kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], dtype, kw.get("GROUP_M", 8), out_dtype,
        bias_dtype, activation, **vectors,
    )  # fmt: skip


def compile_gemm(
    config: Config,
    dtype: tl.dtype,
    out_dtype: tl.dtype | None = None,
    verify: bool = True,
    bias_dtype: tl.dtype | None = None,
    activation: str | None = None,
    **vectors: bool,
) -> CompiledKernel:
    """`gemm` for `config`'s blocks taken to PTX with its launch options; `verify=False`
    skips the ring proofs (CPU work the unit tests do); `vectors` as `config_tile_ir`."""
    options = dataclasses.replace(options_from_launch(config.options()), verify=verify)
    module = config_tile_ir(config, dtype, out_dtype, bias_dtype, activation, **vectors)
    return compile_to_ptx(module, options)


def grid(m: int, n: int, config: Config) -> tuple[int, int, int]:
    """One program per output tile of `config`'s blocks."""
    bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
    return (-(-m // bm) * -(-n // bn), 1, 1)


# ----------------------------------------------------------------------------- the configs


def _config(
    bn: int, d: int, p: int, persistent: bool, epilogue: str, bk: int = 64, group_m: int = 8,
    consumers: int = 2, ctas_per_sm: int = 1,
) -> Config:  # fmt: skip
    kwargs = {"BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": bk}
    if group_m != 8:
        kwargs["GROUP_M"] = group_m
    return Config(
        kwargs, num_stages=d, mma_depth=p, num_consumer_groups=consumers, persistent=persistent,
        epilogue=epilogue, ctas_per_sm=None if ctas_per_sm == 1 else ctas_per_sm,
    )  # fmt: skip


# What bench/gemm.py tunes over for f16/bf16: the TMA-store epilogue, persistent, on 128x128
# and 128x256 tiles with two cooperating consumers (D = 3 for 128x256: the 64 KiB staging
# buffer and three 48 KiB stages fill the 227 KiB of smem), and two CTAs per SM of one
# consumer each on 128x128 tiles (2-deep rings beside the 32 KiB staging in each half of the
# SM), so that one CTA's epilogue runs under the other's MMAs (it wins bf16 K = 128 and fp8
# K = 256 only; its st.global form never won). The configs that never won in the
# 2026-11-30 runs (st.global epilogues, non-persistent) are gone, as measured in
# bench/NOTES.md; the GROUP_M = 4 / 16 variants of the winner test the tile order.
GEMM_CONFIGS = [
    _config(128, 4, 1, True, "tma"),
    _config(128, 6, 2, True, "tma"),
    _config(256, 3, 1, True, "tma"),
    _config(256, 3, 2, True, "tma"),
    _config(256, 3, 2, True, "tma", group_m=4),
    _config(256, 3, 2, True, "tma", group_m=16),
    _config(128, 2, 1, True, "tma", consumers=1, ctas_per_sm=2),
]

# FP8 (e4m3 in, bf16 out): BLOCK_K = 128 (one 128-byte swizzled row of 1-byte elements per
# slot row, four k32 wgmmas per stage), so a stage holds the same bytes as a BLOCK_K = 64
# bf16 stage and the smem budget is the same: D = 4 on 128x128, D = 3 on 128x256.
FP8_GEMM_CONFIGS = [
    _config(128, 4, 1, True, "tma", bk=128),
    _config(128, 4, 2, True, "tma", bk=128),
    _config(256, 3, 1, True, "tma", bk=128),
    _config(256, 3, 2, True, "tma", bk=128),
    _config(256, 3, 2, True, "tma", bk=128, group_m=16),
    _config(128, 2, 1, True, "tma", bk=128, consumers=1, ctas_per_sm=2),
]


def configs_for(dtype: tl.dtype) -> list[Config]:
    """The config list bench/gemm.py tunes over for inputs of `dtype`."""
    return FP8_GEMM_CONFIGS if dtype.is_fp8 else GEMM_CONFIGS
