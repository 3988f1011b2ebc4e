"""The `tl.*` functions and the tile/descriptor methods, bound to their semantics.

`call_builtin` binds the call's arguments against the signature declared in
`tawa_xdsl.language` (so keyword names, defaults and arity errors are Triton's), then runs
the entry of `BUILTINS` for that name. `call_method` does the same for `x.to(...)`,
`desc.load(...)` and the other methods of run-time values.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tawa_xdsl.language as tl
from tawa_xdsl.frontend import semantic
from tawa_xdsl.frontend.builder import IRBuilder
from tawa_xdsl.frontend.errors import SemanticError
from tawa_xdsl.frontend.values import Descriptor, Scalar, Tile

Arguments = dict[str, Any]
BuiltinImpl = Callable[[IRBuilder, Arguments], Any]


def _static_assert(b: IRBuilder, a: Arguments) -> None:
    condition = a["condition"]
    if isinstance(condition, Scalar | Tile):
        raise SemanticError("tl.static_assert needs a compile-time condition")
    if not condition:
        raise SemanticError(f"static_assert failed: {a['message']}".rstrip(": "))


def _math(name: str) -> BuiltinImpl:
    return lambda b, a: semantic.math_unary(b, name, a["x"])


def _reduce(kind: str) -> BuiltinImpl:
    return lambda b, a: semantic.reduce(b, kind, a["input"], a["axis"], a["keep_dims"])


BUILTINS: dict[str, BuiltinImpl] = {
    "program_id": lambda b, a: semantic.program_query(b, "program_id", a["axis"]),
    "num_programs": lambda b, a: semantic.program_query(b, "num_programs", a["axis"]),
    "cdiv": lambda b, a: semantic.cdiv(b, a["x"], a["div"]),
    "arange": lambda b, a: semantic.arange(b, a["start"], a["end"]),
    "zeros": lambda b, a: semantic.full(b, a["shape"], 0, a["dtype"]),
    "full": lambda b, a: semantic.full(b, a["shape"], a["value"], a["dtype"]),
    "reshape": lambda b, a: semantic.reshape(b, a["input"], _dims(a["shape"])),
    "permute": lambda b, a: semantic.permute(b, a["input"], _dims(a["dims"])),
    "join": lambda b, a: semantic.join(b, a["a"], a["b"]),
    "split": lambda b, a: semantic.split(b, a["a"]),
    "trans": lambda b, a: semantic.trans(b, a["input"]),
    "expand_dims": lambda b, a: semantic.expand_dims(
        b, _tile(a["input"], "tl.expand_dims input"), _int(a["axis"], "axis")
    ),
    "broadcast_to": lambda b, a: semantic.broadcast_to(
        b, a["input"], semantic.constant_shape(a["shape"], "tl.broadcast_to shape")
    ),
    "where": lambda b, a: semantic.where(b, a["condition"], a["x"], a["y"]),
    "maximum": lambda b, a: semantic.minimum_or_maximum(b, "max", a["x"], a["y"]),
    "minimum": lambda b, a: semantic.minimum_or_maximum(b, "min", a["x"], a["y"]),
    **{
        name: _math(name)
        for name in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "tanh", "erf")
    },
    "sigmoid": lambda b, a: semantic.sigmoid(b, a["x"]),
    "fma": lambda b, a: semantic.fma(b, a["x"], a["y"], a["z"]),
    "clamp": lambda b, a: semantic.clamp(b, a["x"], a["min"], a["max"]),
    "max": _reduce("max"),
    "min": _reduce("min"),
    "sum": _reduce("sum"),
    "dot": lambda b, a: semantic.dot(b, a["input"], a["other"], a["acc"], a["out_dtype"]),
    "static_assert": _static_assert,
    "multiple_of": lambda b, a: a["input"],
    "max_contiguous": lambda b, a: a["input"],
}


def _dims(dims: tuple[Any, ...]) -> Any:
    """The dims of `reshape(x, 2, 3)` or of `reshape(x, (2, 3))`."""
    if len(dims) == 1 and isinstance(dims[0], tuple | list):
        return tuple(dims[0])
    return dims


def _tile(value: object, what: str) -> Tile:
    if not isinstance(value, Tile):
        raise SemanticError(f"{what} must be a tile, got {value!r}")
    return value


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise SemanticError(f"{what} must be a compile-time int, got {value!r}")
    return value


def bind(name: str, signature: inspect.Signature, args: list[Any], kwargs: Arguments) -> Arguments:
    """Bind a call against a declared signature, with defaults filled in."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as error:
        raise SemanticError(f"{name}(): {error}") from None
    bound.apply_defaults()
    return dict(bound.arguments)


