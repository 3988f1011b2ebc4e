"""The frontend: Triton-style Python kernels (`tawa_xdsl.language`) to tile IR.

* `codegen` -- walks the kernel's AST and emits IR (statements, expressions, calls);
* `semantic` -- what each operation means: type promotion, broadcasting, the tile ops;
* `builtins` -- the `tl.*` functions and tile/descriptor methods, bound to `semantic`;
* `values` -- the typed values (`Scalar`, `Tile`, `Descriptor`) and the promotion rules;
* `signature` -- kernel argument types (`i32`, `desc<128x64xf16>`) and how launch
  arguments map to them;
* `builder` -- the insertion point and source location of new ops;
* `errors` -- `CompilationError` (`file:line: error: ...` plus the source line).
"""

from tawa_xdsl.frontend.codegen import generate_kernel
from tawa_xdsl.frontend.errors import CompilationError

__all__ = ["CompilationError", "generate_kernel"]
