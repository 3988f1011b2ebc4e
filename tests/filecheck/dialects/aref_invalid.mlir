// One case per verifier rule of the aref dialect (ops and !aref.ring); each error is one line
// that names the file, line and column of the offending op or type.
// RUN: tawa-opt %s --split-input-file --verify-diagnostics | filecheck %s
// !aref.ring: depth 0
// CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:18: error: !aref.ring depth must be at least 1, got 0
func.func @f(%r: !aref.ring<[tensor<64xf16>], 0>) {
  func.return
}

// -----

// !aref.ring: no payload
// CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:18: error: !aref.ring needs at least one payload type
func.func @f(%r: !aref.ring<[], 2>) {
  func.return
}

// -----

// !aref.ring: a payload that is not a tile
// CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:18: error: !aref.ring payloads must be tensor tiles, got f32
func.func @f(%r: !aref.ring<[tensor<64xf16>, f32], 2>) {
  func.return
}

// -----

// put: one payload value missing
func.func @f(%r: !aref.ring<[tensor<64x64xf16>, tensor<64xf32>], 2>, %i: i32, %a: tensor<64x64xf16>) {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.put' payload types (tensor<64x64xf16>) must match the ring's (tensor<64x64xf16>, tensor<64xf32>)
  aref.put %r[%i], %a : !aref.ring<[tensor<64x64xf16>, tensor<64xf32>], 2>, tensor<64x64xf16>
  func.return
}

// -----

// put: payload of the wrong type
func.func @f(%r: !aref.ring<[tensor<64x64xf16>, tensor<64xf32>], 2>, %i: i32, %a: tensor<64x64xf16>, %b: tensor<64xf16>) {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.put' payload types (tensor<64x64xf16>, tensor<64xf16>) must match the ring's (tensor<64x64xf16>, tensor<64xf32>)
  aref.put %r[%i], %a, %b : !aref.ring<[tensor<64x64xf16>, tensor<64xf32>], 2>, tensor<64x64xf16>, tensor<64xf16>
  func.return
}

// -----

// get: results of the wrong types
func.func @f(%r: !aref.ring<[tensor<64x64xf16>, tensor<64xf32>], 2>, %i: i32) {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.get' result types (tensor<64xf32>, tensor<64x64xf16>) must match the ring's (tensor<64x64xf16>, tensor<64xf32>)
  %a, %b = aref.get %r[%i] : !aref.ring<[tensor<64x64xf16>, tensor<64xf32>], 2> -> tensor<64xf32>, tensor<64x64xf16>
  func.return
}

// -----

// consumed: the index is i32
func.func @f(%r: !aref.ring<[tensor<64x64xf16>, tensor<64xf32>], 2>, %i: index) {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: operand 'index' at position 1 does not verify: Expected attribute i32 but got index
  "aref.consumed"(%r, %i) : (!aref.ring<[tensor<64x64xf16>, tensor<64xf32>], 2>, index) -> ()
  func.return
}

// -----

// warp_specialize: an op that is not a group
func.func @f() {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.warp_specialize' may only hold 'aref.group' ops, found 'arith.constant'
  aref.warp_specialize {
    %c = arith.constant 0 : i32
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
  }
  func.return
}

// -----

// warp_specialize: no producer
func.func @f() {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.warp_specialize' needs exactly one producer group and at least one consumer group, got ['consumer', 'consumer']
  aref.warp_specialize {
    aref.group consumer warpgroups(1) registers(232) {
      %w = aref.warpgroup_index : i32
    }
    aref.group consumer warpgroups(1) registers(232) {
      %w = aref.warpgroup_index : i32
    }
  }
  func.return
}

// -----

// warp_specialize: two producers
func.func @f() {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.warp_specialize' needs exactly one producer group and at least one consumer group, got ['producer', 'consumer', 'producer']
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    aref.group consumer warpgroups(1) registers(232) {
      %w = aref.warpgroup_index : i32
    }
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
  }
  func.return
}

// -----

// warp_specialize: no consumer
func.func @f() {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.warp_specialize' needs exactly one producer group and at least one consumer group, got ['producer']
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
  }
  func.return
}

// -----

// group: zero warpgroups
func.func @f() {
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:5: error: 'aref.group' warpgroups must be 1..3, got 0
    aref.group consumer warpgroups(0) registers(232) {
      %w = aref.warpgroup_index : i32
    }
  }
  func.return
}

// -----

// group: four warpgroups
func.func @f() {
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:5: error: 'aref.group' warpgroups must be 1..3, got 4
    aref.group consumer warpgroups(4) registers(24) {
      %w = aref.warpgroup_index : i32
    }
  }
  func.return
}

// -----

// warp_specialize: budgets the SM's 64K registers cannot hold (setmaxnreg.inc would wait forever)
func.func @f() {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.warp_specialize' groups' registers [(40, 1), (232, 3)] (per thread, warpgroups) need 94208 registers; an SM has 65536
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    aref.group consumer warpgroups(3) registers(232) {
      %w = aref.warpgroup_index : i32
    }
  }
  func.return
}

// -----

// group: registers not a multiple of 8
func.func @f() {
  aref.warp_specialize {
    // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:5: error: 'aref.group' registers must be a multiple of 8 in 24..256 (setmaxnreg), got 42
    aref.group producer warpgroups(1) registers(42) {
      %w = aref.warpgroup_index : i32
    }
    aref.group consumer warpgroups(1) registers(232) {
      %w = aref.warpgroup_index : i32
    }
  }
  func.return
}

