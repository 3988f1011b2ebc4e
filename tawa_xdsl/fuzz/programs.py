"""Program descriptions the fuzzer draws, their tile IR, inputs and numpy references.

A description is a small frozen dataclass (`GemmProgram`, `RowProgram`, `AttentionProgram`)
that says what the kernel computes; `tile_module()` is its kernel, a `tawa_xdsl.language`
program (`fuzz.kernels`, or the library attention) specialized by the frontend, and
`tile_ir()` that module's text (what the compiler sees and what a reproducer stores);
`make_inputs(shape, seed, values, scalars)` builds the launch arguments (outputs poisoned
with NaN), and `expected(shape, args)` is a plain numpy reference written from the
description -- not from the IR -- returning the `Bounds` every output element must lie in.

GEMM-like (`GemmProgram`): C = epilogue(A @ B^T) with A M x K (K-major) and B N x K or
K x N (`b_major`), in f16, bf16 or fp8 e4m3, f32 accumulation over a K loop of
ceil(K / BLOCK_K) trips (0 and 1 included), or two loops in sequence into one accumulator
(`loops`), or split-K (`split_k` programs along grid axis 2 each store the f32 partial of
their share of the K tiles into P[s]); an epilogue chain of up to four f32 ops: `scale` /
`bias_scalar` (times / plus an f32 scalar argument), `bias`, `col_scale` (plus / times a
per-column vector, `v[None, :]`), `row_bias`, `row_scale` (per-row vectors, `v[:, None]`;
vectors in f32, f16 or bf16), `relu`, `exp2`, `leaky` (x < 0 ? x * a : x), `round_f16` /
`round_bf16` (there and back), `round_f16_bf16` (to f16, then straight to bf16, then back),
`sub_row_max`, `sub_row_min`, `sub_row_mean` (x minus its
row's max / min / mean over the BLOCK_N columns of the tile, `tl.max(x, 1)[:, None]`); then
a store in f16, bf16, f32 or fp8 e4m3.

No-dot (`RowProgram`): a tile copy (2-D grid), or a row softmax, layernorm or RMSnorm
forward over rows of N <= BLOCK_N columns (columns past N masked), weights per column.

Attention-like (`AttentionProgram`): O = softmax(Q K^T * scale) V per head, FlashAttention's
online softmax in base 2: the library kernel `tawa_xdsl.kernels.attention.attn_fwd`.

The GEMM reference is interval arithmetic over the padded tiles (what TMA reads past the
edges is zero, and the row reductions see those columns): every f32 op the program runs is
monotone in each argument, so rounding the float64 endpoints of an interval with the same
numpy rounding keeps the exact machine result inside (one extra ulp either side of every
rounding covers double rounding); the dot gets the classic |A| |B|^T K u bound (u = 2^-23
for f16/bf16; 2^-13 for fp8, whose tensor-core accumulation keeps about 14 bits). An
interval whose endpoint is NaN (inf - inf, 0 * inf on the way) bounds nothing: such an
element may be anything (`Bounds.free`). The no-dot references and attention get
dtype-aware tolerances, derived where the functions are defined (`RowProgram.expected`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import ModuleOp

import tawa_xdsl.language as tl
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg

DTYPES: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
}
LANGUAGE_DTYPES: dict[str, tl.dtype] = {
    "f16": tl.float16,
    "bf16": tl.bfloat16,
    "f32": tl.float32,
    "e4m3": tl.float8e4nv,
}
SCALAR_KINDS = ("scale", "bias_scalar")
# vector ops: which index of the tile the vector runs along
VECTOR_KINDS = {"bias": "col", "col_scale": "col", "row_bias": "row", "row_scale": "row"}
REDUCE_KINDS = ("sub_row_max", "sub_row_min", "sub_row_mean")
EPILOGUE_KINDS = (
    "scale",
    "bias",
    "bias_scalar",
    "relu",
    "exp2",
    "leaky",
    "round_f16",
    "round_bf16",
    "round_f16_bf16",
    "col_scale",
    "row_scale",
    "row_bias",
    *REDUCE_KINDS,
)
MAX_EPILOGUE = 4  # the kernel's op slots (`kernels.fuzz_gemm` OP0..OP3)
VALUE_CLASSES = ("normal", "small", "large", "special")
ROW_OPS = ("copy", "softmax", "layernorm", "rmsnorm")
F32_UNIT = 2.0**-24  # unit roundoff of f32
F32_MIN_NORMAL = 2.0**-126  # below it the SFU's .ftz results are zero


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def module_text(module: ModuleOp, description: str) -> str:
    """A kernel's tile IR as a reproducer stores it: its description as a comment, then the
    module the frontend built."""
    return f"// fuzz: {description}\n{module!s}\n"


# ---------------------------------------------------------------------------- bounds


@dataclass
class Bounds:
    """Per element: the output must be finite-or-inf (never NaN) and lie in [lo, hi], except
    where `free` is set (the reference cannot bound that element: any value passes)."""

    lo: np.ndarray
    hi: np.ndarray
    free: np.ndarray | None = None

    @staticmethod
    def from_interval(lo: np.ndarray, hi: np.ndarray) -> Bounds:
        """Bounds of an interval computation: elements with a NaN endpoint are free."""
        free = np.isnan(lo) | np.isnan(hi)
        return Bounds(np.where(free, -np.inf, lo), np.where(free, np.inf, hi), free)

    def violations(self, actual: np.ndarray) -> np.ndarray:
        """A boolean mask of the elements that break the bounds (NaN always does, outside
        `free`)."""
        value = np.asarray(actual).astype(np.float64)
        with np.errstate(invalid="ignore"):
            inside = (value >= self.lo) & (value <= self.hi)
        bad = ~inside | np.isnan(value)
        return bad & ~self.free if self.free is not None else bad


def _step(x: np.ndarray, dtype: np.dtype, toward: float) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = np.asarray(x, np.float64).astype(np.float32).astype(dtype)
        moved = np.nextafter(rounded, np.asarray(toward, dtype=dtype))
    return moved.astype(np.float64)


@cache
def _finite_values(dtype: np.dtype) -> np.ndarray:
    """Every finite value of a one-byte float type, ascending (-0 and 0 as one)."""
    values = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    return np.unique(values[np.isfinite(values)])


def _step_fp8(x: np.ndarray, dtype: np.dtype, direction: int) -> np.ndarray:
    """x rounded to `dtype` as cvt.rn.satfinite does, then one value further `direction`."""
    from tawa_xdsl.interp.dtypes import convert

    values = _finite_values(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = convert(np.asarray(x, np.float64).astype(np.float32), dtype)
    rounded = rounded.astype(np.float64)
    index = np.searchsorted(values, np.nan_to_num(rounded)) + direction
    moved = values[np.clip(index, 0, len(values) - 1)]
    return np.where(np.isnan(rounded), np.nan, moved)


def round_interval(lo: np.ndarray, hi: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, ...]:
    """[lo, hi] after rounding to `dtype` (as `interp.dtypes.convert`, which overflows to
    inf, or saturates for fp8), widened by one ulp each side."""
    if dtype == np.float32:
        with np.errstate(over="ignore", invalid="ignore"):
            r_lo = np.nextafter(lo.astype(np.float32), np.float32(-np.inf)).astype(np.float64)
            r_hi = np.nextafter(hi.astype(np.float32), np.float32(np.inf)).astype(np.float64)
        return r_lo, r_hi
    if dtype.itemsize == 1:
        return _step_fp8(lo, dtype, -1), _step_fp8(hi, dtype, 1)
    return _step(lo, dtype, -np.inf), _step(hi, dtype, np.inf)


def round_f32(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, ...]:
    return round_interval(lo, hi, DTYPES["f32"])


def times(lo: np.ndarray, hi: np.ndarray, factor: np.ndarray | float) -> tuple[np.ndarray, ...]:
    """[lo, hi] * factor (exact factors of either sign), rounded to f32."""
    with np.errstate(over="ignore", invalid="ignore"):
        a, b = lo * factor, hi * factor
    return round_f32(np.minimum(a, b), np.maximum(a, b))


# ----------------------------------------------------------------------------- GEMM


@dataclass(frozen=True)
class EpilogueOp:
    """One op of a GEMM epilogue; `arg` is the index of its f32 scalar argument (scale,
    bias_scalar), -1 otherwise; `dtype` is a vector op's element type ("" for A's type, f32
    when A is fp8)."""

    kind: str
    arg: int = -1
    dtype: str = ""


def tile_groups(lo: np.ndarray, block_n: int) -> tuple[int, ...]:
    """The shape that splits the last axis of a padded array into its tiles' rows."""
    return (*lo.shape[:-1], lo.shape[-1] // block_n, block_n)


def row_reduce(
    lo: np.ndarray, hi: np.ndarray, kind: str, block_n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of x - r(x) for r the max, min or mean of each tile row's BLOCK_N values:
    r's interval comes from the endpoints (max and min are exact; the f32 sum of n terms in
    any order is within (n + 1) u of the sum of their magnitudes, and NaN when one term may
    be +inf and another -inf), then the difference."""
    groups = tile_groups(lo, block_n)
    glo, ghi = lo.reshape(groups), hi.reshape(groups)
    with np.errstate(over="ignore", invalid="ignore"):
        if kind == "sub_row_max":
            r_lo, r_hi = glo.max(-1), ghi.max(-1)
        elif kind == "sub_row_min":
            r_lo, r_hi = glo.min(-1), ghi.min(-1)
        else:
            error = (block_n + 1) * F32_UNIT * np.maximum(abs(glo), abs(ghi)).sum(-1)
            r_lo, r_hi = round_f32(glo.sum(-1) - error, ghi.sum(-1) + error)
            mixed = (ghi == np.inf).any(-1) & (glo == -np.inf).any(-1)
            r_lo, r_hi = np.where(mixed, np.nan, r_lo), np.where(mixed, np.nan, r_hi)
            r_lo, r_hi = times(r_lo, r_hi, 1.0 / block_n)
        r_lo = np.repeat(r_lo, block_n, axis=-1)
        r_hi = np.repeat(r_hi, block_n, axis=-1)
        return difference(lo, hi, r_lo, r_hi)


def difference(
    lo: np.ndarray, hi: np.ndarray, sub_lo: np.ndarray, sub_hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] - [sub_lo, sub_hi] rounded to f32; NaN (unbounded) where both may be the same
    infinity (inf - inf)."""
    with np.errstate(over="ignore", invalid="ignore"):
        nan = ((hi == np.inf) & (sub_hi == np.inf)) | ((lo == -np.inf) & (sub_lo == -np.inf))
        r_lo, r_hi = round_f32(lo - sub_hi, hi - sub_lo)
    return np.where(nan, np.nan, r_lo), np.where(nan, np.nan, r_hi)


@dataclass(frozen=True)
class GemmProgram:
    """C = epilogue(A @ B^T): tiles BLOCK_M x BLOCK_N, K step BLOCK_K, 1-D or 2-D grid (3-D
    for split-K, whose output is P[split_k, M, N])."""

    dtype: str = "f16"
    out_dtype: str = "f16"
    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    grid_2d: bool = False
    epilogue: tuple[EpilogueOp, ...] = ()
    b_major: str = "k"  # "k": B stored N x K; "n": B stored K x N
    split_k: int = 1
    loops: int = 1  # 2: the K tiles in two loops in sequence into one accumulator
    kind: str = field(default="gemm", init=False)

    def __post_init__(self) -> None:
        unknown = [op.kind for op in self.epilogue if op.kind not in EPILOGUE_KINDS]
        if unknown or len(self.epilogue) > MAX_EPILOGUE:
            raise ValueError(
                f"gemm program: epilogue {[op.kind for op in self.epilogue]}: at most "
                f"{MAX_EPILOGUE} ops of {', '.join(EPILOGUE_KINDS)}"
            )

    # --------------------------------------------------------------- description

    @property
    def scalar_args(self) -> int:
        return sum(1 for op in self.epilogue if op.kind in SCALAR_KINDS)

    def vector_dtype(self, op: EpilogueOp) -> str:
        return op.dtype or ("f32" if self.dtype == "e4m3" else self.dtype)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["epilogue"] = [asdict(op) for op in self.epilogue]
        return data

    def grid(self, shape: dict[str, int]) -> tuple[int, ...]:
        tiles_m, tiles_n = cdiv(shape["m"], self.block_m), cdiv(shape["n"], self.block_n)
        if self.split_k > 1:
            return (tiles_m, tiles_n, self.split_k)
        return (tiles_m, tiles_n) if self.grid_2d else (tiles_m * tiles_n,)

    def output_index(self) -> int:
        return 2

    def features(self) -> list[str]:
        """What this program exercises beyond a plain GEMM, for the run's summary."""
        tags = [f"{self.dtype} in", f"{self.out_dtype} out", f"BLOCK_M {self.block_m}"]
        if self.b_major == "n":
            tags.append("B stored K x N")
        if self.split_k > 1:
            tags.append("split-K")
        if self.loops > 1:
            tags.append("two K loops")
        tags += [
            f"{op.kind} {self.vector_dtype(op)}" for op in self.epilogue if op.kind in VECTOR_KINDS
        ]
        return tags

    def describe(self) -> str:
        chain = " -> ".join(
            f"{op.kind}[{self.vector_dtype(op)}]" if op.kind in VECTOR_KINDS else op.kind
            for op in self.epilogue
        )
        grid = "3d" if self.split_k > 1 else "2d" if self.grid_2d else "1d"
        extra = " B KxN" if self.b_major == "n" else ""
        extra += f" split-K {self.split_k}" if self.split_k > 1 else ""
        extra += " two loops" if self.loops > 1 else ""
        return (
            f"gemm {self.dtype}->{self.out_dtype} tile {self.block_m}x{self.block_n}x"
            f"{self.block_k} grid {grid}{extra} epilogue {chain or 'none'}"
        )

    # -------------------------------------------------------------------- tile IR

    def argument_type(self, op: EpilogueOp) -> DescriptorArg | ScalarArg | None:
        """The run-time argument epilogue op `op` reads (its slot of `fuzz_gemm`)."""
        if op.kind in SCALAR_KINDS:
            return ScalarArg(tl.float32)
        if op.kind in VECTOR_KINDS:
            length = self.block_m if VECTOR_KINDS[op.kind] == "row" else self.block_n
            return DescriptorArg(LANGUAGE_DTYPES[self.vector_dtype(op)], (length,))
        return None

    def tile_module(self) -> ModuleOp:
        """`kernels.fuzz_gemm` specialized to this program (a fresh module)."""
        from tawa_xdsl.fuzz.kernels import fuzz_gemm

        bm, bn, bk = self.block_m, self.block_n, self.block_k
        element, out = LANGUAGE_DTYPES[self.dtype], LANGUAGE_DTYPES[self.out_dtype]
        slots = [self.argument_type(op) for op in self.epilogue]
        slots += [None] * (MAX_EPILOGUE - len(slots))
        kinds = [op.kind for op in self.epilogue] + [None] * (MAX_EPILOGUE - len(self.epilogue))
        kernel = fuzz_gemm.compile(
            DescriptorArg(element, (bm, bk)),
            DescriptorArg(element, (bk, bn) if self.b_major == "n" else (bn, bk)),
            DescriptorArg(out, (1, bm, bn) if self.split_k > 1 else (bm, bn)),
            ScalarArg(tl.int32),
            ScalarArg(tl.int32),
            ScalarArg(tl.int32),
            *slots,
            BLOCK_M=bm,
            BLOCK_N=bn,
            BLOCK_K=bk,
            GRID_2D=self.grid_2d,
            B_N_MAJOR=self.b_major == "n",
            SPLIT_K=self.split_k,
            LOOPS=self.loops,
            OP0=kinds[0],
            OP1=kinds[1],
            OP2=kinds[2],
            OP3=kinds[3],
        )
        return kernel.module.clone()

    def tile_ir(self) -> str:
        """The kernel as tile IR text."""
        return _tile_ir(self)

    # --------------------------------------------------------------------- inputs

    def make_inputs(
        self, shape: dict[str, int], seed: int, values: str, scalars: list[float]
    ) -> list[Any]:
        """Launch arguments in signature order (a, b, c, m, n, k, then each epilogue op's
        scalar or vector); the output is poisoned with NaN."""
        rng = np.random.default_rng(seed)
        m, n, k = shape["m"], shape["n"], shape["k"]
        dt = DTYPES[self.dtype]
        a = random_values(rng, (m, k), dt, values)
        b = random_values(rng, (n, k), dt, values)
        c_shape = (self.split_k, m, n) if self.split_k > 1 else (m, n)
        args: list[Any] = [
            a,
            np.ascontiguousarray(b.T) if self.b_major == "n" else b,
            np.full(c_shape, np.nan, DTYPES[self.out_dtype]),
            m,
            n,
            k,
        ]
        for op in self.epilogue:
            if op.kind in SCALAR_KINDS:
                args.append(np.float32(scalars[op.arg]))
            elif op.kind in VECTOR_KINDS:
                length = m if VECTOR_KINDS[op.kind] == "row" else n
                args.append(random_values(rng, (length,), DTYPES[self.vector_dtype(op)], values))
        return args

    # ------------------------------------------------------------------ reference

    def expected(self, shape: dict[str, int], args: list[Any]) -> Bounds:
        """Bounds of C from numpy, following the description op by op over the padded
        tiles, then cut to M x N."""
        m, n, k = shape["m"], shape["n"], shape["k"]
        a = np.asarray(args[0]).astype(np.float64)
        b = np.asarray(args[1]).astype(np.float64)
        b = b.T if self.b_major == "n" else b
        padded_m = cdiv(m, self.block_m) * self.block_m
        padded_n = cdiv(n, self.block_n) * self.block_n
        lo = np.zeros((self.split_k, padded_m, padded_n))
        hi = np.zeros_like(lo)
        unit = 2.0**-13 if self.dtype == "e4m3" else 2.0**-23
        k_tiles = cdiv(k, self.block_k)
        per_split = cdiv(k_tiles, self.split_k) * self.block_k
        for s in range(self.split_k):
            first, last = min(s * per_split, k), min((s + 1) * per_split, k)
            a_s, b_s = a[:, first:last], b[:, first:last]
            exact = a_s @ b_s.T
            error = (np.abs(a_s) @ np.abs(b_s).T) * (last - first + 2) * unit
            lo[s, :m, :n], hi[s, :m, :n] = exact - error, exact + error
        lo, hi = round_f32(lo, hi)
        operands = iter(args[6:])
        with np.errstate(over="ignore", invalid="ignore"):
            for op in self.epilogue:
                operand = next(operands) if self.argument_type(op) is not None else None
                lo, hi = self.apply(op, operand, lo, hi, padded_m, padded_n)
            if self.out_dtype != "f32":
                lo, hi = round_interval(lo, hi, DTYPES[self.out_dtype])
        lo, hi = lo[:, :m, :n], hi[:, :m, :n]
        if self.split_k == 1:
            lo, hi = lo[0], hi[0]
        return Bounds.from_interval(lo, hi)

    def apply(
        self, op: EpilogueOp, operand: Any, lo: np.ndarray, hi: np.ndarray, rows: int, cols: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """[lo, hi] through epilogue op `op` (its scalar or vector `operand`)."""
        if op.kind in VECTOR_KINDS:
            along = VECTOR_KINDS[op.kind]
            vector = np.zeros(rows if along == "row" else cols)  # read past the end: zeros
            vector[: len(operand)] = np.asarray(operand).astype(np.float64)
            operand = vector[:, None] if along == "row" else vector[None, :]
        if op.kind in ("scale", "col_scale", "row_scale"):
            return times(lo, hi, operand if op.kind != "scale" else float(operand))
        if op.kind in ("bias_scalar", "bias", "row_bias"):
            shift = float(operand) if op.kind == "bias_scalar" else operand
            return round_f32(lo + shift, hi + shift)
        if op.kind == "relu":
            return np.maximum(lo, 0.0), np.maximum(hi, 0.0)
        if op.kind == "exp2":
            slack = 2.0**-20  # ex2.approx: a few ulp
            low = np.exp2(lo) * (1 - slack)
            low = np.where(low < F32_MIN_NORMAL, 0.0, low)  # .ftz: subnormal results are 0
            return round_f32(low, np.exp2(hi) * (1 + slack))
        if op.kind == "leaky":
            from tawa_xdsl.fuzz.kernels import LEAKY_ALPHA

            leak_lo = np.where(lo < 0, lo * LEAKY_ALPHA, lo)
            return round_f32(leak_lo, np.where(hi < 0, hi * LEAKY_ALPHA, hi))
        if op.kind == "round_f16_bf16":
            lo, hi = round_interval(lo, hi, DTYPES["f16"])
            return round_interval(lo, hi, DTYPES["bf16"])
        if op.kind in ("round_f16", "round_bf16"):
            return round_interval(lo, hi, DTYPES[op.kind.removeprefix("round_")])
        return row_reduce(lo, hi, op.kind, self.block_n)


# ------------------------------------------------------------------------------ no dot


@dataclass(frozen=True)
class RowProgram:
    """A kernel with no dot over an M x N input: `copy` (one BLOCK_M x BLOCK_N tile per
    program, a 2-D grid), or `softmax`, `layernorm`, `rmsnorm` of each row (one program per
    BLOCK_M rows; N <= BLOCK_N, the columns past N masked; weight and bias per column, of
    `weight_dtype`)."""

    op: str = "softmax"
    dtype: str = "f16"
    out_dtype: str = "f16"
    block_m: int = 128
    block_n: int = 64
    weight_dtype: str = "f32"
    kind: str = field(default="rows", init=False)

    def __post_init__(self) -> None:
        if self.op not in ROW_OPS:
            raise ValueError(
                f"row program: op must be one of {', '.join(ROW_OPS)}, got {self.op!r}"
            )

    @property
    def weights(self) -> int:
        """How many per-column vectors the kernel reads (weight, bias)."""
        return {"layernorm": 2, "rmsnorm": 1}.get(self.op, 0)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        weights = f" weights {self.weight_dtype}" if self.weights else ""
        return (
            f"rows {self.op} {self.dtype}->{self.out_dtype} tile {self.block_m}x"
            f"{self.block_n}{weights}"
        )

    def features(self) -> list[str]:
        return [
            f"{self.op}",
            f"{self.dtype} in",
            f"{self.out_dtype} out",
            f"BLOCK_M {self.block_m}",
        ]

    def grid(self, shape: dict[str, int]) -> tuple[int, ...]:
        tiles_m = cdiv(shape["m"], self.block_m)
        return (tiles_m, cdiv(shape["n"], self.block_n)) if self.op == "copy" else (tiles_m,)

    def output_index(self) -> int:
        return 1

    def tile_module(self) -> ModuleOp:
        """`kernels.fuzz_rows` specialized to this program (a fresh module)."""
        from tawa_xdsl.fuzz.kernels import fuzz_rows

        block = (self.block_m, self.block_n)
        weight = DescriptorArg(LANGUAGE_DTYPES[self.weight_dtype], (self.block_n,))
        kernel = fuzz_rows.compile(
            DescriptorArg(LANGUAGE_DTYPES[self.dtype], block),
            DescriptorArg(LANGUAGE_DTYPES[self.out_dtype], block),
            ScalarArg(tl.int32),
            ScalarArg(tl.int32),
            weight if self.weights >= 1 else None,
            weight if self.weights >= 2 else None,
            ScalarArg(tl.float32) if self.weights else None,
            OP=self.op,
            BLOCK_M=self.block_m,
            BLOCK_N=self.block_n,
        )
        return kernel.module.clone()

    def tile_ir(self) -> str:
        return _tile_ir(self)

    def make_inputs(
        self, shape: dict[str, int], seed: int, values: str, scalars: list[float]
    ) -> list[Any]:
        """x, y (poisoned with NaN), m, n, then the weights and eps of the norms."""
        rng = np.random.default_rng(seed)
        m, n = shape["m"], shape["n"]
        args: list[Any] = [
            random_values(rng, (m, n), DTYPES[self.dtype], values),
            np.full((m, n), np.nan, DTYPES[self.out_dtype]),
            m,
            n,
        ]
        weight_dtype = DTYPES[self.weight_dtype]
        args += [random_values(rng, (n,), weight_dtype, "normal") for _ in range(self.weights)]
        if self.weights:
            args.append(np.float32(scalars[0] if scalars else 1e-5))
        return args

    def expected(self, shape: dict[str, int], args: list[Any]) -> Bounds:
        """Bounds of y in float64 from the definitions of the ops (per-op tolerances below),
        rounded to y's type."""
        x = np.asarray(args[0]).astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            if self.op == "copy":  # one rounding, the same everywhere (to inf past the range)
                y = np.asarray(args[0]).astype(np.float32).astype(DTYPES[self.out_dtype])
                return Bounds(y.astype(np.float64), y.astype(np.float64))
            if self.op == "softmax":
                lo, hi = softmax_bounds(x)
            elif self.op == "layernorm":
                weight, bias = (np.asarray(v).astype(np.float64) for v in args[4:6])
                lo, hi = layernorm_bounds(x, weight, bias, float(args[6]))
            else:
                weight = np.asarray(args[4]).astype(np.float64)
                lo, hi = rmsnorm_bounds(x, weight, float(args[5]))
            lo, hi = round_interval(lo, hi, DTYPES[self.out_dtype])
        return Bounds.from_interval(lo, hi)


def softmax_bounds(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """exp(t) / sum exp(t), t = x - max: the kernel's exp is exp2(t * log2 e) on the SFU
    (relative error under 2^-22, plus t's own rounding times |t|: 3 |t| u), the sum of n
    terms in f32 ((n + 1) u, the SFU errors of the other terms weighed by their e^t, each
    under 3 u / e) and the division (2 u): relative (3 |t| + 3 n + 80) u; a numerator
    below the normal range may be flushed to zero."""
    n = x.shape[1]
    t = x - x.max(axis=1, keepdims=True)
    num = np.exp(t)
    y = num / num.sum(axis=1, keepdims=True)
    tol = y * (3 * np.abs(t) + 3 * n + 80) * F32_UNIT
    # ex2.approx.ftz flushes a subnormal numerator to 0 (its y then is 0 too)
    low = np.where(num < 2 * F32_MIN_NORMAL, np.minimum(y - tol, 0.0), y - tol)
    return low, y + tol


def layernorm_bounds(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    """Interval arithmetic on (x - mean) * rsqrt(var + eps) * w + b: with A the row's largest
    |x|, the computed mean and each centred value are within d = 2 (n + 4) u A of exact
    (sum, division, subtraction), the variance within 4 A d + d^2 + (n + 2) u (2 A + d)^2
    (squares, sum, division); rsqrt.approx and the add of eps cost under 2^-21 relative.
    The bound stays wide where the row is nearly constant: there the kernel divides rounding
    noise by sqrt(eps), as the GPU does."""
    n = x.shape[1]
    mean = x.mean(axis=1, keepdims=True)
    centred = x - mean
    var = (centred**2).mean(axis=1, keepdims=True)
    peak = np.abs(x).max(axis=1, keepdims=True)
    d = 2 * (n + 4) * F32_UNIT * peak
    var_error = 4 * peak * d + d**2 + (n + 2) * F32_UNIT * (2 * peak + d) ** 2
    r_lo = (1 - 2.0**-21) / np.sqrt(var + var_error + eps)
    r_hi = (1 + 2.0**-21) / np.sqrt(np.maximum(var - var_error, 0.0) + eps)
    c_lo, c_hi = centred - d, centred + d
    corners = np.stack([c_lo * r_lo, c_lo * r_hi, c_hi * r_lo, c_hi * r_hi])
    lo, hi = times(corners.min(0), corners.max(0), weight[None, :])
    return round_f32(lo + bias[None, :], hi + bias[None, :])


def rmsnorm_bounds(x: np.ndarray, weight: np.ndarray, eps: float) -> tuple[np.ndarray, ...]:
    """x * rsqrt(mean(x^2) + eps) * w: the mean of squares (all terms positive) is within
    (n + 3) u relative, so rsqrt within half that plus 2^-21 (rsqrt.approx, the add of eps),
    and two products add 2 u: relative error under (n + 7) u / 2 + 2^-21 + 2 u."""
    n = x.shape[1]
    y = x / np.sqrt((x**2).mean(axis=1, keepdims=True) + eps) * weight[None, :]
    tol = np.abs(y) * ((n + 7) * F32_UNIT / 2 + 2.0**-21 + 2 * F32_UNIT)
    return y - tol, y + tol


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

    @property
    def fp8(self) -> bool:
        return self.dtype == "e4m3"

    @property
    def out_dtype(self) -> str:
        return "bf16" if self.fp8 else self.dtype

    def grid(self, shape: dict[str, int]) -> tuple[int, ...]:
        return (cdiv(shape["seq"], self.block_m), shape["heads"])

    def output_index(self) -> int:
        return 3

    def features(self) -> list[str]:
        return [f"{self.dtype} in", "causal" if self.causal else "full", f"d{self.head_dim}"]

    def tile_module(self) -> ModuleOp:
        """The library attention forward (`tawa_xdsl.kernels.attention.attn_fwd`)
        specialized to this program (a fresh module)."""
        from tawa_xdsl.kernels.attention import tile_module

        return tile_module(
            self.head_dim, self.dtype, self.causal, self.block_n, block_m=self.block_m
        )

    def tile_ir(self) -> str:
        return _tile_ir(self)

    def make_inputs(
        self, shape: dict[str, int], seed: int, values: str, scalars: list[float]
    ) -> list[Any]:
        """q, k, v, o (poisoned with NaN), seq, sm_scale. Scores stay moderate (Q and K are
        'normal' or 'small' whatever `values` says: huge scores only test exp2's overflow,
        which the softmax's max subtraction removes); V takes the value class as drawn. e4m3
        takes V as `attention.fp8_v` lays it out and writes O in bf16."""
        rng = np.random.default_rng(seed)
        heads, seq, d = shape["heads"], shape["seq"], self.head_dim
        dt = DTYPES[self.dtype]
        qk_values = "small" if values == "small" else "normal"
        q = random_values(rng, (heads, seq, d), dt, qk_values)
        k = random_values(rng, (heads, seq, d), dt, qk_values)
        v = random_values(rng, (heads, seq, d), dt, values)
        if self.fp8:
            from tawa_xdsl.kernels.attention import fp8_v

            v = fp8_v(v)
        o = np.full((heads, seq, d), np.nan, DTYPES[self.out_dtype])
        sm_scale = np.float32(scalars[0] if scalars else d**-0.5)
        return [q, k, v, o, seq, sm_scale]

    def expected(self, shape: dict[str, int], args: list[Any]) -> Bounds:
        """softmax(Q K^T scale) V in float64, with a dtype-aware tolerance per row."""
        q, k, v = (np.asarray(x).astype(np.float64) for x in args[:3])
        seq, scale = shape["seq"], float(args[5])
        if self.fp8:  # fp8_v's layout undone: V^T's keys back in order, the pad dropped
            from tawa_xdsl.kernels.attention import fp8_key_positions

            vt = np.empty_like(v)
            vt[..., fp8_key_positions(v.shape[-1])] = v
            v = vt[..., :seq].transpose(0, 2, 1)
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
        eps = {"f16": 2.0**-10, "bf16": 2.0**-7}[self.out_dtype]
        v_max = np.abs(v).max(axis=1, keepdims=True)  # per head and column
        blocks = cdiv(seq, self.block_n)
        # P rounded to e4m3 (unit roundoff 2^-4) moves each output by at most 2^-4 max|v|
        p_err = 1.1 * 2.0**-4 if self.fp8 else 0.0
        tol = v_max * (4 * eps + p_err + blocks * 2.0**-20 + np.expm1(row_err))
        lo, hi = out - tol, out + tol
        return Bounds(*round_interval(lo, hi, DTYPES[self.out_dtype]))


Program = GemmProgram | RowProgram | AttentionProgram


@cache
def _tile_ir(program: Program) -> str:
    """A program's tile IR text (cached: the frontend runs once per description)."""
    return module_text(program.tile_module(), program.describe())


def program_from_json(data: dict[str, Any]) -> Program:
    """The inverse of `to_json`."""
    data = dict(data)
    kind = data.pop("kind")
    if kind == "gemm":
        data["epilogue"] = tuple(EpilogueOp(**op) for op in data.get("epilogue", ()))
        return GemmProgram(**data)
    if kind == "rows":
        return RowProgram(**data)
    if kind == "attention":
        return AttentionProgram(**data)
    raise ValueError(f"unknown program kind {kind!r}")


# --------------------------------------------------------------------------- values


def random_values(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype, values: str
) -> np.ndarray:
    """Random `dtype` values of one class: `normal` (N(0, 1)), `small` (times 2^-10),
    `large` (close to the range the f32 accumulator can still sum: 2^12 for f16, 2^6 for
    fp8 e4m3, 2^50 for bf16 and f32, so products of K terms stay finite), `special` (normal,
    with negative zeros, exact zeros and some large magnitudes sprinkled in)."""
    base = rng.standard_normal(shape)
    big = {np.dtype(np.float16): 2.0**12, DTYPES["e4m3"]: 2.0**6}.get(np.dtype(dtype), 2.0**50)
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
    if np.dtype(dtype).itemsize == 1:  # fp8 has no inf: keep to its finite range
        limit = float(ml_dtypes.finfo(dtype).max)
        base = np.clip(base, -limit, limit)
    return base.astype(np.float32).astype(dtype)
