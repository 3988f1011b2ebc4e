// The combined pipeline, as the README shows it.
// RUN: tawa-opt %examples/gemm.mlir -p 'tawa-warp-specialize{stages=3 mma-depth=2 consumers=2 persistent=true}' | filecheck %s
// RUN: tawa-opt %examples/attention.mlir -p 'tawa-warp-specialize{stages=2 mma-depth=1 consumers=2}' | filecheck %s --check-prefix=ATTN
// RUN: tawa-opt %examples/gemm.mlir -p 'tawa-warp-specialize{consumers=2}' | tawa-opt | filecheck %s --check-prefix=ROUND

// CHECK:      func.func @gemm({{.*}}, %grid_x: i32, %grid_y: i32, %grid_z: i32) {
// CHECK-NEXT:   %a_b_ring = aref.create : !aref.ring<[tensor<128x64xf16>, tensor<128x64xf16>], 3>
// CHECK-NEXT:   aref.warp_specialize {
// CHECK-NEXT:     aref.group producer warpgroups(1) registers(40) {
// CHECK:            scf.for %walk = %pid to %num_tiles step %num_programs iter_args(
// CHECK:              scf.for %kt = %c0 to %k_tiles step %c1 iter_args(
// CHECK:                aref.put %a_b_ring
// CHECK:          aref.group consumer warpgroups(2) registers(232) {
// CHECK:            scf.for %walk_1 = %pid_1 to %num_tiles_1 step %num_programs_1 iter_args(
// CHECK:              scf.for %kt_1 = %c0_1 to %k_tiles_1 step %c1_1 iter_args(%acc_iter = %acc0,
// CHECK:                aref.get %a_b_ring
// CHECK:                tile.extract_slice
// CHECK:                scf.if %full {
// CHECK:              aref.drain %a_b_ring[%{{.*}}] lag(1)
// CHECK:              tile.store_slice %c_desc

// ATTN:      aref.group consumer warpgroups(2) registers(232) {
// ATTN:        %q = tile.reshape %{{.*}} : tensor<1x64x64xf16> -> tensor<64x64xf16>
// ATTN:        %m0 = tile.splat %neg_inf : f32 -> tensor<64xf32>
// The key loop split where its mask stops holding (split-masked-loops, first): the blocks
// before `seq - 63` reduce the scores as they are, the rest after the select.
// ATTN:        scf.for %start_n_2 = %c0_1 to %split_1 step %block_n_1
// ATTN:          %qk_next, %{{.*}} = scf.if
// ATTN:          %row_max = tile.reduce max %qk_scaled, 1 : tensor<64x64xf32> -> tensor<64xf32>
// ATTN:        scf.for %start_n_3 = %split_1 to %seq step %block_n_1
// ATTN:          %s = tile.where %in_seq, %qk_scaled_1, %neg_inf_t
// ATTN-NEXT:     %row_max_1 = tile.reduce max %s, 1 : tensor<64x64xf32> -> tensor<64xf32>
// ATTN:        tile.store_slice %o_desc[%head_1, %{{.*}}, %c0_1], %o3 : !tile.desc<1x128x64xf16>, tensor<1x64x64xf16>

// ROUND: aref.group consumer warpgroups(2) registers(232)
