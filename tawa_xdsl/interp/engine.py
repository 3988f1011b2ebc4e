"""The evaluator every interpreter level shares.

Values live in an environment keyed by SSA value: numpy arrays for tiles, numpy scalars for
scalars, and level-specific Python objects (descriptors, rings, barriers) for the rest. Running
a block is a Python generator: ops that may block (an aref get on an empty slot, an mbarrier
wait) yield a `Blocked` event and are resumed by a scheduler. At the tile level nothing blocks,
so a kernel is one generator driven to completion.

Each level registers a handler per op class. A handler receives the evaluator, the op and the
operand values, and returns the result values -- or, for ops that contain regions or may block,
is a generator function that the evaluator drives with `yield from`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects import func, scf
from xdsl.ir import Block, Operation, SSAValue

from tawa_xdsl.diagnostics import op_location
from tawa_xdsl.interp.dtypes import InterpreterError, numpy_dtype

Handler = Callable[..., Any]


@dataclass
class Blocked:
    """Yielded by an op that cannot proceed; `ready()` tells the scheduler when to resume."""

    op: Operation
    reason: str
    ready: Callable[[], bool]


def sync_point(op: Operation, reason: str, ready: Callable[[], bool]) -> Generator[Blocked]:
    """Let the scheduler switch tasks here, and wait until `ready()`."""
    yield Blocked(op, reason, ready)
    while not ready():
        yield Blocked(op, reason, ready)


@dataclass
class Program:
    """The launch coordinates of one program instance."""

    program_id: tuple[int, int, int]
    num_programs: tuple[int, int, int]


class Return(Exception):
    """Raised by `func.return` to leave the kernel body."""

    def __init__(self, values: Sequence[Any]):
        self.values = tuple(values)


def location(op: Operation) -> str:
    """`gemm.mlir:42:5: 'tile.dot' (in @gemm)`: the op's source position when it was parsed
    from a file (or built by the frontend), its name and its kernel."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    where = f" (in @{parent.sym_name.data})" if isinstance(parent, func.FuncOp) else ""
    position = op_location(op)
    prefix = "" if position == "<unknown>" else f"{position}: "
    return f"{prefix}'{op.name}'{where}"


@dataclass
class Evaluator:
    """Runs ops of one program instance (or one warp group of it) on numpy values."""

    handlers: dict[type[Operation], Handler]
    program: Program
    env: dict[SSAValue, Any] = field(default_factory=dict)
    # Level-specific state (the warpgroup index, the trace of events, ...).
    state: dict[str, Any] = field(default_factory=dict)

    def fork(self, **state: Any) -> Evaluator:
        """A new evaluator sharing the values defined so far (for one warp group)."""
        return Evaluator(self.handlers, self.program, dict(self.env), {**self.state, **state})

    def run_block(self, block: Block, args: Iterable[Any] = ()) -> Generator[Blocked, None, Any]:
        """Run a block; returns the operand values of its terminator (or None)."""
        for arg, value in zip(block.args, args, strict=True):
            self.env[arg] = value
        for op in block.ops:
            if isinstance(op, scf.YieldOp):  # the terminator: its operands are the block's result
                return [self.env[v] for v in op.operands]
            handler = self.handlers.get(type(op))
            if handler is None:
                raise InterpreterError(f"{location(op)}: no interpreter for this op at this level")
            operands = [self.env[v] for v in op.operands]
            try:
                results = handler(self, op, operands)
                if inspect.isgenerator(results):
                    results = yield from results
            except (InterpreterError, Return):
                raise
            except (ArithmeticError, ValueError, TypeError, IndexError) as error:
                raise InterpreterError(f"{location(op)}: {error}") from error
            for result, value in zip(op.results, results or (), strict=True):
                self.env[result] = value
        return None

    def run_to_completion(self, block: Block, args: Iterable[Any] = ()) -> Any:
        """Run a block that must never block (the tile level)."""
        generator = self.run_block(block, args)
        try:
            event = next(generator)
        except StopIteration as stop:
            return stop.value
        raise InterpreterError(f"{location(event.op)}: blocked ({event.reason}) at the tile level")


def _for(ev: Evaluator, op: scf.ForOp, operands: list[Any]) -> Generator[Blocked, None, Any]:
    lower, upper, step, *carried = operands
    lower, upper, step = int(lower), int(upper), int(step)
    if step <= 0:
        raise InterpreterError(f"{location(op)}: step must be positive, got {step}")
    index_type = op.body.block.args[0].type
    for i in range(lower, upper, step):
        index = _scalar(i, index_type)
        carried = yield from ev.run_block(op.body.block, [index, *carried])
    return carried


def _if(ev: Evaluator, op: scf.IfOp, operands: list[Any]) -> Generator[Blocked, None, Any]:
    region = op.true_region if bool(operands[0]) else op.false_region
    if not region.blocks:
        return ()
    return (yield from ev.run_block(region.block))


def _return(ev: Evaluator, op: func.ReturnOp, operands: list[Any]) -> None:
    raise Return(operands)


def _scalar(value: int, type_: Any) -> Any:
    return numpy_dtype(type_).type(value)


STRUCTURE_HANDLERS: dict[type[Operation], Handler] = {
    scf.ForOp: _for,
    scf.IfOp: _if,
    func.ReturnOp: _return,
}
