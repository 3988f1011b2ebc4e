// cooperative-consumers: two consumer warpgroups split the rows of every consumer tile.
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,ring-depth,distribute,cooperative-consumers{consumers=2}' | filecheck %s --check-prefix=COOP
// RUN: tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,distribute,cooperative-consumers' | filecheck %s --check-prefix=ONE
// RUN: not tawa-opt %examples/gemm.mlir -p 'partition,insert-aref,distribute,cooperative-consumers{consumers=3}' 2>&1 | filecheck %s --check-prefix=BAD

// Two consumer warpgroups split the 128 rows: A is sliced, B is not, the accumulator and
// the stored tile have 64 rows, stored at off_m + 64 * warpgroup.
// COOP:      aref.group consumer warpgroups(2) registers(232) {
// COOP-NEXT:   %wg = aref.warpgroup_index : i32
// COOP-NEXT:   %[[R:[0-9]+]] = arith.constant 64 : i32
// COOP-NEXT:   %row0 = arith.muli %wg, %[[R]] : i32
// COOP:        %acc0 = tile.splat %zero : f32 -> tensor<64x128xf32>
// COOP:        %a_1, %b_1 = aref.get %a_b_ring[%{{.*}}] : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 2> -> tensor<128x64xf16>, tensor<128x64xf16>
// COOP-NEXT:   %a_2 = tile.extract_slice %a_1[%row0, %{{.*}}] : tensor<128x64xf16> -> tensor<64x64xf16>
// COOP:        %b_t = tile.trans %b_1 : tensor<128x64xf16> -> tensor<64x128xf16>
// COOP-NEXT:   %acc_next = tile.dot %a_2, %b_t, %acc_iter : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
// COOP:        %c_tile = tile.convert %acc : tensor<64x128xf32> -> tensor<64x128xf16>
// COOP-NEXT:   %[[ROW:[0-9]+]] = arith.addi %off_m_1, %row0 : i32
// COOP-NEXT:   tile.store_slice %c_desc[%[[ROW]], %off_n_1], %c_tile : !tile.desc<128x128xf16>, tensor<64x128xf16>

// consumers=1 leaves the group on one warpgroup.
// ONE:       aref.group consumer warpgroups(1) registers(232) {
// ONE-NOT:   tile.extract_slice

// 128 rows do not split into three warpgroups of a multiple of 64 rows (three: cooperative-consumers-three.mlir).
// BAD: error: cooperative-consumers: cannot split rows [128] into 3 warpgroups of a multiple of 64 rows
