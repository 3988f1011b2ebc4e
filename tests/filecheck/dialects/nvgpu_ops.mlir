// Every nvgpu type and op, printed, re-parsed and printed again (custom and generic form).
// RUN: tawa-opt %s | tawa-opt | filecheck %s
// RUN: tawa-opt %s --print-op-generic | tawa-opt | filecheck %s

// CHECK-LABEL: func.func @producer
// CHECK-SAME:    (%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<64x128xf16>, %i: i32, %k: i32)
func.func @producer(%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<64x128xf16>, %i: i32, %k: i32) {
  %slot = arith.constant 1 : i32
  %parity = arith.constant 0 : i32
  // CHECK:      %full = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<3>
  // CHECK-NEXT: %empty = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<3>
  // CHECK-NEXT: nvgpu.mbarrier_init %full, count 1 : !nvgpu.mbarrier<3>
  // CHECK-NEXT: nvgpu.mbarrier_init %empty, count 2 : !nvgpu.mbarrier<3>
  // CHECK-NEXT: nvgpu.fence_mbarrier_init
  // CHECK-NEXT: nvgpu.cta_barrier
  %full = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<3>
  %empty = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<3>
  nvgpu.mbarrier_init %full, count 1 : !nvgpu.mbarrier<3>
  nvgpu.mbarrier_init %empty, count 2 : !nvgpu.mbarrier<3>
  nvgpu.fence_mbarrier_init
  nvgpu.cta_barrier
  // CHECK-NEXT: %a_smem = nvgpu.smem_alloc : !nvgpu.smem<3x128x64xf16, swizzle 128>
  // CHECK-NEXT: %b_smem = nvgpu.smem_alloc : !nvgpu.smem<3x64x128xf16, swizzle 128>
  // CHECK-NEXT: %c_smem = nvgpu.smem_alloc : !nvgpu.smem<1x128x128xf32, swizzle 0>
  %a_smem = nvgpu.smem_alloc : !nvgpu.smem<3x128x64xf16, swizzle 128>
  %b_smem = nvgpu.smem_alloc : !nvgpu.smem<3x64x128xf16, swizzle 128>
  %c_smem = nvgpu.smem_alloc : !nvgpu.smem<1x128x128xf32>
  // CHECK-NEXT: nvgpu.setmaxnreg decrease 40
  // CHECK-NEXT: %e = nvgpu.elect_sync : i1
  // CHECK-NEXT: nvgpu.mbarrier_wait %empty[%slot], %parity : !nvgpu.mbarrier<3>
  // CHECK-NEXT: nvgpu.mbarrier_arrive_expect_tx %full[%slot], bytes 32768 : !nvgpu.mbarrier<3>
  // CHECK-NEXT: nvgpu.tma_load %a_desc[%i, %k] -> %a_smem[%slot], %full[%slot] : !tile.desc<128x64xf16>, !nvgpu.smem<3x128x64xf16, swizzle 128>, !nvgpu.mbarrier<3>
  // CHECK-NEXT: nvgpu.tma_load %b_desc[%k, %i] -> %b_smem[%slot], %full[%parity] : !tile.desc<64x128xf16>, !nvgpu.smem<3x64x128xf16, swizzle 128>, !nvgpu.mbarrier<3>
  // CHECK-NEXT: nvgpu.mbarrier_arrive %empty[%slot] : !nvgpu.mbarrier<3>
  nvgpu.setmaxnreg decrease 40
  %e = nvgpu.elect_sync : i1
  nvgpu.mbarrier_wait %empty[%slot], %parity : !nvgpu.mbarrier<3>
  nvgpu.mbarrier_arrive_expect_tx %full[%slot], bytes 32768 : !nvgpu.mbarrier<3>
  nvgpu.tma_load %a_desc[%i, %k] -> %a_smem[%slot], %full[%slot] : !tile.desc<128x64xf16>, !nvgpu.smem<3x128x64xf16, swizzle 128>, !nvgpu.mbarrier<3>
  nvgpu.tma_load %b_desc[%k, %i] -> %b_smem[%slot], %full[%parity] : !tile.desc<64x128xf16>, !nvgpu.smem<3x64x128xf16, swizzle 128>, !nvgpu.mbarrier<3>
  nvgpu.mbarrier_arrive %empty[%slot] : !nvgpu.mbarrier<3>
  func.return
}

