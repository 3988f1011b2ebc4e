"""tawa-xdsl: a warp-specializing compiler for Triton-style tile kernels, built on xDSL.

The packages, in the order a kernel flows through them:

* `dialects` -- the IR: `tile` (input level), `aref` (warp-specialized), `nvgpu` (hardware).
* `transforms` -- one module per pass, registered in the `tawa-opt` driver.
* `interp` -- numpy interpreters that run the program at each level (the test oracle).
* `tools` -- the `tawa-opt`, `tawa-run` and `tawa` command-line entry points.
"""

__version__ = "0.1.0"
