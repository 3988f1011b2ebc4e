# ruff: noqa: E501 -- the MLIR template keeps its lines whole
"""The GEMM C = A @ B^T at tile level for any tile shape, and the configurations tuned over.

`gemm_tile_ir(128, 256, 64, tl.bfloat16)` is examples/gemm.mlir with its block sizes and
element type as parameters (one program per BLOCK_M x BLOCK_N tile of C, grouped tile order,
fp32 accumulation, output rounded to the input type). Launch the compiled kernel with
grid = (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), 1, 1) and arguments (a, b, c, M, N, K).

FP8: `gemm_tile_ir(128, 256, 128, tl.float8e4nv)` takes e4m3 A and B (wgmma k32, both
K-major; BLOCK_K = 128 makes a slot row exactly the 128-byte swizzle span), accumulates in
fp32 and writes bf16 (`out_dtype`, f16 also allowed). TMA needs 16-byte row strides, so K must
be a multiple of 16 for fp8 inputs.

`GEMM_CONFIGS` (f16/bf16) and `FP8_GEMM_CONFIGS` are the `tawa_xdsl.autotune.Config`s that
bench/gemm.py tunes over; `configs_for(dtype)` picks the list.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

import tawa_xdsl.language as tl
from tawa_xdsl.autotune import Config
from tawa_xdsl.dialects import make_context

_MLIR_TYPES = {"fp16": "f16", "bf16": "bf16", "fp8e4nv": "f8E4M3FN", "fp8e5": "f8E5M2"}

_TEMPLATE = """
func.func @gemm(%a_desc: !tile.desc<{bm}x{bk}x{t}>, %b_desc: !tile.desc<{bn}x{bk}x{t}>,
                %c_desc: !tile.desc<{bm}x{bn}x{o}>, %m: i32, %n: i32, %k: i32) {{
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %block_m = arith.constant {bm} : i32
  %block_n = arith.constant {bn} : i32
  %block_k = arith.constant {bk} : i32
  %group_m = arith.constant {gm} : i32
  %block_m_minus_1 = arith.constant {bm1} : i32
  %block_n_minus_1 = arith.constant {bn1} : i32
  %block_k_minus_1 = arith.constant {bk1} : i32
  %pid = tile.program_id 0 : i32
  %m_round = arith.addi %m, %block_m_minus_1 : i32
  %tiles_m = arith.divsi %m_round, %block_m : i32
  %n_round = arith.addi %n, %block_n_minus_1 : i32
  %tiles_n = arith.divsi %n_round, %block_n : i32
  %tiles_per_group = arith.muli %group_m, %tiles_n : i32
  %group_id = arith.divsi %pid, %tiles_per_group : i32
  %first_m = arith.muli %group_id, %group_m : i32
  %rows_left = arith.subi %tiles_m, %first_m : i32
  %group_size = arith.minsi %rows_left, %group_m : i32
  %in_group = arith.remsi %pid, %tiles_per_group : i32
  %row_in_group = arith.remsi %in_group, %group_size : i32
  %pid_m = arith.addi %first_m, %row_in_group : i32
  %pid_n = arith.divsi %in_group, %group_size : i32
  %off_m = arith.muli %pid_m, %block_m : i32
  %off_n = arith.muli %pid_n, %block_n : i32
  %k_round = arith.addi %k, %block_k_minus_1 : i32
  %k_tiles = arith.divsi %k_round, %block_k : i32
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = tile.splat %zero : f32 -> tensor<{bm}x{bn}xf32>
  %acc = scf.for %kt = %c0 to %k_tiles step %c1 iter_args(%acc_iter = %acc0) -> (tensor<{bm}x{bn}xf32>) : i32 {{
    %off_k = arith.muli %kt, %block_k : i32
    %a = tile.load %a_desc[%off_m, %off_k] : !tile.desc<{bm}x{bk}x{t}> -> tensor<{bm}x{bk}x{t}>
    %b = tile.load %b_desc[%off_n, %off_k] : !tile.desc<{bn}x{bk}x{t}> -> tensor<{bn}x{bk}x{t}>
    %b_t = tile.trans %b : tensor<{bn}x{bk}x{t}> -> tensor<{bk}x{bn}x{t}>
    %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<{bm}x{bk}x{t}>, tensor<{bk}x{bn}x{t}> -> tensor<{bm}x{bn}xf32>
    scf.yield %acc_next : tensor<{bm}x{bn}xf32>
  }}
  %c_tile = tile.convert %acc : tensor<{bm}x{bn}xf32> -> tensor<{bm}x{bn}x{o}>
  tile.store %c_desc[%off_m, %off_n], %c_tile : !tile.desc<{bm}x{bn}x{o}>, tensor<{bm}x{bn}x{o}>
  func.return
}}
"""


def gemm_tile_ir(
    block_m: int = 128,
    block_n: int = 128,
    block_k: int = 64,
    dtype: tl.dtype = tl.float16,
    group_m: int = 8,
    out_dtype: tl.dtype | None = None,
) -> ModuleOp:
    """The tile-level GEMM module for one tile shape and input type (fp16, bf16 or fp8).

    The output type is `out_dtype`; by default the input type, and bf16 for fp8 inputs.
    """
    if dtype.name not in _MLIR_TYPES:
        raise ValueError(f"gemm_tile_ir: dtype must be float16, bfloat16 or fp8, got {dtype.name}")
    out = out_dtype or (tl.bfloat16 if dtype.is_fp8 else dtype)
    if out.name not in ("fp16", "bf16"):
        raise ValueError(f"gemm_tile_ir: out_dtype must be float16 or bfloat16, got {out.name}")
    text = _TEMPLATE.format(
        bm=block_m, bn=block_n, bk=block_k, gm=group_m, t=_MLIR_TYPES[dtype.name],
        o=_MLIR_TYPES[out.name],
        bm1=block_m - 1, bn1=block_n - 1, bk1=block_k - 1,
    )  # fmt: skip
    return Parser(make_context(), text).parse_module()


def _config(
    bn: int, d: int, p: int, persistent: bool, epilogue: str, bk: int = 64, group_m: int = 8
) -> Config:
    kwargs = {"BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": bk}
    if group_m != 8:
        kwargs["GROUP_M"] = group_m
    return Config(
        kwargs, num_stages=d, mma_depth=p, num_consumer_groups=2, persistent=persistent,
        epilogue=epilogue,
    )  # fmt: skip


# What bench/gemm.py tunes over for f16/bf16 (two cooperating consumers throughout): the
# TMA-store epilogue, persistent, on 128x128 and 128x256 tiles (D = 3 for 128x256: the 64 KiB
# staging buffer and three 48 KiB stages fill the 227 KiB of smem). The configs that never won
# in the 2026-11-30 runs (st.global epilogues, non-persistent) are gone, as measured in
# bench/NOTES.md; the GROUP_M = 4 / 16 variants of the winner test the tile order.
GEMM_CONFIGS = [
    _config(128, 4, 1, True, "tma"),
    _config(128, 6, 2, True, "tma"),
    _config(256, 3, 1, True, "tma"),
    _config(256, 3, 2, True, "tma"),
    _config(256, 3, 2, True, "tma", group_m=4),
    _config(256, 3, 2, True, "tma", group_m=16),
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
]


def configs_for(dtype: tl.dtype) -> list[Config]:
    """The config list bench/gemm.py tunes over for inputs of `dtype`."""
    return FP8_GEMM_CONFIGS if dtype.is_fp8 else GEMM_CONFIGS


def config_tile_ir(config: Config, dtype: tl.dtype) -> ModuleOp:
    """`gemm_tile_ir` for the block sizes (and GROUP_M) of `config`."""
    kw = config.kwargs
    return gemm_tile_ir(
        kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], dtype, group_m=kw.get("GROUP_M", 8)
    )
