"""The code generator: a kernel's Python AST, walked once, emitting tile IR.

As in Triton, the kernel is never run by Python. `generate_kernel` parses the function's
source (`inspect.getsource` + `ast`) and `CodeGenerator` visits it statement by statement,
keeping a scope that maps each Python name to a compile-time Python object or a run-time
`Scalar`/`Tile`/`Descriptor`:

* expressions on compile-time values are evaluated by Python (so `BLOCK_M * 2`, `if CAUSAL:`
  and `float("-inf")` cost nothing at run time); expressions on run-time values go through
  `semantic` and become ops;
* `for ... in range(...)` / `tl.range(...)` becomes `scf.for` with i32 bounds; its
  loop-carried values are the names that exist before the loop, are reassigned in the body,
  and are read in the body or after the loop (`loop_carried_names`);
* `if` on a compile-time value keeps one branch; on a run-time scalar it becomes `scf.if`
  whose results are the names assigned in a branch that exist afterwards and are read later;
* calls to `@jit` helpers are inlined, with their own scope and source position.

Any construct it does not know raises `CompilationError` at the offending line.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, IntegerAttr, ModuleOp, StringAttr, i32
from xdsl.ir import Attribute, Block, Region
from xdsl.utils.exceptions import VerifyException

import tawa_xdsl.language as tl
from tawa_xdsl.frontend import builtins as tl_builtins
from tawa_xdsl.frontend import semantic
from tawa_xdsl.frontend.builder import IRBuilder
from tawa_xdsl.frontend.errors import CompilationError, SemanticError
from tawa_xdsl.frontend.signature import ArgType
from tawa_xdsl.frontend.values import RUNTIME_VALUES, Scalar, Tile, ir_type, is_number, wrap

MAX_INLINE_DEPTH = 32

# Python operators on compile-time values, and their names for run-time values.
_BINARY = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
    ast.BitAnd: ("&", operator.and_),
    ast.BitOr: ("|", operator.or_),
    ast.BitXor: ("^", operator.xor),
    ast.LShift: ("<<", operator.lshift),
    ast.RShift: (">>", operator.rshift),
    ast.Pow: ("**", operator.pow),
    ast.MatMult: ("@", operator.matmul),
}
_COMPARE = {
    ast.Eq: ("==", operator.eq),
    ast.NotEq: ("!=", operator.ne),
    ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le),
    ast.Gt: (">", operator.gt),
    ast.GtE: (">=", operator.ge),
    ast.Is: ("is", operator.is_),
    ast.IsNot: ("is not", operator.is_not),
    ast.In: ("in", lambda a, b: a in b),
    ast.NotIn: ("not in", lambda a, b: a not in b),
}
# Python builtins a kernel may call on compile-time values.
_PYTHON_BUILTINS = {
    name: getattr(builtins, name)
    for name in (
        "range",
        "min",
        "max",
        "len",
        "abs",
        "int",
        "float",
        "bool",
        "tuple",
        "list",
        "isinstance",
        "print",
        "None",
        "True",
        "False",
    )
    if hasattr(builtins, name)
}


# ---------------------------------------------------------------------------- the source


@dataclass(frozen=True)
class FunctionSource:
    """A function's AST and where its lines are in its file."""

    function: Callable[..., Any]
    tree: ast.FunctionDef
    filename: str
    first_line: int  # the file line of the AST's line 1
    lines: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.function.__name__

    def file_line(self, node: ast.AST) -> int:
        return getattr(node, "lineno", 1) + self.first_line - 1

    def source_line(self, node: ast.AST) -> str:
        index = getattr(node, "lineno", 1) - 1
        return self.lines[index] if 0 <= index < len(self.lines) else ""


@lru_cache(maxsize=256)
def function_source(function: Callable[..., Any]) -> FunctionSource:
    try:
        lines, first_line = inspect.getsourcelines(function)
        filename = inspect.getsourcefile(function) or "<unknown>"
    except (OSError, TypeError) as error:
        raise SemanticError(f"cannot read the source of {function.__name__}: {error}") from None
    module = ast.parse(textwrap.dedent("".join(lines)))
    tree = module.body[0]
    if not isinstance(tree, ast.FunctionDef):
        raise SemanticError(f"{function.__name__} is not a plain function definition")
    return FunctionSource(function, tree, filename, max(first_line, 1), tuple(lines))