// CHECK-LABEL: func.func @consumer
func.func @consumer(%c_desc: !tile.desc<128x128xf32>, %i: i32, %j: i32, %x: f32) {
  %slot = arith.constant 0 : i32
  %a_smem = nvgpu.smem_alloc : !nvgpu.smem<3x128x64xf16, swizzle 128>
  %b_smem = nvgpu.smem_alloc : !nvgpu.smem<3x64x128xf16, swizzle 128>
  %bt_smem = nvgpu.smem_alloc : !nvgpu.smem<2x128x64xf16, swizzle 128>
  %c_smem = nvgpu.smem_alloc : !nvgpu.smem<1x128x128xf32>
  // CHECK:      nvgpu.setmaxnreg increase 232
  // CHECK-NEXT: %wg = nvgpu.warpgroup_index : i32
  // CHECK-NEXT: %tid = nvgpu.thread_index : i32
  // CHECK:      %row = arith.muli %wg, %c64 : i32
  // CHECK-NEXT: %zero = nvgpu.fragment_splat %x : f32 -> !nvgpu.fragment<wgmma_acc, 64x128xf32>
  // CHECK-NEXT: %unset = nvgpu.fragment_undef : !nvgpu.fragment<wgmma_acc, 64x128xf32>
  nvgpu.setmaxnreg increase 232
  %wg = nvgpu.warpgroup_index : i32
  %tid = nvgpu.thread_index : i32
  %c64 = arith.constant 64 : i32
  %row = arith.muli %wg, %c64 : i32
  %zero = nvgpu.fragment_splat %x : f32 -> !nvgpu.fragment<wgmma_acc, 64x128xf32>
  %unset = nvgpu.fragment_undef : !nvgpu.fragment<wgmma_acc, 64x128xf32>
  // CHECK-NEXT: nvgpu.wgmma_fence
  // CHECK-NEXT: %d0 = nvgpu.wgmma_mma_async %a_smem[%slot, %row], %b_smem[%slot], %zero transpose_b : !nvgpu.smem<3x128x64xf16, swizzle 128>, !nvgpu.smem<3x64x128xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x128xf32>
  // CHECK-NEXT: %d1 = nvgpu.wgmma_mma_async %a_smem[%slot, %row], %bt_smem[%slot], %d0 : !nvgpu.smem<3x128x64xf16, swizzle 128>, !nvgpu.smem<2x128x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x128xf32>
  // CHECK-NEXT: nvgpu.wgmma_commit_group
  // CHECK-NEXT: nvgpu.wgmma_wait_group 0
  nvgpu.wgmma_fence
  %d0 = nvgpu.wgmma_mma_async %a_smem[%slot, %row], %b_smem[%slot], %zero transpose_b : !nvgpu.smem<3x128x64xf16, swizzle 128>, !nvgpu.smem<3x64x128xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x128xf32>
  %d1 = nvgpu.wgmma_mma_async %a_smem[%slot, %row], %bt_smem[%slot], %d0 : !nvgpu.smem<3x128x64xf16, swizzle 128>, !nvgpu.smem<2x128x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x128xf32>
  nvgpu.wgmma_commit_group
  nvgpu.wgmma_wait_group 0
  // CHECK-NEXT: nvgpu.fragment_store %d1, %c_smem[%slot, %row] : !nvgpu.fragment<wgmma_acc, 64x128xf32>, !nvgpu.smem<1x128x128xf32, swizzle 0>
  // CHECK-NEXT: nvgpu.fence_proxy_async
  // CHECK-NEXT: nvgpu.named_barrier_sync 1, 256
  // CHECK-NEXT: nvgpu.tma_store %c_desc[%i, %j], %c_smem[%slot] : !tile.desc<128x128xf32>, !nvgpu.smem<1x128x128xf32, swizzle 0>
  // CHECK-NEXT: nvgpu.tma_store_commit
  // CHECK-NEXT: nvgpu.tma_store_wait 0
  // CHECK-NEXT: nvgpu.fragment_store_global %d1, %c_desc[%i, %j] : !nvgpu.fragment<wgmma_acc, 64x128xf32>, !tile.desc<128x128xf32>
  nvgpu.fragment_store %d1, %c_smem[%slot, %row] : !nvgpu.fragment<wgmma_acc, 64x128xf32>, !nvgpu.smem<1x128x128xf32, swizzle 0>
  nvgpu.fence_proxy_async
  nvgpu.named_barrier_sync 1, 256
  nvgpu.tma_store %c_desc[%i, %j], %c_smem[%slot] : !tile.desc<128x128xf32>, !nvgpu.smem<1x128x128xf32, swizzle 0>
  nvgpu.tma_store_commit
  nvgpu.tma_store_wait 0
  nvgpu.fragment_store_global %d1, %c_desc[%i, %j] : !nvgpu.fragment<wgmma_acc, 64x128xf32>, !tile.desc<128x128xf32>
  // CHECK-NEXT: %t = nvgpu.smem_load %a_smem[%slot] : !nvgpu.smem<3x128x64xf16, swizzle 128> -> tensor<128x64xf16>
  // CHECK-NEXT: nvgpu.smem_store %t, %a_smem[%slot] : tensor<128x64xf16>, !nvgpu.smem<3x128x64xf16, swizzle 128>
  %t = nvgpu.smem_load %a_smem[%slot] : !nvgpu.smem<3x128x64xf16, swizzle 128> -> tensor<128x64xf16>
  nvgpu.smem_store %t, %a_smem[%slot] : tensor<128x64xf16>, !nvgpu.smem<3x128x64xf16, swizzle 128>
  func.return
}

