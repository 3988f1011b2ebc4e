"""Fuzzer programs the GPU backend used to refuse (the H200 run skipped them) now run on the
GPU within the numpy bounds: GEMM epilogues with f16/bf16 round trips, scale / bias_scalar /
relu, leaky relu (`fragment_select`), a bias vector (`fragment_load_columns`), and attention
at the deepest ring that fits shared memory (`strategies.fitting_stages`).

Each case goes through `check_case` at the tile and GPU levels; the GPU level must run (not
be skipped as refused). The PTX of the same programs is checked with ptxas, without a GPU, in
tests/unit/test_ptx_assembles_fuzz.py. A few small shapes: a few seconds in all.
"""

from __future__ import annotations

import pytest

from tawa_xdsl.fuzz.check import Case, Options, Outcome, check_case
from tawa_xdsl.fuzz.programs import AttentionProgram, EpilogueOp, GemmProgram

pytestmark = pytest.mark.gpu

LEVELS = ("tile", "gpu")


def gemm_case(
    dtype: str,
    out: str,
    tile: tuple[int, int, int],
    epilogue: tuple[EpilogueOp, ...],
    options: Options,
    scalars: tuple[float, ...] = (),
    values: str = "special",
) -> Case:
    """A ragged GEMM (M and K not multiples of the tile, N a multiple of 8 for TMA)."""
    bm, bn, bk = tile
    program = GemmProgram(dtype, out, bm, bn, bk, epilogue=epilogue)
    shape = {"m": bm + 37, "n": bn + 24, "k": 3 * bk - 8}
    return Case(program, shape, 11, values, scalars, options, levels=LEVELS)


CASES = {
    "round_f16": gemm_case(
        "bf16", "f16", (128, 128, 32), (EpilogueOp("round_f16"),), Options(2, 1, 1)
    ),
    "round_bf16-exp2": gemm_case(
        "f16",
        "f32",
        (64, 64, 64),
        (EpilogueOp("round_bf16"), EpilogueOp("exp2")),
        Options(4, 2, 1, persistent=True),
        values="small",
    ),
    "scale-relu-bias_scalar": gemm_case(
        "f16",
        "f16",
        (128, 128, 64),
        (EpilogueOp("scale", 0), EpilogueOp("relu"), EpilogueOp("bias_scalar", 1)),
        Options(5, 1, 2, persistent=True),
        scalars=(-0.5, 3.25),
    ),
    "leaky": gemm_case("f16", "f32", (128, 64, 32), (EpilogueOp("leaky"),), Options(3, 2, 1)),
    "bias-leaky-round_bf16": gemm_case(
        "bf16",
        "bf16",
        (128, 128, 64),
        (EpilogueOp("bias"), EpilogueOp("leaky"), EpilogueOp("round_bf16")),
        Options(3, 2, 2, persistent=True),
    ),
    "bias-persistent-ring": gemm_case(
        "f16", "f32", (64, 128, 64), (EpilogueOp("bias"),), Options(2, 1, 1, persistent=True)
    ),
    "attention-deepest-ring": Case(
        AttentionProgram("f16", 128, 128, causal=True),
        {"heads": 2, "seq": 200},
        5,
        "normal",
        (0.125,),
        Options(2, 1, 1, persistent=True),
        levels=LEVELS,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fuzz_program_runs_on_the_gpu(name: str) -> None:
    outcome = check_case(CASES[name], Outcome())
    assert "gpu" in outcome.ran, outcome.skipped.get("gpu")
