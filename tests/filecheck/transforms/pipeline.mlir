// pipeline: ring depth, MMA depth (delayed release + drain), cooperative consumers,
// attention consumer pipelining.
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,distribute,pipeline{stages=4 mma-depth=2}' | filecheck %s
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,distribute,pipeline{consumers=2}' | filecheck %s --check-prefix=COOP
// RUN: tawa-opt %examples/attention_causal.mlir -p 'partition,insert-aref{depth=3},distribute,pipeline{mma-depth=2}' | filecheck %s --check-prefix=ATTN
// RUN: tawa-opt %s -p 'partition,insert-aref{depth=1},distribute,pipeline{mma-depth=3}' | filecheck %s --check-prefix=D1
// RUN: tawa-opt %s -p 'partition,insert-aref{depth=4},distribute,pipeline{mma-depth=3}' | filecheck %s --check-prefix=DEEP

// stages=4 re-sizes the ring; P=2: use i-1 is released after the dot of use i, the last use
// after the loop.
// CHECK:      %a_b_ring = aref.create : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 4>
// CHECK:      aref.group consumer
// CHECK:        %acc, %[[END:[a-z0-9_]+]] = scf.for %kt_1 = %c0_1 to %k_tiles_1 step %c1_1 iter_args(%acc_iter = %acc0, %[[I:[a-z0-9_]+]] = %use0_1)
// CHECK:          %acc_next = tile.dot
// CHECK-NEXT:     %lag = arith.constant 1 : i32
// CHECK-NEXT:     %oldest = arith.subi %[[I]], %lag : i32
// CHECK-NEXT:     %held = arith.subi %[[I]], %use0_1 : i32
// CHECK-NEXT:     %full = arith.cmpi sge, %held, %lag : i32
// CHECK-NEXT:     scf.if %full {
// CHECK-NEXT:       aref.consumed %a_b_ring[%oldest]
// CHECK-NEXT:     }
// CHECK-NEXT:     scf.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   %lag_1 = arith.constant 1 : i32
// CHECK-NEXT:   %[[ONE:[0-9]+]] = arith.constant 1 : i32
// CHECK-NEXT:   %[[BACK:[0-9]+]] = arith.subi %[[END]], %lag_1 : i32
// CHECK-NEXT:   %drain_from = arith.maxsi %[[BACK]], %use0_1 : i32
// CHECK-NEXT:   scf.for %j = %drain_from to %[[END]] step %[[ONE]] : i32 {
// CHECK-NEXT:     aref.consumed %a_b_ring[%j]
// CHECK-NEXT:   }
// CHECK-NEXT:   %c_tile = tile.convert %acc

// Two consumer warpgroups split the 128 rows: A is sliced, B is not, the accumulator and
// the stored tile have 64 rows, stored at off_m + 64 * warpgroup.
// COOP:      aref.group consumer warpgroups(2) registers(232) {
// COOP-NEXT:   %wg = aref.warpgroup_index : i32
// COOP-NEXT:   %[[R:[0-9]+]] = arith.constant 64 : i32
// COOP-NEXT:   %row0 = arith.muli %wg, %[[R]] : i32
// COOP:        %acc0 = tile.splat %zero : f32 -> tensor<64x128xf32>
// COOP:        %a_1, %b_1 = aref.get %a_b_ring[%{{.*}}] : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 2> -> tensor<128x64xf16>, tensor<128x64xf16>
// COOP-NEXT:   %a_2 = tile.extract_slice %a_1[%row0, %{{.*}}] : tensor<128x64xf16> -> tensor<64x64xf16>
// COOP:        %b_t = tile.trans %b_1 : tensor<128x64xf16> -> tensor<64x128xf16>
// COOP-NEXT:   %acc_next = tile.dot %a_2, %b_t, %acc_iter : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
// COOP:        %c_tile = tile.convert %acc : tensor<64x128xf32> -> tensor<64x128xf16>
// COOP-NEXT:   %[[ROW:[0-9]+]] = arith.addi %off_m_1, %row0 : i32
// COOP-NEXT:   tile.store_slice %c_desc[%[[ROW]], %off_n_1], %c_tile : !tile.desc<128x128xf16>, tensor<64x128xf16>

