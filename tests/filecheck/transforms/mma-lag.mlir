// mma-lag: with MMA depth P the release of a dot-feeding use runs L = min(P, D) - 1 uses
// late, the lag written on it (`lag(L)`), and `aref.drain` releases the uses still held
// after the loop.
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,ring-depth{stages=4},distribute,mma-lag{mma-depth=2}' | filecheck %s
// RUN: tawa-opt %s -p 'partition,insert-aref,ring-depth{stages=1},distribute,mma-lag{mma-depth=3}' | filecheck %s --check-prefix=D1
// RUN: tawa-opt %s -p 'partition,insert-aref,ring-depth{stages=4},distribute,mma-lag{mma-depth=3}' | filecheck %s --check-prefix=DEEP
// RUN: not tawa-opt %s -p 'partition,insert-aref,distribute,mma-lag{mma-depth=0}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,ring-depth{stages=4},distribute,mma-lag{mma_depth}' | filecheck %s
// RUN: tawa-opt %examples/attention.mlir -p 'partition,insert-aref,ring-depth{stages=3},distribute,mma-lag{mma_depth}' | filecheck %s --check-prefix=RESCALED

// P=2: use i-1 is released after the dot of use i, the last use by the drain.
// CHECK:      aref.group consumer
// CHECK:        %acc, %[[END:[a-z0-9_]+]] = scf.for %kt_1 = %c0_1 to %k_tiles_1 step %c1_1 iter_args(%acc_iter = %acc0, %[[I:[a-z0-9_]+]] = %use0_1)
// CHECK:          %acc_next = tile.dot
// CHECK-NEXT:     %lag = arith.constant 1 : i32
// CHECK-NEXT:     %oldest = arith.subi %[[I]], %lag : i32
// CHECK-NEXT:     %held = arith.subi %[[I]], %use0_1 : i32
// CHECK-NEXT:     %full = arith.cmpi sge, %held, %lag : i32
// CHECK-NEXT:     scf.if %full {
// CHECK-NEXT:       aref.consumed %a_b_ring[%oldest] lag(1) : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 4>
// CHECK-NEXT:     }
// CHECK-NEXT:     scf.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   aref.drain %a_b_ring[%use0_1, %[[END]]] lag(1) : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 4>
// CHECK-NEXT:   %c_tile = tile.convert %acc

// D=1: the ring has one slot, so the consumer cannot hold P=3 uses: releases stay in place.
// D1:        aref.group consumer
// D1-NOT:    scf.if
// D1:        tile.dot
// D1-NEXT:   aref.consumed %a_b_ring[%{{.*}}] : !aref.ring
// D1-NOT:    aref.drain

// P=3 > trip count (one trip): the drain releases the uses from max(end - 2, start).
// DEEP:      aref.consumed %a_b_ring[%oldest] lag(2)
// DEEP:      aref.drain %a_b_ring[%use0_1, %{{.*}}] lag(2)

// BAD: error: mma-lag: mma-depth must be at least 1, got 0

// Depth unset, chosen per loop: the GEMM's accumulator is its dot's alone, so P = 2 (the
// CHECK lines above). Attention's P V accumulates into O rescaled in the loop: P = 1, every
// release right after its use, nothing drained.
// RESCALED:      aref.group consumer
// RESCALED:        %acc_next = tile.dot %p16, %v, %acc_scaled
// RESCALED-NEXT:   aref.consumed %v3_ring[%{{.*}}] : !aref.ring
// RESCALED-NOT:    lag(
// RESCALED-NOT:    aref.drain

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
