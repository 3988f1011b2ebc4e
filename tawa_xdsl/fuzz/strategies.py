"""Hypothesis strategies for whole fuzzing cases (`check.Case`).

    from tawa_xdsl.fuzz.strategies import cases
    @given(case=cases())            # CPU levels; cases(gpu=True) for tile + GPU
    def test(case): check_case(case)

What they draw, all within what the compiler supports:

* GEMM-like programs (`gemm_programs`): f16/bf16/fp8 e4m3 inputs, f16/bf16/f32/e4m3
  output, tiles BLOCK_M in {64, 128} (64: one consumer), BLOCK_N in {64, 128}, BLOCK_K in
  {32, 64} (128 for fp8), 1-D or 2-D grids, B stored N x K or K x N (16-bit inputs), split-K
  partials (2 or 3 splits, f32 out, a 3-D grid), two K loops in sequence into one
  accumulator (the use counter continuing), and an epilogue chain of up to four ops (scale,
  bias scalar, per-row and per-column bias and scale vectors in f32/f16/bf16, relu, exp2,
  leaky where, f16/bf16 round trips, minus the row max / min / mean);
* no-dot programs (`row_programs`): tile copies, row softmax, layernorm and RMSnorm forward,
  f16/bf16/f32 in and out, weights in f32/f16/bf16;
* attention-like programs (`attention_programs`): head dim 64/128, key block 64/128, causal
  or not, f16/bf16;
* shapes not multiples of the tile, K trip counts 0, 1, 2, 3 and 5 with ragged last tiles,
  rows of 1 .. BLOCK_N columns (no-dot), sequence lengths 1 .. 300;
* values (`programs.VALUE_CLASSES`): normal, tiny, large magnitudes, and negative zeros;
  f32 scalars of any sign, big and small;
* options (`options`): D 1..6 (only up to what fits an sm_90 block's shared memory:
  `fitting_stages` for the GPU, `accepted_depth` for the CPU levels), P 1..3 or chosen,
  cooperative consumers (64 rows or more each: 2 at BLOCK_M 128, 3 at an attention BLOCK_M of
  192),
  persistent on 1..3 SMs (the walk x or y fastest), the grid folded or not (fold-grid),
  attention pipelining on/off (CPU);
* schedules (`schedules`): named adversarial policies, random seeds, or Hypothesis-drawn
  choice lists (shrinkable).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

from hypothesis import strategies as st

from tawa_xdsl.compiler import CompileOptions, shared_memory_need
from tawa_xdsl.dialects.nvgpu import SM90_MAX_SMEM_BYTES
from tawa_xdsl.fuzz.check import CPU_LEVELS, Case, Options, Schedule, warp_specialized
from tawa_xdsl.fuzz.programs import (
    DTYPES,
    EPILOGUE_KINDS,
    ROW_OPS,
    VALUE_CLASSES,
    VECTOR_KINDS,
    AttentionProgram,
    EpilogueOp,
    GemmProgram,
    Program,
    RowProgram,
)
from tawa_xdsl.interp.scheduler import POLICIES

SCALES = [0.5, -1.0, 2.0, 1e-3, -3.0, 1024.0, -1e4, 2.0**-20]
BIASES = [0.0, -0.0, 1.0, -2.5, 1e4, -1e30, 65504.0, 3e38]
EPSILONS = [1e-5, 1e-6, 1.0, 2.0**-20]


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
    """A GEMM with a random tile shape, operand major, K split, one or two K loops and
    epilogue chain (the same for the GPU, whose backend lowers every epilogue op)."""
    dtype = draw(st.sampled_from(["f16", "bf16", "e4m3"]), label="dtype")
    fp8 = dtype == "e4m3"
    kinds = draw(st.lists(st.sampled_from(EPILOGUE_KINDS), max_size=4), label="epilogue")
    vector_dtypes = st.sampled_from(["", "f32", "bf16", "f16"])
    ops = tuple(
        replace(op, dtype=draw(vector_dtypes, label="vector dtype"))
        if op.kind in VECTOR_KINDS
        else op
        for op in epilogue_chain(kinds)
    )
    split_k = draw(st.sampled_from([1, 1, 2, 3]), label="split-K")
    outputs = ["f16", "bf16", "f32", "e4m3"]
    return GemmProgram(
        dtype=dtype,
        out_dtype="f32" if split_k > 1 else draw(st.sampled_from(outputs), label="out dtype"),
        block_m=draw(st.sampled_from([128, 64])),
        block_n=draw(st.sampled_from([128, 64])),
        block_k=128 if fp8 else draw(st.sampled_from([64, 32])),  # fp8: one 128-byte row
        grid_2d=draw(st.booleans()),
        epilogue=ops,
        b_major="k" if fp8 else draw(st.sampled_from(["k", "n"]), label="B major"),
        split_k=split_k,
        loops=draw(st.sampled_from([1, 2])),
    )


def row_programs() -> st.SearchStrategy[RowProgram]:
    """A kernel with no dot: a copy, a row softmax, layernorm or RMSnorm."""
    return st.builds(
        RowProgram,
        op=st.sampled_from(ROW_OPS),
        dtype=st.sampled_from(["f16", "bf16", "f32"]),
        out_dtype=st.sampled_from(["f16", "bf16", "f32"]),
        block_m=st.sampled_from([128, 64]),
        block_n=st.sampled_from([64, 128]),
        weight_dtype=st.sampled_from(["f32", "f16", "bf16"]),
    )


def attention_programs() -> st.SearchStrategy[AttentionProgram]:
    """Attention forward with a random head dim, key block and masking."""
    return st.builds(
        AttentionProgram,
        dtype=st.sampled_from(["f16", "bf16", "e4m3"]),
        head_dim=st.sampled_from([64, 128]),
        block_n=st.sampled_from([64, 128]),
        block_m=st.sampled_from([128, 128, 192]),
        causal=st.booleans(),
    )


def programs(gpu: bool = False, kind: str | None = None) -> st.SearchStrategy[Program]:
    """Programs of every kind, or of one (`KINDS`)."""
    families: dict[str, st.SearchStrategy[Any]] = {
        "gemm": gemm_programs(gpu),
        "rows": row_programs(),
        "attention": attention_programs(),
    }
    if kind is not None:
        if kind not in families:
            raise ValueError(f"unknown program kind {kind!r} (kinds: {', '.join(families)})")
        return families[kind]
    return st.one_of(*families.values())


# TMA describes a global tensor only when every row pitch is a multiple of 16 bytes: the
# inner dims of the GPU cases are multiples of 16 bytes of the narrowest element type.
TMA_ROW_BYTES = 16


def tma_step(*dtypes: str) -> int:
    return TMA_ROW_BYTES // min(DTYPES[d].itemsize for d in dtypes)


@st.composite
def shapes(draw: st.DrawFn, program: Program, gpu: bool = False) -> dict[str, int]:
    """A problem shape for `program`: ragged edges, short and odd K loops (for the GPU, inner
    dims a TMA can describe; rows stay ragged)."""
    if isinstance(program, GemmProgram):
        step = tma_step(program.dtype, program.out_dtype) if gpu else 1
        m = draw(st.integers(1, program.block_m * 2 + program.block_m // 2), label="m")
        n = step * draw(st.integers(1, (program.block_n * 2 + program.block_n // 2) // step))
        k_tiles = draw(st.sampled_from([1, 0, 2, 3, 5]), label="k tiles")
        ragged = draw(st.integers(0, (program.block_k - 1) // step), label="k ragged") * step
        return {"m": m, "n": n, "k": k_tiles * program.block_k - (ragged if k_tiles else 0)}
    if isinstance(program, RowProgram):
        step = tma_step(program.dtype, program.out_dtype) if gpu else 1
        m = draw(st.integers(1, program.block_m * 2 + program.block_m // 2), label="m")
        widest = (
            program.block_n * 2 + program.block_n // 2 if program.op == "copy" else program.block_n
        )
        return {"m": m, "n": step * draw(st.integers(1, widest // step), label="n")}
    seq = draw(st.one_of(st.sampled_from([1, 64, 65, 128, 129]), st.integers(1, 300)))
    if gpu and program.dtype == "e4m3":  # V^T's rows (seq bytes) 16 bytes apart, for TMA
        seq = -(-seq // 16) * 16
    return {"heads": draw(st.integers(1, 2)), "seq": seq}


MAX_STAGES = 6


@st.composite
def options(draw: st.DrawFn, program: Program, gpu: bool = False) -> Options:
    """Warp-specialization options valid for `program` (each cooperative consumer takes 64
    rows or more), with D drawn among the depths the compiler does not refuse for shared memory
    (deep rings of big blocks cannot fit 227 KB); attention pipelining on or off on the CPU
    (the GPU runs the default, on), rotated or not."""
    mma_depth = draw(st.sampled_from([None, 1, 2, 3]))  # None: chosen per loop (the default)
    # cooperative consumers: 64 rows or more each (192-row attention: three)
    consumers = draw(st.sampled_from([c for c in (1, 2, 3) if program.block_m % (64 * c) == 0]))
    persistent = draw(st.booleans())
    if gpu:
        stages = draw(st.sampled_from(fitting_stages(program, mma_depth, consumers, persistent)))
    else:
        stages = draw(st.integers(1, MAX_STAGES))
    drawn = Options(
        stages=stages,
        mma_depth=mma_depth,
        consumers=consumers,
        persistent=persistent,
        attention=True if gpu else draw(st.booleans()),
        sms=draw(st.integers(1, 3)),
        rotate=draw(st.booleans()),
        tile_order=draw(st.sampled_from(["xyz", "yxz"])) if persistent else "xyz",
        fold=draw(st.booleans()),
    )
    return drawn if gpu else accepted_depth(program, drawn)


def accepted_depth(program: Program, options: Options) -> Options:
    """`options` with D lowered until warp-specialize accepts the ring (it refuses rings too
    deep for shared memory); the CPU levels then reuse that warp-specialized program
    (`check.warp_specialized` is cached), so the common case costs nothing extra."""
    from tawa_xdsl.transforms.smem_budget import SharedMemoryError

    while options.stages > 1:
        try:
            warp_specialized(program.tile_ir(), options)
            return options
        except SharedMemoryError:
            options = replace(options, stages=options.stages - 1)
    return options


@cache
def fitting_stages(
    program: Program, mma_depth: int | None, consumers: int, persistent: bool
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
    if isinstance(program, RowProgram):
        return (draw(st.sampled_from(EPSILONS)),) if program.weights else ()
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
    """A whole case; `kind` ("gemm" / "rows" / "attention") restricts the program kind."""
    program = draw(programs(gpu, kind), label="program")
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
