// ring-depth: the one place a ring's depth is set: rings an innermost loop streams get D
// slots, rings used once per program keep the one slot insert-aref gave them, and a ring
// used once per iteration of a loop around other loops (Q in a persistent attention's tile
// loop) gets two, or one where two do not fit shared memory beside the streamed rings.
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,distribute,ring-depth{stages=4}' | filecheck %s
// RUN: tawa-opt %examples/attention.mlir -p 'partition,insert-aref,ring-depth{stages=3},distribute' | filecheck %s --check-prefix=ATTN
// RUN: tawa-opt %examples/attention.mlir -p 'persistent,partition,insert-aref,ring-depth{stages=3}' | filecheck %s --check-prefix=TILES
// RUN: tawa-opt %examples/attention.mlir -p 'persistent,partition,insert-aref,ring-depth{stages=13}' | filecheck %s --check-prefix=FULL
// RUN: not tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,ring-depth{stages=0}' 2>&1 | filecheck %s --check-prefix=BAD

// CHECK:      %a_b_ring = aref.create : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 4>
// CHECK:      aref.put %a_b_ring[%{{.*}}], %a, %b : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 4>

// ATTN:      %q3_ring = aref.create : !aref.ring<[tensor<1x128x64xf16>], 1>
// ATTN-NEXT: %k3_ring = aref.create : !aref.ring<[tensor<1x64x64xf16>], 3>
// ATTN-NEXT: %v3_ring = aref.create : !aref.ring<[tensor<1x64x64xf16>], 3>

// Persistent: Q is put once per tile, K and V once per key block.
// TILES:      %q3_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<1x128x64xf16>], 2>
// TILES-NEXT: %k3_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<1x64x64xf16>], 3>
// TILES-NEXT: %v3_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<1x64x64xf16>], 3>

// 13-deep K and V rings (208 KB) leave room for one Q tile (16 KB), not two.
// FULL:      %q3_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<1x128x64xf16>], 1>
// FULL-NEXT: %k3_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<1x64x64xf16>], 13>

// BAD: error: ring-depth: stages must be at least 1, got 0
