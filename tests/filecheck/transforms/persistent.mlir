// persistent: the kernel loops over logical tiles, dealt in waves of num_programs with every
// other full wave mirrored (a snake); run before partition, the tile loop is a `both` loop
// around the K loop and the ring counter is carried through both loops.
// RUN: tawa-opt %examples/gemm.mlir -p persistent | filecheck %s
// RUN: tawa-opt %examples/gemm.mlir -p 'persistent,partition,insert-aref,ring-depth{stages=2}' | filecheck %s --check-prefix=NEST
// RUN: tawa-opt %examples/attention.mlir -p persistent | filecheck %s --check-prefix=ATTN
// RUN: tawa-opt %examples/attention.mlir -p 'persistent{order=yxz}' | filecheck %s --check-prefix=YX
// RUN: not tawa-opt %examples/gemm.mlir -p 'persistent{order=xxz}' 2>&1 | filecheck %s --check-prefix=BAD

// CHECK:      func.func @gemm(%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<128x64xf16>, %c_desc: !tile.desc<128x128xf16>, %m: i32, %n: i32, %k: i32, %grid_x: i32, %grid_y: i32, %grid_z: i32) {
// CHECK-NEXT:   %pid = tile.program_id 0 : i32
// CHECK-NEXT:   %num_programs = tile.num_programs 0 : i32
// CHECK-NEXT:   %0 = arith.muli %grid_x, %grid_y : i32
// CHECK-NEXT:   %num_tiles = arith.muli %0, %grid_z : i32
// CHECK-NEXT:   scf.for %walk = %pid to %num_tiles step %num_programs : i32 {
// Step k of program p: wave k, mirrored when k is odd and the wave full.
// CHECK-NEXT:     %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:     %wave = arith.divsi %walk, %num_programs : i32
// CHECK-NEXT:     %[[START:.*]] = arith.subi %walk, %pid : i32
// CHECK-NEXT:     %[[END:.*]] = arith.addi %[[START]], %num_programs : i32
// CHECK-NEXT:     %[[FULL:.*]] = arith.cmpi sle, %[[END]], %num_tiles : i32
// CHECK-NEXT:     %[[PARITY:.*]] = arith.andi %wave, %[[ONE]] : i32
// CHECK-NEXT:     %[[ODD:.*]] = arith.cmpi eq, %[[PARITY]], %[[ONE]] : i32
// CHECK-NEXT:     %[[FLIP:.*]] = arith.andi %[[ODD]], %[[FULL]] : i1
// CHECK-NEXT:     %[[LAST:.*]] = arith.subi %[[END]], %[[ONE]] : i32
// CHECK-NEXT:     %[[MIRROR:.*]] = arith.subi %[[LAST]], %pid : i32
// CHECK-NEXT:     %tile_id = arith.select %[[FLIP]], %[[MIRROR]], %walk : i32
// CHECK-NEXT:     %pid_x = arith.remsi %tile_id, %grid_x : i32
// CHECK-NEXT:     %[[ROW:.*]] = arith.divsi %tile_id, %grid_x : i32
// CHECK-NEXT:     %pid_y = arith.remsi %[[ROW]], %grid_y : i32
// CHECK-NEXT:     %pid_z = arith.divsi %[[ROW]], %grid_y : i32
// CHECK-NOT:      tile.program_id
// CHECK:          %group_id = arith.divsi %pid_x, %tiles_per_group : i32
// CHECK:          tile.store %c_desc[%off_m, %off_n], %c_tile
// CHECK-NEXT:   }
// CHECK-NEXT:   func.return

// NEST:      %a_b_ring = aref.create {aref.role = "both"} : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 2>
// NEST:      %{{.*}} = scf.for %walk = %pid to %num_tiles step %num_programs iter_args(%[[T:[a-z0-9_]+]] = %use0) -> (i32) : i32 {
// NEST:        %acc, %[[KEND:[a-z0-9_]+]] = scf.for %kt = %c0 to %k_tiles step %c1 iter_args(%acc_iter = %acc0, %[[I:[a-z0-9_]+]] = %[[T]])
// NEST:          aref.put %a_b_ring[%[[I]]], %a, %b
// NEST:        tile.store
// NEST-NEXT:   scf.yield {aref.role = "both"} %[[KEND]] : i32

// ATTN:      %pid_x = arith.remsi %tile_id, %grid_x : i32
// ATTN:      %off_m = arith.muli %pid_x, %block_m : i32
// ATTN:      %q3 = tile.load %q_desc[%pid_y, %off_m, %c0]

// order=yxz: y (the heads) fastest, so the walk takes row block x of every head before x + 1.
// YX:      %tile_id = arith.select
// YX-NEXT: %pid_y = arith.remsi %tile_id, %grid_y : i32
// YX-NEXT: %[[ROWS:.*]] = arith.divsi %tile_id, %grid_y : i32
// YX-NEXT: %pid_x = arith.remsi %[[ROWS]], %grid_x : i32
// YX-NEXT: %pid_z = arith.divsi %[[ROWS]], %grid_x : i32
// YX:      %off_m = arith.muli %pid_x, %block_m : i32

// BAD: gemm.mlir:{{[0-9]+}}:{{[0-9]+}}: error: persistent: order must be a permutation of xyz, got 'xxz'
