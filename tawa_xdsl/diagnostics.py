"""Errors that name the place: `file:line:col: error: message`, one line, no traceback.

The parser here records each op's source position as its `location`, so a verifier failure,
an interpreter failure or a failed proof can point at the line the user wrote; passes that
clone ops carry the location along.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Attribute, Operation
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    VerifyException,
)


class TawaError(DiagnosticException):
    """A user-facing error whose message is one line starting with the place."""


class LocatingParser(Parser):
    """An MLIR parser that stores `loc("file":line:col)` on every op it parses."""

    def __init__(self, ctx: Context, text: str, name: str, line_offset: int = 0):
        super().__init__(ctx, text, name)
        self.line_offset = line_offset

    def parse_operation(self) -> Operation:
        position = self._current_token.span.get_location()
        op = super().parse_operation()
        if isinstance(op.location, UnknownLoc):
            op.location = FileLineColLoc(
                StringAttr(position.file),
                IntAttr(position.line + self.line_offset),
                IntAttr(position.col),
            )
        return op

    def parse_optional_type(self) -> Attribute | None:  # type: ignore[override]
        """A type whose verifier fails (`!tile.desc<0x4xf16>`) is an error at the type's place."""
        position = self._current_token.span.get_location()
        try:
            return super().parse_optional_type()
        except VerifyException as error:
            message = first_line(error)
            line = position.line + self.line_offset
            raise TawaError(f"{position.file}:{line}:{position.col}: error: {message}") from error


def op_location(op: Operation) -> str:
    """`file:line:col` of an op, or of its closest located ancestor; `<unknown>` if none."""
    current: Operation | None = op
    while current is not None:
        if isinstance(current.location, FileLineColLoc):
            loc = current.location
            return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
        current = current.parent_op()
    return "<unknown>"


def parse_error_message(error: ParseError) -> str:
    position = error.span.get_location()
    return f"{position.file}:{position.line}:{position.col}: error: {error.msg}"


def parse_module(ctx: Context, text: str, name: str = "<input>", line_offset: int = 0) -> ModuleOp:
    """Parse and verify; any problem becomes a one-line `TawaError` naming the place."""
    try:
        module = LocatingParser(ctx, text, name, line_offset).parse_module()
    except ParseError as error:
        raise TawaError(parse_error_message(error)) from error
    verify_module(module)
    return module


def parse_file(ctx: Context, path: str | Path) -> ModuleOp:
    return parse_module(ctx, read_source(path), str(path))


def read_source(path: str | Path) -> str:
    """The text of `path`; unreadable or not UTF-8 text is a one-line `TawaError`."""
    try:
        return decode_source(Path(path).read_bytes(), str(path))
    except OSError as error:
        raise TawaError(f"{path}: error: cannot read: {error.strerror}") from error


def decode_source(data: bytes, name: str) -> str:
    """`data` as UTF-8 text; anything else (a binary file) is a one-line `TawaError`."""
    try:
        return data.decode()
    except UnicodeDecodeError as error:
        raise TawaError(
            f"{name}: error: not UTF-8 text (byte 0x{data[error.start]:02x} at offset "
            f"{error.start}): expected MLIR source"
        ) from None


PassFactories = Mapping[str, Callable[[], type[ModulePass]]]


def parse_pass_pipeline(passes: PassFactories, spec: str) -> list[ModulePass]:
    """The passes of a `-p` pipeline; an unknown pass, an unknown option or a value of the
    wrong type is a one-line `TawaError` naming it (xDSL would say only "Incompatible types")."""
    try:
        specs = list(parse_pipeline(spec))
    except ArgSpecParseError as error:  # a BaseException in xDSL
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        column = lines[1].rpartition(":")[2] if len(lines) > 2 else "?"
        raise TawaError(f"-p: error: at column {column} of '{spec}': {lines[-1]}") from None
    return [_make_pass(passes, pass_spec) for pass_spec in specs]


def _make_pass(passes: PassFactories, spec: ArgSpec) -> ModulePass:
    if spec.name not in passes:
        raise TawaError(f"-p: error: unknown pass '{spec.name}'")
    cls = passes[spec.name]()
    options = {f.name: f for f in dataclasses.fields(cls) if f.init and f.name != "name"}
    hints = typing.get_type_hints(cls)
    for option, value in spec.parameters.items():
        field = option.replace("-", "_")
        if field not in options:
            known = ", ".join(o.replace("_", "-") for o in options) or "none"
            raise TawaError(f"-p: error: {spec.name}: no option '{option}' (options: {known})")
        try:
            cls.from_pass_spec(ArgSpec(spec.name, {option: value}))
        except ValueError:
            given = ",".join(str(v) for v in value)
            expected = getattr(hints[field], "__name__", str(hints[field]))
            raise TawaError(
                f"-p: error: {spec.name}: option '{option}' expects {expected}, got '{given}'"
            ) from None
    try:
        return cls.from_pass_spec(spec)
    except ValueError as error:
        raise TawaError(f"-p: error: {spec.name}: {first_line(error)}") from None


def verify_module(module: ModuleOp) -> None:
    """Verify op by op, innermost first, so the first failure names the op that broke a rule."""
    for op in module.walk(reverse=True):
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as error:
            raise TawaError(f"{op_location(op)}: error: {first_line(error)}") from error


def first_line(error: Exception) -> str:
    """The gist of a verifier message in one line.

    xDSL's constraint errors end their first line with a colon ("operand 'rhs' at position 1
    does not verify:") and give the reason on the next; such a pair is joined."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"
    return lines[0]
