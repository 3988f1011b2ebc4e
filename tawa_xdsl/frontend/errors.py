"""Compilation errors that point at the kernel source, as Triton's do.

The code generator raises `SemanticError` (a message only) from the helpers that build IR,
and converts it into a `CompilationError` at the AST node being compiled, which knows the
file, the line and the source text:

    gemm.py:42: error: tl.dot: first input shape (128, 64) and second input shape (32, 128)
    are not compatible for matmul (...)
        acc = tl.dot(a, b, acc)
"""

from __future__ import annotations


class SemanticError(Exception):
    """A rule of the language was broken; the code generator adds the place."""


class CompilationError(Exception):
    """`file:line: error: message`, then the offending source line."""

    def __init__(self, filename: str, line: int, message: str, source_line: str = ""):
        self.filename = filename
        self.line = line
        self.message = message
        self.source_line = source_line.rstrip()
        text = f"{filename}:{line}: error: {message}"
        if self.source_line:
            text += f"\n    {self.source_line.strip()}"
        super().__init__(text)
