"""One example case per program family the fuzzer draws (issue 14's language on the GPU):
the unit tests run each through every CPU level and check that each reference catches a
wrong kernel; tests/gpu runs them on the device (levels tile and gpu).

    from tawa_xdsl.fuzz.families import FAMILIES, on_gpu
    check_case(FAMILIES["split-k"]); check_case(on_gpu(FAMILIES["split-k"]))

Shapes are ragged in M and in K tiles, with inner dims that a TMA can describe (rows of a
multiple of 16 bytes), so the same case runs on the CPU levels and on the GPU.
"""

from __future__ import annotations

from dataclasses import replace

from tawa_xdsl.fuzz.check import Case, Options
from tawa_xdsl.fuzz.programs import EpilogueOp, GemmProgram, Program, RowProgram


def vector(kind: str, dtype: str) -> EpilogueOp:
    return EpilogueOp(kind, dtype=dtype)


VECTORS = GemmProgram(
    "f16",
    "bf16",
    128,
    64,
    32,
    epilogue=(
        vector("row_scale", "f32"),
        vector("col_scale", "bf16"),
        vector("row_bias", "f16"),
        vector("bias", "f32"),
    ),
)
REDUCTIONS = GemmProgram(
    "bf16",
    "f32",
    64,
    128,
    64,
    epilogue=(EpilogueOp("sub_row_max"), EpilogueOp("sub_row_mean"), EpilogueOp("sub_row_min")),
)
B_N_MAJOR = GemmProgram("f16", "f16", 64, 64, 64, b_major="n")
F16_TO_BF16 = GemmProgram(
    "f16", "bf16", 64, 64, 64, epilogue=(EpilogueOp("round_f16_bf16"), EpilogueOp("leaky"))
)
FP8 = GemmProgram(
    "e4m3", "e4m3", 128, 64, 128, epilogue=(vector("row_scale", "f32"), vector("col_scale", "f32"))
)
FP8_F32 = replace(FP8, out_dtype="f32")
SPLIT_K = GemmProgram("bf16", "f32", 64, 64, 32, split_k=3)
TWO_LOOPS = GemmProgram("f16", "f16", 64, 64, 32, loops=2)
BLOCK_M_64 = GemmProgram("f16", "f16", 64, 64, 64, grid_2d=True)
COPY = RowProgram("copy", "bf16", "f32", 64, 64)
SOFTMAX = RowProgram("softmax", "f16", "f32", 128, 64)
LAYERNORM = RowProgram("layernorm", "bf16", "bf16", 64, 128, "f16")
RMSNORM = RowProgram("rmsnorm", "f32", "f16", 64, 64, "bf16")


def case(program: Program, shape: dict[str, int], **changes: object) -> Case:
    """A case of `program` on `shape` with one consumer, D2 P2, a fixed seed and schedules."""
    weights = isinstance(program, RowProgram) and program.weights
    base = Case(
        program=program,
        shape=shape,
        seed=5,
        values="normal",
        scalars=(1e-5,) if weights else (),
        options=Options(stages=2, mma_depth=2, consumers=1),
        aref_schedule="random",
        mbarrier_schedule="consumer-first",
        nvgpu_schedule=7,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


GEMM_SHAPE = {"m": 100, "n": 80, "k": 144}
FAMILIES: dict[str, Case] = {
    "vectors": case(VECTORS, GEMM_SHAPE, options=Options(2, 1, 2, persistent=True)),
    "reductions": case(REDUCTIONS, GEMM_SHAPE, values="special"),
    "b-k-by-n": case(B_N_MAJOR, {"m": 70, "n": 96, "k": 208}),
    "f16-to-bf16": case(F16_TO_BF16, {"m": 70, "n": 64, "k": 96}, values="large"),
    "fp8-e4m3-out": case(FP8, {"m": 100, "n": 80, "k": 304}),
    "fp8-f32-out": case(FP8_F32, {"m": 60, "n": 64, "k": 144}),
    "split-k": case(SPLIT_K, {"m": 70, "n": 40, "k": 152}),
    "two-loops": case(TWO_LOOPS, {"m": 70, "n": 40, "k": 152}),
    "block-m-64": case(BLOCK_M_64, {"m": 130, "n": 72, "k": 64}),
    "copy": case(COPY, {"m": 70, "n": 104}),
    "softmax": case(SOFTMAX, {"m": 130, "n": 56}, options=Options(2, 1, 2)),
    "layernorm": case(LAYERNORM, {"m": 40, "n": 104}, values="special"),
    "rmsnorm": case(RMSNORM, {"m": 70, "n": 64}, values="large"),
}


def on_gpu(case: Case) -> Case:
    """The case at the tile and GPU levels."""
    return replace(case, levels=("tile", "gpu"))
