// software-pipeline{rotate=true}: stage 0 is all but the last dot. The first QK^T and its
// softmax are peeled under lb < ub; each iteration issues QK^T(j+1) and P V(j) back to back,
// both left in flight (tawa.in_flight), then runs the softmax of j+1 under the same guard:
// wait_group 1 at its first reader of S (P V(j) stays in flight) with K(j+1) released right
// after, wait_group 0 at its first reader of O (the rescale), and at the else-branch's yield.
// The loop carries O and the 16-bit P; V(j) is released at the end of the body.
// RUN: tawa-opt %examples/attention_causal.mlir -p 'partition,insert-aref,ring-depth{stages=3},distribute,software-pipeline{rotate=true}' | filecheck %s

// CHECK:      aref.group consumer
// CHECK:        %[[NONEMPTY:[0-9]+]] = arith.cmpi slt, %c0_1, %hi_1 : i32
// CHECK-NEXT:   %[[O0:[0-9]+]], %[[L0:[0-9]+]], %[[M0:[0-9]+]], %[[K0:[0-9]+]], %[[P0:[0-9]+]] = scf.if %[[NONEMPTY]] -> (tensor<128x64xf32>, tensor<128xf32>, tensor<128xf32>, i32, tensor<128x64xf16>) {
// CHECK:          %qk = tile.dot %q, %k_t, %qk_zero : tensor<128x64xf16>
// CHECK-NEXT:     aref.consumed %k3_ring[%use0_1]
// CHECK:          %acc_scaled = arith.mulf %acc0, %alpha_b
// CHECK-NEXT:     %p16 = tile.convert %p
// CHECK-NEXT:     scf.yield %acc_scaled, %l_next, %m_next, %{{.*}}, %p16
// CHECK:        }{tawa.stage = 0 : i32, tawa.peeled}

// The V counter starts where it was; O, l, m, the K counter and P come from the prologue.
// CHECK-NEXT:   scf.for %[[J:[0-9]+]] = %c0_1 to %hi_1 step %block_n_1 iter_args(%[[O:[0-9]+]] = %[[O0]], %[[L:[0-9]+]] = %[[L0]], %[[M:[0-9]+]] = %[[M0]], %[[KI:[0-9]+]] = %[[K0]], %[[VI:[0-9]+]] = %use0_1, %[[P:[0-9]+]] = %[[P0]])
// CHECK-NEXT:     %[[NEXT:[0-9]+]] = arith.addi %[[J]], %block_n_1 : i32
// CHECK-NEXT:     %[[MORE:[0-9]+]] = arith.cmpi slt, %[[NEXT]], %hi_1 : i32
// CHECK-NEXT:     %qk_next, %[[KN:[0-9]+]] = scf.if %[[MORE]] -> (tensor<128x64xf32>, i32) {
// CHECK-NEXT:       aref.get %k3_ring[%[[KI]]]
// CHECK:            tile.dot %q, %{{.*}}, %qk_zero {tawa.in_flight}
// CHECK-NOT:        aref.consumed
// CHECK:          }{tawa.stage = 0 : i32}
// CHECK-NEXT:     aref.get %v3_ring[%[[VI]]]
// CHECK:          %acc_next = tile.dot %[[P]], %v, %[[O]] {tawa.in_flight}
// CHECK-NEXT:     scf.if %[[MORE]] -> (tensor<128x64xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x64xf16>) {
// CHECK-NEXT:       arith.mulf %qk_next, %qk_scale_t {tawa.mma_wait = 1 : i32}
// CHECK-NEXT:       aref.consumed %k3_ring[%[[KI]]]
// CHECK:            arith.maximumf %[[M]], %{{.*}}
// CHECK:            arith.mulf %acc_next, %{{.*}} {tawa.mma_wait = 0 : i32}
// CHECK:          } else {
// CHECK-NEXT:       scf.yield {tawa.mma_wait = 0 : i32} %acc_next, %[[L]], %[[M]], %[[P]]
// CHECK-NEXT:     }{tawa.stage = 0 : i32}
// CHECK-NEXT:     aref.consumed %v3_ring[%[[VI]]]
// CHECK-NEXT:     scf.yield
// CHECK:        aref.consumed %q3_ring
