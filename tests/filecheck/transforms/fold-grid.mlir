// fold-grid: each program runs the body for itself and its mirror along x, so that where the
// work grows along x (causal attention's row blocks) every program does the same; run before
// partition, the pair loop is a `both` loop around the key loop, the ring counters carried
// through both, and persistent then walks the pairs.
// RUN: tawa-opt %examples/attention_causal.mlir -p fold-grid | filecheck %s
// RUN: tawa-opt %examples/attention_causal.mlir -p 'fold-grid,partition,insert-aref,ring-depth{stages=2}' | filecheck %s --check-prefix=NEST
// RUN: tawa-opt %examples/attention_causal.mlir -p 'fold-grid,persistent' | filecheck %s --check-prefix=PERS
// RUN: tawa-opt %examples/gemm.mlir -p fold-grid | filecheck %s --check-prefix=GEMM

// The x extent the kernel would have been launched over becomes a trailing argument.
// CHECK:      func.func @attention_causal({{.*}}, %sm_scale: f32, %unfolded_x: i32) {
// CHECK-NEXT:   %pid = tile.program_id 0 : i32
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT:   %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:   %[[TWO:.*]] = arith.constant 2 : i32
// Two trips, one for the middle program of an odd extent (its mirror is itself).
// CHECK-NEXT:   %[[LAST:.*]] = arith.subi %unfolded_x, %[[ONE]] : i32
// CHECK-NEXT:   %mirror = arith.subi %[[LAST]], %pid : i32
// CHECK-NEXT:   %span = arith.subi %mirror, %pid : i32
// CHECK-NEXT:   %[[LEFT:.*]] = arith.addi %span, %[[ONE]] : i32
// CHECK-NEXT:   %trips = arith.minsi %[[LEFT]], %[[TWO]] : i32
// CHECK-NEXT:   scf.for %half = %[[ZERO]] to %trips step %[[ONE]] : i32 {
// The program id of this trip: p, then its mirror.
// CHECK-NEXT:     %[[STEP:.*]] = arith.muli %half, %span : i32
// CHECK-NEXT:     %pid_x = arith.addi %pid, %[[STEP]] : i32
// CHECK-NOT:      tile.program_id 0
// CHECK:          %off_m = arith.muli %pid_x, %block_m : i32
// CHECK:          tile.store %o_desc
// CHECK-NEXT:   }
// CHECK-NEXT:   func.return

// NEST:      %q3_ring = aref.create {aref.role = "both"}
// NEST:      %{{.*}} = scf.for %half = %{{.*}} to %trips step %{{.*}} iter_args(%[[Q:[a-z0-9_]+]] = %use0, %[[K:[a-z0-9_]+]] = %use0, %[[V:[a-z0-9_]+]] = %use0)
// NEST:        aref.put %q3_ring[%[[Q]]]
// NEST:        scf.for %start_n = {{.*}} iter_args({{.*}}, %[[KI:[a-z0-9_]+]] = %[[K]], %[[VI:[a-z0-9_]+]] = %[[V]])
// NEST:          aref.put %k3_ring[%[[KI]]]
// NEST:      scf.yield {aref.role = "both"}

// persistent walks the pairs: the pair loop's program id is the walk's pid_x.
// PERS:      %sm_scale: f32, %unfolded_x: i32, %grid_x: i32, %grid_y: i32, %grid_z: i32) {
// PERS:      %pid_x = arith.remsi %tile_id, %grid_x : i32
// PERS:      %mirror = arith.subi %{{.*}}, %pid_x : i32
// PERS:      scf.for %half = %{{.*}} to %trips

// Any kernel folds: the GEMM's group order reads the folded program id.
// GEMM:      %pid_x = arith.addi %pid, %{{.*}} : i32
// GEMM-NOT:  tile.program_id 0
// GEMM:      tile.store %c_desc
