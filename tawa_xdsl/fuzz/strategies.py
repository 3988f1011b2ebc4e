"""Hypothesis strategies for whole fuzzing cases (`check.Case`).

    from tawa_xdsl.fuzz.strategies import cases
    @given(case=cases())            # CPU levels; cases(gpu=True) for tile + GPU
    def test(case): check_case(case)

What they draw, all within what the compiler supports:

* GEMM-like programs (`gemm_programs`): f16/bf16 inputs, f16/bf16/f32 output, tiles
  BLOCK_M in {64, 128}, BLOCK_N in {64, 128}, BLOCK_K in {32, 64}, 1-D or 2-D grids, and an
  epilogue chain of up to four ops (scale, bias vector, bias scalar, relu, exp2, leaky
  where, f16/bf16 round trips);
* attention-like programs (`attention_programs`): head dim 64/128, key block 64/128, causal
  or not, f16/bf16;
* shapes not multiples of the tile, K trip counts 0, 1, 2, 3 and 5 with ragged last tiles,
  sequence lengths 1 .. 300;
* values (`programs.VALUE_CLASSES`): normal, tiny, large magnitudes, and negative zeros;
  f32 scalars of any sign, big and small;
* options (`options`): D 1..6, P 1..3, cooperative consumers (when BLOCK_M is 128),
  persistent on 1..3 SMs, attention pipelining on/off; for the GPU, D only up to what fits
  an sm_90 block's shared memory (`fitting_stages`);
* schedules (`schedules`): named adversarial policies, random seeds, or Hypothesis-drawn
  choice lists (shrinkable).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import strategies as st

from tawa_xdsl.compiler import SM90_MAX_SMEM_BYTES, CompileOptions, shared_memory_need
from tawa_xdsl.fuzz.check import CPU_LEVELS, Case, Options, Schedule
from tawa_xdsl.fuzz.programs import (
    EPILOGUE_KINDS,
    VALUE_CLASSES,
    AttentionProgram,
    EpilogueOp,
    GemmProgram,
    Program,
)
from tawa_xdsl.interp.scheduler import POLICIES

SCALES = [0.5, -1.0, 2.0, 1e-3, -3.0, 1024.0, -1e4, 2.0**-20]
BIASES = [0.0, -0.0, 1.0, -2.5, 1e4, -1e30, 65504.0, 3e38]


def epilogue_chain(kinds: list[str]) -> tuple[EpilogueOp, ...]:
    """Epilogue ops of these kinds, in order; scale and bias_scalar take the kernel's scalar
    arguments in turn."""
    ops, scalar = [], 0
    for kind in kinds:
        if kind in ("scale", "bias_scalar"):
            ops.append(EpilogueOp(kind, scalar))
            scalar += 1
        else:
            ops.append(EpilogueOp(kind))
    return tuple(ops)


@st.composite
def gemm_programs(draw: st.DrawFn, gpu: bool = False) -> GemmProgram:
    """A GEMM with a random tile shape and epilogue chain (the same for the GPU, whose
    backend lowers every epilogue op)."""
    kinds = draw(st.lists(st.sampled_from(EPILOGUE_KINDS), max_size=4), label="epilogue")
    ops = epilogue_chain(kinds)
    return GemmProgram(
        dtype=draw(st.sampled_from(["f16", "bf16"])),
        out_dtype=draw(st.sampled_from(["f16", "bf16", "f32"])),
        block_m=draw(st.sampled_from([128, 64])),
        block_n=draw(st.sampled_from([128, 64])),
        block_k=draw(st.sampled_from([64, 32])),
        grid_2d=draw(st.booleans()),
        epilogue=ops,
    )


def attention_programs() -> st.SearchStrategy[AttentionProgram]:
    """Attention forward with a random head dim, key block and masking."""
    return st.builds(
        AttentionProgram,
        dtype=st.sampled_from(["f16", "bf16"]),
        head_dim=st.sampled_from([64, 128]),
        block_n=st.sampled_from([64, 128]),
        causal=st.booleans(),
    )


def programs(gpu: bool = False) -> st.SearchStrategy[Program]:
    return st.one_of(gemm_programs(gpu), attention_programs())


# TMA describes a global tensor only when every row pitch is a multiple of 16 bytes: with
# elements of 2 or 4 bytes, the inner dims of the GPU cases are multiples of 8.
TMA_INNER_MULTIPLE = 8


@st.composite
def shapes(draw: st.DrawFn, program: Program, gpu: bool = False) -> dict[str, int]:
    """A problem shape for `program`: ragged edges, short and odd K loops (for the GPU, inner
    dims a TMA can describe; rows stay ragged)."""
    if isinstance(program, GemmProgram):
        step = TMA_INNER_MULTIPLE if gpu else 1
        m = draw(st.integers(1, program.block_m * 2 + program.block_m // 2), label="m")
        n = step * draw(st.integers(1, (program.block_n * 2 + program.block_n // 2) // step))
        k_tiles = draw(st.sampled_from([1, 0, 2, 3, 5]), label="k tiles")
        ragged = draw(st.integers(0, (program.block_k - 1) // step), label="k ragged") * step
        return {"m": m, "n": n, "k": k_tiles * program.block_k - (ragged if k_tiles else 0)}
    seq = draw(st.one_of(st.sampled_from([1, 64, 65, 128, 129]), st.integers(1, 300)))
    return {"heads": draw(st.integers(1, 2)), "seq": seq}


def options(program: Program, gpu: bool = False) -> st.SearchStrategy[Options]:
    """Warp-specialization options valid for `program` (cooperative needs 128 rows); for the
    GPU, only ring depths whose kernel fits an sm_90 block's shared memory (`gpu_options`)."""
    if gpu:
        return gpu_options(program)
    cooperative = program.block_m >= 128
    return st.builds(
        Options,
        stages=st.integers(1, 6),
        mma_depth=st.integers(1, 3),
        consumers=st.sampled_from([1, 2] if cooperative else [1]),
        persistent=st.booleans(),
        attention=st.booleans(),
        sms=st.integers(1, 3),
    )


