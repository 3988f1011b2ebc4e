// The compiler's GEMM pipeline is proved for every trip count, one line per ring, and the
// verify-pipeline pass accepts it.
// RUN: tawa-verify %examples/gemm.mlir -p 'tawa-warp-specialize{stages=3 mma-depth=2 consumers=2 persistent=true},lower-aref' | filecheck %s
// RUN: tawa-opt %examples/gemm.mlir -p 'tawa-warp-specialize{stages=2},lower-aref,verify-pipeline' > /dev/null

// CHECK: proved: ring a_b_ring: no deadlock, overwrite, stale/partial read, count or tx mismatch, parity aliasing for every trip count
