"""`tawa demo`: the main job on the bundled examples, as far as the compiler goes today.

For each example kernel: parse and verify the tile IR, run it in the tile interpreter on random
inputs and compare with a plain numpy reference. It prints one line per example and exits 1 if
any result is wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tawa_xdsl.diagnostics import parse_file
from tawa_xdsl.dialects import make_context
from tawa_xdsl.interp.tile import run_kernel

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@dataclass
class Case:
    """One example: its file, a launch on random inputs, and the numpy reference."""

    name: str
    path: Path
    launch: Callable[[np.random.Generator], tuple[tuple[int, ...], list, np.ndarray]]


def gemm_case(rng: np.random.Generator) -> tuple[tuple[int, ...], list, np.ndarray]:
    m, n, k = 300, 200, 160
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float16)
    grid = (-(-m // 128) * -(-n // 128),)
    reference = a.astype(np.float32) @ b.astype(np.float32).T
    return grid, [a, b, c, m, n, k], reference


def attention_case(causal: bool) -> Callable:
    def launch(rng: np.random.Generator) -> tuple[tuple[int, ...], list, np.ndarray]:
        heads, seq, dim = 3, 200, 64
        q, k, v = (rng.standard_normal((heads, seq, dim)).astype(np.float16) for _ in range(3))
        o = np.full_like(q, np.nan)
        scale = dim**-0.5
        scores = q.astype(np.float32) @ k.astype(np.float32).transpose(0, 2, 1) * scale
        if causal:
            scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -np.inf)
        p = np.exp(scores - scores.max(-1, keepdims=True))
        reference = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float32)
        return (-(-seq // 128), heads), [q, k, v, o, seq, scale], reference

    return launch


CASES = [
    Case("gemm", EXAMPLES / "gemm.mlir", gemm_case),
    Case("attention", EXAMPLES / "attention.mlir", attention_case(causal=False)),
    Case("attention causal", EXAMPLES / "attention_causal.mlir", attention_case(causal=True)),
]


def run_demo(seed: int = 0) -> int:
    """Run every example; returns the process exit status."""
    ctx = make_context()
    rng = np.random.default_rng(seed)
    failures = 0
    print(f"{'example':<18} {'stage':<18} {'max abs err':>12} {'time':>8}  result")
    for case in CASES:
        module = parse_file(ctx, case.path)
        grid, args, reference = case.launch(rng)
        start = time.perf_counter()
        (output,) = run_kernel(module, grid, args)
        elapsed = time.perf_counter() - start
        error = float(np.max(np.abs(output.astype(np.float32) - reference)))
        # The outputs are fp16: rounding alone costs up to 2^-11 relative (half an ulp); allow
        # a few ulps, plus an absolute term for attention's fp16 probabilities near zero.
        close = np.allclose(output.astype(np.float32), reference, rtol=2e-3, atol=2e-3)
        ok = bool(np.isfinite(output).all()) and close
        failures += not ok
        verdict = "ok" if ok else "WRONG"
        print(
            f"{case.name:<18} {'tile interpreter':<18} {error:>12.2e} {elapsed:>7.2f}s  {verdict}"
        )
    return 1 if failures else 0
