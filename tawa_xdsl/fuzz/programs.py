"""Program descriptions the fuzzer draws, their tile IR, inputs and numpy references.

A description is a small frozen dataclass (`GemmProgram`, `AttentionProgram`) that says what
the kernel computes; `tile_ir()` writes it as tile IR text (what the compiler sees and what a
reproducer stores), `make_inputs(shape, seed, values)` builds the launch arguments (outputs
poisoned with NaN), and `expected(shape, args)` is a plain numpy reference written from the
description -- not from the IR -- returning the `Bounds` every output element must lie in.

GEMM-like: C = epilogue(A @ B^T) with A MxK and B NxK (both K-major) in f16 or bf16, f32
accumulation over a K loop of ceil(K / BLOCK_K) trips (0 and 1 included), and an epilogue
chain of elementwise f32 ops: `scale` (times an f32 scalar argument), `bias` (plus a row
vector read through a rank-1 descriptor), `bias_scalar` (plus an f32 scalar argument),
`relu` (arith.maximumf with 0), `exp2`, `leaky` (tile.cmp + tile.where: x < 0 ? x * a : x),
`round_f16` / `round_bf16` (tile.convert there and back), then a store in f16, bf16 or f32.

Attention-like: O = softmax(Q K^T * scale) V per head, FlashAttention's online softmax in
base 2: the library kernel `tawa_xdsl.kernels.attention.attn_fwd` with head dim 64 or 128,
key block 64 or 128, causal or not.

The GEMM reference is interval arithmetic: every f32 op the program runs is monotone, so
rounding the float64 endpoints of an interval with the same numpy rounding keeps the exact
machine result inside (one extra ulp either side of every rounding covers double rounding);
the dot gets the classic |A| |B|^T K u bound. Attention gets a dtype-aware tolerance: the
rounding of P to the input dtype, the f32 score error amplified through exp2, and one ulp of
the output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

DTYPES: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
}
EPILOGUE_KINDS = (
    "scale",
    "bias",
    "bias_scalar",
    "relu",
    "exp2",
    "leaky",
    "round_f16",
    "round_bf16",
)
VALUE_CLASSES = ("normal", "small", "large", "special")
LEAKY_ALPHA = 0.125


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------------------- bounds


@dataclass
class Bounds:
    """Per element: the output must be finite-or-inf (never NaN) and lie in [lo, hi]."""

    lo: np.ndarray
    hi: np.ndarray

    def violations(self, actual: np.ndarray) -> np.ndarray:
        """A boolean mask of the elements that break the bounds (NaN always does)."""
        value = np.asarray(actual).astype(np.float64)
        with np.errstate(invalid="ignore"):
            inside = (value >= self.lo) & (value <= self.hi)
        return ~inside | np.isnan(value)


def _step(x: np.ndarray, dtype: np.dtype, toward: float) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = np.asarray(x, np.float64).astype(np.float32).astype(dtype)
        moved = np.nextafter(rounded, np.asarray(toward, dtype=dtype))
    return moved.astype(np.float64)


def round_interval(lo: np.ndarray, hi: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, ...]:
    """[lo, hi] after rounding to `dtype` (as `interp.dtypes.convert`, which overflows to
    inf), widened by one ulp each side."""
    if dtype == np.float32:
        with np.errstate(over="ignore", invalid="ignore"):
            r_lo = np.nextafter(lo.astype(np.float32), np.float32(-np.inf)).astype(np.float64)
            r_hi = np.nextafter(hi.astype(np.float32), np.float32(np.inf)).astype(np.float64)
        return r_lo, r_hi
    return _step(lo, dtype, -np.inf), _step(hi, dtype, np.inf)


# ----------------------------------------------------------------------------- GEMM


@dataclass(frozen=True)
class EpilogueOp:
    """One elementwise op of a GEMM epilogue; `arg` is the index of its f32 scalar argument
    (scale, bias_scalar), -1 otherwise."""

    kind: str
    arg: int = -1


@dataclass(frozen=True)
class GemmProgram:
    """C = epilogue(A @ B^T): tiles BLOCK_M x BLOCK_N, K step BLOCK_K, 1-D or 2-D grid."""

    dtype: str = "f16"
    out_dtype: str = "f16"
    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    grid_2d: bool = False
    epilogue: tuple[EpilogueOp, ...] = ()
    kind: str = field(default="gemm", init=False)

    # --------------------------------------------------------------- description

    @property
    def has_bias(self) -> bool:
        return any(op.kind == "bias" for op in self.epilogue)

    @property
    def scalar_args(self) -> int:
        return sum(1 for op in self.epilogue if op.arg >= 0)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["epilogue"] = [asdict(op) for op in self.epilogue]
        return data

    def grid(self, shape: dict[str, int]) -> tuple[int, ...]:
        tiles_m, tiles_n = cdiv(shape["m"], self.block_m), cdiv(shape["n"], self.block_n)
        return (tiles_m, tiles_n) if self.grid_2d else (tiles_m * tiles_n,)

    def output_index(self) -> int:
        return 2

    # -------------------------------------------------------------------- tile IR

    def tile_ir(self) -> str:
        """The kernel as tile IR text."""
        bm, bn, bk, dt = self.block_m, self.block_n, self.block_k, self.dtype
        out = self.out_dtype
        acc_t = f"tensor<{bm}x{bn}xf32>"
        params = [
            f"%a_desc: !tile.desc<{bm}x{bk}x{dt}>",
            f"%b_desc: !tile.desc<{bn}x{bk}x{dt}>",
            f"%c_desc: !tile.desc<{bm}x{bn}x{out}>",
        ]
        if self.has_bias:
            params.append(f"%bias_desc: !tile.desc<{bn}x{dt}>")
        params += ["%m: i32", "%n: i32", "%k: i32"]
        params += [f"%s{i}: f32" for i in range(self.scalar_args)]
        lines = [
            f"// fuzz: {self.describe()}",
            f"func.func @fuzz_gemm({', '.join(params)}) {{",
            "  %c0 = arith.constant 0 : i32",
            "  %c1 = arith.constant 1 : i32",
            f"  %block_m = arith.constant {bm} : i32",
            f"  %block_n = arith.constant {bn} : i32",
            f"  %block_k = arith.constant {bk} : i32",
        ]
        if self.grid_2d:
            lines += [
                "  %pid_m = tile.program_id 0 : i32",
                "  %pid_n = tile.program_id 1 : i32",
            ]
        else:
            lines += [
                "  %pid = tile.program_id 0 : i32",
                f"  %bn_minus_1 = arith.constant {bn - 1} : i32",
                "  %n_round = arith.addi %n, %bn_minus_1 : i32",
                "  %tiles_n = arith.divsi %n_round, %block_n : i32",
                "  %pid_m = arith.divsi %pid, %tiles_n : i32",
                "  %pid_n = arith.remsi %pid, %tiles_n : i32",
            ]
        lines += [
            "  %off_m = arith.muli %pid_m, %block_m : i32",
            "  %off_n = arith.muli %pid_n, %block_n : i32",
            f"  %bk_minus_1 = arith.constant {bk - 1} : i32",
            "  %k_round = arith.addi %k, %bk_minus_1 : i32",
            "  %k_tiles = arith.divsi %k_round, %block_k : i32",
            "  %zero = arith.constant 0.000000e+00 : f32",
            f"  %acc0 = tile.splat %zero : f32 -> {acc_t}",
            "  %acc = scf.for %kt = %c0 to %k_tiles step %c1 iter_args(%acc_iter = %acc0)"
            f" -> ({acc_t}) : i32 {{",
            "    %off_k = arith.muli %kt, %block_k : i32",
            f"    %a = tile.load %a_desc[%off_m, %off_k] : !tile.desc<{bm}x{bk}x{dt}>"
            f" -> tensor<{bm}x{bk}x{dt}>",
            f"    %b = tile.load %b_desc[%off_n, %off_k] : !tile.desc<{bn}x{bk}x{dt}>"
            f" -> tensor<{bn}x{bk}x{dt}>",
            f"    %b_t = tile.trans %b : tensor<{bn}x{bk}x{dt}> -> tensor<{bk}x{bn}x{dt}>",
            f"    %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<{bm}x{bk}x{dt}>,"
            f" tensor<{bk}x{bn}x{dt}> -> {acc_t}",
            f"    scf.yield %acc_next : {acc_t}",
            "  }",
        ]
        value = "%acc"
        for i, op in enumerate(self.epilogue):
            v = f"%e{i}"
            if op.kind == "scale":
                lines += [
                    f"  {v}_s = tile.splat %s{op.arg} : f32 -> {acc_t}",
                    f"  {v} = arith.mulf {value}, {v}_s : {acc_t}",
                ]
            elif op.kind == "bias_scalar":
                lines += [
                    f"  {v}_s = tile.splat %s{op.arg} : f32 -> {acc_t}",
                    f"  {v} = arith.addf {value}, {v}_s : {acc_t}",
                ]
            elif op.kind == "bias":
                lines += [
                    f"  {v}_l = tile.load %bias_desc[%off_n] : !tile.desc<{bn}x{dt}>"
                    f" -> tensor<{bn}x{dt}>",
                    f"  {v}_f = tile.convert {v}_l : tensor<{bn}x{dt}> -> tensor<{bn}xf32>",
                    f"  {v}_r = tile.expand_dims {v}_f, 0 : tensor<{bn}xf32> -> tensor<1x{bn}xf32>",
                    f"  {v}_b = tile.broadcast {v}_r : tensor<1x{bn}xf32> -> {acc_t}",
                    f"  {v} = arith.addf {value}, {v}_b : {acc_t}",
                ]
            elif op.kind == "relu":
                lines += [
                    f"  {v}_z = tile.splat %zero : f32 -> {acc_t}",
                    f"  {v} = arith.maximumf {value}, {v}_z : {acc_t}",
                ]
            elif op.kind == "exp2":
                lines += [f"  {v} = math.exp2 {value} : {acc_t}"]
            elif op.kind == "leaky":
                lines += [
                    f"  {v}_alpha = arith.constant {LEAKY_ALPHA:e} : f32",
                    f"  {v}_a = tile.splat {v}_alpha : f32 -> {acc_t}",
                    f"  {v}_z = tile.splat %zero : f32 -> {acc_t}",
                    f"  {v}_neg = tile.cmp lt, {value}, {v}_z : {acc_t} -> tensor<{bm}x{bn}xi1>",
                    f"  {v}_m = arith.mulf {value}, {v}_a : {acc_t}",
                    f"  {v} = tile.where {v}_neg, {v}_m, {value} : tensor<{bm}x{bn}xi1>, {acc_t}",
                ]
            elif op.kind in ("round_f16", "round_bf16"):
                narrow = f"tensor<{bm}x{bn}x{op.kind.removeprefix('round_')}>"
                lines += [
                    f"  {v}_n = tile.convert {value} : {acc_t} -> {narrow}",
                    f"  {v} = tile.convert {v}_n : {narrow} -> {acc_t}",
                ]
            else:
                raise ValueError(f"unknown epilogue op {op.kind!r}")
            value = v
        if out != "f32":
            lines.append(f"  %c_tile = tile.convert {value} : {acc_t} -> tensor<{bm}x{bn}x{out}>")
            value = "%c_tile"
        lines += [
            f"  tile.store %c_desc[%off_m, %off_n], {value} : !tile.desc<{bm}x{bn}x{out}>,"
            f" tensor<{bm}x{bn}x{out}>",
            "  func.return",
            "}",
        ]
        return "\n".join(lines) + "\n"

    def describe(self) -> str:
        chain = " -> ".join(op.kind for op in self.epilogue) or "none"
        grid = "2d" if self.grid_2d else "1d"
        return (
            f"gemm {self.dtype}->{self.out_dtype} tile {self.block_m}x{self.block_n}x"
            f"{self.block_k} grid {grid} epilogue {chain}"
        )

    # --------------------------------------------------------------------- inputs

    def make_inputs(
        self, shape: dict[str, int], seed: int, values: str, scalars: list[float]
    ) -> list[Any]:
        """Launch arguments in signature order; the output is poisoned with NaN."""
        rng = np.random.default_rng(seed)
        m, n, k = shape["m"], shape["n"], shape["k"]
        dt = DTYPES[self.dtype]
        args: list[Any] = [
            random_values(rng, (m, k), dt, values),
            random_values(rng, (n, k), dt, values),
            np.full((m, n), np.nan, DTYPES[self.out_dtype]),
        ]
        if self.has_bias:
            args.append(random_values(rng, (n,), dt, values))
        args += [m, n, k]
        args += [np.float32(s) for s in scalars]
        return args

    # ------------------------------------------------------------------ reference

    def expected(self, shape: dict[str, int], args: list[Any]) -> Bounds:
        """Bounds of C from numpy, following the description op by op."""
        a = np.asarray(args[0]).astype(np.float64)
        b = np.asarray(args[1]).astype(np.float64)
        first_scalar = 7 if self.has_bias else 6
        bias = np.asarray(args[3]).astype(np.float64) if self.has_bias else None
        k = shape["k"]
        exact = a @ b.T
        error = (np.abs(a) @ np.abs(b).T) * (k + 2) * 2.0**-23
        lo, hi = round_interval(exact - error, exact + error, DTYPES["f32"])
        with np.errstate(over="ignore", invalid="ignore"):
            for op in self.epilogue:
                if op.kind == "scale":
                    s = float(args[first_scalar + op.arg])
                    lo, hi = (lo * s, hi * s) if s >= 0 else (hi * s, lo * s)
                    lo, hi = round_interval(lo, hi, DTYPES["f32"])
                elif op.kind == "bias_scalar":
                    s = float(args[first_scalar + op.arg])
                    lo, hi = round_interval(lo + s, hi + s, DTYPES["f32"])
                elif op.kind == "bias":
                    assert bias is not None
                    lo, hi = round_interval(lo + bias, hi + bias, DTYPES["f32"])
                elif op.kind == "relu":
                    lo, hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
                elif op.kind == "exp2":
                    slack = 2.0**-20
                    lo = np.exp2(lo) * (1 - slack)
                    hi = np.exp2(hi) * (1 + slack)
                    lo, hi = round_interval(lo, hi, DTYPES["f32"])
                elif op.kind == "leaky":
                    lo = np.where(lo < 0, lo * LEAKY_ALPHA, lo)
                    hi = np.where(hi < 0, hi * LEAKY_ALPHA, hi)
                    lo, hi = round_interval(lo, hi, DTYPES["f32"])
                elif op.kind in ("round_f16", "round_bf16"):
                    lo, hi = round_interval(lo, hi, DTYPES[op.kind.removeprefix("round_")])
            if self.out_dtype != "f32":
                lo, hi = round_interval(lo, hi, DTYPES[self.out_dtype])
        return Bounds(lo, hi)


# ------------------------------------------------------------------------ attention


@dataclass(frozen=True)
class AttentionProgram:
    """O = softmax(Q K^T * sm_scale) V per (batch * head), online softmax in base 2."""

    dtype: str = "f16"
    head_dim: int = 64
    block_n: int = 64
    causal: bool = False
    block_m: int = 128
    kind: str = field(default="attention", init=False)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        causal = "causal" if self.causal else "full"
        return (
            f"attention {self.dtype} d{self.head_dim} blocks {self.block_m}x{self.block_n} {causal}"
        )

    def grid(self, shape: dict[str, int]) -> tuple[int, ...]:
        return (cdiv(shape["seq"], self.block_m), shape["heads"])

    def output_index(self) -> int:
        return 3

    def tile_ir(self) -> str:
        """The kernel as tile IR text: the library attention forward
        (`tawa_xdsl.kernels.attention.attn_fwd`) specialized to this program."""
        from tawa_xdsl.kernels.attention import tile_module

        module = tile_module(
            self.head_dim, self.dtype, self.causal, self.block_n, block_m=self.block_m
        )
        return f"// fuzz: {self.describe()}\n{module!s}\n"

    def make_inputs(
        self, shape: dict[str, int], seed: int, values: str, scalars: list[float]
    ) -> list[Any]:
        """q, k, v, o (poisoned with NaN), seq, sm_scale. Scores stay moderate (Q and K are
        'normal' or 'small' whatever `values` says: huge scores only test exp2's overflow,
        which the softmax's max subtraction removes); V takes the value class as drawn."""
        rng = np.random.default_rng(seed)
        heads, seq, d = shape["heads"], shape["seq"], self.head_dim
        dt = DTYPES[self.dtype]
        qk_values = "small" if values == "small" else "normal"
        q = random_values(rng, (heads, seq, d), dt, qk_values)
        k = random_values(rng, (heads, seq, d), dt, qk_values)
        v = random_values(rng, (heads, seq, d), dt, values)
        o = np.full((heads, seq, d), np.nan, dt)
        sm_scale = np.float32(scalars[0] if scalars else d**-0.5)
        return [q, k, v, o, seq, sm_scale]

    def expected(self, shape: dict[str, int], args: list[Any]) -> Bounds:
        """softmax(Q K^T scale) V in float64, with a dtype-aware tolerance per row."""
        q, k, v = (np.asarray(x).astype(np.float64) for x in args[:3])
        seq, scale = shape["seq"], float(args[5])
        s = np.einsum("hqd,hkd->hqk", q, k) * scale
        if self.causal:
            s = np.where(np.tril(np.ones((seq, seq), bool)), s, -np.inf)
        s_max = s.max(axis=-1, keepdims=True)
        p = np.exp(s - s_max)
        out = np.einsum("hqk,hkd->hqd", p / p.sum(axis=-1, keepdims=True), v)
        # f32 score error, amplified by exp2 (twice: numerator and normalizer)
        score_err = np.einsum("hqd,hkd->hqk", np.abs(q), np.abs(k)) * abs(scale) * 2.0**-21
        score_err = score_err * (self.head_dim + 4)
        row_err = 4 * np.log(2) * score_err.max(axis=-1, keepdims=True) * 1.4427
        eps = {"f16": 2.0**-10, "bf16": 2.0**-7}[self.dtype]
        v_max = np.abs(v).max(axis=1, keepdims=True)  # per head and column
        blocks = cdiv(seq, self.block_n)
        tol = v_max * (4 * eps + blocks * 2.0**-20 + np.expm1(row_err))
        lo, hi = out - tol, out + tol
        return Bounds(*round_interval(lo, hi, DTYPES[self.dtype]))


Program = GemmProgram | AttentionProgram


def program_from_json(data: dict[str, Any]) -> Program:
    """The inverse of `to_json`."""
    data = dict(data)
    kind = data.pop("kind")
    if kind == "gemm":
        data["epilogue"] = tuple(EpilogueOp(**op) for op in data.get("epilogue", ()))
        return GemmProgram(**data)
    if kind == "attention":
        return AttentionProgram(**data)
    raise ValueError(f"unknown program kind {kind!r}")


# --------------------------------------------------------------------------- values


def random_values(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype, values: str
) -> np.ndarray:
    """Random `dtype` values of one class: `normal` (N(0, 1)), `small` (times 2^-10),
    `large` (close to the range the f32 accumulator can still sum: 2^12 for f16, 2^50 for
    bf16, so products of K terms stay finite), `special` (normal, with negative zeros,
    exact zeros and some large magnitudes sprinkled in)."""
    base = rng.standard_normal(shape)
    big = 2.0**12 if dtype == np.float16 else 2.0**50
    if values == "small":
        base = base * 2.0**-10
    elif values == "large":
        base = base * big
    elif values == "special":
        pick = rng.random(shape)
        base = np.where(pick < 0.1, -0.0, base)
        base = np.where((pick >= 0.1) & (pick < 0.15), 0.0, base)
        base = np.where((pick >= 0.15) & (pick < 0.2), base * big, base)
    elif values != "normal":
        raise ValueError(f"unknown value class {values!r}")
    return base.astype(np.float32).astype(dtype)
