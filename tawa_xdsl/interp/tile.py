"""The tile-level interpreter: the reference semantics of a tile kernel, on numpy arrays.

`run_kernel(module, grid, args)` runs every program instance of the grid in order. A
descriptor argument is the global numpy array it describes (or any object with a `base`
array, such as `tawa_xdsl.TensorDescriptor`); loads read the block at the given offsets with
zeros outside the array and stores write the block clipped to the array, as TMA does. Stores
write into the caller's arrays in place; the written arrays are also returned.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Operation

from tawa_xdsl.dialects import tile
from tawa_xdsl.interp.arith import ARITH_HANDLERS
from tawa_xdsl.interp.dtypes import InterpreterError, convert, dtype_name, numpy_dtype
from tawa_xdsl.interp.engine import (
    STRUCTURE_HANDLERS,
    Blocked,
    Evaluator,
    Handler,
    Program,
    Return,
    location,
    sync_point,
)


@dataclass
class Descriptor:
    """A global tensor and the block shape it is accessed in (the interpreter's TMA map)."""

    array: np.ndarray
    block_shape: tuple[int, ...]

    def block_slices(self, offsets: Sequence[int]) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
        """The in-bounds part of the block at `offsets`: (slices of the array, of the block)."""
        global_slices, block_slices = [], []
        for offset, extent, size in zip(offsets, self.block_shape, self.array.shape, strict=True):
            lo, hi = max(offset, 0), min(offset + extent, size)
            hi = max(hi, lo)
            global_slices.append(slice(lo, hi))
            block_slices.append(slice(lo - offset, hi - offset))
        return tuple(global_slices), tuple(block_slices)

    def load(self, offsets: Sequence[int]) -> np.ndarray:
        block = np.zeros(self.block_shape, self.array.dtype)
        global_slices, block_slices = self.block_slices(offsets)
        block[block_slices] = self.array[global_slices]
        return block

    def store(self, offsets: Sequence[int], value: np.ndarray) -> None:
        global_slices, block_slices = self.block_slices(offsets)
        self.array[global_slices] = value[block_slices]


# ------------------------------------------------------------------------------ op handlers


def _dtype_of(type_: Attribute) -> np.dtype:
    assert isinstance(type_, TensorType)
    return numpy_dtype(type_.element_type)


def _load(ev: Evaluator, op: tile.LoadOp, operands: list[Any]) -> tuple[np.ndarray]:
    desc, *offsets = operands
    return (desc.load([int(o) for o in offsets]),)


def _store(ev: Evaluator, op: tile.StoreOp, operands: list[Any]) -> tuple[()]:
    desc, *offsets, value = operands
    desc.store([int(o) for o in offsets], value)
    _mark_written(ev, desc)
    return ()


def _dot(ev: Evaluator, op: tile.DotOp, operands: list[Any]) -> tuple[np.ndarray]:
    lhs, rhs, acc = operands
    # Products and sums in f64, rounded once to f32: the result then does not depend on how
    # BLAS blocks the matmul, so a tile split over warpgroups equals the whole tile exactly.
    product = (lhs.astype(np.float64) @ rhs.astype(np.float64)).astype(np.float32)
    return ((product + acc.astype(np.float32)).astype(_dtype_of(op.result.type)),)


def _reduce(ev: Evaluator, op: tile.ReduceOp, operands: list[Any]) -> Any:
    """max, or a sum accumulated in f32 (i64 for integers) and rounded once, as the GPU's
    f32 fragment reduction does; numpy would add bf16 elements in bf16, one rounding each.
    `across(n)`: this warpgroup's reduction, then every warpgroup's combined (`_across`)."""
    source, axis = operands[0], op.axis.value.data
    if op.kind.data == tile.ReduceKind.MAX:
        local = np.max(source, axis=axis)
    else:
        wide = np.float32 if source.dtype.kind not in "iub" else np.int64
        local = np.sum(source.astype(wide), axis=axis).astype(source.dtype)
    if op.warpgroups is None:
        return (local,)
    return _across(ev, op, local, op.warpgroups.value.data)


@dataclass
class Collective:
    """The warpgroups' contributions to one reduction across warpgroups, per round."""

    parts: dict[int, np.ndarray] = field(default_factory=dict)
    rounds: dict[int, list] = field(default_factory=dict)  # round -> [result, readers left]
    round: int = 0


def _across(
    ev: Evaluator, op: tile.ReduceOp, local: np.ndarray, warpgroups: int
) -> Generator[Blocked, None, tuple[np.ndarray]]:
    """Wait until all `warpgroups` warpgroups of the group have reached this reduction, then
    return their results combined in warpgroup order (each warpgroup its own copy)."""
    boards = ev.state.get("collectives")
    if boards is None or "warpgroup" not in ev.state:
        raise InterpreterError(f"{location(op)}: a reduction across warpgroups outside a group")
    board = boards.setdefault(op, Collective())
    mine = board.round
    board.parts[ev.state["warpgroup"]] = local
    if len(board.parts) == warpgroups:
        parts = [board.parts[w] for w in sorted(board.parts)]
        combine = np.maximum if op.kind.data == tile.ReduceKind.MAX else np.add
        total = parts[0]
        for part in parts[1:]:
            total = combine(total, part).astype(local.dtype)
        board.rounds[mine] = [total, warpgroups]
        board.parts, board.round = {}, mine + 1
    yield from sync_point(op, f"{warpgroups} warpgroups' reduction", lambda: mine in board.rounds)
    entry = board.rounds[mine]
    entry[1] -= 1
    if not entry[1]:
        del board.rounds[mine]
    return (np.array(entry[0], copy=True),)


_COMPARE = {
    tile.ComparePredicate.EQ: np.equal,
    tile.ComparePredicate.NE: np.not_equal,
    tile.ComparePredicate.LT: np.less,
    tile.ComparePredicate.LE: np.less_equal,
    tile.ComparePredicate.GT: np.greater,
    tile.ComparePredicate.GE: np.greater_equal,
}


def _cmp(ev: Evaluator, op: tile.CmpOp, operands: list[Any]) -> tuple[np.ndarray]:
    with np.errstate(invalid="ignore"):
        return (_COMPARE[op.predicate.data](*operands),)


def _splat(ev: Evaluator, op: tile.SplatOp, operands: list[Any]) -> tuple[np.ndarray]:
    assert isinstance(op.result.type, TensorType)
    shape = tuple(op.result.type.get_shape())
    return (np.full(shape, operands[0], _dtype_of(op.result.type)),)


def _extract_slice(
    ev: Evaluator, op: tile.ExtractSliceOp, operands: list[Any]
) -> tuple[np.ndarray]:
    source, *offsets = operands
    shape = tile.shape_of(op.result)
    starts = [int(o) for o in offsets]
    if any(s < 0 or s + d > n for s, d, n in zip(starts, shape, source.shape, strict=True)):
        raise InterpreterError(
            f"{location(op)}: slice of {shape} at {starts} is outside the {source.shape} tile"
        )
    return (source[tuple(slice(s, s + d) for s, d in zip(starts, shape, strict=True))].copy(),)


def _store_slice(ev: Evaluator, op: tile.StoreSliceOp, operands: list[Any]) -> tuple[()]:
    desc, *offsets, value = operands
    Descriptor(desc.array, tuple(value.shape)).store([int(o) for o in offsets], value)
    _mark_written(ev, desc)
    return ()


def _mark_written(ev: Evaluator, desc: Descriptor) -> None:
    """Record the stored-to array, so `run_kernel` returns it."""
    ev.state.setdefault("written", set()).add(id(desc.array))


TILE_HANDLERS: dict[type[Operation], Handler] = {
    tile.ProgramIdOp: lambda ev, op, _: (np.int32(ev.program.program_id[op.axis.value.data]),),
    tile.NumProgramsOp: lambda ev, op, _: (np.int32(ev.program.num_programs[op.axis.value.data]),),
    tile.ArangeOp: lambda ev, op, _: (
        np.arange(op.start.value.data, op.end.value.data, dtype=np.int32),
    ),
    tile.SplatOp: _splat,
    tile.ExpandDimsOp: lambda ev, op, args: (np.expand_dims(args[0], op.axis.value.data),),
    tile.BroadcastOp: lambda ev, op, args: (
        np.broadcast_to(args[0], op.result.type.get_shape()).copy(),
    ),
    tile.ReshapeOp: lambda ev, op, args: (args[0].reshape(op.result.type.get_shape()),),
    tile.TransOp: lambda ev, op, args: (np.ascontiguousarray(args[0].T),),
    tile.PermuteOp: lambda ev, op, args: (
        np.ascontiguousarray(args[0].transpose(op.permutation())),
    ),
    tile.JoinOp: lambda ev, op, args: (np.stack(args, axis=-1),),
    tile.SplitOp: lambda ev, op, args: (args[0][..., 0].copy(), args[0][..., 1].copy()),
    tile.ConvertOp: lambda ev, op, args: (convert(args[0], _dtype_of(op.result.type)),),
    tile.CmpOp: _cmp,
    tile.WhereOp: lambda ev, op, args: (np.where(*args),),
    tile.DotOp: _dot,
    tile.ReduceOp: _reduce,
    tile.LoadOp: _load,
    tile.StoreOp: _store,
    tile.ExtractSliceOp: _extract_slice,
    tile.StoreSliceOp: _store_slice,
}

HANDLERS: dict[type[Operation], Handler] = {
    **STRUCTURE_HANDLERS,
    **ARITH_HANDLERS,
    **TILE_HANDLERS,
}


# ----------------------------------------------------------------------------- the launcher


class KernelArgumentError(InterpreterError):
    """A kernel launched with arguments that do not match its signature."""


def find_kernel(module: ModuleOp, name: str | None = None) -> func.FuncOp:
    """The kernel called `name`, or the only function of the module."""
    kernels = [op for op in module.ops if isinstance(op, func.FuncOp) and op.body.blocks]
    if name is not None:
        kernels = [k for k in kernels if k.sym_name.data == name]
        if not kernels:
            raise KernelArgumentError(f"no kernel named @{name} in the module")
    if len(kernels) != 1:
        names = ", ".join(f"@{k.sym_name.data}" for k in kernels) or "none"
        raise KernelArgumentError(f"expected one kernel in the module, found {names}; name one")
    return kernels[0]


def bind_argument(kernel: func.FuncOp, position: int, value: Any) -> Any:
    """Check one launch argument against the kernel signature and convert it."""
    param = kernel.body.block.args[position]
    where = f"@{kernel.sym_name.data} argument {position} ({param.type})"
    if isinstance(param.type, tile.DescType):
        array = value if isinstance(value, np.ndarray) else getattr(value, "base", value)
        if not isinstance(array, np.ndarray):
            raise KernelArgumentError(
                f"{where}: expected a numpy array, got {type(value).__name__}"
            )
        expected = numpy_dtype(param.type.element_type)
        if array.dtype != expected:
            raise KernelArgumentError(
                f"{where}: expected a {dtype_name(expected)} array, got {dtype_name(array.dtype)}"
            )
        if array.ndim != param.type.rank:
            raise KernelArgumentError(
                f"{where}: expected a {param.type.rank}-D array, got shape {array.shape}"
            )
        return Descriptor(array, param.type.get_block_shape())
    if isinstance(value, np.ndarray) and value.ndim > 0:
        raise KernelArgumentError(
            f"{where}: expected a scalar, got an array of shape {value.shape}"
        )
    dtype = numpy_dtype(param.type)
    if dtype.kind in "iu":
        if not float(value).is_integer():
            raise KernelArgumentError(f"{where}: expected an integer, got {value!r}")
        limits = np.iinfo(dtype)
        if not limits.min <= int(value) <= limits.max:
            raise KernelArgumentError(
                f"{where}: {value!r} is out of the range {limits.min}..{limits.max}"
            )
    return dtype.type(value)


def bind_arguments(kernel: func.FuncOp, args: Sequence[Any]) -> list[Any]:
    params = kernel.body.block.args
    if len(args) != len(params):
        raise KernelArgumentError(
            f"@{kernel.sym_name.data} takes {len(params)} arguments, got {len(args)}"
        )
    return [bind_argument(kernel, i, value) for i, value in enumerate(args)]


def normalize_grid(grid: Sequence[int] | int) -> tuple[int, int, int]:
    dims = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid)
    if not 1 <= len(dims) <= 3 or any(d < 0 for d in dims):
        raise KernelArgumentError(f"grid must be 1 to 3 non-negative sizes, got {grid}")
    return (*dims, *(1,) * (3 - len(dims)))  # type: ignore[return-value]


def run_kernel(
    module: ModuleOp,
    grid: Sequence[int] | int,
    args: Sequence[Any],
    kernel: str | None = None,
    handlers: dict[type[Operation], Handler] | None = None,
) -> list[np.ndarray]:
    """Run every program instance of `grid`; returns the arrays the kernel stored to."""
    kernel_op = find_kernel(module, kernel)
    values = bind_arguments(kernel_op, args)
    grid3 = normalize_grid(grid)
    written: set[int] = set()
    for program_id in itertools.product(*(range(g) for g in reversed(grid3))):
        program = Program(tuple(reversed(program_id)), grid3)  # type: ignore[arg-type]
        evaluator = Evaluator(handlers or HANDLERS, program)
        try:
            evaluator.run_to_completion(kernel_op.body.block, values)
        except Return:
            pass
        written |= evaluator.state.get("written", set())
    return [v.array for v in values if isinstance(v, Descriptor) and id(v.array) in written]
