"""One corpus kernel: a `@jit` kernel, its arguments for a seed, and the numpy answer.

`Case.launch(rng)` builds fresh numpy inputs and outputs and returns a `Launch`: the grid, the
positional and keyword arguments of `kernel[grid](...)` (descriptors over the numpy arrays, so a
launch writes the outputs in place, on the GPU or in the interpreter) and, per output array,
its expected value. Launch keywords are the user's constexprs, and a compile option only where
the case is about that option (`persistent=True`): defaults everywhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tawa_xdsl.runtime.dispatch import host_descriptor, is_descriptor
from tawa_xdsl.transforms.persistent import persistent_launch


@dataclass
class Launch:
    grid: tuple[int, ...]
    args: list[Any]
    kwargs: dict[str, Any]
    expected: list[tuple[np.ndarray, np.ndarray]]  # (output array written in place, answer)
    rtol: float = 2e-2
    atol: float = 2e-2


@dataclass(frozen=True)
class Case:
    name: str
    kernel: Any  # a tawa_xdsl.jit.JITFunction
    launch: Callable[[np.random.Generator], Launch]
    covers: tuple[str, ...] = field(default_factory=tuple)  # issue items it exercises

    def compile(self, rng: np.random.Generator):
        """The kernel compiled for this case's arguments (no launch)."""
        run = self.launch(rng)
        return self.kernel.compile(*run.args, **run.kwargs)


def nvgpu_launch(run: Launch, persistent: bool, programs: int = 2) -> tuple[Any, list[Any]]:
    """The grid and host arguments that run `run` at the nvgpu level (`run_nvgpu_kernel`); a
    persistent kernel runs on `programs` programs (several tiles each), its grid appended."""
    args = [host_descriptor(a) if is_descriptor(a) else a for a in run.args]
    if not persistent:
        return run.grid, args
    grid, extra = persistent_launch(run.grid, programs)
    return grid, args + extra


def check(run: Launch) -> None:
    """Assert every output equals its answer within the launch's tolerance."""
    for out, answer in run.expected:
        np.testing.assert_allclose(
            out.astype(np.float32), answer.astype(np.float32), rtol=run.rtol, atol=run.atol
        )