// An online-softmax step of attention on the S = Q K^T accumulator, then O += P V (RS form).
// CHECK-LABEL: func.func @softmax
func.func @softmax(%s: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %o: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %m_old: !nvgpu.fragment<wgmma_row, 64xf32>, %scale: f32, %v: !nvgpu.smem<2x64x64xbf16, swizzle 128>, %slot: i32) -> !nvgpu.fragment<wgmma_acc, 64x64xf32> {
  // CHECK:      %mx = nvgpu.fragment_row_reduce max %s : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_row, 64xf32>
  // CHECK-NEXT: %mx1 = nvgpu.shuffle_xor %mx, 1 : !nvgpu.fragment<wgmma_row, 64xf32>
  // CHECK-NEXT: %mx2 = nvgpu.fragment_binary max %mx, %mx1 : !nvgpu.fragment<wgmma_row, 64xf32>
  // CHECK-NEXT: %mx3 = nvgpu.shuffle_xor %mx2, 2 : !nvgpu.fragment<wgmma_row, 64xf32>
  // CHECK-NEXT: %m = nvgpu.fragment_binary max %mx2, %mx3 : !nvgpu.fragment<wgmma_row, 64xf32>
  %mx = nvgpu.fragment_row_reduce max %s : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_row, 64xf32>
  %mx1 = nvgpu.shuffle_xor %mx, 1 : !nvgpu.fragment<wgmma_row, 64xf32>
  %mx2 = nvgpu.fragment_binary max %mx, %mx1 : !nvgpu.fragment<wgmma_row, 64xf32>
  %mx3 = nvgpu.shuffle_xor %mx2, 2 : !nvgpu.fragment<wgmma_row, 64xf32>
  %m = nvgpu.fragment_binary max %mx2, %mx3 : !nvgpu.fragment<wgmma_row, 64xf32>
  // CHECK-NEXT: %diff = nvgpu.fragment_binary sub %m_old, %m : !nvgpu.fragment<wgmma_row, 64xf32>
  // CHECK-NEXT: %alpha = nvgpu.fragment_unary exp2 %diff : !nvgpu.fragment<wgmma_row, 64xf32>
  // CHECK-NEXT: %alpha_b = nvgpu.fragment_broadcast_rows %alpha : !nvgpu.fragment<wgmma_row, 64xf32> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %o1 = nvgpu.fragment_binary mul %o, %alpha_b : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %diff = nvgpu.fragment_binary sub %m_old, %m : !nvgpu.fragment<wgmma_row, 64xf32>
  %alpha = nvgpu.fragment_unary exp2 %diff : !nvgpu.fragment<wgmma_row, 64xf32>
  %alpha_b = nvgpu.fragment_broadcast_rows %alpha : !nvgpu.fragment<wgmma_row, 64xf32> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %o1 = nvgpu.fragment_binary mul %o, %alpha_b : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %m_b = nvgpu.fragment_broadcast_rows %m : !nvgpu.fragment<wgmma_row, 64xf32> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %neg_m = nvgpu.fragment_unary neg %m_b : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %x = nvgpu.fragment_binary add %s, %neg_m : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %sc = nvgpu.fragment_splat %scale : f32 -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %x1 = nvgpu.fragment_binary div %x, %sc : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %x2 = nvgpu.fragment_binary min %x1, %x : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %p = nvgpu.fragment_unary exp2 %x2 : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %l = nvgpu.fragment_row_reduce sum %p : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_row, 64xf32>
  %m_b = nvgpu.fragment_broadcast_rows %m : !nvgpu.fragment<wgmma_row, 64xf32> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %neg_m = nvgpu.fragment_unary neg %m_b : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %x = nvgpu.fragment_binary add %s, %neg_m : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %sc = nvgpu.fragment_splat %scale : f32 -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %x1 = nvgpu.fragment_binary div %x, %sc : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %x2 = nvgpu.fragment_binary min %x1, %x : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %p = nvgpu.fragment_unary exp2 %x2 : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %l = nvgpu.fragment_row_reduce sum %p : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_row, 64xf32>
  // CHECK-NEXT: %p_a = nvgpu.fragment_convert %p : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_operand_a, 64x64xbf16>
  // CHECK-NEXT: %p_h = nvgpu.fragment_convert %p : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_acc, 64x64xf8E4M3FN>
  // CHECK-NEXT: nvgpu.wgmma_fence
  // CHECK-NEXT: %o2 = nvgpu.wgmma_mma_async_rs %p_a, %v[%slot], %o1 transpose_b : !nvgpu.fragment<wgmma_operand_a, 64x64xbf16>, !nvgpu.smem<2x64x64xbf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: %o3 = nvgpu.wgmma_mma_async_rs %p_a, %v[%slot], %o2 : !nvgpu.fragment<wgmma_operand_a, 64x64xbf16>, !nvgpu.smem<2x64x64xbf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // CHECK-NEXT: func.return %o3 : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %p_a = nvgpu.fragment_convert %p : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_operand_a, 64x64xbf16>
  %p_h = nvgpu.fragment_convert %p : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_acc, 64x64xf8E4M3FN>
  nvgpu.wgmma_fence
  %o2 = nvgpu.wgmma_mma_async_rs %p_a, %v[%slot], %o1 transpose_b : !nvgpu.fragment<wgmma_operand_a, 64x64xbf16>, !nvgpu.smem<2x64x64xbf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  %o3 = nvgpu.wgmma_mma_async_rs %p_a, %v[%slot], %o2 : !nvgpu.fragment<wgmma_operand_a, 64x64xbf16>, !nvgpu.smem<2x64x64xbf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return %o3 : !nvgpu.fragment<wgmma_acc, 64x64xf32>
}

