// One case per verifier rule of the tile dialect (ops and !tile.desc); each error is one line
// that names the file, line and column of the offending op or type.
// RUN: tawa-opt %s --split-input-file --verify-diagnostics | filecheck %s
// !tile.desc: rank 0
// CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:18: error: !tile.desc block rank must be 1..5, got 0
func.func @f(%d: !tile.desc<f16>) {
  func.return
}

// -----

// !tile.desc: rank 6
// CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:18: error: !tile.desc block rank must be 1..5, got 6
func.func @f(%d: !tile.desc<1x1x1x1x1x1xf16>) {
  func.return
}

// -----

// !tile.desc: a zero dim
// CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:18: error: !tile.desc block dims must be positive, got (0, 64)
func.func @f(%d: !tile.desc<0x64xf16>) {
  func.return
}

// -----

// !tile.desc: an integer element type
// CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:18: error: !tile.desc element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, got i32
func.func @f(%d: !tile.desc<64x64xi32>) {
  func.return
}

// -----

// !tile.desc inside a function type is checked too
// CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:27: error: !tile.desc element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, got f64
func.func @f(%a: i32, %d: !tile.desc<64xf64>) {
  func.return
}

// -----

// program_id: axis past 2
func.func @f() {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.program_id' axis must be 0, 1 or 2, got 3
  %p = tile.program_id 3 : i32
  func.return
}

// -----

// num_programs: negative axis
func.func @f() {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.num_programs' axis must be 0, 1 or 2, got -1
  %n = tile.num_programs -1 : i32
  func.return
}

// -----

// arange: result length
func.func @f() {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.arange' 0, 64 must produce tensor<64xi32>, got tensor<32xi32>
  %r = tile.arange 0, 64 : tensor<32xi32>
  func.return
}

// -----

// arange: result element type
func.func @f() {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.arange' 8, 16 must produce tensor<8xi32>, got tensor<8xi64>
  %r = tile.arange 8, 16 : tensor<8xi64>
  func.return
}

// -----

// splat: element type differs from the scalar
func.func @f(%x: f32) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.splat' element type of tensor<4x4xf16> must equal the scalar type f32
  %s = tile.splat %x : f32 -> tensor<4x4xf16>
  func.return
}

// -----

// expand_dims: axis out of range
func.func @f(%v: tensor<64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.expand_dims' axis 2 out of range for tensor<64xf32>
  %e = tile.expand_dims %v, 2 : tensor<64xf32> -> tensor<64x1xf32>
  func.return
}

// -----

// expand_dims: wrong result
func.func @f(%v: tensor<64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.expand_dims' of tensor<64xf32> at axis 0 must give tensor<1x64xf32>, got tensor<64x1xf32>
  %e = tile.expand_dims %v, 0 : tensor<64xf32> -> tensor<64x1xf32>
  func.return
}

// -----

// broadcast: element type changes
func.func @f(%v: tensor<1x64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.broadcast' must keep the element type
  %b = tile.broadcast %v : tensor<1x64xf32> -> tensor<8x64xf16>
  func.return
}

// -----

// broadcast: a dim that is neither 1 nor the result dim
func.func @f(%v: tensor<2x64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.broadcast' cannot broadcast 2x64 to 8x64: ranks must match and each source dim must be 1 or equal the result dim
  %b = tile.broadcast %v : tensor<2x64xf32> -> tensor<8x64xf32>
  func.return
}

// -----

// broadcast: rank changes
func.func @f(%v: tensor<64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.broadcast' cannot broadcast 64 to 8x64: ranks must match and each source dim must be 1 or equal the result dim
  %b = tile.broadcast %v : tensor<64xf32> -> tensor<8x64xf32>
  func.return
}

// -----

// reshape: element type changes
func.func @f(%v: tensor<1x64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.reshape' must keep the element type
  %r = tile.reshape %v : tensor<1x64xf32> -> tensor<64xi32>
  func.return
}

