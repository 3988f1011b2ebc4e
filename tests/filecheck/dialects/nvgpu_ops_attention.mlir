// The nvgpu ops of the attention forward, printed, re-parsed and printed again (custom and
// generic form): masks, the register-A wgmma on an N-major B, row reductions and broadcasts.
// RUN: tawa-opt %s | tawa-opt | filecheck %s
// RUN: tawa-opt %s --print-op-generic | tawa-opt | filecheck %s

// CHECK-LABEL: func.func @softmax_step
func.func @softmax_step(%s: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %m: !nvgpu.fragment<wgmma_row, 64xf32>,
                        %acc: !nvgpu.fragment<wgmma_acc, 64x128xf32>, %v: !nvgpu.smem<2x64x128xbf16, swizzle 128>,
                        %slot: i32, %seq_bound: i32, %diag_bound: i32) {
  %neg_inf = arith.constant 0xFF800000 : f32
  // CHECK:      %masked = nvgpu.fragment_mask %s, %neg_inf where[%seq_bound, %diag_bound] {col_coefficients = array<i32: 1, 1>, row_coefficients = array<i32: 0, -1>} : !nvgpu.fragment<wgmma_acc, 64x64xf32>, f32
  %masked = nvgpu.fragment_mask %s, %neg_inf where [%seq_bound, %diag_bound] {col_coefficients = array<i32: 1, 1>, row_coefficients = array<i32: 0, -1>} : !nvgpu.fragment<wgmma_acc, 64x64xf32>, f32
  // CHECK-NEXT: %part = nvgpu.fragment_row_reduce max %masked : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_row, 64xf32>
  // CHECK-NEXT: %other = nvgpu.shuffle_xor %part, 1 : !nvgpu.fragment<wgmma_row, 64xf32>
  // CHECK-NEXT: %row_max = nvgpu.fragment_binary max %part, %other : !nvgpu.fragment<wgmma_row, 64xf32>
  %part = nvgpu.fragment_row_reduce max %masked : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_row, 64xf32>
  %other = nvgpu.shuffle_xor %part, 1 : !nvgpu.fragment<wgmma_row, 64xf32>
  %row_max = nvgpu.fragment_binary max %part, %other : !nvgpu.fragment<wgmma_row, 64xf32>
  // CHECK-NEXT: %m_b = nvgpu.fragment_broadcast_rows %row_max : !nvgpu.fragment<wgmma_row, 64xf32> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %shifted = nvgpu.fragment_binary sub %masked, %m_b : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %p = nvgpu.fragment_unary exp2 %shifted : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %p16 = nvgpu.fragment_convert %p : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_operand_a, 64x64xbf16>
  %m_b = nvgpu.fragment_broadcast_rows %row_max : !nvgpu.fragment<wgmma_row, 64xf32> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %shifted = nvgpu.fragment_binary sub %masked, %m_b : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %p = nvgpu.fragment_unary exp2 %shifted : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %p16 = nvgpu.fragment_convert %p : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_operand_a, 64x64xbf16>
  // CHECK-NEXT: nvgpu.wgmma_fence
  // CHECK-NEXT: %o = nvgpu.wgmma_mma_async_rs %p16, %v[%slot], %acc transpose_b : !nvgpu.fragment<wgmma_operand_a, 64x64xbf16>, !nvgpu.smem<2x64x128xbf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x128xf32>
  // CHECK-NEXT: nvgpu.wgmma_commit_group
  nvgpu.wgmma_fence
  %o = nvgpu.wgmma_mma_async_rs %p16, %v[%slot], %acc transpose_b : !nvgpu.fragment<wgmma_operand_a, 64x64xbf16>, !nvgpu.smem<2x64x128xbf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x128xf32>
  nvgpu.wgmma_commit_group
  func.return
}

// Stores through a rank-3 descriptor whose leading block dim is 1.
// CHECK-LABEL: func.func @store_rank3
// CHECK: nvgpu.fragment_store_global %o16, %o_desc[%head, %row, %col] : !nvgpu.fragment<wgmma_acc, 64x128xf16>, !tile.desc<1x128x128xf16>
func.func @store_rank3(%o16: !nvgpu.fragment<wgmma_acc, 64x128xf16>, %o_desc: !tile.desc<1x128x128xf16>, %head: i32, %row: i32, %col: i32) {
  nvgpu.fragment_store_global %o16, %o_desc[%head, %row, %col] : !nvgpu.fragment<wgmma_acc, 64x128xf16>, !tile.desc<1x128x128xf16>
  func.return
}
