// split-masked-loops: a loop whose masks hold for a prefix of its iterations becomes two
// loops, the prefix without the selects; a mask that holds for a suffix leaves its loop whole.
// RUN: tawa-opt %s -p split-masked-loops | filecheck %s
// RUN: tawa-opt %examples/attention_causal.mlir -p split-masked-loops | filecheck %s --check-prefix=ATTN

func.func @masked(%o_desc: !tile.desc<4x8xf32>, %lo: i32, %hi: i32, %bound: i32, %row0: i32) {
  %c8 = arith.constant 8 : i32
  %zero = arith.constant 0.000000e+00 : f32
  %minus = arith.constant -1.000000e+00 : f32
  %acc0 = tile.splat %zero : f32 -> tensor<4x8xf32>
  %minus_t = tile.splat %minus : f32 -> tensor<4x8xf32>
  %ones = tile.splat %zero : f32 -> tensor<4x8xf32>
  %lanes = tile.arange 0, 8 : tensor<8xi32>
  %rows0 = tile.arange 0, 4 : tensor<4xi32>
  %row0_t = tile.splat %row0 : i32 -> tensor<4xi32>
  %rows = arith.addi %row0_t, %rows0 : tensor<4xi32>
  %rows_col = tile.expand_dims %rows, 1 : tensor<4xi32> -> tensor<4x1xi32>
  %rows_b = tile.broadcast %rows_col : tensor<4x1xi32> -> tensor<4x8xi32>
  %bound_t = tile.splat %bound : i32 -> tensor<4x8xi32>
  // cols = i + [0, 8): `cols < bound` holds on every lane while i < bound - 7, `cols <= rows`
  // while i < row0 - 6; the first loop ends at the first step at or past the smaller bound,
  // clamped to [lo, hi].
  // CHECK:      %[[B1:.*]] = arith.constant -7 : i32
  // CHECK-NEXT: %[[X1:.*]] = arith.addi %[[B1]], %bound : i32
  // CHECK-NEXT: %[[B2:.*]] = arith.constant -6 : i32
  // CHECK-NEXT: %[[X2:.*]] = arith.addi %[[B2]], %row0 : i32
  // CHECK-NEXT: %[[B:.*]] = arith.minsi %[[X1]], %[[X2]] : i32
  // CHECK-NEXT: %[[AHEAD:.*]] = arith.subi %[[B]], %lo : i32
  // CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i32
  // CHECK-NEXT: %[[POS:.*]] = arith.maxsi %[[AHEAD]], %[[ZERO]] : i32
  // CHECK-NEXT: %[[TRIPS:.*]] = arith.ceildivsi %[[POS]], %c8 : i32
  // CHECK-NEXT: %[[SPAN:.*]] = arith.muli %[[TRIPS]], %c8 : i32
  // CHECK-NEXT: %[[END:.*]] = arith.addi %lo, %[[SPAN]] : i32
  // CHECK-NEXT: %split = arith.minsi %[[END]], %hi : i32
  // The prefix: no compare, no select; the carried value flows into the second loop.
  // CHECK-NEXT: %acc = scf.for %i = %lo to %split step %c8 iter_args(%acc_i = %acc0)
  // CHECK-NEXT:   %next = arith.addf %acc_i, %ones : tensor<4x8xf32>
  // CHECK-NEXT:   scf.yield %next : tensor<4x8xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: %acc_1 = scf.for %i_1 = %split to %hi step %c8 iter_args(%acc_i_1 = %acc)
  // CHECK:        tile.where %visible
  %acc = scf.for %i = %lo to %hi step %c8 iter_args(%acc_i = %acc0) -> (tensor<4x8xf32>) : i32 {
    %i_t = tile.splat %i : i32 -> tensor<8xi32>
    %cols = arith.addi %i_t, %lanes : tensor<8xi32>
    %cols_row = tile.expand_dims %cols, 0 : tensor<8xi32> -> tensor<1x8xi32>
    %cols_b = tile.broadcast %cols_row : tensor<1x8xi32> -> tensor<4x8xi32>
    %in_bound = tile.cmp lt, %cols_b, %bound_t : tensor<4x8xi32> -> tensor<4x8xi1>
    %before_row = tile.cmp le, %cols_b, %rows_b : tensor<4x8xi32> -> tensor<4x8xi1>
    %visible = arith.andi %in_bound, %before_row : tensor<4x8xi1>
    %x = tile.where %visible, %ones, %minus_t : tensor<4x8xi1>, tensor<4x8xf32>
    %next = arith.addf %acc_i, %x : tensor<4x8xf32>
    scf.yield %next : tensor<4x8xf32>
  }
  // `cols > bound` holds for a suffix of the iterations: one loop, as written.
  // CHECK:      %acc_2 = scf.for %j = %lo to %hi step %c8 iter_args(%acc_j = %acc_1)
  // CHECK:        %y = tile.where %past
  // CHECK-NOT:  scf.for
  %acc_2 = scf.for %j = %lo to %hi step %c8 iter_args(%acc_j = %acc) -> (tensor<4x8xf32>) : i32 {
    %j_t = tile.splat %j : i32 -> tensor<8xi32>
    %cols = arith.addi %j_t, %lanes : tensor<8xi32>
    %cols_row = tile.expand_dims %cols, 0 : tensor<8xi32> -> tensor<1x8xi32>
    %cols_b = tile.broadcast %cols_row : tensor<1x8xi32> -> tensor<4x8xi32>
    %past = tile.cmp gt, %cols_b, %bound_t : tensor<4x8xi32> -> tensor<4x8xi1>
    %y = tile.where %past, %ones, %minus_t : tensor<4x8xi1>, tensor<4x8xf32>
    %next = arith.addf %acc_j, %y : tensor<4x8xf32>
    scf.yield %next : tensor<4x8xf32>
  }
  %c0 = arith.constant 0 : i32
  tile.store %o_desc[%c0, %c0], %acc_2 : !tile.desc<4x8xf32>, tensor<4x8xf32>
  func.return
}

// The causal attention's key loop (64 keys per block): keys before `seq` while
// start_n < seq - 63, and before the tile's first row while start_n < off_m - 62.
// ATTN:      %[[S:.*]] = arith.constant -63 : i32
// ATTN-NEXT: %{{.*}} = arith.addi %[[S]], %seq : i32
// ATTN-NEXT: %[[R:.*]] = arith.constant -62 : i32
// ATTN-NEXT: %{{.*}} = arith.addi %[[R]], %off_m : i32
// ATTN:      %split = arith.minsi %{{.*}}, %hi : i32
// ATTN-NEXT: %acc, %l, %m = scf.for %start_n = %c0 to %split step %block_n
// ATTN-NOT:    tile.where
// ATTN:        scf.yield
// ATTN-NEXT: }
// ATTN-NEXT: %acc_1, %l_1, %m_1 = scf.for %start_n_1 = %split to %hi step %block_n iter_args(%acc_i_1 = %acc, %l_i_1 = %l, %m_i_1 = %m)
// ATTN:        tile.where %visible
