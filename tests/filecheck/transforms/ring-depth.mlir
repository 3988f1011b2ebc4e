// ring-depth: the one place a ring's depth is set: rings used inside a loop get D slots,
// rings used once per program keep the one slot insert-aref gave them.
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,distribute,ring-depth{stages=4}' | filecheck %s
// RUN: tawa-opt %examples/attention.mlir -p 'partition,insert-aref,ring-depth{stages=3},distribute' | filecheck %s --check-prefix=ATTN
// RUN: not tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,ring-depth{stages=0}' 2>&1 | filecheck %s --check-prefix=BAD

// CHECK:      %a_b_ring = aref.create : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 4>
// CHECK:      aref.put %a_b_ring[%{{.*}}], %a, %b : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 4>

// ATTN:      %q3_ring = aref.create : !aref.ring<[tensor<1x128x64xf16>], 1>
// ATTN-NEXT: %k3_ring = aref.create : !aref.ring<[tensor<1x64x64xf16>], 3>
// ATTN-NEXT: %v3_ring = aref.create : !aref.ring<[tensor<1x64x64xf16>], 3>

// BAD: error: ring-depth: stages must be at least 1, got 0
