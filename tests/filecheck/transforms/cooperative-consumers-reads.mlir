// cooperative-consumers on a kernel with no dot and no tile stored (a running column max over
// row blocks, stored as one row): the rows of the tiles it reads from the ring are split, as
// a GEMM's are (the compile's default, consumers chosen from the rows, picks two for 128).
// RUN: tawa-opt %s -p 'partition,insert-aref,ring-depth{stages=2},distribute,cooperative-consumers{consumers=2}' | filecheck %s

func.func @column_max(%x_desc: !tile.desc<128x64xf16>, %m_desc: !tile.desc<1x64xf32>, %M: i32) {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %ninf = arith.constant 0xff800000 : f32
  %best0 = tile.splat %ninf : f32 -> tensor<64xf32>
  %nonempty = arith.cmpi sgt, %M, %c0 : i32
  scf.if %nonempty {
    %best = scf.for %r = %c0 to %M step %c128 iter_args(%best_iter = %best0) -> (tensor<64xf32>) : i32 {
      %x = tile.load %x_desc[%r, %c0] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
      %x32 = tile.convert %x : tensor<128x64xf16> -> tensor<128x64xf32>
      %col = tile.reduce max %x32, 0 : tensor<128x64xf32> -> tensor<64xf32>
      %next = arith.maximumf %best_iter, %col : tensor<64xf32>
      scf.yield %next : tensor<64xf32>
    }
    %row = tile.expand_dims %best, 0 : tensor<64xf32> -> tensor<1x64xf32>
    tile.store %m_desc[%c0, %c0], %row : !tile.desc<1x64xf32>, tensor<1x64xf32>
  }
  func.return
}
// Each warpgroup takes its 64 rows of the slot, reduces them, and the reduction spans both
// warpgroups' rows (`across(2)`); the column maxima, one row, are not split.
// CHECK:      aref.group consumer warpgroups(2)
// CHECK-NEXT:   %wg = aref.warpgroup_index : i32
// CHECK-NEXT:   %[[R:[0-9]+]] = arith.constant 64 : i32
// CHECK-NEXT:   %row0 = arith.muli %wg, %[[R]] : i32
// CHECK:        aref.get %{{.*}} -> tensor<128x64xf16>
// CHECK-NEXT:   %{{.*}} = tile.extract_slice %{{.*}}[%row0, %{{.*}}] : tensor<128x64xf16> -> tensor<64x64xf16>
// CHECK:        tile.reduce max %{{.*}}, 0 across(2) : tensor<64x64xf32> -> tensor<64xf32>
// CHECK:        tile.store %m_desc[%{{.*}}], %{{.*}} : !tile.desc<1x64xf32>, tensor<1x64xf32>
