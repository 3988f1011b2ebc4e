// set-registers: the producer group and every consumer group get their setmaxnreg budget,
// after the cooperative split (the consumer group runs on two warpgroups here).
// RUN: tawa-opt %examples/gemm.mlir -p 'tawa-warp-specialize{consumers=2},set-registers{producer=24 consumer=240}' | filecheck %s
// RUN: tawa-opt %examples/gemm.mlir -p 'tawa-warp-specialize{consumers=2},set-registers{producer=24 consumer=240},lower-aref,lower-to-nvgpu' | filecheck %s --check-prefix=NVGPU
// RUN: not tawa-opt %examples/gemm.mlir -p 'tawa-warp-specialize{consumers=2},set-registers{producer=56 consumer=240}' 2>&1 | filecheck %s --check-prefix=FULL
// RUN: not tawa-opt %examples/gemm.mlir -p 'set-registers' 2>&1 | filecheck %s --check-prefix=TILE
// RUN: tawa-opt %examples/gemm.mlir -p 'tawa-warp-specialize{consumers=2},set-registers' | filecheck %s --check-prefix=KEEP
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=1 rotate=true},set-registers' | filecheck %s --check-prefix=RAISE
// RUN: not tawa-opt %examples/gemm.mlir -p 'tawa-warp-specialize{consumers=2},set-registers{producer=24}' 2>&1 | filecheck %s --check-prefix=HALF

// CHECK:      aref.warp_specialize {
// CHECK-NEXT:   aref.group producer warpgroups(1) registers(24) {
// CHECK:        aref.group consumer warpgroups(2) registers(240) {

// The budgets become the groups' setmaxnreg (the producer gives registers back first).
// NVGPU:      nvgpu.setmaxnreg decrease 24
// NVGPU:      nvgpu.setmaxnreg increase 240

// (56 + 2 * 240) * 128 = 68608 registers do not fit the SM's 65536.
// FULL: error: set-registers: registers (56, 240) over 3 warpgroups need 68608 registers; an SM has 65536

// At the tile level there are no warp groups to give budgets to.
// TILE: error: set-registers: no aref.warp_specialize: run tawa-warp-specialize first

// Budgets unset, chosen: the GEMM's consumer warpgroups carry a 64 x 128 f32 accumulator each
// (64 registers a thread, 96 with the rest by estimate): the defaults stay.
// KEEP:      aref.group producer warpgroups(1) registers(40) {
// KEEP:      aref.group consumer warpgroups(2) registers(232) {

// One consumer warpgroup keeping all 128 rows of the rotated attention (O, P and the next
// scores, 162 registers a thread, 243 by estimate) needs more than 232: the producer drops to
// 24 and the consumer takes the rest, up to setmaxnreg's 256.
// RAISE:      aref.group producer warpgroups(1) registers(24) {
// RAISE:      aref.group consumer warpgroups(1) registers(256) {

// HALF: error: set-registers: give both budgets, producer and consumer, or neither
