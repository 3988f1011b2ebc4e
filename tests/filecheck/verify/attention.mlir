// tawa-verify proves the lowered output of tawa-warp-specialize on both attention examples
// (Q, K and V rings; the peeled K prologue, the lookahead QK^T(j+1) whose K release comes after
// P V(j), the V(j-1) release after the get of V(j): the order the GPU runs), read from stdin,
// one line per ring with the time taken, then one for the rings together (cross-ring deadlock).
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{stages=2 mma-depth=2 consumers=2},lower-aref' | tawa-verify - | filecheck %s
// RUN: tawa-opt %examples/attention_causal.mlir -p 'tawa-warp-specialize{stages=2 mma-depth=2 consumers=1 persistent=true},lower-aref' | tawa-verify - | filecheck %s
// RUN: tawa-opt %examples/gemm.mlir -p 'tawa-warp-specialize{stages=4 mma-depth=2 consumers=2},lower-aref' | tawa-verify - | filecheck %s --check-prefix=GEMM

// CHECK: proved: ring q3_ring: {{.*}} for every trip count and tile count (certificate, 1-induction, {{[0-9.]+}} s)
// CHECK-NEXT: proved: ring k3_ring: {{.*}} (certificate, 1-induction, {{[0-9.]+}} s)
// CHECK-NEXT: proved: ring v3_ring: {{.*}} (certificate, 1-induction, {{[0-9.]+}} s)
// CHECK-NEXT: proved: rings q3_ring, k3_ring, v3_ring together: no cross-ring deadlock for every trip count and tile count (decomposition, {{[0-9.]+}} s)
// GEMM: proved: ring a_b_ring: {{.*}} (certificate, 1-induction, {{[0-9.]+}} s)
// GEMM-NOT: together
