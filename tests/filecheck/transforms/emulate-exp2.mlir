// emulate-exp2: the key loop of attention at d = 64 keeps the MUFU unit as busy as the tensor
// cores (one exp2 per score against 4 * 64 flops), so a share of its exp2s moves to the FMA
// units; a loop without exp2s is left alone.
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2' | filecheck %s
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2{share=3}' | filecheck %s --check-prefix=FORCED
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2{share=0}' | filecheck %s --check-prefix=NONE
// RUN: tawa-opt %examples/gemm.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2' | filecheck %s --check-prefix=NONE
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2,lower-aref,lower-to-nvgpu' | filecheck %s --check-prefix=NVGPU
// RUN: not tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{consumers=2},emulate-exp2{share=9}' 2>&1 | filecheck %s --check-prefix=RANGE

// Chosen: each consumer warpgroup's 64 x 64 scores a step, 4096 exp2s (256 MUFU clocks)
// against two dots of 512K flops (256 tensor-core clocks); a quarter of the values on the FMA
// units brings the MUFU unit to 3/4.
// The row vector's exp2 (alpha, one or two values a thread) keeps the MUFU unit.
// CHECK:      math.exp2 %{{.*}} {tawa.exp2_emulated = 2 : i32} : tensor<64x64xf32>
// CHECK-NOT:  tawa.exp2_emulated
// CHECK:      math.exp2 %{{.*}} : tensor<64xf32>

// A share given marks every exp2 of a tile, chosen or not.
// FORCED:     math.exp2 %{{.*}} {tawa.exp2_emulated = 3 : i32} : tensor<64x64xf32>

// NONE-NOT:   tawa.exp2_emulated

// lower-to-nvgpu carries the share onto the fragment op the printer and interpreter read.
// NVGPU:      nvgpu.fragment_unary exp2 %{{.*}} emulated 2 : !nvgpu.fragment<wgmma_acc, 64x64xf32>

// RANGE: error: emulate-exp2: share must be 0..8, got 9
