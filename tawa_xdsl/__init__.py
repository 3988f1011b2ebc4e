"""tawa-xdsl: a warp-specializing compiler for Triton-style tile kernels, built on xDSL.

The packages, in the order a kernel flows through them:

* `language`, `jit`, `autotune`, `frontend` -- Triton-style Python kernels (`import
  tawa_xdsl.language as tl`, `@tawa_xdsl.jit`) compiled from their AST to tile IR; launch
  keywords become `compiler.CompileOptions`.
* `dialects` -- the IR: `tile` (input level), `aref` (warp-specialized), `nvgpu` (hardware).
* `transforms` -- one module per pass, registered in the `tawa-opt` driver; passes import
  dialects and each other, never the backend or the compiler.
* `verify` -- the Z3 proof of every ring's barrier protocol at the mbarrier level.
* `backend` -- the nvgpu -> PTX printer and ptxas.
* `compiler` -- the driver: `CompileOptions` (the only source of options) and the one pass
  pipeline tile -> nvgpu -> PTX; `compile_to_ptx` returns a `CompiledKernel`.
* `runtime` -- the GPU through cuda-python: loads the PTX, builds parameters and tensor maps,
  launches (`CompiledKernel.launch` delegates to it); it imports nothing of the compiler.
* `interp` -- numpy interpreters that run the program at each level (the test oracle).
* `fuzz`, `tools` -- the fuzzer and the `tawa`, `tawa-opt`, `tawa-run`, `tawa-verify` entry
  points, at the top: they use the compiler, never the other way round.

`jit`, `TensorDescriptor` and `language` are imported on first use, so `import tawa_xdsl`
stays cheap and never touches a GPU.
"""

from typing import Any

from tawa_xdsl.version import __version__

__all__ = [
    "Config",
    "TensorDescriptor",
    "__version__",
    "autotune",
    "cdiv",
    "jit",
    "language",
    "next_power_of_2",
]


def __getattr__(name: str) -> Any:
    if name == "jit":
        # The module is callable: `@tawa_xdsl.jit` and `@tawa_xdsl.jit(interpret=True)`.
        import tawa_xdsl.jit as jit_module

        return jit_module
    if name == "autotune":
        # Callable too: `@tawa_xdsl.autotune(configs=[...], key=[...])`.
        import tawa_xdsl.autotune as autotune_module

        return autotune_module
    if name == "Config":
        from tawa_xdsl.autotune import Config

        return Config
    if name == "TensorDescriptor":
        from tawa_xdsl.descriptor import TensorDescriptor

        return TensorDescriptor
    if name == "language":
        import tawa_xdsl.language as language

        return language
    raise AttributeError(f"module 'tawa_xdsl' has no attribute '{name}'")


def cdiv(x: int, y: int) -> int:
    """Ceiling division, as `triton.cdiv`: the number of `y`-blocks covering `x`."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= `n` (1 for n <= 1), as `triton.next_power_of_2`."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()