// -----

// group: registers above 256
func.func @f() {
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:5: error: 'aref.group' registers must be a multiple of 8 in 24..256 (setmaxnreg), got 264
    aref.group consumer warpgroups(1) registers(264) {
      %w = aref.warpgroup_index : i32
    }
  }
  func.return
}

// -----

// group: registers below 24
func.func @f() {
  aref.warp_specialize {
    // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:5: error: 'aref.group' registers must be a multiple of 8 in 24..256 (setmaxnreg), got 16
    aref.group producer warpgroups(1) registers(16) {
      %w = aref.warpgroup_index : i32
    }
    aref.group consumer warpgroups(1) registers(232) {
      %w = aref.warpgroup_index : i32
    }
  }
  func.return
}

// -----

// group: outside a warp_specialize
func.func @f() {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.group' expects parent op 'aref.warp_specialize'
  aref.group consumer warpgroups(1) registers(232) {
    %w = aref.warpgroup_index : i32
  }
  func.return
}

// -----

// consumed: a lag that holds more uses than the ring has slots
func.func @f(%r: !aref.ring<[tensor<64xf16>], 2>, %i: i32) {
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    aref.group consumer warpgroups(1) registers(232) {
      scf.for %j = %i to %i step %i : i32 {
        // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:9: error: 'aref.consumed' lag must be in 0..1 (below the ring depth 2), got 2
        aref.consumed %r[%j] lag(2) : !aref.ring<[tensor<64xf16>], 2>
      }
    }
  }
  func.return
}

// -----

// consumed: a negative lag
func.func @f(%r: !aref.ring<[tensor<64xf16>], 2>, %i: i32) {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.consumed' lag must be in 0..1 (below the ring depth 2), got -1
  aref.consumed %r[%i] lag(-1) : !aref.ring<[tensor<64xf16>], 2>
  func.return
}

// -----

// consumed: a lagged release outside any loop
func.func @f(%r: !aref.ring<[tensor<64xf16>], 2>, %i: i32) {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.consumed' with a lag must be inside a loop
  aref.consumed %r[%i] lag(1) : !aref.ring<[tensor<64xf16>], 2>
  func.return
}

// -----

// drain: nothing to drain without a lag
func.func @f(%r: !aref.ring<[tensor<64xf16>], 2>, %i: i32) {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.drain' lag must be at least 1, got 0
  aref.drain %r[%i, %i] lag(0) : !aref.ring<[tensor<64xf16>], 2>
  func.return
}

// -----

// drain: a lag the ring cannot hold
func.func @f(%r: !aref.ring<[tensor<64xf16>], 2>, %i: i32) {
  // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:3: error: 'aref.drain' lag must be in 0..1 (below the ring depth 2), got 3
  aref.drain %r[%i, %i] lag(3) : !aref.ring<[tensor<64xf16>], 2>
  func.return
}

// -----

// stage: only stage 0 (the stage issued ahead) is written
func.func @f(%c: i1) {
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:5: error: 'scf.if': tawa.stage must be 0 : i32 (the stage ahead)
    aref.group consumer warpgroups(1) registers(232) {
      scf.if %c {
      } {tawa.stage = 2 : i32}
    }
  }
  func.return
}

// -----

// stage: on an op that is not a guard
func.func @f(%a: i32) {
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:5: error: 'arith.addi' with tawa.stage must be an 'scf.if' (the stage's guard)
    aref.group consumer warpgroups(1) registers(232) {
      %b = arith.addi %a, %a {tawa.stage = 0 : i32} : i32
    }
  }
  func.return
}

// -----

// stage: a lookahead outside any loop body
func.func @f(%c: i1) {
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:5: error: 'scf.if' with tawa.stage must be in a loop body (or peeled, before the loop)
    aref.group consumer warpgroups(1) registers(232) {
      scf.if %c {
      } {tawa.stage = 0 : i32}
    }
  }
  func.return
}

// -----

// stage: a peeled copy with no loop after it
func.func @f(%c: i1) {
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:5: error: 'scf.if' with tawa.stage peeled must precede the loop it was peeled from
    aref.group consumer warpgroups(1) registers(232) {
      scf.if %c {
      } {tawa.stage = 0 : i32, tawa.peeled}
    }
  }
  func.return
}

// -----

// stage: the last iteration's stage 1 must be peeled (after its loop)
func.func @f(%c: i1, %n: index) {
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:5: error: 'scf.if' with tawa.stage = 1 must be tawa.peeled (after its loop)
    aref.group consumer warpgroups(1) registers(232) {
      %lb = arith.constant 0 : index
      %one = arith.constant 1 : index
      scf.for %i = %lb to %n step %one {
      }
      scf.if %c {
      } {tawa.stage = 1 : i32}
    }
  }
  func.return
}

// -----

// stage: a peeled last stage with no loop before it
func.func @f(%c: i1) {
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %w = aref.warpgroup_index : i32
    }
    // CHECK: {{.*}}aref_invalid.mlir:[[# @LINE + 1]]:5: error: 'scf.if' with tawa.stage = 1 must follow the loop it was peeled from
    aref.group consumer warpgroups(1) registers(232) {
      scf.if %c {
      } {tawa.stage = 1 : i32, tawa.peeled}
    }
  }
  func.return
}