// Attention: the first QK^T is peeled under lb < ub (a causal zero-trip loop skips it); each
// iteration issues the QK^T of the next key block before the softmax of this one, carrying S.
// The releases sit where the overlapped MMAs of lower-to-nvgpu free the slots (and stay
// there): V(j-1) before O is rescaled, K(j+1) after P V(j), under the lookahead's guard.
// ATTN:      aref.group consumer
// ATTN:        %[[NONEMPTY:[0-9]+]] = arith.cmpi slt, %c0_1, %hi_1 : i32
// ATTN-NEXT:   %[[S0:[0-9]+]], %[[K0:[0-9]+]] = scf.if %[[NONEMPTY]] -> (tensor<128x64xf32>, i32) {
// ATTN-NEXT:     %k3_1 = aref.get %k3_ring[%use0_1]
// ATTN:          %qk = tile.dot %q, %k_t, %qk_zero
// ATTN-NEXT:     aref.consumed %k3_ring[%use0_1]
// ATTN-NEXT:     scf.yield %qk, %{{.*}} : tensor<128x64xf32>, i32
// ATTN-NEXT:   } else {
// ATTN:          scf.yield %{{.*}}, %use0_1 : tensor<128x64xf32>, i32
// ATTN-NEXT:   }
// ATTN-NEXT:   scf.for %start_n_1 = %c0_1 to %hi_1 step %block_n_1 iter_args(%acc_i = %acc0, %l_i = %l0, %m_i = %m0, %[[KI:[a-z0-9_]+]] = %[[K0]], %[[VI:[a-z0-9_]+]] = %use0_1, %[[S:[a-z0-9_]+]] = %[[S0]])
// ATTN-NEXT:     %[[NEXT:[0-9]+]] = arith.addi %start_n_1, %block_n_1 : i32
// ATTN-NEXT:     %[[MORE:[0-9]+]] = arith.cmpi slt, %[[NEXT]], %hi_1 : i32
// ATTN-NEXT:     %qk_next, %{{.*}} = scf.if %[[MORE]] -> (tensor<128x64xf32>, i32) {
// ATTN-NEXT:       %{{.*}} = aref.get %k3_ring[%[[KI]]]
// ATTN:          %qk_scaled = arith.mulf %[[S]], %qk_scale_t
// ATTN-NOT:       aref.consumed
// ATTN:          %p = math.exp2 %s_shifted
// ATTN:          scf.if %full {
// ATTN-NEXT:       aref.consumed %v3_ring[%oldest]
// ATTN:          %acc_scaled = arith.mulf %acc_i, %alpha_b
// ATTN:          %acc_next = tile.dot %p16, %v, %acc_scaled
// ATTN-NEXT:     scf.if %[[MORE]] {
// ATTN-NEXT:       aref.consumed %k3_ring[%[[KI]]]
// ATTN:          scf.yield %acc_next, %l_next, %m_next, %{{.*}}, %{{.*}}, %qk_next
// ATTN:        scf.for %j = %drain_from to
// ATTN-NEXT:     aref.consumed %v3_ring[%j]

// D=1: the ring has one slot, so the consumer cannot hold P=3 uses: releases stay in place.
// D1:        aref.group consumer
// D1-NOT:    scf.if
// D1:        tile.dot
// D1-NEXT:   aref.consumed %a_b_ring

// P=3 > trip count (one trip): uses are released in the drain, from max(end - 2, start).
// DEEP:      scf.if %full {
// DEEP:      %lag_1 = arith.constant 2 : i32
// DEEP:      %drain_from = arith.maxsi
// DEEP:      scf.for %j = %drain_from to

func.func @one_trip(%a_desc: !tile.desc<64x16xf16>, %b_desc: !tile.desc<64x16xf16>, %c_desc: !tile.desc<64x64xf32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = tile.splat %zero : f32 -> tensor<64x64xf32>
  %acc = scf.for %kt = %c0 to %c1 step %c1 iter_args(%acc_iter = %acc0) -> (tensor<64x64xf32>) : i32 {
    %a = tile.load %a_desc[%c0, %kt] : !tile.desc<64x16xf16> -> tensor<64x16xf16>
    %b = tile.load %b_desc[%c0, %kt] : !tile.desc<64x16xf16> -> tensor<64x16xf16>
    %b_t = tile.trans %b : tensor<64x16xf16> -> tensor<16x64xf16>
    %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<64x16xf16>, tensor<16x64xf16> -> tensor<64x64xf32>
    scf.yield %acc_next : tensor<64x64xf32>
  }
  tile.store %c_desc[%c0, %c0], %acc : !tile.desc<64x64xf32>, tensor<64x64xf32>
  func.return
}
