"""The attention forward of `examples/attention.py` taken to PTX for the H200.

    from attention_compile import compile_attention
    kernel = compile_attention(head_dim=128, dtype="bf16", causal=True)
    kernel.launch(grid(seq, batch_heads), q, k, v, o, seq, sm_scale)   # [B*H, seq, d] tensors
    kernel = compile_attention(head_dim=128, return_lse=True)          # also the log-sum-exp:
    kernel.launch(grid(seq, batch_heads), q, k, v, o, lse, seq, sm_scale)  # lse [B*H, seq] f32

The language kernel `attn_fwd` is specialized for (head dim, BLOCK_M = 128, BLOCK_N, causal)
and compiled to tile IR (`attn_fwd_lse` with `return_lse`: the log-sum-exp of each row's
scaled scores, natural log, into an f32 [B*H, seq] tensor whose row stride is a multiple of 4
elements); bf16 is the same program with every f16 type renamed (the kernel writes
`p.to(tl.float16)`), then `compile_to_ptx` runs the warp-specialization pipeline (two
consumer warpgroups of 64 query rows each). `examples/attention.mlir` and
`attention_causal.mlir` are the hand-written d = 64, f16 forms of the same program.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
from pathlib import Path
from types import ModuleType

from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

import tawa_xdsl.language as tl
from tawa_xdsl.compiler import CompiledKernel, CompileOptions, compile_to_ptx
from tawa_xdsl.dialects import make_context
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg

EXAMPLES = Path(__file__).resolve().parent
BLOCK_M = 128  # two consumer warpgroups of 64 rows


def default_block_n(head_dim: int) -> int:
    """Keys per step: 128 for d = 64 and d = 128 (d = 128 with setmaxnreg 24/240,
    `default_registers`: +16-24% over 64 keys on the H200, bench/NOTES.md round 3)."""
    return 128


@functools.cache
def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("attention_example", EXAMPLES / "attention.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tile_module(
    head_dim: int,
    dtype: str = "f16",
    causal: bool = False,
    block_n: int | None = None,
    return_lse: bool = False,
) -> ModuleOp:
    """The tile IR of `attn_fwd` (`attn_fwd_lse` with `return_lse`) for these parameters
    (a fresh module)."""
    bn = block_n or default_block_n(head_dim)
    f16 = tl.float16
    lse = [DescriptorArg(tl.float32, (1, BLOCK_M))] if return_lse else []
    example = _example()
    kernel = (example.attn_fwd_lse if return_lse else example.attn_fwd).compile(
        DescriptorArg(f16, (1, BLOCK_M, head_dim)),
        DescriptorArg(f16, (1, bn, head_dim)),
        DescriptorArg(f16, (1, bn, head_dim)),
        DescriptorArg(f16, (1, BLOCK_M, head_dim)),
        *lse,
        ScalarArg(tl.int32),
        ScalarArg(tl.float32),
        HEAD_DIM=head_dim,
        BLOCK_M=BLOCK_M,
        BLOCK_N=bn,
        CAUSAL=causal,
    )
    text = str(kernel.module)
    if dtype == "bf16":
        text = text.replace("xf16", "xbf16")
    elif dtype != "f16":
        raise ValueError(f"dtype must be f16 or bf16, got {dtype}")
    return Parser(make_context(), text).parse_module()


def default_registers(head_dim: int, block_n: int) -> tuple[int, int] | None:
    """setmaxnreg (producer, consumer): 24/240 where S, S_next, P and O of d = 128 with 128
    keys per step spill at 232 (ptxas: 16 bytes), else the groups' defaults (40/232)."""
    return (24, 240) if head_dim > 64 and block_n >= 128 else None


@functools.cache
def compile_attention(
    head_dim: int,
    dtype: str = "f16",
    causal: bool = False,
    block_n: int | None = None,
    stages: int = 3,
    registers: tuple[int, int] | None = None,
    pingpong: bool = False,
    mma_depth: int = 1,
    return_lse: bool = False,
) -> CompiledKernel:
    """The attention forward as a launchable kernel (cached per configuration). K and V
    rings are 3 deep: with QK^T(j+1) and P V(j) in flight, a 2-deep ring left the producer
    too little time to refill (bench/NOTES.md, attention). `registers` overrides the
    setmaxnreg split (`default_registers`); `pingpong` alternates the two consumer
    warpgroups' MMA issue with named barriers (CompileOptions.pingpong). MMA depth 1: each
    iteration waits for its P V (a wgmma in flight across the loop's back edge, under a
    rescale of O, makes ptxas serialize them all), so V(j) is released in iteration j."""
    bn = block_n or default_block_n(head_dim)
    options = CompileOptions(
        stages=stages,
        mma_depth=mma_depth,
        consumers=2,
        registers=registers or default_registers(head_dim, bn),
    )
    if pingpong:
        options = dataclasses.replace(options, pingpong=True)
    return compile_to_ptx(tile_module(head_dim, dtype, causal, bn, return_lse), options)


def grid(seq: int, batch_heads: int) -> tuple[int, int, int]:
    """One program per 128 query rows of one (batch, head)."""
    return (-(-seq // BLOCK_M), batch_heads, 1)
