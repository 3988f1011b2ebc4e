"""`tawa demo`: the main job -- the library kernels through every stage of the compiler.

For each kernel of `tawa_xdsl.kernels` (the GEMM; attention, causal and not) it runs, on
random inputs, one check per stage and prints one line per check:

* tile interpreter against a plain numpy reference (dtype-aware tolerance);
* warp-specialized (aref level) and lowered (mbarrier level) programs in their concurrent
  interpreters under a random schedule, which must equal the tile program exactly;
* the Z3 proof of the lowered barrier protocol, for every trip count;
* PTX generation, assembled with `ptxas -arch=sm_90a` when ptxas is present;
* a launch on the GPU against the numpy reference, when an sm_90 GPU is present.

A stage the compiler cannot do yet for a kernel prints `n/a` with the reason; a stage that
cannot run on this machine (no ptxas, no GPU) prints `skipped` with the reason. The exit status
is 1 when any check fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

from tawa_xdsl.dialects.tile import DescType
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.kernels.attention import tile_module as attention_tile_ir
from tawa_xdsl.kernels.gemm import gemm_tile_ir


@dataclass
class Launch:
    """A launch on random inputs: the grid, the arguments, which one is the output, and what
    numpy says the output should be."""

    grid: tuple[int, ...]
    args: list[Any]
    output: int
    reference: np.ndarray

    def fresh_args(self) -> list[Any]:
        """The arguments with a new output array poisoned with NaN, so unwritten elements
        show."""
        args = list(self.args)
        args[self.output] = np.full_like(args[self.output], np.nan)
        return args


@dataclass
class Case:
    """One kernel: its tile IR, a launch on random inputs, the numpy reference, its options."""

    name: str
    tile_ir: Callable[[], ModuleOp]
    launch: Callable[[np.random.Generator], Launch]
    options: dict[str, Any]


def gemm_case(rng: np.random.Generator) -> Launch:
    m, n, k = 300, 200, 160
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    grid = (-(-m // 128) * -(-n // 128),)
    reference = a.astype(np.float32) @ b.astype(np.float32).T
    return Launch(grid, [a, b, c, m, n, k], 2, reference)


def attention_case(causal: bool) -> Callable[[np.random.Generator], Launch]:
    def launch(rng: np.random.Generator) -> Launch:
        heads, seq, dim = 3, 200, 64
        q, k, v = (rng.standard_normal((heads, seq, dim)).astype(np.float16) for _ in range(3))
        o = np.full_like(q, np.nan)
        scale = dim**-0.5
        scores = q.astype(np.float32) @ k.astype(np.float32).transpose(0, 2, 1) * scale
        if causal:
            scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        reference = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float32)
        return Launch((-(-seq // 128), heads), [q, k, v, o, seq, scale], 3, reference)

    return launch


CASES = [
    Case("gemm", gemm_tile_ir, gemm_case, {"stages": 4, "mma_depth": 2, "consumers": 2}),
    Case(
        "attention",
        lambda: attention_tile_ir(64, "f16", causal=False, block_n=64),
        attention_case(causal=False),
        {"stages": 2, "mma_depth": 1, "consumers": 2},
    ),
    Case(
        "attention causal",
        lambda: attention_tile_ir(64, "f16", causal=True, block_n=64),
        attention_case(causal=True),
        {"stages": 2, "mma_depth": 1, "consumers": 2},
    ),
]


class NotSupported(Exception):
    """The compiler cannot do this stage for this kernel yet."""


class Skipped(Exception):
    """This machine cannot run this stage (no ptxas, no GPU)."""


def require(state: dict[str, Any], key: str, stage: str) -> Any:
    """What an earlier stage produced; this stage cannot run without it."""
    if key not in state:
        raise NotSupported(f"needs the {stage} stage")
    return state[key]


def close_to_reference(output: np.ndarray, reference: np.ndarray) -> tuple[bool, float]:
    """fp16 outputs: rounding alone costs up to 2^-11 relative (half an ulp); allow a few
    ulps, plus an absolute term for attention's fp16 probabilities near zero."""
    wide = output.astype(np.float32)
    error = float(np.max(np.abs(wide - reference)))
    ok = bool(np.isfinite(wide).all()) and np.allclose(wide, reference, rtol=2e-3, atol=2e-3)
    return ok, error


# --------------------------------------------------------------------------------- the stages


def stage_tile(module: ModuleOp, case: Case, launch: Launch, state: dict) -> str:
    (output,) = run_kernel(module, launch.grid, launch.fresh_args())
    state["tile"] = output
    ok, error = close_to_reference(output, launch.reference)
    if not ok:
        raise AssertionError(f"differs from numpy by {error:.2e}")
    return f"max abs err {error:.1e} vs numpy"


def stage_aref(module: ModuleOp, case: Case, launch: Launch, state: dict) -> str:
    from tawa_xdsl.interp.aref import run_warp_specialized
    from tawa_xdsl.transforms.warp_specialize import warp_specialize

    state["ws"] = warp_specialize(module, **case.options)
    return _compare_exact(run_warp_specialized, state["ws"], launch, state)