MAX_STAGES = 6


@st.composite
def gpu_options(draw: st.DrawFn, program: Program) -> Options:
    """Options as `options`, with D drawn among the depths the backend does not refuse for
    shared memory (deep rings of big attention blocks cannot fit 227 KB)."""
    cooperative = program.block_m >= 128
    mma_depth = draw(st.integers(1, 3))
    consumers = draw(st.sampled_from([1, 2] if cooperative else [1]))
    persistent = draw(st.booleans())
    depths = fitting_stages(program, mma_depth, consumers, persistent)
    return Options(
        stages=draw(st.sampled_from(depths)),
        mma_depth=mma_depth,
        consumers=consumers,
        persistent=persistent,
        attention=True,
        sms=draw(st.integers(1, 3)),
    )


@cache
def fitting_stages(
    program: Program, mma_depth: int, consumers: int, persistent: bool
) -> tuple[int, ...]:
    """The ring depths 1..MAX_STAGES whose kernel fits an sm_90 block's shared memory, as
    `compile_to_ptx` measures it (`compiler.shared_memory_need`; the need grows with
    the depth, so the deepest is tried first)."""
    from tawa_xdsl.diagnostics import parse_module
    from tawa_xdsl.dialects import make_context

    module = parse_module(make_context(), program.tile_ir(), "fuzz.mlir")

    def fits(stages: int) -> bool:
        opts = CompileOptions(stages, mma_depth, consumers, persistent)
        return shared_memory_need(module, opts) <= SM90_MAX_SMEM_BYTES

    if fits(MAX_STAGES):
        return tuple(range(1, MAX_STAGES + 1))
    depths = [1]  # a 1-deep ring is the least a kernel can have: never refused
    while depths[-1] + 1 < MAX_STAGES and fits(depths[-1] + 1):
        depths.append(depths[-1] + 1)
    return tuple(depths)


def schedules() -> st.SearchStrategy[Schedule]:
    """A named policy, a seed, or a choice list drawn (and shrunk) by Hypothesis."""
    return st.one_of(
        st.lists(st.integers(0, 3), max_size=64),
        st.sampled_from(sorted(POLICIES)),
        st.integers(0, 2**32 - 1),
    )


@st.composite
def scalars(draw: st.DrawFn, program: Program) -> tuple[float, ...]:
    """The f32 scalar arguments: scale factors (never 0) and biases, or attention's
    sm_scale (positive: the library kernel scales the row max of the raw scores)."""
    if isinstance(program, AttentionProgram):
        scale = draw(st.sampled_from([program.head_dim**-0.5, 0.125, 1.0, 2.0**-8]))
        return (scale,)
    values: list[float] = []
    nonzero = st.floats(-1e4, 1e4, width=32).filter(lambda x: abs(x) >= 2.0**-20)
    for op in program.epilogue:
        if op.kind == "scale":
            values.append(draw(st.one_of(st.sampled_from(SCALES), nonzero)))
        elif op.kind == "bias_scalar":
            finite = st.floats(allow_nan=False, allow_infinity=False, width=32)
            values.append(draw(st.one_of(st.sampled_from(BIASES), finite)))
    return tuple(values)


@st.composite
def cases(draw: st.DrawFn, gpu: bool = False, kind: str | None = None) -> Case:
    """A whole case; `kind` ("gemm" / "attention") restricts the program kind."""
    strategy: Any = {"gemm": gemm_programs(gpu), "attention": attention_programs()}.get(
        kind or "", programs(gpu)
    )
    program = draw(strategy, label="program")
    levels = ("tile", "gpu") if gpu else CPU_LEVELS
    return Case(
        program=program,
        shape=draw(shapes(program, gpu), label="shape"),
        seed=draw(st.integers(0, 2**31 - 1), label="input seed"),
        values=draw(st.sampled_from(VALUE_CLASSES), label="values"),
        scalars=draw(scalars(program), label="scalars"),
        options=draw(options(program, gpu), label="options"),
        aref_schedule=draw(schedules(), label="aref schedule"),
        mbarrier_schedule=draw(schedules(), label="mbarrier schedule"),
        nvgpu_schedule=draw(schedules(), label="nvgpu schedule"),
        levels=levels,
    )
