"""Where generated ops go, and which source position they carry.

The code generator moves the insertion block as it enters loop bodies and branches, and sets
the location before compiling each statement or expression, so that every op records the
Python line it came from (`op.location`, a `FileLineColLoc`): later verifier or pass errors
then name the kernel's source line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    FileLineColLoc,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    LocationAttr,
    StringAttr,
    UnknownLoc,
)
from xdsl.ir import Block, Operation

import tawa_xdsl.language as tl
from tawa_xdsl.frontend.errors import SemanticError
from tawa_xdsl.frontend.values import PythonNumber, Scalar, ir_type

OpT = TypeVar("OpT", bound=Operation)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class IRBuilder:
    """Appends ops at the end of the current block, stamped with the current location."""

    def __init__(self, block: Block):
        self.block = block
        self.location: LocationAttr = UnknownLoc()
        # The blocks being filled, outermost first: their ops so far dominate the current one.
        self.open_blocks: list[Block] = [block]
        # Constants already emitted, per block, so each appears once where it is visible.
        self.constants: dict[tuple[int, str, str], Scalar] = {}

    def emit(self, op: OpT) -> OpT:
        op.location = self.location
        self.block.add_op(op)
        return op

    def set_location(self, filename: str, line: int, column: int) -> None:
        self.location = FileLineColLoc(StringAttr(filename), IntAttr(line), IntAttr(column))

    @contextmanager
    def at_end_of(self, block: Block) -> Iterator[None]:
        """Emit into `block` for the duration of the `with`."""
        saved = self.block
        self.block = block
        self.open_blocks.append(block)
        try:
            yield
        finally:
            self.open_blocks.pop()
            self.block = saved

    def constant(self, number: PythonNumber, dtype: tl.dtype) -> Scalar:
        """An `arith.constant` of `dtype` holding a Python number (one per block)."""
        for block in self.open_blocks:
            known = self.constants.get((id(block), repr(number), dtype.name))
            if known is not None:
                return known
        constant = self._new_constant(number, dtype)
        self.constants[id(self.block), repr(number), dtype.name] = constant
        return constant

    def _new_constant(self, number: PythonNumber, dtype: tl.dtype) -> Scalar:
        type_ = ir_type(dtype)
        if dtype.is_floating:
            attr = FloatAttr(float(number), type_)  # type: ignore[arg-type]
        else:
            value = int(number)
            if dtype.is_bool:
                value = int(bool(value))
            elif not INT32_MIN <= value <= INT32_MAX:
                raise SemanticError(f"integer constant {number} does not fit in int32")
            attr = IntegerAttr(value, type_)  # type: ignore[arg-type]
        op = self.emit(arith.ConstantOp(attr, type_))
        return Scalar(op.result, dtype)
