"""The Triton-style kernel language: `import tawa_xdsl.language as tl`.

A kernel is a Python function decorated with `@tawa_xdsl.jit` that calls the functions of this
module. They are never run by Python: the frontend (`tawa_xdsl.frontend`) reads the kernel's
AST and emits tile IR for each call, so everything here is a *declaration* -- a name the
frontend recognises, a signature users read, and a docstring stating the semantics. Calling
one of them outside a kernel raises an error saying so.

What a kernel may use, beside Python operators on tiles and scalars:

* grid: `program_id`, `num_programs`, `cdiv`
* tile creation: `arange`, `zeros`, `full`
* shape changes: `reshape`, `trans`, `expand_dims`, `broadcast_to`, and `x[:, None]` indexing
* math: `where`, `maximum`, `minimum`, `clamp`, `exp`, `exp2`, `log`, `log2`, `sqrt`,
  `rsqrt`, `abs`, `sigmoid`, `erf`, `fma`, and `tl.math.tanh` (all also as `tl.math.*`);
  reductions `max`, `min`, `sum`; `dot`
* loops: `range` (like Python's `range`, with pipelining hints), `static_range` (unrolled)
* compile time: `constexpr`, `static_assert`; the hints `multiple_of` and `max_contiguous`
  (accepted for Triton compatibility, no effect)
* element types: `int1`, `int32`, `float16`, `bfloat16`, `float32`, `float8e4nv`, `float8e5`
* tensor methods: `x.to(dtype)`, `x.T`, `x.shape`, `x.dtype`; descriptor methods
  `desc.load([o0, o1])` and `desc.store([o0, o1], value)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

# ------------------------------------------------------------------------------ element types


@dataclass(frozen=True)
class dtype:  # noqa: N801 -- Triton's spelling, so kernels port unchanged
    """An element type: `tl.float16` is `dtype("fp16")`."""

    name: str

    @property
    def is_floating(self) -> bool:
        return self.name.startswith(("fp", "bf"))

    @property
    def is_int(self) -> bool:
        return self.name.startswith("int")

    @property
    def is_bool(self) -> bool:
        return self.name == "int1"

    @property
    def is_fp8(self) -> bool:
        return self.name.startswith("fp8")

    @property
    def primitive_bitwidth(self) -> int:
        return {"int1": 1, "int32": 32, "fp16": 16, "bf16": 16, "fp32": 32}.get(self.name, 8)

    def __repr__(self) -> str:
        return f"tl.{_PUBLIC_NAMES.get(self.name, self.name)}"

    __str__ = __repr__


int1 = dtype("int1")
int32 = dtype("int32")
float16 = dtype("fp16")
bfloat16 = dtype("bf16")
float32 = dtype("fp32")
float8e4nv = dtype("fp8e4nv")
float8e5 = dtype("fp8e5")
# Triton's aliases.
bool_ = int1
float8_e4m3fn = float8e4nv
float8_e5m2 = float8e5

_PUBLIC_NAMES = {
    "int1": "int1",
    "int32": "int32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "fp8e4nv": "float8e4nv",
    "fp8e5": "float8e5",
}

DTYPES: dict[str, dtype] = {name: globals()[public] for name, public in _PUBLIC_NAMES.items()}


# ------------------------------------------------------------------------ compile-time values


class constexpr:  # noqa: N801
    """A value known when the kernel is compiled.

    As a parameter annotation (`BLOCK_M: tl.constexpr`) it makes the parameter a
    specialization constant: each distinct value compiles its own kernel and the value is
    folded into the IR. As a wrapper (`GROUP = tl.constexpr(8)`) it marks a global constant.
    """

    def __init__(self, value: Any):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self) -> str:
        return f"constexpr({self.value!r})"

    def __eq__(self, other: object) -> bool:
        other_value = other.value if isinstance(other, constexpr) else other
        return self.value == other_value

    def __hash__(self) -> int:
        return hash(self.value)


class tensor:  # noqa: N801
    """The type of a tile inside a kernel (for annotations only; the frontend makes tiles)."""


class tensor_descriptor:  # noqa: N801
    """The type of a tensor descriptor kernel argument (for annotations only)."""


# ----------------------------------------------------------------------------- the builtins

F = TypeVar("F", bound=Callable[..., Any])


def builtin(function: F) -> F:
    """Mark `function` as a kernel-language builtin that the frontend lowers by name."""

    def outside_kernel(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"tl.{function.__name__} can only be called inside a @tawa_xdsl.jit kernel"
        )

    outside_kernel.__name__ = function.__name__
    outside_kernel.__qualname__ = function.__qualname__
    outside_kernel.__doc__ = function.__doc__
    outside_kernel.__wrapped__ = function  # type: ignore[attr-defined]
    outside_kernel.__tawa_builtin__ = function.__name__  # type: ignore[attr-defined]
    return outside_kernel  # type: ignore[return-value]


def builtin_name(value: Any) -> str | None:
    """The builtin a Python object stands for, or None if it is not a builtin."""
    return getattr(value, "__tawa_builtin__", None)


@builtin
def program_id(axis: int) -> tensor:
    """The index (int32) of this program along grid axis 0, 1 or 2."""


@builtin
def num_programs(axis: int) -> tensor:
    """The number of programs (int32) along grid axis 0, 1 or 2."""


@builtin
def cdiv(x: Any, div: Any) -> Any:
    """`(x + div - 1) // div`: the number of blocks of `div` covering `x`."""


@builtin
def arange(start: int, end: int) -> tensor:
    """The 1-D int32 tile `[start, ..., end - 1]`; both bounds are compile-time constants."""


@builtin
def zeros(shape: tuple[int, ...], dtype: dtype) -> tensor:
    """A tile of `shape` (compile-time constant) filled with zeros."""


@builtin
def full(shape: tuple[int, ...], value: Any, dtype: dtype) -> tensor:
    """A tile of `shape` (compile-time constant) filled with `value` (scalar)."""


@builtin
def reshape(input: tensor, *shape: Any, can_reorder: bool = False) -> tensor:
    """The same elements, row-major, in another shape (a tuple or the dims one by one);
    `can_reorder` is accepted for Triton compatibility (the order kept is row-major)."""


@builtin
def permute(input: tensor, *dims: Any) -> tensor:
    """The tile with its dims reordered (a tuple or the dims one by one): result dim k is
    input dim `dims[k]`."""


@builtin
def join(a: tensor, b: tensor) -> tensor:
    """`a` and `b` (same shape and type) stacked along a new minor dim of 2."""


@builtin
def split(a: tensor) -> tuple[tensor, tensor]:
    """The two halves of a tile whose minor dim is 2: `a[..., 0]` and `a[..., 1]`."""


@builtin
def trans(input: tensor) -> tensor:
    """The transpose of a 2-D tile (also `x.T`)."""


@builtin
def expand_dims(input: tensor, axis: int) -> tensor:
    """Insert a dimension of size 1 at `axis`."""


@builtin
def broadcast_to(input: tensor, shape: tuple[int, ...]) -> tensor:
    """Broadcast to `shape` with numpy rules."""


@builtin
def where(condition: Any, x: Any, y: Any) -> tensor:
    """Elementwise `condition ? x : y`, broadcasting all three."""


@builtin
def maximum(x: Any, y: Any) -> Any:
    """Elementwise maximum (NaN if either operand is NaN)."""


@builtin
def minimum(x: Any, y: Any) -> Any:
    """Elementwise minimum (NaN if either operand is NaN)."""


@builtin
def exp(x: Any) -> Any:
    """Elementwise e**x."""


@builtin
def exp2(x: Any) -> Any:
    """Elementwise 2**x."""


@builtin
def log(x: Any) -> Any:
    """Elementwise natural logarithm."""


@builtin
def log2(x: Any) -> Any:
    """Elementwise base-2 logarithm."""


@builtin
def sqrt(x: Any) -> Any:
    """Elementwise square root."""


@builtin
def rsqrt(x: Any) -> Any:
    """Elementwise 1 / sqrt(x)."""


@builtin
def abs(x: Any) -> Any:  # noqa: A001 -- Triton's name
    """Elementwise absolute value."""


@builtin
def tanh(x: Any) -> Any:
    """Elementwise hyperbolic tangent (Triton spells it `tl.math.tanh`)."""


@builtin
def erf(x: Any) -> Any:
    """Elementwise error function."""


@builtin
def sigmoid(x: Any) -> Any:
    """Elementwise 1 / (1 + e**-x)."""


@builtin
def fma(x: Any, y: Any, z: Any) -> Any:
    """Elementwise x * y + z, broadcasting all three."""


@builtin
def clamp(x: Any, min: Any, max: Any, propagate_nan: Any = None) -> Any:  # noqa: A002
    """Elementwise `minimum(maximum(x, min), max)`; `propagate_nan` is accepted for Triton
    compatibility (a NaN `x` gives NaN either way)."""


@builtin
def max(input: tensor, axis: int | None = None, keep_dims: bool = False) -> tensor:  # noqa: A001
    """The maximum along `axis` (the axis is removed unless `keep_dims`)."""


@builtin
def min(input: tensor, axis: int | None = None, keep_dims: bool = False) -> tensor:  # noqa: A001
    """The minimum along `axis` (the axis is removed unless `keep_dims`)."""


@builtin
def sum(input: tensor, axis: int | None = None, keep_dims: bool = False) -> tensor:  # noqa: A001
    """The sum along `axis` (the axis is removed unless `keep_dims`); int1 sums as int32."""


@builtin
def dot(
    input: tensor,
    other: tensor,
    acc: tensor | None = None,
    input_precision: str | None = None,
    allow_tf32: bool | None = None,
    max_num_imprecise_acc: int | None = None,
    out_dtype: dtype = float32,
) -> tensor:
    """`input @ other + acc` on the tensor cores: MxK @ KxN (+ MxN), f32 accumulation.

    `input_precision`, `allow_tf32` and `max_num_imprecise_acc` are accepted for Triton
    compatibility and ignored (inputs are f16, bf16 or fp8, so they do not apply)."""


@builtin
def range(  # noqa: A001
    arg1: Any,
    arg2: Any = None,
    step: Any = None,
    num_stages: int | None = None,
    loop_unroll_factor: int | None = None,
    warp_specialize: bool | None = None,
) -> Any:
    """Like Python's `range` in a kernel: a `scf.for` loop. `num_stages` is recorded on the
    loop for the pipeliner; the other hints are accepted and ignored."""


@builtin
def static_range(arg1: int, arg2: int | None = None, step: int | None = None) -> Any:
    """A loop unrolled at compile time; the bounds are compile-time constants."""


@builtin
def static_assert(condition: bool, message: str = "") -> None:
    """Fail compilation with `message` unless the compile-time `condition` holds."""


@builtin
def multiple_of(input: Any, values: Any) -> Any:
    """A divisibility hint (accepted for Triton compatibility; returns `input`)."""


@builtin
def max_contiguous(input: Any, values: Any) -> Any:
    """A contiguity hint (accepted for Triton compatibility; returns `input`)."""


class math:  # noqa: N801
    """`tl.math.exp2(x)` and friends, as Triton spells them."""

    exp = exp
    exp2 = exp2
    log = log
    log2 = log2
    sqrt = sqrt
    rsqrt = rsqrt
    abs = abs
    tanh = tanh
    erf = erf
    sigmoid = sigmoid
    fma = fma
    max = maximum
    min = minimum