def _position(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))


def _end_position(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)


def _names(nodes: Sequence[ast.AST], context: type[ast.expr_context]) -> list[str]:
    """Names stored (or loaded) anywhere in `nodes`, in source order, without repeats."""
    found = [
        (_position(n), n.id)
        for root in nodes
        for n in ast.walk(root)
        if isinstance(n, ast.Name) and isinstance(n.ctx, context)
    ]
    return list(dict.fromkeys(name for _, name in sorted(found)))


def _closure_of(function: Callable[..., Any]) -> dict[str, Any]:
    """The variables a nested function captured from its enclosing scopes."""
    cells = getattr(function, "__closure__", None) or ()
    names = function.__code__.co_freevars
    values = {}
    for name, cell in zip(names, cells, strict=True):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # an empty cell: assigned after the function was defined
            continue
    return values


def jit_function_of(value: object) -> Callable[..., Any] | None:
    """The Python function behind a `@jit` object, or None."""
    return getattr(value, "__tawa_jit_function__", None)


def is_constexpr_annotation(annotation: object) -> bool:
    if annotation is tl.constexpr:
        return True
    return isinstance(annotation, str) and annotation.split(".")[-1] == "constexpr"


@dataclass(frozen=True)
class Slot:
    """The type a loop-carried variable or an `scf.if` result must keep."""

    dtype: tl.dtype
    type: Attribute
    shape: tuple[int, ...] | None  # None for a scalar
    text: str

    @staticmethod
    def of(value: Scalar | Tile) -> Slot:
        shape = value.shape if isinstance(value, Tile) else None
        return Slot(value.dtype, value.ssa.type, shape, value.describe())

    @staticmethod
    def of_dtype(dtype: tl.dtype) -> Slot:
        return Slot(dtype, ir_type(dtype), None, f"scalar {dtype}")


# ------------------------------------------------------------------------ the code generator