def stage_mbarrier(module: ModuleOp, case: Case, launch: Launch, state: dict) -> str:
    from tawa_xdsl.interp.mbarrier import run_mbarrier_kernel
    from tawa_xdsl.transforms.lower_aref import lower_arefs

    lowered = require(state, "ws", "aref").clone()
    lower_arefs(lowered)
    state["lowered"] = lowered
    return _compare_exact(run_mbarrier_kernel, lowered, launch, state)


def _compare_exact(run: Callable, module: ModuleOp, launch: Launch, state: dict) -> str:
    tile_output = require(state, "tile", "tile interpreter")
    (output,) = run(module, launch.grid, launch.fresh_args(), schedule=int(state["seed"]))
    if not np.array_equal(output, tile_output):
        raise AssertionError("differs from the tile program")
    return "equal to the tile program (random schedule)"


def stage_proof(module: ModuleOp, case: Case, launch: Launch, state: dict) -> str:
    from tawa_xdsl.verify.check import verify_module
    from tawa_xdsl.verify.extract import ExtractionError

    try:
        verdicts = verify_module(require(state, "lowered", "mbarrier"))
    except ExtractionError as error:
        raise NotSupported(f"the verifier cannot model this protocol yet: {error}") from error
    failed = [v for v in verdicts if not v.proved]
    if failed:
        raise AssertionError(failed[0].summary())
    seconds = sum(v.seconds for v in verdicts)
    rings = sum(v.method != "composition" for v in verdicts)
    together = " and together" if rings < len(verdicts) else ""
    return f"{rings} ring(s) proved alone{together}, for every trip count ({seconds:.2f} s)"


def stage_ptx(module: ModuleOp, case: Case, launch: Launch, state: dict) -> str:
    from tawa_xdsl.backend.ptxas import assemble, find_ptxas
    from tawa_xdsl.compiler import CompileOptions, compile_to_ptx

    try:
        kernel = compile_to_ptx(module, CompileOptions(**case.options))
    except DiagnosticException as error:
        raise NotSupported(str(error).splitlines()[0]) from error
    state["kernel"] = kernel
    lines = kernel.ptx.count("\n")
    if find_ptxas() is None:
        return f"{lines} lines of PTX (ptxas not found: not assembled)"
    result = assemble(kernel.ptx)
    if not result.ok:
        raise AssertionError(f"ptxas: {(result.forbidden() or result.log.splitlines())[:1]}")
    return f"{lines} lines of PTX, ptxas ok, {result.registers} registers/thread"


def stage_gpu(module: ModuleOp, case: Case, launch: Launch, state: dict) -> str:
    from tawa_xdsl.descriptor import TensorDescriptor
    from tawa_xdsl.runtime import gpu_available

    kernel = require(state, "kernel", "ptx")
    if not gpu_available():
        raise Skipped("no sm_90 GPU")
    args = launch.fresh_args()
    kernel_op = next(op for op in module.ops if isinstance(op, func.FuncOp))
    launch_args = [
        TensorDescriptor.from_tensor(value, list(param.type.get_block_shape()))
        if isinstance(param.type, DescType)
        else value
        for value, param in zip(args, kernel_op.body.block.args, strict=True)
    ]
    kernel.launch(launch.grid, *launch_args)
    ok, error = close_to_reference(args[launch.output], launch.reference)
    if not ok:
        raise AssertionError(f"differs from numpy by {error:.2e}")
    return f"max abs err {error:.1e} vs numpy"


STAGES: list[tuple[str, Callable[..., str]]] = [
    ("tile interpreter", stage_tile),
    ("aref interpreter", stage_aref),
    ("mbarrier interp.", stage_mbarrier),
    ("barrier proof", stage_proof),
    ("ptx", stage_ptx),
    ("gpu", stage_gpu),
]


def run_demo(seed: int = 0) -> int:
    """Run every stage of every kernel; returns the process exit status."""
    failures = 0
    print(f"{'example':<17} {'stage':<17} {'time':>7}  result")
    for case in CASES:
        module = case.tile_ir()
        launch = case.launch(np.random.default_rng(seed))
        state: dict[str, Any] = {"seed": seed}
        for stage_name, stage in STAGES:
            start = time.perf_counter()
            try:
                verdict = "ok: " + stage(module, case, launch, state)
            except NotSupported as reason:
                verdict = f"n/a: {reason}"
            except Skipped as reason:
                verdict = f"skipped: {reason}"
            except (AssertionError, DiagnosticException) as error:
                failures += 1
                verdict = f"FAILED: {str(error).splitlines()[0] if str(error) else error!r}"
            elapsed = time.perf_counter() - start
            print(f"{case.name:<17} {stage_name:<17} {elapsed:>6.2f}s  {verdict}", flush=True)
    return 1 if failures else 0
