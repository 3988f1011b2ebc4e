// emulate-exp2: a share of a loop's exp2s on the FMA units, chosen only where they would keep
// the MUFU unit busier than the loop's dots keep the tensor cores.
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2' | filecheck %s --check-prefix=NONE
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2{share=2}' | filecheck %s
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2{share=3}' | filecheck %s --check-prefix=FORCED
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2{share=0}' | filecheck %s --check-prefix=NONE
// RUN: tawa-opt %examples/gemm.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2' | filecheck %s --check-prefix=NONE
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2{share=2},lower-aref,lower-to-nvgpu' | filecheck %s --check-prefix=NVGPU
// RUN: not tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2{share=9}' 2>&1 | filecheck %s --check-prefix=RANGE

// Given 2 of 8: the scores' exp2 is marked; the row vector's (alpha, one or two values a
// thread) keeps the MUFU unit.
// CHECK:      math.exp2 %{{.*}} {tawa.exp2_emulated = 2 : i32} : tensor<64x64xf32>
// CHECK-NOT:  tawa.exp2_emulated
// CHECK:      math.exp2 %{{.*}} : tensor<64xf32>

// A share given marks every exp2 of a tile.
// FORCED:     math.exp2 %{{.*}} {tawa.exp2_emulated = 3 : i32} : tensor<64x64xf32>

// Chosen at d = 64: each consumer warpgroup's 64 x 64 scores a step, 4096 exp2s (256 MUFU
// clocks) against two dots of 512K flops (256 tensor-core clocks): balanced, not past it
// (emulating 2 of 8 there measured 7-11% slower on the H200), so nothing is marked; the GEMM
// has no exp2.
// NONE-NOT:   tawa.exp2_emulated

// lower-to-nvgpu carries the share onto the fragment op the printer and interpreter read.
// NVGPU:      nvgpu.fragment_unary exp2 %{{.*}} emulated 2 : !nvgpu.fragment<wgmma_acc, 64x64xf32>

// RANGE: error: emulate-exp2: share must be 0..8, got 9
