// insert-aref: producer -> consumer edges become rings with put / get / consumed, and each
// ring's use counter is threaded through the enclosing loops. Every ring gets one slot
// (ring-depth sets the depth).
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref' | filecheck %s --check-prefix=GEMM
// RUN: tawa-opt %examples/attention.mlir -p 'partition,insert-aref' | filecheck %s --check-prefix=ATTN
// RUN: tawa-opt %s --split-input-file -p 'partition,insert-aref' | filecheck %s

// GEMM:      %a_b_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 1>
// GEMM-NEXT: %use0 = arith.constant {aref.role = "both"} 0 : i32
// GEMM-NEXT: %use1 = arith.constant {aref.role = "both"} 1 : i32
// GEMM:      %acc, %i = scf.for %kt = %c0 to %k_tiles step %c1 iter_args(%acc_iter = %acc0, %i_1 = %use0) -> (tensor<128x128xf32>, i32) : i32 {
// GEMM:        %a = tile.load %a_desc[%off_m, %off_k] {aref.role = "producer"}
// GEMM-NEXT:   %b = tile.load %b_desc[%off_n, %off_k] {aref.role = "producer"}
// GEMM-NEXT:   aref.put %a_b_ring[%i_1], %a, %b {aref.role = "producer"}
// GEMM-NEXT:   %a_1, %b_1 = aref.get %a_b_ring[%i_1] {aref.role = "consumer"}
// GEMM-NEXT:   %0 = arith.addi %i_1, %use1 {aref.role = "both"} : i32
// GEMM-NEXT:   %b_t = tile.trans %b_1 {aref.role = "consumer"}
// GEMM-NEXT:   %acc_next = tile.dot %a_1, %b_t, %acc_iter {aref.role = "consumer"}
// GEMM-NEXT:   aref.consumed %a_b_ring[%i_1] {aref.role = "consumer"}
// GEMM-NEXT:   scf.yield {aref.role = "both"} %acc_next, %0 : tensor<128x128xf32>, i32

// Q is used once per program (depth 1) and released after the loop that reads it; K and V
// feed different dots, so they get separate rings.
// ATTN:      %q3_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<1x128x64xf16>], 1>
// ATTN-NEXT: %k3_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<1x64x64xf16>], 1>
// ATTN-NEXT: %v3_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<1x64x64xf16>], 1>
// ATTN:      aref.put %q3_ring[%use0], %q3
// ATTN:      scf.for %start_n = %c0 to %seq step %block_n iter_args(%acc_i = %acc0, %l_i = %l0, %m_i = %m0, %i_2 = %use0, %i_3 = %use0)
// ATTN:        aref.put %k3_ring[%i_2], %k3
// ATTN:        %qk = tile.dot %q, %k_t, %qk_zero
// ATTN-NEXT:   aref.consumed %k3_ring[%i_2]
// ATTN:        aref.put %v3_ring[%i_3], %v3
// ATTN:        %acc_next = tile.dot %p16, %v, %acc_scaled
// ATTN-NEXT:   aref.consumed %v3_ring[%i_3]
// ATTN-NEXT:   scf.yield
// ATTN-NEXT: } {aref.role = "both"}
// ATTN-NEXT: aref.consumed %q3_ring[%use0]
// ATTN-NEXT: %l_col = tile.expand_dims %l, 1

// A loaded tile that feeds both the dot and elementwise math: one get, released after its
// last use (the elementwise op after the dot).
func.func @dot_and_elementwise(%a_desc: !tile.desc<64x16xf16>, %b_desc: !tile.desc<64x16xf16>, %c_desc: !tile.desc<64x64xf32>, %s_desc: !tile.desc<64x16xf32>, %k: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = tile.splat %zero : f32 -> tensor<64x64xf32>
  %sum0 = tile.splat %zero : f32 -> tensor<64x16xf32>
  %acc, %sum = scf.for %kt = %c0 to %k step %c1 iter_args(%acc_iter = %acc0, %sum_iter = %sum0) -> (tensor<64x64xf32>, tensor<64x16xf32>) : i32 {
    %a = tile.load %a_desc[%c0, %kt] : !tile.desc<64x16xf16> -> tensor<64x16xf16>
    %b = tile.load %b_desc[%c0, %kt] : !tile.desc<64x16xf16> -> tensor<64x16xf16>
    %b_t = tile.trans %b : tensor<64x16xf16> -> tensor<16x64xf16>
    %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<64x16xf16>, tensor<16x64xf16> -> tensor<64x64xf32>
    %a32 = tile.convert %a : tensor<64x16xf16> -> tensor<64x16xf32>
    %sum_next = arith.addf %sum_iter, %a32 : tensor<64x16xf32>
    scf.yield %acc_next, %sum_next : tensor<64x64xf32>, tensor<64x16xf32>
  }
  tile.store %c_desc[%c0, %c0], %acc : !tile.desc<64x64xf32>, tensor<64x64xf32>
  tile.store %s_desc[%c0, %c0], %sum : !tile.desc<64x16xf32>, tensor<64x16xf32>
  func.return
}

