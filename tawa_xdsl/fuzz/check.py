"""The fuzzing property: one case (program, shape, inputs, options, schedules) through every
level, compared with numpy and with each other.

    from tawa_xdsl.fuzz.check import Case, check_case
    check_case(case)              # raises FuzzFailure(level, message, case) on a bug

Levels, in order (`LEVELS`):

* `tile`: the tile IR parses and the tile interpreter's result lies inside the numpy
  reference's bounds (`programs.Bounds`; dtype-aware, NaN never passes); the output is
  poisoned with NaN before the run, so an element no store wrote fails.
* `compile`: `warp_specialize` with the case's options (D, P, consumers, persistent,
  attention pipelining), then `lower-aref`; a refusal is a failure (the strategies only draw
  what the compiler supports).
* `verify`: the barrier-protocol proof of the mbarrier-level IR
  (`tawa_xdsl.verify.check.check_module`: every ring proved for every trip count, cached by
  protocol); skipped, and counted in the summary, for protocols the verifier cannot model
  and for options with verify=False (reproducers may carry it).
* `aref`: the aref interpreter under the case's aref schedule must store exactly (bit for
  bit, -0.0 included) what the tile interpreter stored.
* `mbarrier`: the same for the mbarrier interpreter (TMA landing times scheduled too).
* `nvgpu`: `lower-to-nvgpu` and `legalize-nvgpu`, then the nvgpu interpreter (every thread,
  fragments through their layouts, wgmma reading smem where its descriptor plan says when
  retired, TMA boxes where the box plan puts them) under the case's nvgpu schedule: bit for
  bit equal to the tile level where the fragment math is numpy's, else (exp2, row sums,
  max.f32 on NaN are the GPU's) within the numpy bounds. Skipped, and counted, for programs
  the lowering refuses.
* `gpu` (GPU mode only): `compile_to_ptx` (with the proof unless verify=False) + launch on
  the device; within the numpy bounds
  (the GPU's rounding order differs from numpy's, so not bit for bit).

A schedule is a named policy (`interp.scheduler.POLICIES`), a random seed, or an explicit
list of choices (`ChoicePolicy`: the index among the runnable tasks; Hypothesis draws the
list, so a failing interleaving shrinks and replays from the reproducer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from tawa_xdsl.compiler import CompileOptions, compile_to_ptx
from tawa_xdsl.fuzz.programs import Program, program_from_json

LEVELS = ("tile", "compile", "verify", "aref", "mbarrier", "nvgpu", "gpu")
CPU_LEVELS = ("tile", "compile", "verify", "aref", "mbarrier", "nvgpu")

Schedule = str | int | list[int]
UNVERIFIED_REASON = "options verify=False (the case was written without the proof)"


@dataclass(frozen=True)
class Options:
    """Warp-specialization options: ring depth D, MMA depth P, consumer warpgroups,
    persistent tiles, attention software pipelining and its rotation (FA3's two-stage
    pipeline); `verify=False` (kept for reproducers written before the sequence proof) skips
    the proof level and the GPU compile's proof."""

    stages: int = 3
    mma_depth: int | None = 2  # None: chosen per loop by mma-lag
    consumers: int = 1
    persistent: bool = False
    attention: bool = True
    sms: int = 2  # persistent launches: the number of SMs (programs) to spread tiles on
    verify: bool = True
    rotate: bool = False
    tile_order: str = "xyz"  # persistent launches: the walk's axes, the fastest first
    fold: bool = False  # each program also runs its mirror's program id along x (fold-grid)

    def key(self) -> str:
        """`D3 P2 C1 persistent` for summaries."""
        walk = f" {self.tile_order}" if self.persistent and self.tile_order != "xyz" else ""
        extra = (" persistent" + walk if self.persistent else "") + (
            "" if self.attention else " no-sw"
        )
        extra += (" rotated" if self.rotate else "") + ("" if self.verify else " unverified")
        extra += " folded" if self.fold else ""
        depth = "chosen" if self.mma_depth is None else self.mma_depth
        return f"D{self.stages} P{depth} C{self.consumers}{extra}"


