// software-pipeline: the first QK^T is peeled under lb < ub (a causal zero-trip loop skips
// it) and each iteration issues the QK^T of the next key block before the softmax of this
// one, carrying S. Both copies of stage 0 say so: `tawa.stage = 0`, the peeled one also
// `tawa.peeled`. A GEMM loop (one dot) is left alone.
// RUN: tawa-opt %examples/attention_causal.mlir -p 'partition,insert-aref,ring-depth{stages=3},distribute,software-pipeline' | filecheck %s
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,distribute,software-pipeline' | filecheck %s --check-prefix=GEMM

// CHECK:      aref.group consumer
// CHECK:        %[[NONEMPTY:[0-9]+]] = arith.cmpi slt, %c0_1, %hi_1 : i32
// CHECK-NEXT:   %[[S0:[0-9]+]], %[[K0:[0-9]+]] = scf.if %[[NONEMPTY]] -> (tensor<128x64xf32>, i32) {
// CHECK-NEXT:     %k3_1 = aref.get %k3_ring[%use0_1]
// CHECK:          %qk = tile.dot %q, %k_t, %qk_zero
// CHECK-NEXT:     aref.consumed %k3_ring[%use0_1]
// CHECK-NEXT:     scf.yield %qk, %{{.*}} : tensor<128x64xf32>, i32
// CHECK-NEXT:   } else {
// CHECK:          scf.yield %{{.*}}, %use0_1 : tensor<128x64xf32>, i32
// CHECK-NEXT:   }{tawa.stage = 0 : i32, tawa.peeled}
// CHECK-NEXT:   scf.for %start_n_1 = %c0_1 to %hi_1 step %block_n_1 iter_args(%acc_i = %acc0, %l_i = %l0, %m_i = %m0, %[[KI:[a-z0-9_]+]] = %[[K0]], %{{.*}} = %use0_1, %[[S:[a-z0-9_]+]] = %[[S0]])
// CHECK-NEXT:     %[[NEXT:[0-9]+]] = arith.addi %start_n_1, %block_n_1 : i32
// CHECK-NEXT:     %[[MORE:[0-9]+]] = arith.cmpi slt, %[[NEXT]], %hi_1 : i32
// CHECK-NEXT:     %qk_next, %{{.*}} = scf.if %[[MORE]] -> (tensor<128x64xf32>, i32) {
// CHECK-NEXT:       %{{.*}} = aref.get %k3_ring[%[[KI]]]
// CHECK:            aref.consumed %k3_ring[%[[KI]]]
// CHECK:          }{tawa.stage = 0 : i32}
// CHECK-NEXT:     %qk_scaled = arith.mulf %[[S]], %qk_scale_t
// CHECK:          scf.yield %acc_next, %l_next, %m_next, %{{.*}}, %{{.*}}, %qk_next

// GEMM-NOT:  tawa.stage
