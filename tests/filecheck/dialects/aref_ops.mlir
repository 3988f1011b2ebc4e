// Every op, type and attribute of the aref dialect survives parse -> print -> parse, in the
// custom form and in the generic form.
// RUN: tawa-opt %s | tawa-opt | filecheck %s
// RUN: tawa-opt %s --print-op-generic | tawa-opt | filecheck %s
// RUN: tawa-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @rings
// CHECK-SAME: (%r1: !aref.ring<[tensor<128x64xf16>], 1>, %r3: !aref.ring<[tensor<128x64xf16>, tensor<64x128xbf16>], 3>)
func.func @rings(%r1: !aref.ring<[tensor<128x64xf16>], 1>,
                 %r3: !aref.ring<[tensor<128x64xf16>, tensor<64x128xbf16>], 3>) {
  func.return
}

// CHECK-LABEL: func.func @gemm_ws
func.func @gemm_ws(%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<64x128xf16>, %k_tiles: i32) {
  // CHECK-NEXT: %c0 = arith.constant 0 : i32
  // CHECK-NEXT: %c1 = arith.constant 1 : i32
  // CHECK-NEXT: %ring = aref.create : !aref.ring<[tensor<128x64xf16>, tensor<64x128xf16>], 2>
  // CHECK-NEXT: aref.warp_specialize {
  // CHECK-NEXT:   aref.group producer warpgroups(1) registers(40) {
  // CHECK-NEXT:     scf.for %i = %c0 to %k_tiles step %c1 : i32 {
  // CHECK-NEXT:       %a = tile.load %a_desc[%c0, %i] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
  // CHECK-NEXT:       %b = tile.load %b_desc[%i, %c0] : !tile.desc<64x128xf16> -> tensor<64x128xf16>
  // CHECK-NEXT:       aref.put %ring[%i], %a, %b : !aref.ring<[tensor<128x64xf16>, tensor<64x128xf16>], 2>, tensor<128x64xf16>, tensor<64x128xf16>
  // CHECK-NEXT:     }
  // CHECK-NEXT:   }
  // CHECK-NEXT:   aref.group consumer warpgroups(2) registers(232) {
  // CHECK-NEXT:     %wg = aref.warpgroup_index : i32
  // CHECK-NEXT:     scf.for %j = %c0 to %k_tiles step %c1 : i32 {
  // CHECK-NEXT:       %x, %y = aref.get %ring[%j] : !aref.ring<[tensor<128x64xf16>, tensor<64x128xf16>], 2> -> tensor<128x64xf16>, tensor<64x128xf16>
  // CHECK-NEXT:       aref.consumed %ring[%j] : !aref.ring<[tensor<128x64xf16>, tensor<64x128xf16>], 2>
  // CHECK-NEXT:     }
  // CHECK-NEXT:   }
  // CHECK-NEXT:   aref.group consumer warpgroups(3) registers(24) attributes {tag = "extra"} {
  // CHECK-NEXT:     %wg3 = aref.warpgroup_index : i32
  // CHECK-NEXT:   }
  // CHECK-NEXT: }
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %ring = aref.create : !aref.ring<[tensor<128x64xf16>, tensor<64x128xf16>], 2>
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      scf.for %i = %c0 to %k_tiles step %c1 : i32 {
        %a = tile.load %a_desc[%c0, %i] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
        %b = tile.load %b_desc[%i, %c0] : !tile.desc<64x128xf16> -> tensor<64x128xf16>
        aref.put %ring[%i], %a, %b : !aref.ring<[tensor<128x64xf16>, tensor<64x128xf16>], 2>, tensor<128x64xf16>, tensor<64x128xf16>
      }
    }
    aref.group consumer warpgroups(2) registers(232) {
      %wg = aref.warpgroup_index : i32
      scf.for %j = %c0 to %k_tiles step %c1 : i32 {
        %x, %y = aref.get %ring[%j] : !aref.ring<[tensor<128x64xf16>, tensor<64x128xf16>], 2> -> tensor<128x64xf16>, tensor<64x128xf16>
        aref.consumed %ring[%j] : !aref.ring<[tensor<128x64xf16>, tensor<64x128xf16>], 2>
      }
    }
    aref.group consumer warpgroups(3) registers(24) attributes {tag = "extra"} {
      %wg3 = aref.warpgroup_index : i32
    }
  }
  func.return
}

// GENERIC: "aref.create"() : () -> !aref.ring<[tensor<128x64xf16>, tensor<64x128xf16>], 2>
// GENERIC: "aref.warp_specialize"() ({
// GENERIC: "aref.group"() <{role = #aref<role producer>, warpgroups = 1 : i32, registers = 40 : i32}> ({
// GENERIC: "aref.put"(%ring, %i, %a, %b)
// GENERIC: "aref.group"() <{role = #aref<role consumer>, warpgroups = 2 : i32, registers = 232 : i32}> ({
// GENERIC: "aref.warpgroup_index"() : () -> i32
// GENERIC: %x, %y = "aref.get"(%ring, %j)
// GENERIC: "aref.consumed"(%ring, %j)
