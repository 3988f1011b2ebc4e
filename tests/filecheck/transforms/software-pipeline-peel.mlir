// software-pipeline{rotate=true peel=true}: the rotated loop with its last iteration's stage 1
// peeled after it. The first QK^T and its softmax are peeled under lb < ub as in the rotated
// form; the loop runs to ub - step with QK^T(j+1), P V(j) and the softmax of j+1 unguarded
// (no branch in the body); after it, under the same lb < ub, P V(last) on the loop's O and P,
// waited for (not in flight), and V's release, marked tawa.stage = 1 and tawa.peeled. Its
// counter result (the loop's V counter plus one) is what follows the loop.
// RUN: tawa-opt %examples/attention_causal.mlir -p 'partition,insert-aref,ring-depth{stages=3},distribute,software-pipeline{rotate=true peel=true}' | filecheck %s

// CHECK:      aref.group consumer
// CHECK:        %[[NONEMPTY:[0-9]+]] = arith.cmpi slt, %c0_1, %hi_1 : i32
// CHECK-NEXT:   %[[O0:[0-9]+]], %[[L0:[0-9]+]], %[[M0:[0-9]+]], %[[K0:[0-9]+]], %[[P0:[0-9]+]] = scf.if %[[NONEMPTY]]
// CHECK:        }{tawa.stage = 0 : i32, tawa.peeled}

// The loop stops one key block short of the end.
// CHECK-NEXT:   %[[SHORT:[0-9]+]] = arith.subi %hi_1, %block_n_1 : i32
// CHECK-NEXT:   %acc, %l, %m, %{{.*}}, %[[VEND:[a-z0-9_]+]], %[[PEND:[0-9]+]] = scf.for %{{.*}} = %c0_1 to %[[SHORT]] step %block_n_1 iter_args(%[[O:[0-9]+]] = %[[O0]], %{{.*}} = %[[L0]], %{{.*}} = %[[M0]], %[[KI:[0-9]+]] = %[[K0]], %[[VI:[0-9]+]] = %use0_1, %[[P:[0-9]+]] = %[[P0]])

// No guard in the body: K(j+1) and V(j) taken, both dots in flight, K released once QK^T(j+1)
// is done, the rescale waits for P V(j), V released last.
// CHECK-NOT:      scf.if
// CHECK:          aref.get %k3_ring[%[[KI]]]
// CHECK:          tile.dot %q, %{{.*}}, %qk_zero {tawa.in_flight}
// CHECK-NEXT:     aref.get %v3_ring[%[[VI]]]
// CHECK:          %acc_next = tile.dot %[[P]], %v, %[[O]] {tawa.in_flight}
// CHECK-NEXT:     arith.mulf %{{.*}}, %qk_scale_t {tawa.mma_wait = 1 : i32}
// CHECK-NEXT:     aref.consumed %k3_ring[%[[KI]]]
// CHECK-NOT:      scf.if
// CHECK:          arith.mulf %acc_next, %{{.*}} {tawa.mma_wait = 0 : i32}
// CHECK:          aref.consumed %v3_ring[%[[VI]]]
// CHECK-NEXT:     scf.yield
// CHECK-NEXT:   }

// The last iteration's stage 1, on what the loop left: V of the last use, P V(last) waited.
// CHECK-NEXT:   %acc_1, %{{.*}} = scf.if %[[NONEMPTY]] -> (tensor<128x64xf32>, i32) {
// CHECK-NEXT:     aref.get %v3_ring[%[[VEND]]]
// CHECK-NEXT:     %[[VNEXT:[0-9]+]] = arith.addi %[[VEND]], %use1_1 : i32
// CHECK:          %acc_next_1 = tile.dot %[[PEND]], %v_1, %acc : tensor<128x64xf16>
// CHECK-NEXT:     aref.consumed %v3_ring[%[[VEND]]]
// CHECK-NEXT:     scf.yield %acc_next_1, %[[VNEXT]]
// CHECK-NEXT:   } else {
// CHECK-NEXT:     scf.yield %acc, %[[VEND]]
// CHECK-NEXT:   }{tawa.stage = 1 : i32, tawa.peeled}
// CHECK-NEXT:   aref.consumed %q3_ring
// CHECK:        arith.divf %acc_1, %l_b