@dataclass(frozen=True)
class Case:
    """One fuzzing case; `tile_ir` overrides the program's own IR (a mutated program)."""

    program: Program
    shape: dict[str, int]
    seed: int
    values: str
    scalars: tuple[float, ...]
    options: Options
    aref_schedule: Schedule = "random"
    mbarrier_schedule: Schedule = "random"
    nvgpu_schedule: Schedule = "random"
    tile_ir: str | None = None
    levels: tuple[str, ...] = CPU_LEVELS

    def ir(self) -> str:
        return self.tile_ir if self.tile_ir is not None else self.program.tile_ir()

    def to_json(self) -> dict[str, Any]:
        return {
            "program": self.program.to_json(),
            "shape": dict(self.shape),
            "seed": self.seed,
            "values": self.values,
            "scalars": [float(s) for s in self.scalars],
            "options": self.options.__dict__.copy(),
            "aref_schedule": self.aref_schedule,
            "mbarrier_schedule": self.mbarrier_schedule,
            "nvgpu_schedule": self.nvgpu_schedule,
            "levels": list(self.levels),
        }

    @staticmethod
    def from_json(data: dict[str, Any], tile_ir: str | None = None) -> Case:
        return Case(
            program=program_from_json(data["program"]),
            shape={k: int(v) for k, v in data["shape"].items()},
            seed=int(data["seed"]),
            values=data["values"],
            scalars=tuple(float(s) for s in data.get("scalars", ())),
            options=Options(**data["options"]),
            aref_schedule=_schedule(data.get("aref_schedule", "random")),
            mbarrier_schedule=_schedule(data.get("mbarrier_schedule", "random")),
            nvgpu_schedule=_schedule(data.get("nvgpu_schedule", "random")),
            tile_ir=tile_ir,
            levels=tuple(data.get("levels", CPU_LEVELS)),
        )

    def with_ir(self, text: str) -> Case:
        return replace(self, tile_ir=text)


def _schedule(value: Any) -> Schedule:
    if isinstance(value, list):
        return [int(v) for v in value]
    return value  # type: ignore[no-any-return]


class FuzzFailure(AssertionError):
    """A case failed at `level`; `case` is what to write to a reproducer."""

    def __init__(self, level: str, message: str, case: Case):
        super().__init__(f"[{level}] {message}")
        self.level = level
        self.message = message
        self.case = case


@dataclass
class Outcome:
    """What one run of a case did (levels that ran, skipped ones and why)."""

    ran: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- helpers


@lru_cache(maxsize=64)
def _parse(text: str) -> Any:
    from tawa_xdsl.diagnostics import parse_module
    from tawa_xdsl.dialects import make_context

    return parse_module(make_context(), text, "fuzz.mlir")


@lru_cache(maxsize=64)
def warp_specialized(text: str, options: Options) -> Any:
    """`warp_specialize` of the program with these options (cached: the strategies try the
    depth they draw, the compile level reuses it); raises its refusal."""
    from tawa_xdsl.transforms.warp_specialize import warp_specialize

    return warp_specialize(
        _parse(text),
        stages=options.stages,
        mma_depth=options.mma_depth,
        consumers=options.consumers,
        persistent=options.persistent,
        attention=options.attention,
        rotate=options.rotate,
        tile_order=options.tile_order,
        fold=options.fold,
    )


@lru_cache(maxsize=64)
def _lowered(text: str, options: Options) -> Any:
    from tawa_xdsl.transforms.lower_aref import lower_arefs

    module = warp_specialized(text, options).clone()
    lower_arefs(module)
    module.verify()
    return module


@lru_cache(maxsize=64)
def _nvgpu_level(text: str, options: Options) -> Any:
    """The program after `lower-to-nvgpu`, `defer-row-sums` and `legalize-nvgpu` (the IR
    emit-ptx prints), or the one-line refusal of either (a string)."""
    from xdsl.utils.exceptions import PassFailedException

    from tawa_xdsl.dialects import make_context
    from tawa_xdsl.transforms.defer_row_sums import DeferRowSumsPass
    from tawa_xdsl.transforms.legalize_nvgpu import LegalizeNvgpuPass
    from tawa_xdsl.transforms.lower_to_nvgpu import LowerToNvgpuPass

    module = _lowered(text, options).clone()
    try:
        LowerToNvgpuPass().apply(make_context(), module)
        DeferRowSumsPass().apply(make_context(), module)
        LegalizeNvgpuPass().apply(make_context(), module)
    except PassFailedException as error:
        return f"the nvgpu lowering refuses it: {str(error).splitlines()[0][:100]}"
    module.verify()
    return module


def _exact_at_nvgpu_level(module: Any) -> bool:
    """Whether the nvgpu level computes what the tile level does, bit for bit: no op whose
    GPU form differs from numpy's (`ex2.approx`/`lg2.approx`, per-thread row sums, `max.f32`
    on NaN)."""
    from tawa_xdsl.dialects import nvgpu

    approximate = (nvgpu.FragmentUnaryOp, nvgpu.FragmentRowReduceOp, nvgpu.ShuffleXorOp)
    for op in module.walk():
        if isinstance(op, approximate):
            return False
        if isinstance(op, nvgpu.FragmentBinaryOp) and op.kind.data in (
            nvgpu.BinaryKind.MAX,
            nvgpu.BinaryKind.MIN,
        ):
            return False
    return True