// -----

// reshape: element count changes
func.func @f(%v: tensor<1x64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.reshape' cannot reshape 1x64 (64 elements) to 2x64 (128 elements)
  %r = tile.reshape %v : tensor<1x64xf32> -> tensor<2x64xf32>
  func.return
}

// -----

// trans: not a transpose
func.func @f(%v: tensor<16x64xf16>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.trans' expects a 2-D tile and its transpose, got tensor<16x64xf16> -> tensor<16x64xf16>
  %t = tile.trans %v : tensor<16x64xf16> -> tensor<16x64xf16>
  func.return
}

// -----

// trans: not 2-D
func.func @f(%v: tensor<2x16x64xf16>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.trans' expects a 2-D tile and its transpose, got tensor<2x16x64xf16> -> tensor<64x16x2xf16>
  %t = tile.trans %v : tensor<2x16x64xf16> -> tensor<64x16x2xf16>
  func.return
}

// -----

// convert: shape changes
func.func @f(%v: tensor<16x64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.convert' must keep the shape, got tensor<16x64xf32> -> tensor<64x16xf16>
  %c = tile.convert %v : tensor<16x64xf32> -> tensor<64x16xf16>
  func.return
}

// -----

// convert: an element type with no conversion
func.func @f(%v: tensor<16xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.convert' cannot convert element type index
  %c = tile.convert %v : tensor<16xf32> -> tensor<16xindex>
  func.return
}

// -----

// cmp: result is not i1
func.func @f(%a: tensor<4x8xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.cmp' must produce tensor<4x8xi1>, got tensor<4x8xi32>
  %c = tile.cmp lt, %a, %a : tensor<4x8xf32> -> tensor<4x8xi32>
  func.return
}

// -----

// cmp: operands of different types (generic form: the custom form cannot spell it)
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: operand 'rhs' at position 1 does not verify: attribute tensor<4xf32> expected from variable 'T', but got tensor<4xf16>
  %c = "tile.cmp"(%a, %b) <{predicate = #tile<predicate eq>}> : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xi1>
  func.return
}

// -----

// where: condition is not i1
func.func @f(%c: tensor<4xi32>, %a: tensor<4xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.where' condition must be a tile of i1, got tensor<4xi32>
  %w = tile.where %c, %a, %a : tensor<4xi32>, tensor<4xf32>
  func.return
}

// -----

// where: condition shape differs
func.func @f(%c: tensor<1x4xi1>, %a: tensor<8x4xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.where' condition shape 1x4 must equal the value shape 8x4
  %w = tile.where %c, %a, %a : tensor<1x4xi1>, tensor<8x4xf32>
  func.return
}

// -----

// dot: operands not 2-D
func.func @f(%a: tensor<64xf16>, %b: tensor<64x16xf16>, %c: tensor<16xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.dot' operands must be 2-D tiles
  %d = tile.dot %a, %b, %c : tensor<64xf16>, tensor<64x16xf16> -> tensor<16xf32>
  func.return
}

// -----

// dot: K differs
func.func @f(%a: tensor<64x32xf16>, %b: tensor<16x16xf16>, %c: tensor<64x16xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.dot' shape mismatch: 64x32 @ 16x16 + 64x16 (needs MxK @ KxN + MxN)
  %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<16x16xf16> -> tensor<64x16xf32>
  func.return
}

// -----

// dot: accumulator shape differs
func.func @f(%a: tensor<64x32xf16>, %b: tensor<32x16xf16>, %c: tensor<64x32xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.dot' shape mismatch: 64x32 @ 32x16 + 64x32 (needs MxK @ KxN + MxN)
  %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<32x16xf16> -> tensor<64x32xf32>
  func.return
}

// -----

// dot: mixed input types
func.func @f(%a: tensor<64x32xf16>, %b: tensor<32x16xbf16>, %c: tensor<64x16xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.dot' inputs must have one element type, got f16 and bf16
  %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<32x16xbf16> -> tensor<64x16xf32>
  func.return
}

