// defer-row-sums: the online softmax's row sum l is carried as each lane's partial. The
// peeled first stage and every iteration add the lane's own row sum (no shuffles); after the
// loop and its peeled last stage, l is combined over the quad (shuffle_xor 1 and 2) once,
// for the normalization. The row max keeps its shuffles: the max feeds the exp2s in the loop.
// RUN: tawa-opt %examples/attention_causal.mlir -p 'tawa-warp-specialize{stages=3 mma-depth=1 consumers=2 rotate=true peel=true split-loops=false},lower-aref,lower-to-nvgpu,defer-row-sums' | filecheck %s
// Without the pass, the same IR combines l in every iteration.
// RUN: tawa-opt %examples/attention_causal.mlir -p 'tawa-warp-specialize{stages=3 mma-depth=1 consumers=2 rotate=true peel=true split-loops=false},lower-aref,lower-to-nvgpu' | filecheck %s --check-prefix=BEFORE

// CHECK:      %l0 = nvgpu.fragment_splat %zero

// The peeled first stage: the max is combined, the sum is not.
// CHECK:        %row_max_1 = nvgpu.shuffle_xor %row_max, 1
// CHECK:        %row_max_3 = nvgpu.shuffle_xor %row_max_2, 2
// CHECK:        %row_sum = nvgpu.fragment_row_reduce sum %p
// CHECK-NOT:    shuffle_xor
// CHECK:        %l_scaled = nvgpu.fragment_binary mul %l0, %alpha
// CHECK-NEXT:   %l_next = nvgpu.fragment_binary add %l_scaled, %row_sum
// CHECK:      }{tawa.stage = 0 : i32, tawa.peeled}

// The loop carries the partial: in each iteration two shuffles for the max, none for the sum.
// CHECK:      %acc, %l, %m, {{.*}} = scf.for
// CHECK:        nvgpu.shuffle_xor %row_max_5, 1
// CHECK:        nvgpu.shuffle_xor %row_max_7, 2
// CHECK:        %row_sum_1 = nvgpu.fragment_row_reduce sum %p_1
// CHECK-NOT:    shuffle_xor
// CHECK:        %l_next_1 = nvgpu.fragment_binary add %l_scaled_1, %row_sum_1
// CHECK:      }{tawa.stage = 1 : i32, tawa.peeled}

// After the peeled last stage (nothing may sit between it and its loop): the quad combine.
// CHECK-NEXT: %[[S1:[0-9]+]] = nvgpu.shuffle_xor %l, 1
// CHECK-NEXT: %[[T1:[0-9]+]] = nvgpu.fragment_binary add %l, %[[S1]]
// CHECK-NEXT: %[[S2:[0-9]+]] = nvgpu.shuffle_xor %[[T1]], 2
// CHECK-NEXT: %[[L:[0-9]+]] = nvgpu.fragment_binary add %[[T1]], %[[S2]]
// CHECK:      %l_inv = nvgpu.fragment_unary rcp %[[L]]

// BEFORE:      scf.for
// BEFORE:        %[[SUM:[a-z0-9_]+]] = nvgpu.fragment_row_reduce sum %p_1
// BEFORE-NEXT:   nvgpu.shuffle_xor %[[SUM]], 1
// BEFORE:      %l_inv = nvgpu.fragment_unary rcp %l :