def _copy_args(args: list[Any]) -> list[Any]:
    return [a.copy() if isinstance(a, np.ndarray) and a.ndim > 0 else a for a in args]


def _bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).view(f"u{array.dtype.itemsize}")


def _describe_mismatch(actual: np.ndarray, bad: np.ndarray, what: str, hint: Any = None) -> str:
    where = np.argwhere(bad)
    first = tuple(int(i) for i in where[0])
    nan = int(np.isnan(np.asarray(actual, np.float64)).sum())
    text = f"{len(where)} of {bad.size} elements {what}; first at {first}: got {actual[first]!r}"
    if hint is not None:
        text += f", {hint(first)}"
    if nan:
        text += f" ({nan} NaN: unwritten or invalid)"
    return text


@lru_cache(maxsize=256)
def prove(text: str, options: Options) -> tuple[str, str]:
    """The verifier's verdict on the lowered module: ("proved" | "failed" | "skipped", why).
    `verify.check.check_module` caches proofs by protocol, so a protocol seen before (same
    options and payload bytes, any shape) costs only the extraction."""
    from tawa_xdsl.verify.check import ProtocolError, check_module

    try:
        verdicts = check_module(_lowered(text, options))
    except ProtocolError as error:
        if "cannot be verified" in str(error):
            return "skipped", "the verifier cannot model this protocol"
        return "failed", str(error)
    return "proved", f"{len(verdicts)} ring(s) proved"


@lru_cache(maxsize=64)
def gpu_kernel(text: str, options: Options) -> Any:
    """`compile_to_ptx` of the program, or the reason the backend refuses it (a string).
    A failed barrier-protocol proof is a bug, not a refusal: it propagates."""
    from xdsl.utils.exceptions import DiagnosticException

    from tawa_xdsl.diagnostics import TawaError
    from tawa_xdsl.verify.check import ProtocolError

    compile_options = CompileOptions(
        stages=options.stages,
        mma_depth=options.mma_depth,
        consumers=options.consumers,
        persistent=options.persistent,
        verify=options.verify,
        rotate=options.rotate,
        tile_order=options.tile_order,
        fold=options.fold,
    )
    try:
        return compile_to_ptx(_parse(text), compile_options)
    except ProtocolError:
        raise
    except (DiagnosticException, TawaError, NotImplementedError, ValueError) as error:
        return f"the GPU backend refuses it: {str(error).splitlines()[0][:100]}"


def _run_on_gpu(case: Case, args: list[Any]) -> str | None:
    """Launch the compiled program on `args` (outputs copied back); a skip reason or None."""
    from tawa_xdsl.descriptor import TensorDescriptor

    kernel = gpu_kernel(case.ir(), case.options)
    if isinstance(kernel, str):
        return kernel
    kernel_op = next(iter(_parse(case.ir()).ops))
    launch_args: list[Any] = []
    for arg, param in zip(args, kernel_op.body.block.args, strict=True):  # type: ignore[attr-defined]
        block_shape = getattr(param.type, "get_block_shape", None)
        launch_args.append(TensorDescriptor.from_tensor(arg, block_shape()) if block_shape else arg)
    kernel.launch(case.program.grid(case.shape), *launch_args)
    return None


# ----------------------------------------------------------------------------- check


