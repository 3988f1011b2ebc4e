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
  // CHECK-NEXT:   aref.group consumer warpgroups(2) registers(160) {
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
    aref.group consumer warpgroups(2) registers(160) {
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
// GENERIC: "aref.group"() <{role = #aref<role consumer>, warpgroups = 2 : i32, registers = 160 : i32}> ({
// GENERIC: "aref.warpgroup_index"() : () -> i32
// GENERIC: %x, %y = "aref.get"(%ring, %j)
// GENERIC: "aref.consumed"(%ring, %j)

// The schedule as data: a lagged release and the drain of mma-lag, the stage-0 copies of
// software-pipeline (in the loop, and peeled in front of it).
// CHECK-LABEL: func.func @schedule
// CHECK:         %{{.*}} = scf.if %{{.*}} -> (i32) {
// CHECK:         }{tawa.stage = 0 : i32, tawa.peeled}
// CHECK:         scf.for %j = %lo to %hi step %one : i32 {
// CHECK:           %{{.*}} = scf.if %{{.*}} -> (i32) {
// CHECK:           }{tawa.stage = 0 : i32}
// CHECK:           aref.consumed %r[%old] lag(2) : !aref.ring<[tensor<64x64xf16>], 3>
// CHECK:         aref.drain %r[%lo, %hi] lag(2) : !aref.ring<[tensor<64x64xf16>], 3>
// GENERIC: "aref.consumed"(%r, %old) <{lag = 2 : i32}>
// GENERIC: "aref.drain"(%r, %lo, %hi) <{lag = 2 : i32}>
func.func @schedule(%r: !aref.ring<[tensor<64x64xf16>], 3>, %lo: i32, %hi: i32) {
  %one = arith.constant 1 : i32
  %two = arith.constant 2 : i32
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    aref.group consumer warpgroups(1) registers(232) {
      %runs = arith.cmpi slt, %lo, %hi : i32
      %first = scf.if %runs -> (i32) {
        scf.yield %lo : i32
      } else {
        scf.yield %lo : i32
      } {tawa.stage = 0 : i32, tawa.peeled}
      scf.for %j = %lo to %hi step %one : i32 {
        %next = arith.addi %j, %one : i32
        %more = arith.cmpi slt, %next, %hi : i32
        %ahead = scf.if %more -> (i32) {
          scf.yield %next : i32
        } else {
          scf.yield %j : i32
        } {tawa.stage = 0 : i32}
        %old = arith.subi %j, %two : i32
        aref.consumed %r[%old] lag(2) : !aref.ring<[tensor<64x64xf16>], 3>
      }
      aref.drain %r[%lo, %hi] lag(2) : !aref.ring<[tensor<64x64xf16>], 3>
    }
  }
  func.return
}