// -----

// dot: f32 inputs
func.func @f(%a: tensor<64x32xf32>, %b: tensor<32x16xf32>, %c: tensor<64x16xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.dot' inputs must be f16, bf16 or fp8, got f32
  %d = tile.dot %a, %b, %c : tensor<64x32xf32>, tensor<32x16xf32> -> tensor<64x16xf32>
  func.return
}

// -----

// dot: f16 accumulator with bf16 inputs
func.func @f(%a: tensor<64x32xbf16>, %b: tensor<32x16xbf16>, %c: tensor<64x16xf16>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.dot' accumulator must be f32 (or f16 for f16 inputs), got f16
  %d = tile.dot %a, %b, %c : tensor<64x32xbf16>, tensor<32x16xbf16> -> tensor<64x16xf16>
  func.return
}

// -----

// dot: result type differs from the accumulator
func.func @f(%a: tensor<64x32xf16>, %b: tensor<32x16xf16>, %c: tensor<64x16xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: result 'result' at position 0 does not verify: attribute tensor<64x16xf32> expected from variable 'ACC', but got tensor<64x16xf16>
  %d = "tile.dot"(%a, %b, %c) : (tensor<64x32xf16>, tensor<32x16xf16>, tensor<64x16xf32>) -> tensor<64x16xf16>
  func.return
}

// -----

// reduce: axis out of range
func.func @f(%v: tensor<8x64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.reduce' axis 2 out of range for tensor<8x64xf32>
  %r = tile.reduce max %v, 2 : tensor<8x64xf32> -> tensor<8xf32>
  func.return
}

// -----

// reduce: a 1-D tile
func.func @f(%v: tensor<64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.reduce' of a 1-D tile is not supported; keep a dim of 1
  %r = "tile.reduce"(%v) <{kind = #tile<reduce_kind sum>, axis = 0 : i32}> : (tensor<64xf32>) -> tensor<f32>
  func.return
}

// -----

// reduce: wrong result
func.func @f(%v: tensor<8x64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.reduce' along axis 0 of tensor<8x64xf32> must give tensor<64xf32>, got tensor<8xf32>
  %r = tile.reduce sum %v, 0 : tensor<8x64xf32> -> tensor<8xf32>
  func.return
}

// -----

// load: one offset short
func.func @f(%d: !tile.desc<1x64x64xf16>, %i: i32) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.load' needs one offset per descriptor dim: !tile.desc<1x64x64xf16> has rank 3, got 2 offsets
  %x = tile.load %d[%i, %i] : !tile.desc<1x64x64xf16> -> tensor<1x64x64xf16>
  func.return
}

// -----

// load: result is not the block
func.func @f(%d: !tile.desc<64x64xf16>, %i: i32) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.load' from !tile.desc<64x64xf16> must produce tensor<64x64xf16>, got tensor<64x32xf16>
  %x = tile.load %d[%i, %i] : !tile.desc<64x64xf16> -> tensor<64x32xf16>
  func.return
}

// -----

// store: one offset too many
func.func @f(%d: !tile.desc<64xf32>, %i: i32, %v: tensor<64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.store' needs one offset per descriptor dim: !tile.desc<64xf32> has rank 1, got 2 offsets
  tile.store %d[%i, %i], %v : !tile.desc<64xf32>, tensor<64xf32>
  func.return
}

// -----

// store: value is not the block
func.func @f(%d: !tile.desc<64x64xf16>, %i: i32, %v: tensor<64x64xf32>) {
  // CHECK: {{.*}}tile_invalid.mlir:[[# @LINE + 1]]:3: error: 'tile.store' to !tile.desc<64x64xf16> needs a tensor<64x64xf16> value, got tensor<64x64xf32>
  tile.store %d[%i, %i], %v : !tile.desc<64x64xf16>, tensor<64x64xf32>
  func.return
}