def check_case(case: Case, outcome: Outcome | None = None) -> Outcome:
    """Run `case` through its levels; raises `FuzzFailure` at the first disagreement."""
    from tawa_xdsl.interp.aref import run_warp_specialized
    from tawa_xdsl.interp.mbarrier import run_mbarrier_kernel
    from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
    from tawa_xdsl.interp.tile import run_kernel
    from tawa_xdsl.transforms.fold_grid import fold_launch
    from tawa_xdsl.transforms.persistent import persistent_launch

    outcome = outcome if outcome is not None else Outcome()
    program, opts = case.program, case.options
    grid = program.grid(case.shape)
    args = program.make_inputs(case.shape, case.seed, case.values, list(case.scalars))
    out = program.output_index()
    bounds = program.expected(case.shape, args)
    if np.isnan(bounds.lo).any() or np.isnan(bounds.hi).any():
        raise FuzzFailure("tile", "the numpy reference itself is NaN (generator bug)", case)

    def fail(level: str, message: str) -> FuzzFailure:
        return FuzzFailure(level, message, case)

    def hint(index: tuple[int, ...]) -> str:
        return f"expected [{bounds.lo[index]!r}, {bounds.hi[index]!r}]"

    # tile level vs numpy
    try:
        module = _parse(case.ir())
        tile_args = _copy_args(args)
        run_kernel(module, grid, tile_args)
    except Exception as error:  # noqa: BLE001 -- any crash is a finding
        raise fail("tile", f"{type(error).__name__}: {error}") from error
    reference = tile_args[out]
    bad = bounds.violations(reference)
    if bad.any():
        raise fail(
            "tile",
            "tile interpreter vs numpy: "
            + _describe_mismatch(reference, bad, "outside the numpy bounds", hint),
        )
    outcome.ran.append("tile")

    def launch_ws(run: Callable[..., Any], ws: Any, schedule: Schedule) -> np.ndarray:
        run_args = _copy_args(args)
        launch_grid, extra = list(grid), []
        if opts.fold:
            launch_grid, extra = fold_launch((launch_grid + [1, 1])[:3])
        if opts.persistent:
            launch_grid, walk = persistent_launch(launch_grid, opts.sms)
            extra += walk
        run(ws, launch_grid, [*run_args, *extra], schedule=schedule)
        return run_args[out]

    def same(level: str, actual: np.ndarray) -> None:
        bad = _bits(actual) != _bits(reference)
        if bad.any():
            raise fail(
                level,
                f"{level} level vs tile level: "
                + _describe_mismatch(
                    actual, bad, "differ", lambda i: f"tile level gave {reference[i]!r}"
                ),
            )
        outcome.ran.append(level)

    if "compile" in case.levels:
        try:
            ws = warp_specialized(case.ir(), opts)
            lowered = _lowered(case.ir(), opts)
        except Exception as error:  # noqa: BLE001
            raise fail("compile", f"{type(error).__name__}: {error}") from error
        outcome.ran.append("compile")
        if "verify" in case.levels and not opts.verify:
            outcome.skipped["verify"] = UNVERIFIED_REASON
        elif "verify" in case.levels:
            try:
                verdict, why = prove(case.ir(), opts)
            except Exception as error:  # noqa: BLE001
                raise fail("verify", f"{type(error).__name__}: {error}") from error
            if verdict == "failed":
                raise fail("verify", f"the barrier-protocol proof failed: {why}")
            if verdict == "skipped":
                outcome.skipped["verify"] = why
            else:
                outcome.ran.append("verify")
        if "aref" in case.levels:
            try:
                actual = launch_ws(run_warp_specialized, ws, case.aref_schedule)
            except Exception as error:  # noqa: BLE001
                raise fail("aref", f"{type(error).__name__}: {error}") from error
            same("aref", actual)
        if "mbarrier" in case.levels:
            try:
                actual = launch_ws(run_mbarrier_kernel, lowered, case.mbarrier_schedule)
            except Exception as error:  # noqa: BLE001
                raise fail("mbarrier", f"{type(error).__name__}: {error}") from error
            same("mbarrier", actual)
        if "nvgpu" in case.levels:
            try:
                nvgpu_module = _nvgpu_level(case.ir(), opts)
                if isinstance(nvgpu_module, str):
                    outcome.skipped["nvgpu"] = nvgpu_module
                else:
                    actual = launch_ws(run_nvgpu_kernel, nvgpu_module, case.nvgpu_schedule)
            except Exception as error:  # noqa: BLE001
                raise fail("nvgpu", f"{type(error).__name__}: {error}") from error
            if isinstance(nvgpu_module, str):
                pass
            elif _exact_at_nvgpu_level(nvgpu_module):
                same("nvgpu", actual)
            else:
                bad = bounds.violations(actual)
                if bad.any():
                    raise fail(
                        "nvgpu",
                        "nvgpu level vs numpy: "
                        + _describe_mismatch(actual, bad, "outside the numpy bounds", hint),
                    )
                outcome.ran.append("nvgpu")

    if "gpu" in case.levels:
        gpu_args = _copy_args(args)
        try:
            skipped = _run_on_gpu(case, gpu_args)
        except Exception as error:  # noqa: BLE001
            raise fail("gpu", f"{type(error).__name__}: {error}") from error
        if skipped is not None:
            outcome.skipped["gpu"] = skipped
        else:
            bad = bounds.violations(gpu_args[out])
            if bad.any():
                raise fail(
                    "gpu",
                    "GPU vs numpy: "
                    + _describe_mismatch(gpu_args[out], bad, "outside the numpy bounds", hint),
                )
            outcome.ran.append("gpu")
    return outcome