// CHECK-LABEL: func.func @dot_and_elementwise
// CHECK:         %a_b_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<64x16xf16>, tensor<64x16xf16>], 1>
// CHECK:         aref.put %a_b_ring[%i_1], %a, %b
// CHECK-NEXT:    %a_1, %b_1 = aref.get %a_b_ring[%i_1]
// CHECK:         %acc_next = tile.dot %a_1, %b_t, %acc_iter
// CHECK-NEXT:    %a32 = tile.convert %a_1
// CHECK-NEXT:    %sum_next = arith.addf %sum_iter, %a32
// CHECK-NEXT:    aref.consumed %a_b_ring[%i_1]

// -----

// Two K loops in sequence load the same tile types: they share one ring and the use
// counter of the second loop starts where the first one stopped.
func.func @two_loops(%a_desc: !tile.desc<64x16xf16>, %b_desc: !tile.desc<64x16xf16>, %c_desc: !tile.desc<64x64xf32>, %k: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = tile.splat %zero : f32 -> tensor<64x64xf32>
  %acc1 = scf.for %kt = %c0 to %k step %c1 iter_args(%acc_iter = %acc0) -> (tensor<64x64xf32>) : i32 {
    %a = tile.load %a_desc[%c0, %kt] : !tile.desc<64x16xf16> -> tensor<64x16xf16>
    %b = tile.load %b_desc[%c0, %kt] : !tile.desc<64x16xf16> -> tensor<64x16xf16>
    %b_t = tile.trans %b : tensor<64x16xf16> -> tensor<16x64xf16>
    %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<64x16xf16>, tensor<16x64xf16> -> tensor<64x64xf32>
    scf.yield %acc_next : tensor<64x64xf32>
  }
  %acc2 = scf.for %kt2 = %c0 to %k step %c1 iter_args(%acc_iter2 = %acc1) -> (tensor<64x64xf32>) : i32 {
    %a2 = tile.load %b_desc[%c0, %kt2] : !tile.desc<64x16xf16> -> tensor<64x16xf16>
    %b2 = tile.load %a_desc[%c0, %kt2] : !tile.desc<64x16xf16> -> tensor<64x16xf16>
    %b2_t = tile.trans %b2 : tensor<64x16xf16> -> tensor<16x64xf16>
    %acc2_next = tile.dot %a2, %b2_t, %acc_iter2 : tensor<64x16xf16>, tensor<16x64xf16> -> tensor<64x64xf32>
    scf.yield %acc2_next : tensor<64x64xf32>
  }
  tile.store %c_desc[%c0, %c0], %acc2 : !tile.desc<64x64xf32>, tensor<64x64xf32>
  func.return
}

// CHECK-LABEL: func.func @two_loops
// CHECK:         %a_b_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<64x16xf16>, tensor<64x16xf16>], 1>
// CHECK-NOT:     aref.create
// CHECK:         %acc1, %[[END1:[a-z0-9_]+]] = scf.for %kt = %c0 to %k step %c1 iter_args(%acc_iter = %acc0, %[[I1:[a-z0-9_]+]] = %use0)
// CHECK:           aref.put %a_b_ring[%[[I1]]], %a, %b
// CHECK:         %acc2, %{{.*}} = scf.for %kt2 = %c0 to %k step %c1 iter_args(%acc_iter2 = %acc1, %[[I2:[a-z0-9_]+]] = %[[END1]])
// CHECK:           aref.put %a_b_ring[%[[I2]]], %a2, %b2
// CHECK:           aref.consumed %a_b_ring[%[[I2]]]
