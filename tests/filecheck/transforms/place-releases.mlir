// place-releases: in a software-pipelined loop the releases go where the overlapped MMAs of
// lower-to-nvgpu free the slots, read from the schedule data (stage 0, lag).
// RUN: tawa-opt %examples/attention_causal.mlir -p 'partition,insert-aref,ring-depth{stages=3},distribute,software-pipeline,mma-lag{mma-depth=2},place-releases' | filecheck %s --check-prefix=ATTN
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,ring-depth{stages=3},distribute,mma-lag{mma-depth=2},place-releases' | filecheck %s --check-prefix=GEMM

// After software-pipeline (the stage-0 lookahead) and mma-lag (V released with lag(1)):
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
// ATTN-NEXT:       aref.consumed %v3_ring[%oldest] lag(1)
// ATTN:          %acc_scaled = arith.mulf %acc_i, %alpha_b
// ATTN:          %acc_next = tile.dot %p16, %v, %acc_scaled
// ATTN-NEXT:     scf.if %[[MORE]] {
// ATTN-NEXT:       aref.consumed %k3_ring[%[[KI]]]
// ATTN-NEXT:     }{tawa.stage = 0 : i32}
// ATTN:          scf.yield %acc_next, %l_next, %m_next, %{{.*}}, %{{.*}}, %qk_next
// ATTN:        aref.drain %v3_ring[%use0_1, %{{.*}}] lag(1)

// Without a lookahead (GEMM) the releases stay after their dot.
// GEMM:      %acc_next = tile.dot
// GEMM-NEXT: %lag = arith.constant 1 : i32
