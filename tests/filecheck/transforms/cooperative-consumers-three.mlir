// cooperative-consumers{consumers=3}: three consumer warpgroups split 192 rows, and the
// groups' register budgets are refitted to the SM (distribute's 40/232 would need 94208).
// RUN: tawa-opt %s -p 'partition,insert-aref,ring-depth{stages=2},distribute,cooperative-consumers{consumers=3}' | filecheck %s
// Unset, the pass chooses three for 192 rows (one warpgroup holding all 192 spills): the same.
// RUN: tawa-opt %s -p 'partition,insert-aref,ring-depth{stages=2},distribute,cooperative-consumers{consumers}' | filecheck %s
// RUN: not tawa-opt %s -p 'partition,insert-aref,distribute,cooperative-consumers{consumers=2}' 2>&1 | filecheck %s --check-prefix=TWO
// RUN: not tawa-opt %s -p 'partition,insert-aref,distribute,cooperative-consumers{consumers=4}' 2>&1 | filecheck %s --check-prefix=FOUR
// RUN: not tawa-opt %s -p 'partition,insert-aref,distribute,cooperative-consumers{consumers=3},set-registers{producer=40 consumer=232}' 2>&1 | filecheck %s --check-prefix=OVER

func.func @gemm192(%a_desc: !tile.desc<192x64xf16>, %b_desc: !tile.desc<128x64xf16>,
                   %c_desc: !tile.desc<192x128xf16>, %k: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %block_m = arith.constant 192 : i32
  %block_k = arith.constant 64 : i32
  %pid = tile.program_id 0 : i32
  %off_m = arith.muli %pid, %block_m : i32
  %k_tiles = arith.divsi %k, %block_k : i32
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = tile.splat %zero : f32 -> tensor<192x128xf32>
  %acc = scf.for %kt = %c0 to %k_tiles step %c1 iter_args(%acc_iter = %acc0) -> (tensor<192x128xf32>) : i32 {
    %off_k = arith.muli %kt, %block_k : i32
    %a = tile.load %a_desc[%off_m, %off_k] : !tile.desc<192x64xf16> -> tensor<192x64xf16>
    %b = tile.load %b_desc[%c0, %off_k] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
    %b_t = tile.trans %b : tensor<128x64xf16> -> tensor<64x128xf16>
    %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<192x64xf16>, tensor<64x128xf16> -> tensor<192x128xf32>
    scf.yield %acc_next : tensor<192x128xf32>
  }
  %c_tile = tile.convert %acc : tensor<192x128xf32> -> tensor<192x128xf16>
  tile.store %c_desc[%off_m, %c0], %c_tile : !tile.desc<192x128xf16>, tensor<192x128xf16>
  func.return
}

// The producer drops to the least setmaxnreg takes; three consumers share the rest:
// (24 + 3 * 160) * 128 = 64512 of 65536.
// CHECK:      aref.group producer warpgroups(1) registers(24) {
// CHECK:      aref.group consumer warpgroups(3) registers(160) {
// CHECK-NEXT:   %wg = aref.warpgroup_index : i32
// CHECK-NEXT:   %[[R:[0-9]+]] = arith.constant 64 : i32
// CHECK-NEXT:   %row0 = arith.muli %wg, %[[R]] : i32
// CHECK:        %acc0 = tile.splat %zero : f32 -> tensor<64x128xf32>
// CHECK:        %a_2 = tile.extract_slice %a_1[%row0, %{{.*}}] : tensor<192x64xf16> -> tensor<64x64xf16>
// CHECK:        tile.store_slice %c_desc[%{{.*}}, %c0{{.*}}], %c_tile : !tile.desc<192x128xf16>, tensor<64x128xf16>

// 192 rows do not split into two warpgroups of a multiple of 64 rows.
// TWO: error: cooperative-consumers: cannot split rows [192] into 2 warpgroups of a multiple of 64 rows

// FOUR: error: cooperative-consumers: consumers must be 1, 2 or 3 warpgroups, got 4

// set-registers may not put distribute's budgets back: the SM has too few registers.
// OVER: error: set-registers: registers (40, 232) over 4 warpgroups need 94208 registers; an SM has 65536
