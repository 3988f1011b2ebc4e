// lower-to-nvgpu reads slot tiles into registers where no dot takes them, through the whole
// pipeline from tile IR (one consumer): a 2-D tile becomes an accumulator-layout
// fragment_load, a per-row vector (`[:, None]`) a wgmma_row fragment_load_rows spread by
// fragment_broadcast_rows, a per-column vector (`[None, :]`) one fragment_load_columns; any
// elementwise op is a fragment op; a group that read a slot into registers syncs its threads
// before thread 0 releases the slot.
// RUN: tawa-opt %s -p "tawa-warp-specialize{consumers=1},lower-aref,lower-to-nvgpu" | filecheck %s
// RUN: tawa-opt %s -p "tawa-warp-specialize{consumers=1},lower-aref,lower-to-nvgpu" -t ptx | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @rows
// CHECK:       nvgpu.setmaxnreg increase
builtin.module {
  func.func @rows(%x_desc: !tile.desc<64x64xf16>, %s_desc: !tile.desc<64xf32>, %w_desc: !tile.desc<64xbf16>, %y_desc: !tile.desc<64x64xf16>) {
    %0 = arith.constant 0 : i32
// CHECK:       nvgpu.mbarrier_wait %ring_full
// CHECK-NEXT:  %[[X16:.*]] = nvgpu.fragment_load %ring_buf0[%{{.*}}] : !nvgpu.smem<1x64x64xf16, swizzle 128> -> !nvgpu.fragment<wgmma_acc, 64x64xf16>
// PTX:         ld.shared.b32
    %1 = tile.load %x_desc[%0, %0] : !tile.desc<64x64xf16> -> tensor<64x64xf16>
// CHECK-NEXT:  %[[X:.*]] = nvgpu.fragment_convert %[[X16]] : !nvgpu.fragment<wgmma_acc, 64x64xf16> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
    %x = tile.convert %1 : tensor<64x64xf16> -> tensor<64x64xf32>
// CHECK-NEXT:  %[[ERF:.*]] = nvgpu.fragment_unary erf %[[X]] : !nvgpu.fragment<wgmma_acc, 64x64xf32>
// PTX:         copysign.f32
    %2 = math.erf %x : tensor<64x64xf32>
// CHECK:       nvgpu.named_barrier_sync 5, 128
// CHECK-NEXT:  scf.if %is_t0 {
// CHECK-NEXT:    nvgpu.mbarrier_arrive %ring_empty
// CHECK:       %[[S:.*]] = nvgpu.fragment_load_rows %ring_buf0_1[%{{.*}}] : !nvgpu.smem<1x64xf32, swizzle 0> -> !nvgpu.fragment<wgmma_row, 64xf32>
// PTX:         ld.shared.f32
    %3 = tile.load %s_desc[%0] : !tile.desc<64xf32> -> tensor<64xf32>
    %4 = tile.expand_dims %3, 1 : tensor<64xf32> -> tensor<64x1xf32>
// CHECK-NEXT:  %[[SB:.*]] = nvgpu.fragment_broadcast_rows %[[S]] : !nvgpu.fragment<wgmma_row, 64xf32> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
    %5 = tile.broadcast %4 : tensor<64x1xf32> -> tensor<64x64xf32>
// CHECK-NEXT:  %[[SCALED:.*]] = nvgpu.fragment_binary mul %[[ERF]], %[[SB]]
    %6 = arith.mulf %2, %5 : tensor<64x64xf32>
// CHECK:       %[[W:.*]] = nvgpu.fragment_load_columns %ring_buf0_2[%{{.*}}] : !nvgpu.smem<1x64xbf16, swizzle 0> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
    %7 = tile.load %w_desc[%0] : !tile.desc<64xbf16> -> tensor<64xbf16>
    %8 = tile.convert %7 : tensor<64xbf16> -> tensor<64xf32>
    %9 = tile.expand_dims %8, 0 : tensor<64xf32> -> tensor<1x64xf32>
    %10 = tile.broadcast %9 : tensor<1x64xf32> -> tensor<64x64xf32>
// CHECK-NEXT:  %y = nvgpu.fragment_binary add %[[SCALED]], %[[W]]
    %y = arith.addf %6, %10 : tensor<64x64xf32>
// CHECK:       nvgpu.fragment_convert %y : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_acc, 64x64xf16>
// CHECK-NEXT:  nvgpu.fragment_store_global
    %11 = tile.convert %y : tensor<64x64xf32> -> tensor<64x64xf16>
    tile.store %y_desc[%0, %0], %11 : !tile.desc<64x64xf16>, tensor<64x64xf16>
    func.return
  }
}
