// distribute: one aref.group per warp group, each with its own ops and the same loops.
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,ring-depth{stages=3},distribute' | filecheck %s
// RUN: tawa-opt %examples/attention.mlir -p 'partition,insert-aref,distribute' | filecheck %s --check-prefix=ATTN
// RUN: tawa-opt %s -p 'partition,insert-aref,distribute' | filecheck %s --check-prefix=ZERO

// CHECK:      func.func @gemm(
// CHECK-NEXT:   %a_b_ring = aref.create : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 3>
// CHECK-NEXT:   aref.warp_specialize {
// CHECK-NEXT:     aref.group producer warpgroups(1) registers(40) {
// CHECK-NOT:        tile.dot
// CHECK-NOT:        tile.splat
// CHECK:            %i = scf.for %kt = %c0 to %k_tiles step %c1 iter_args(%i_1 = %use0) -> (i32) : i32 {
// CHECK-NEXT:         %off_k = arith.muli %kt, %block_k : i32
// CHECK-NEXT:         %a = tile.load %a_desc[%off_m, %off_k]
// CHECK-NEXT:         %b = tile.load %b_desc[%off_n, %off_k]
// CHECK-NEXT:         aref.put %a_b_ring[%i_1], %a, %b
// CHECK-NEXT:         %0 = arith.addi %i_1, %use1 : i32
// CHECK-NEXT:         scf.yield %0 : i32
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:     aref.group consumer warpgroups(1) registers(232) {
// CHECK-NOT:        tile.load
// CHECK:            %acc, %i_2 = scf.for %kt_1 = %c0_1 to %k_tiles_1 step %c1_1 iter_args(%acc_iter = %acc0, %i_3 = %use0_1) -> (tensor<128x128xf32>, i32) : i32 {
// CHECK-NEXT:         %a_1, %b_1 = aref.get %a_b_ring[%i_3]
// CHECK-NEXT:         %1 = arith.addi %i_3, %use1_1 : i32
// CHECK-NEXT:         %b_t = tile.trans %b_1
// CHECK-NEXT:         %acc_next = tile.dot %a_1, %b_t, %acc_iter
// CHECK-NEXT:         aref.consumed %a_b_ring[%i_3]
// CHECK-NEXT:         scf.yield %acc_next, %1 : tensor<128x128xf32>, i32
// CHECK-NEXT:       }
// CHECK-NEXT:       %c_tile = tile.convert %acc
// CHECK-NEXT:       tile.store %c_desc[%off_m_1, %off_n_1], %c_tile
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   func.return

// The producer loop keeps only the two ring counters; the consumer also carries the softmax
// state and the accumulator, over the same bounds.
// ATTN:      aref.group producer warpgroups(1) registers(40) {
// ATTN:        aref.put %q3_ring[%use0], %q3
// ATTN:        scf.for %start_n = %c0 to %seq step %block_n iter_args(%{{.*}} = %use0, %{{.*}} = %use0) -> (i32, i32) : i32 {
// ATTN:      aref.group consumer warpgroups(1) registers(232) {
// ATTN:        scf.for %start_n_1 = %c0_1 to %seq step %block_n_1 iter_args(%acc_i = %acc0, %l_i = %l0, %m_i = %m0, %{{.*}} = %use0_1, %{{.*}} = %use0_1) -> (tensor<128x64xf32>, tensor<128xf32>, tensor<128xf32>, i32, i32) : i32 {

// A K loop of zero trips (static bounds) distributes like any other loop.
func.func @zero_trip(%a_desc: !tile.desc<64x16xf16>, %b_desc: !tile.desc<64x16xf16>, %c_desc: !tile.desc<64x64xf32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = tile.splat %zero : f32 -> tensor<64x64xf32>
  %acc = scf.for %kt = %c0 to %c0 step %c1 iter_args(%acc_iter = %acc0) -> (tensor<64x64xf32>) : i32 {
    %a = tile.load %a_desc[%c0, %kt] : !tile.desc<64x16xf16> -> tensor<64x16xf16>
    %b = tile.load %b_desc[%c0, %kt] : !tile.desc<64x16xf16> -> tensor<64x16xf16>
    %b_t = tile.trans %b : tensor<64x16xf16> -> tensor<16x64xf16>
    %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<64x16xf16>, tensor<16x64xf16> -> tensor<64x64xf32>
    scf.yield %acc_next : tensor<64x64xf32>
  }
  tile.store %c_desc[%c0, %c0], %acc : !tile.desc<64x64xf32>, tensor<64x64xf32>
  func.return
}

// ZERO:      %a_b_ring = aref.create : !aref.ring<[tensor<64x16xf16>, tensor<64x16xf16>], 1>
// ZERO:      aref.group producer
// ZERO:        scf.for %kt = %c0 to %c0 step %c1 iter_args(%i_1 = %use0) -> (i32) : i32 {
// ZERO:      aref.group consumer
// ZERO:        scf.for %kt_1 = %c0_1 to %c0_1 step %c1_1 iter_args(%acc_iter = %acc0, %i_3 = %use0_1)
// ZERO:        tile.store %c_desc[%c0_1, %c0_1], %acc
