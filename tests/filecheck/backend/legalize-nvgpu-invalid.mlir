// legalize-nvgpu refuses smem operands a wgmma descriptor cannot describe, naming the op.
// RUN: not tawa-opt %s -p legalize-nvgpu 2>&1 | filecheck %s

func.func @unswizzled_operand(%a_buf: !nvgpu.smem<1x64x64xf16>, %b_buf: !nvgpu.smem<1x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>) {
  %c0 = arith.constant 0 : i32
  // CHECK: legalize-nvgpu: 'nvgpu.wgmma_mma_async' needs swizzled slots for its smem descriptors, got !nvgpu.smem<1x64x64xf16, swizzle 0>
  %r = nvgpu.wgmma_mma_async %a_buf[%c0], %b_buf[%c0], %acc : !nvgpu.smem<1x64x64xf16>, !nvgpu.smem<1x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}

