"""Property-based fuzzing of whole programs: Hypothesis draws tile programs within what the
compiler supports, runs them at every level and compares with numpy.

    tawa fuzz --minutes 5 [--seed S] [--out DIR] [--gpu]     # a time-boxed run + summary
    tawa repro DIR/repro-aref-0123456789.json                # replay one failure

Modules:

* `programs`: program descriptions (GEMM with epilogue chains, B majors, split-K, fp8, two
  K loops; no-dot copies, softmax and norms; attention), their tile IR from the frontend,
  inputs (outputs poisoned with NaN) and numpy references (`Bounds`);
* `kernels`: the fuzzer's kernels in `tawa_xdsl.language` (`fuzz_gemm`, `fuzz_rows`);
* `strategies`: the Hypothesis strategies (`cases()`);
* `check`: the property (`check_case`): tile interpreter vs numpy within dtype-aware bounds,
  the warp-specialization pipeline with the case's options, the verifier's proof when its API
  exists, the aref and mbarrier interpreters under drawn schedules bit-exact against the tile
  interpreter, and in GPU mode the PTX kernel on the device against numpy;
* `repro`: reproducer files (JSON: tile IR, input seed, shapes, options, schedules, level);
* `runner`: `fuzz(minutes, seed, out, gpu)` and its `Summary`.
"""

from tawa_xdsl.fuzz.check import Case, FuzzFailure, Options, check_case
from tawa_xdsl.fuzz.programs import AttentionProgram, EpilogueOp, GemmProgram, RowProgram
from tawa_xdsl.fuzz.repro import replay, write_reproducer
from tawa_xdsl.fuzz.runner import Summary, fuzz

__all__ = [
    "AttentionProgram",
    "Case",
    "EpilogueOp",
    "FuzzFailure",
    "GemmProgram",
    "Options",
    "RowProgram",
    "Summary",
    "check_case",
    "fuzz",
    "replay",
    "write_reproducer",
]