class CodeGenerator(ast.NodeVisitor):
    """Emits the IR of one function body (a kernel, or an inlined `@jit` helper)."""

    def __init__(
        self, source: FunctionSource, builder: IRBuilder, scope: dict[str, Any], depth: int = 0
    ):
        self.source = source
        self.b = builder
        self.scope = scope
        self.depth = depth
        self.returned = False
        self.return_value: Any = None
        self.return_node: ast.Return | None = None
        # Loops and run-time ifs being compiled, outermost first (for liveness and `return`).
        self.enclosing: list[ast.For | ast.If] = []

    # ------------------------------------------------------------------------- plumbing

    def error(self, node: ast.AST, message: str) -> CompilationError:
        return CompilationError(
            self.source.filename,
            self.source.file_line(node),
            message,
            self.source.source_line(node),
        )

    def visit(self, node: ast.AST) -> Any:
        saved = self.b.location
        if hasattr(node, "lineno"):
            column = getattr(node, "col_offset", 0) + 1
            self.b.set_location(self.source.filename, self.source.file_line(node), column)
        try:
            return super().visit(node)
        except SemanticError as error:
            raise self.error(node, str(error)) from None
        finally:
            self.b.location = saved

    def generic_visit(self, node: ast.AST) -> Any:
        raise self.error(node, f"unsupported Python construct: {type(node).__name__}")

    def visit_body(self, statements: Sequence[ast.stmt]) -> None:
        for statement in statements:
            if self.returned:
                return
            self.visit(statement)

    def compile_time(self, node: ast.AST, compute: Callable[[], Any]) -> Any:
        """Run Python on compile-time values; its exceptions become errors at `node`."""
        try:
            return compute()
        except (CompilationError, SemanticError):
            raise
        except Exception as error:  # the user's compile-time Python failed
            raise self.error(node, f"{type(error).__name__}: {error}") from None

    # ------------------------------------------------------------------------ names

    def lookup(self, node: ast.Name) -> Any:
        name = node.id
        if name in self.scope:
            return self.scope[name]
        closure = _closure_of(self.source.function)
        if name in closure:
            value = closure[name]
        elif name in self.source.function.__globals__:
            value = self.source.function.__globals__[name]
        elif name in _PYTHON_BUILTINS:
            value = _PYTHON_BUILTINS[name]
        else:
            raise SemanticError(f"name '{name}' is not defined")
        return value.value if isinstance(value, tl.constexpr) else value

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            value = value.value if isinstance(value, tl.constexpr) else value
            if isinstance(value, RUNTIME_VALUES) and value.ssa.name_hint is None:
                value.ssa.name_hint = target.id
            self.scope[target.id] = value
            return
        if isinstance(target, ast.Tuple | ast.List):
            if not isinstance(value, tuple | list) or len(value) != len(target.elts):
                raise self.error(
                    target, f"cannot unpack {type(value).__name__} into {len(target.elts)} names"
                )
            for element, item in zip(target.elts, value, strict=True):
                self.assign(element, item)
            return
        raise self.error(
            target, f"assignment to {type(target).__name__} is not supported (tiles are values)"
        )

    # ------------------------------------------------------------------------ statements

    def visit_Expr(self, node: ast.Expr) -> None:
        self.visit(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        for target in node.targets:
            self.assign(target, value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(node.target, self.visit(node.value))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "augmented assignment is supported on names only")
        current = self.lookup(node.target)
        self.assign(node.target, self.binary(node, node.op, current, self.visit(node.value)))

    def visit_Return(self, node: ast.Return) -> None:
        if self.enclosing:
            raise self.error(node, "return inside a loop or a run-time if is not supported")
        self.return_value = self.visit(node.value) if node.value is not None else None
        self.return_node = node
        self.returned = True

    def visit_Assert(self, node: ast.Assert) -> None:
        condition = self.visit(node.test)
        if isinstance(condition, RUNTIME_VALUES):
            raise self.error(
                node,
                "assert on run-time values is not supported; use tl.static_assert on constexprs",
            )
        if not condition:
            message = self.visit(node.msg) if node.msg is not None else ""
            raise self.error(node, f"assertion failed: {message}".rstrip(": "))

    def visit_If(self, node: ast.If) -> None:
        condition = self.visit(node.test)
        if isinstance(condition, Tile):
            raise self.error(node.test, "if condition must be a scalar, got a tile; use tl.where")
        if isinstance(condition, Scalar):
            self.emit_if(node, condition)
        elif condition:
            self.visit_body(node.body)
        else:
            self.visit_body(node.orelse)

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error(node, "for ... else is not supported")
        call = node.iter
        kind = self.loop_kind(call)
        if not isinstance(call, ast.Call) or kind is None:
            raise self.error(
                node.iter,
                "for loops must iterate over range(...), tl.range(...) or tl.static_range(...)",
            )
        args = [self.visit(a) for a in call.args]
        kwargs = {k.arg: self.visit(k.value) for k in call.keywords if k.arg is not None}
        declaration = tl.static_range if kind == "static_range" else tl.range
        bound = tl_builtins.bind(
            "range",
            inspect.signature(declaration.__wrapped__),
            args,
            kwargs,  # type: ignore[attr-defined]
        )
        start, stop, step = bound["arg1"], bound["arg2"], bound["step"]
        if stop is None:
            start, stop = 0, start
        step = 1 if step is None else step
        if isinstance(step, int) and step <= 0:
            raise self.error(
                node.iter, f"loop step must be a positive constant or a scalar, got {step}"
            )
        if kind == "static_range":
            self.unroll(node, start, stop, step)
        else:
            self.emit_for(node, start, stop, step, bound.get("num_stages"))

    def loop_kind(self, iterable: ast.expr) -> str | None:
        if not isinstance(iterable, ast.Call):
            return None
        function = self.visit(iterable.func)
        if function is builtins.range or tl.builtin_name(function) == "range":
            return "range"
        if tl.builtin_name(function) == "static_range":
            return "static_range"
        return None

    def unroll(self, node: ast.For, start: Any, stop: Any, step: Any) -> None:
        if not all(isinstance(v, int) for v in (start, stop, step)):
            raise self.error(node.iter, "tl.static_range bounds must be compile-time constants")
        for value in range(start, stop, step):
            self.assign(node.target, value)
            self.enclosing.append(node)
            try:
                self.visit_body(node.body)
            finally:
                self.enclosing.pop()

    # ------------------------------------------------------------------ loops and branches

    def live_after(self, node: ast.stmt) -> set[str]:
        """Names that may be read after `node` runs: later in the function, or anywhere in an
        enclosing loop (whose next iteration comes after)."""
        end = _end_position(node)
        later = {
            n.id
            for n in ast.walk(self.source.tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and _position(n) > end
        }
        loops = [s for s in self.enclosing if isinstance(s, ast.For)]
        if loops:
            later |= set(_names([loops[0]], ast.Load))
        return later

    def loop_carried_names(self, node: ast.For) -> list[str]:
        target = node.target.id if isinstance(node.target, ast.Name) else None
        live = set(_names(node.body, ast.Load)) | self.live_after(node)
        return [
            name
            for name in _names(node.body, ast.Store)
            if name in self.scope and name != target and name in live
        ]

    def carried_init(self, node: ast.AST, name: str) -> Scalar | Tile:
        value = self.scope[name]
        if is_number(value):
            return semantic.materialize(self.b, value)
        if not isinstance(value, Scalar | Tile):
            raise self.error(
                node,
                f"variable '{name}' is reassigned in the loop but holds {value!r}; only scalars "
                "and tiles can be carried across iterations",
            )
        return value

    def emit_for(self, node: ast.For, start: Any, stop: Any, step: Any, num_stages: Any) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a single name")
        bounds = [
            semantic.int32_scalar(self.b, v, f"loop {what}")
            for v, what in ((start, "start"), (stop, "end"), (step, "step"))
        ]
        carried = self.loop_carried_names(node)
        inits = [self.carried_init(node, name) for name in carried]
        body = Block(arg_types=[i32, *(v.ssa.type for v in inits)])
        body.args[0].name_hint = node.target.id
        outer_scope = dict(self.scope)
        self.scope[node.target.id] = Scalar(body.args[0], tl.int32)
        for name, arg in zip(carried, body.args[1:], strict=True):
            arg.name_hint = name
            self.scope[name] = wrap(arg)
        self.enclosing.append(node)
        with self.b.at_end_of(body):
            self.visit_body(node.body)
            yields = [
                self.carried_value(node, name, Slot.of(init), "loop")
                for name, init in zip(carried, inits, strict=True)
            ]
            self.b.emit(scf.YieldOp(*(v.ssa for v in yields)))
        self.enclosing.pop()
        loop = self.b.emit(
            scf.ForOp(*(v.ssa for v in bounds), [v.ssa for v in inits], Region(body))
        )
        if isinstance(num_stages, int):
            loop.attributes["tl.num_stages"] = IntegerAttr(num_stages, i32)
        self.scope = outer_scope
        for name, result in zip(carried, loop.results, strict=True):
            result.name_hint = name
            self.scope[name] = wrap(result)

    def carried_value(self, node: ast.AST, name: str, like: Slot, where: str) -> Scalar | Tile:
        """The value of `name` at the end of a body, in the type `like`."""
        value = self.scope.get(name)
        if is_number(value) and like.shape is None:
            return semantic.cast(self.b, value, like.dtype)
        if is_number(value) and like.shape is not None:
            return semantic.full(self.b, like.shape, value, like.dtype)
        if isinstance(value, Scalar | Tile) and value.ssa.type == like.type:
            return value
        got = value.describe() if isinstance(value, RUNTIME_VALUES) else repr(value)
        raise self.error(
            node,
            f"{where}-carried variable '{name}' is {like.text} before the {where} but "
            f"{got} at the end of its body; keep its type consistent",
        )

    def emit_if(self, node: ast.If, condition: Scalar) -> None:
        condition = semantic.cast(self.b, condition, tl.int1)  # type: ignore[assignment]
        outer_scope = dict(self.scope)
        branches: list[tuple[Block, dict[str, Any]]] = []
        self.enclosing.append(node)
        for statements in (node.body, node.orelse):
            block = Block()
            self.scope = dict(outer_scope)
            with self.b.at_end_of(block):
                self.visit_body(statements)
            branches.append((block, self.scope))
        self.enclosing.pop()
        results = self.if_results(node, outer_scope, branches[0][1], branches[1][1])
        result_values: list[list[Scalar | Tile]] = []
        for block, scope in branches:
            self.scope = scope
            with self.b.at_end_of(block):
                values = [self.carried_value(node, name, like, "if") for name, like in results]
                self.b.emit(scf.YieldOp(*(v.ssa for v in values)))
            result_values.append(values)
        types = [like.type for _, like in results]
        op = self.b.emit(
            scf.IfOp(condition.ssa, types, Region(branches[0][0]), Region(branches[1][0]))
        )
        self.scope = outer_scope
        for (name, _), result in zip(results, op.results, strict=True):
            result.name_hint = name
            self.scope[name] = wrap(result)

    def if_results(
        self, node: ast.If, outer: dict[str, Any], then: dict[str, Any], orelse: dict[str, Any]
    ) -> list[tuple[str, Slot]]:
        """(name, result type) for each name the `scf.if` must produce: assigned in a branch,
        defined on both paths, read later, and not the same value on both paths."""
        live = self.live_after(node)
        results = []
        for name in _names([*node.body, *node.orelse], ast.Store):
            if name not in live or name not in then or name not in orelse:
                continue
            a, b = then[name], orelse[name]
            if a is b or (is_number(a) and is_number(b) and a == b and type(a) is type(b)):
                continue  # the same value on both paths: no result needed
            if isinstance(a, Scalar | Tile):
                results.append((name, Slot.of(a)))
            elif isinstance(b, Scalar | Tile):
                results.append((name, Slot.of(b)))
            elif is_number(a) and is_number(b):
                results.append((name, Slot.of_dtype(semantic.common_dtype(a, b))))
            else:
                raise self.error(
                    node, f"variable '{name}' differs between the branches of a run-time if"
                )
        return results

    # ----------------------------------------------------------------------- expressions

    def visit_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def visit_Name(self, node: ast.Name) -> Any:
        return self.lookup(node)

    def visit_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.visit(e) for e in node.elts)

    def visit_List(self, node: ast.List) -> list[Any]:
        return [self.visit(e) for e in node.elts]

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        return self.binary(node, node.op, self.visit(node.left), self.visit(node.right))

    def binary(self, node: ast.AST, op: ast.operator, lhs: Any, rhs: Any) -> Any:
        symbol, python = _BINARY[type(op)]
        if not isinstance(lhs, RUNTIME_VALUES) and not isinstance(rhs, RUNTIME_VALUES):
            return self.compile_time(node, lambda: python(lhs, rhs))
        if symbol in ("**", "@"):
            raise SemanticError(f"operator '{symbol}' is not supported on tiles (use tl.dot for @)")
        return semantic.binary(self.b, symbol, lhs, rhs)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = self.visit(node.operand)
        if not isinstance(value, RUNTIME_VALUES):
            python = {
                ast.USub: operator.neg,
                ast.UAdd: operator.pos,
                ast.Not: operator.not_,
                ast.Invert: operator.invert,
            }[type(node.op)]
            return self.compile_time(node, lambda: python(value))
        match node.op:
            case ast.USub():
                return semantic.negate(self.b, value)
            case ast.UAdd():
                return value
            case ast.Not():
                return semantic.logical_not(self.b, value)
            case _:
                return semantic.invert(self.b, value)

    def visit_Compare(self, node: ast.Compare) -> Any:
        lhs = self.visit(node.left)
        rhs_values = [self.visit(c) for c in node.comparators]
        operands = [lhs, *rhs_values]
        if not any(isinstance(v, RUNTIME_VALUES) for v in operands):
            return self.compile_time(node, lambda: self.python_compare(node.ops, operands))
        if len(node.ops) != 1:
            raise SemanticError("chained comparisons of run-time values are not supported")
        symbol, _ = _COMPARE[type(node.ops[0])]
        if symbol in ("is", "is not") and None in operands:
            return symbol == "is not"  # a run-time value is never None (Triton's `x is None`)
        if symbol in ("is", "is not", "in", "not in"):
            raise SemanticError(f"'{symbol}' is not supported on run-time values")
        return semantic.compare(self.b, symbol, lhs, rhs_values[0])

    @staticmethod
    def python_compare(ops: Sequence[ast.cmpop], operands: Sequence[Any]) -> bool:
        return all(
            _COMPARE[type(op)][1](a, b)
            for op, a, b in zip(ops, operands, operands[1:], strict=False)
        )

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for value_node in node.values[1:]:
            if not isinstance(result, RUNTIME_VALUES):
                if bool(result) != is_and:  # short-circuit on a compile-time value
                    return result
                result = self.visit(value_node)
                continue
            rhs = self.visit(value_node)
            if isinstance(result, Tile) or isinstance(rhs, Tile):
                raise SemanticError("'and'/'or' on tiles is ambiguous; use & and | instead")
            operands = [semantic.cast(self.b, v, tl.int1) for v in (result, rhs)]
            result = semantic.binary(self.b, "&" if is_and else "|", *operands)
        return result

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        condition = self.visit(node.test)
        if not isinstance(condition, RUNTIME_VALUES):
            return self.visit(node.body) if condition else self.visit(node.orelse)
        return semantic.where(self.b, condition, self.visit(node.body), self.visit(node.orelse))

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        value = self.visit(node.value)
        if isinstance(value, Tile):
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return semantic.index(self.b, value, [self.tile_index(item) for item in items])
        if isinstance(value, RUNTIME_VALUES):
            raise SemanticError(f"{value.describe()} cannot be indexed")
        key = self.visit(node.slice)
        return self.compile_time(node, lambda: value[key])

    def tile_index(self, item: ast.expr) -> None | slice:
        if isinstance(item, ast.Constant) and item.value is None:
            return None
        if isinstance(item, ast.Slice) and item.lower is item.upper is item.step is None:
            return slice(None)
        raise SemanticError("tiles can only be indexed with ':' and None (as in x[:, None])")

    def visit_Slice(self, node: ast.Slice) -> slice:
        parts = (node.lower, node.upper, node.step)
        return slice(*(self.visit(p) if p is not None else None for p in parts))

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        value = self.visit(node.value)
        if isinstance(value, RUNTIME_VALUES):
            return tl_builtins.get_attribute(self.b, value, node.attr)
        if value is tl or value is tl.math:
            if not hasattr(value, node.attr) or node.attr.startswith("_"):
                prefix = "tl" if value is tl else "tl.math"
                raise SemanticError(f"unknown function {prefix}.{node.attr}")
        result = self.compile_time(node, lambda: getattr(value, node.attr))
        return result.value if isinstance(result, tl.constexpr) else result

    def visit_JoinedStr(self, node: ast.JoinedStr) -> str:
        return self.compile_time(node, lambda: "".join(str(self.visit(v)) for v in node.values))

    def visit_FormattedValue(self, node: ast.FormattedValue) -> Any:
        return self.visit(node.value)

    # ----------------------------------------------------------------------------- calls

    def visit_Call(self, node: ast.Call) -> Any:
        function = self.visit(node.func)
        args: list[Any] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                args.extend(self.visit(arg.value))
            else:
                args.append(self.visit(arg))
        if any(k.arg is None for k in node.keywords):
            raise SemanticError("**kwargs in calls is not supported")
        kwargs = {k.arg: self.visit(k.value) for k in node.keywords if k.arg is not None}
        return self.call(node, function, args, kwargs)

    def call(self, node: ast.Call, function: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if isinstance(function, tl_builtins.BoundMethod):
            return tl_builtins.call_method(self.b, function, args, kwargs)
        name = tl.builtin_name(function)
        if name is not None:
            return tl_builtins.call_builtin(self.b, name, args, kwargs)
        helper = jit_function_of(function)
        if helper is not None:
            return self.inline(node, helper, args, kwargs)
        runtime = [v for v in [*args, *kwargs.values()] if isinstance(v, RUNTIME_VALUES)]
        if function in (builtins.min, builtins.max) and runtime and not kwargs:
            return self.python_min_max(function, args)
        if function is builtins.range:
            raise SemanticError("range(...) can only be the iterable of a for loop")
        if runtime:
            raise SemanticError(
                f"cannot call {getattr(function, '__name__', function)!r} on run-time values: "
                "only tl functions and @jit functions run in a kernel"
            )
        if function is builtins.print:
            raise SemanticError("print is not supported in kernels")
        return self.compile_time(node, lambda: function(*args, **kwargs))

    def python_min_max(self, function: Any, args: list[Any]) -> Any:
        kind = "min" if function is builtins.min else "max"
        result = args[0]
        for arg in args[1:]:
            result = semantic.minimum_or_maximum(self.b, kind, result, arg)
        return result

    def inline(
        self, node: ast.Call, helper: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        """Compile a `@jit` helper's body in place, with its parameters bound to the arguments."""
        if self.depth >= MAX_INLINE_DEPTH:
            raise SemanticError(f"@jit calls nest deeper than {MAX_INLINE_DEPTH} (recursion?)")
        signature = inspect.signature(helper)
        arguments = tl_builtins.bind(helper.__name__, signature, args, kwargs)
        for name, value in arguments.items():
            if is_constexpr_annotation(signature.parameters[name].annotation) and isinstance(
                value, RUNTIME_VALUES
            ):
                raise SemanticError(
                    f"argument '{name}' of {helper.__name__} is tl.constexpr but got a run-time "
                    f"{value.describe()}"
                )
        source = function_source(helper)
        generator = CodeGenerator(source, self.b, dict(arguments), self.depth + 1)
        generator.visit_body(source.tree.body)
        return generator.return_value


# ----------------------------------------------------------------------------- the kernel


def generate_kernel(
    function: Callable[..., Any],
    signature: Sequence[tuple[str, ArgType]],
    constexprs: dict[str, Any],
) -> ModuleOp:
    """The tile IR of `function` specialized to run-time parameter types and constexpr values:
    a module holding one `func.func` named after the function, whose parameters are the
    run-time ones in order."""
    try:
        source = function_source(function)
    except SemanticError as error:
        raise CompilationError("<unknown>", 0, str(error)) from None
    arg_types = [arg_type.ir_type() for _, arg_type in signature]
    body = Block(arg_types=arg_types)
    scope: dict[str, Any] = dict(constexprs)
    for (name, _), arg in zip(signature, body.args, strict=True):
        arg.name_hint = name
        scope[name] = wrap(arg)
    builder = IRBuilder(body)
    generator = CodeGenerator(source, builder, scope)
    generator.visit_body(source.tree.body)
    if generator.return_value is not None and generator.return_node is not None:
        raise generator.error(generator.return_node, "a kernel cannot return a value")
    builder.location = _location(source, source.tree)
    builder.emit(func.ReturnOp())
    kernel = func.FuncOp(source.name, (arg_types, []), Region(body))
    kernel.location = _location(source, source.tree)
    module = ModuleOp([kernel])
    _verify(module, source)
    return module


def _location(source: FunctionSource, node: ast.AST) -> FileLineColLoc:
    return FileLineColLoc(
        StringAttr(source.filename),
        IntAttr(source.file_line(node)),
        IntAttr(getattr(node, "col_offset", 0) + 1),
    )


def _verify(module: ModuleOp, source: FunctionSource) -> None:
    """Verify op by op; a failure is reported at the Python line the op came from."""
    for op in module.walk(reverse=True):
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as error:
            location = op.location
            line = location.line.data if isinstance(location, FileLineColLoc) else 0
            text = ""
            if isinstance(location, FileLineColLoc):
                import linecache

                text = linecache.getline(location.filename.data, line)
            message = str(error).strip().splitlines()[0]
            raise CompilationError(
                location.filename.data if isinstance(location, FileLineColLoc) else source.filename,
                line,
                message,
                text,
            ) from None
