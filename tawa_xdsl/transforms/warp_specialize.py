"""`tawa-warp-specialize`: the whole tile -> aref pipeline as one pass.

Python API (stable; the aref-interpreter tests call it):

    from tawa_xdsl.transforms.warp_specialize import warp_specialize
    ws_module = warp_specialize(module, stages=3, mma_depth=2, consumers=2, persistent=False)

`warp_specialize` clones `module` (the input is left untouched), runs, in order,
`persistent` (only when persistent=True), `partition`, `insert-aref{depth=stages}`,
`distribute` and `pipeline{mma-depth=.. consumers=.. attention=..}`, verifies the result and
returns it. The same as a pass: `tawa-opt k.mlir -p 'tawa-warp-specialize{stages=3
mma-depth=2 consumers=2 persistent=true}'`, or `WarpSpecializePass(...).apply(ctx, module)`.

Launching the result: the kernel keeps its signature and grid, except with persistent=True,
where three trailing i32 arguments are appended, the logical grid (g0, g1, g2) the
non-persistent kernel would have been launched with, and the kernel is launched with
grid = (number of SMs, 1, 1) (any positive count is correct). `persistent_launch(grid, sms)`
returns (launch_grid, extra_args).
"""