def call_builtin(b: IRBuilder, name: str, args: list[Any], kwargs: Arguments) -> Any:
    if name in ("range", "static_range"):
        raise SemanticError(f"tl.{name}(...) can only be the iterable of a for loop")
    declaration = getattr(tl, name)
    arguments = bind(f"tl.{name}", inspect.signature(declaration.__wrapped__), args, kwargs)
    return BUILTINS[name](b, arguments)


# --------------------------------------------------------------------------------- methods


@dataclass(frozen=True)
class BoundMethod:
    """`x.to`, `desc.load`, ...: a method of a run-time value, called later."""

    receiver: Scalar | Tile | Descriptor
    name: str


def _to(b: IRBuilder, value: Scalar | Tile, args: list[Any], kwargs: Arguments) -> Any:
    def to(dtype: Any, fp_downcast_rounding: Any = None, bitcast: bool = False) -> None: ...

    a = bind(".to", inspect.signature(to), args, kwargs)
    if not isinstance(a["dtype"], tl.dtype):
        raise SemanticError(f".to() needs a tl element type such as tl.float16, got {a['dtype']!r}")
    if a["bitcast"]:
        raise SemanticError(".to(bitcast=True) is not supported")
    return semantic.cast(b, value, a["dtype"])


def _method_via_builtin(name: str) -> Callable[..., Any]:
    def call(b: IRBuilder, value: Any, args: list[Any], kwargs: Arguments) -> Any:
        return call_builtin(b, name, [value, *args], kwargs)

    return call


def _load(b: IRBuilder, desc: Descriptor, args: list[Any], kwargs: Arguments) -> Any:
    def load(offsets: Any) -> None: ...

    return semantic.load(
        b, desc, bind("desc.load", inspect.signature(load), args, kwargs)["offsets"]
    )


def _store(b: IRBuilder, desc: Descriptor, args: list[Any], kwargs: Arguments) -> Any:
    def store(offsets: Any, value: Any) -> None: ...

    a = bind("desc.store", inspect.signature(store), args, kwargs)
    return semantic.store(b, desc, a["offsets"], a["value"])


TILE_METHOD_BUILTINS = (
    "trans", "reshape", "permute", "split", "expand_dims", "broadcast_to", "sum", "max", "min"
)  # fmt: skip
_TILE_METHODS = {"to": _to, **{name: _method_via_builtin(name) for name in TILE_METHOD_BUILTINS}}
_SCALAR_METHODS = {"to": _to}
_DESCRIPTOR_METHODS = {"load": _load, "store": _store}


def _methods_of(value: object) -> dict[str, Callable[..., Any]]:
    if isinstance(value, Tile):
        return _TILE_METHODS
    if isinstance(value, Scalar):
        return _SCALAR_METHODS
    return _DESCRIPTOR_METHODS


def get_attribute(b: IRBuilder, value: Scalar | Tile | Descriptor, name: str) -> Any:
    """`x.T`, `x.shape`, `x.dtype`, `desc.block_shape`, or a bound method."""
    if name == "dtype":
        return value.dtype
    if name == "shape" and isinstance(value, Tile):
        return value.shape
    if name == "T" and isinstance(value, Tile):
        return semantic.trans(b, value)
    if name == "block_shape" and isinstance(value, Descriptor):
        return value.block_shape
    if name in _methods_of(value):
        return BoundMethod(value, name)
    raise SemanticError(f"{value.describe()} has no attribute '{name}'")


def call_method(b: IRBuilder, method: BoundMethod, args: list[Any], kwargs: Arguments) -> Any:
    return _methods_of(method.receiver)[method.name](b, method.receiver, args, kwargs)
