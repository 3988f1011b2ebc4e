// A K loop under a uniform condition (scalars only): partition tags the scf.if `both`,
// insert-aref carries the ring's use counter out of it as an extra result (the else branch
// yields it unchanged), and distribute gives each group its own copy of the branch with the
// results of its role.
// RUN: tawa-opt %s -p 'partition,insert-aref' | filecheck %s --check-prefix=AREF
// RUN: tawa-opt %s -p 'partition,insert-aref,ring-depth{stages=2},distribute' | filecheck %s

func.func @gemm_if(%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<128x64xf16>, %c_desc: !tile.desc<128x128xf16>, %k: i32, %flag: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = tile.splat %zero : f32 -> tensor<128x128xf32>
  %on = arith.cmpi ne, %flag, %c0 : i32
  // AREF:      %acc, %i = scf.if %on -> (tensor<128x128xf32>, i32) {
  // AREF-NEXT:   %sum, %i_1 = scf.for %kk = %c0 to %k step %c64 iter_args(%acc_iter = %acc0, %i_2 = %use0)
  // AREF:        scf.yield {aref.role = "both"} %sum, %i_1 : tensor<128x128xf32>, i32
  // AREF-NEXT: } else {
  // AREF-NEXT:   scf.yield {aref.role = "both"} %acc0, %use0 : tensor<128x128xf32>, i32
  // AREF-NEXT: }{aref.role = "both"}
  // CHECK:      aref.group producer
  // CHECK:        %on = arith.cmpi ne, %flag, %c0 : i32
  // CHECK-NEXT:   %i = scf.if %on -> (i32) {
  // CHECK:          aref.put %a_b_ring[%i_2]
  // CHECK:          scf.yield %i_1 : i32
  // CHECK-NEXT:   } else {
  // CHECK-NEXT:     scf.yield %use0 : i32
  // CHECK:      aref.group consumer
  // CHECK:        %acc, %i_3 = scf.if %on_1 -> (tensor<128x128xf32>, i32) {
  // CHECK:          aref.get %a_b_ring[%i_5]
  // CHECK:          scf.yield %sum, %i_4 : tensor<128x128xf32>, i32
  // CHECK-NEXT:   } else {
  // CHECK-NEXT:     scf.yield %acc0, %use0_1 : tensor<128x128xf32>, i32
  %acc = scf.if %on -> (tensor<128x128xf32>) {
    %sum = scf.for %kk = %c0 to %k step %c64 iter_args(%acc_iter = %acc0) -> (tensor<128x128xf32>) : i32 {
      %a = tile.load %a_desc[%c0, %kk] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
      %b = tile.load %b_desc[%c0, %kk] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
      %b_t = tile.trans %b : tensor<128x64xf16> -> tensor<64x128xf16>
      %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
      scf.yield %acc_next : tensor<128x128xf32>
    }
    scf.yield %sum : tensor<128x128xf32>
  } else {
    scf.yield %acc0 : tensor<128x128xf32>
  }
  %c = tile.convert %acc : tensor<128x128xf32> -> tensor<128x128xf16>
  tile.store %c_desc[%c0, %c0], %c : !tile.desc<128x128xf16>, tensor<128x128xf16>
  func.return
}