// fp8 inputs: K = 64 is two k32 instructions; the two fp8 formats may mix.
// CHECK-LABEL: func.func @fp8
// CHECK:       %d = nvgpu.wgmma_mma_async %a[%slot], %b[%slot], %acc : !nvgpu.smem<2x64x64xf8E4M3FN, swizzle 64>, !nvgpu.smem<2x256x64xf8E5M2, swizzle 64>, !nvgpu.fragment<wgmma_acc, 64x256xf32>
func.func @fp8(%a: !nvgpu.smem<2x64x64xf8E4M3FN, swizzle 64>, %b: !nvgpu.smem<2x256x64xf8E5M2, swizzle 64>, %acc: !nvgpu.fragment<wgmma_acc, 64x256xf32>, %slot: i32) {
  %d = nvgpu.wgmma_mma_async %a[%slot], %b[%slot], %acc : !nvgpu.smem<2x64x64xf8E4M3FN, swizzle 64>, !nvgpu.smem<2x256x64xf8E5M2, swizzle 64>, !nvgpu.fragment<wgmma_acc, 64x256xf32>
  func.return
}

// An accumulator into the fp8 A operand with its columns permuted so that every value stays
// in its thread (the A layout's own columns): the columns print in the attribute dictionary.
// CHECK-LABEL: func.func @fp8_own_columns
func.func @fp8_own_columns(%p: !nvgpu.fragment<wgmma_acc, 64x32xf32>) -> !nvgpu.fragment<wgmma_operand_a8, 64x32xf8E4M3FN> {
  // CHECK-NEXT: %p8 = nvgpu.fragment_convert %p {columns = array<i32: 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 16, 17, 24, 25, 18, 19, 26, 27, 20, 21, 28, 29, 22, 23, 30, 31>} : !nvgpu.fragment<wgmma_acc, 64x32xf32> -> !nvgpu.fragment<wgmma_operand_a8, 64x32xf8E4M3FN>
  %p8 = nvgpu.fragment_convert %p {columns = array<i32: 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 16, 17, 24, 25, 18, 19, 26, 27, 20, 21, 28, 29, 22, 23, 30, 31>} : !nvgpu.fragment<wgmma_acc, 64x32xf32> -> !nvgpu.fragment<wgmma_operand_a8, 64x32xf8E4M3FN>
  func.return %p8 : !nvgpu.fragment<wgmma_operand_a8, 64x32xf8E4M3FN>
}
