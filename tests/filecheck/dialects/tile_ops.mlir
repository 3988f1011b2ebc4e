// Every op, type and attribute of the tile dialect survives parse -> print -> parse, in the
// custom form and in the generic form.
// RUN: tawa-opt %s | tawa-opt | filecheck %s
// RUN: tawa-opt %s --print-op-generic | tawa-opt | filecheck %s

// CHECK-LABEL: func.func @descriptors
// CHECK-SAME: (%d1: !tile.desc<64xf32>, %d2: !tile.desc<128x64xf16>, %d3: !tile.desc<1x64x64xbf16>,
// CHECK-SAME: %d4: !tile.desc<2x2x8x16xf8E4M3FN>, %d5: !tile.desc<1x1x1x8x16xf8E5M2>)
func.func @descriptors(%d1: !tile.desc<64xf32>, %d2: !tile.desc<128x64xf16>,
                       %d3: !tile.desc<1x64x64xbf16>, %d4: !tile.desc<2x2x8x16xf8E4M3FN>,
                       %d5: !tile.desc<1x1x1x8x16xf8E5M2>) {
  func.return
}

// CHECK-LABEL: func.func @grid
func.func @grid() -> (i32, i32, i32, i32) {
  // CHECK-NEXT: %pid0 = tile.program_id 0 : i32
  // CHECK-NEXT: %pid2 = tile.program_id 2 : i32
  // CHECK-NEXT: %n1 = tile.num_programs 1 : i32
  // CHECK-NEXT: %n2 = tile.num_programs 2 : i32
  %pid0 = tile.program_id 0 : i32
  %pid2 = tile.program_id 2 : i32
  %n1 = tile.num_programs 1 : i32
  %n2 = tile.num_programs 2 : i32
  func.return %pid0, %pid2, %n1, %n2 : i32, i32, i32, i32
}

// CHECK-LABEL: func.func @creation
func.func @creation(%x: f32, %i: i32) {
  // CHECK-NEXT: %r = tile.arange 0, 64 : tensor<64xi32>
  // CHECK-NEXT: %r2 = tile.arange 16, 48 : tensor<32xi32>
  // CHECK-NEXT: %s = tile.splat %x : f32 -> tensor<128x64xf32>
  // CHECK-NEXT: %si = tile.splat %i : i32 -> tensor<1x64xi32>
  %r = tile.arange 0, 64 : tensor<64xi32>
  %r2 = tile.arange 16, 48 : tensor<32xi32>
  %s = tile.splat %x : f32 -> tensor<128x64xf32>
  %si = tile.splat %i : i32 -> tensor<1x64xi32>
  func.return
}

// CHECK-LABEL: func.func @layout
func.func @layout(%v: tensor<64xf32>, %m: tensor<128x64xf16>, %b: tensor<1x128x64xf16>) {
  // CHECK-NEXT: %row = tile.expand_dims %v, 0 : tensor<64xf32> -> tensor<1x64xf32>
  // CHECK-NEXT: %col = tile.expand_dims %v, 1 : tensor<64xf32> -> tensor<64x1xf32>
  // CHECK-NEXT: %rows = tile.broadcast %row : tensor<1x64xf32> -> tensor<128x64xf32>
  // CHECK-NEXT: %cols = tile.broadcast %col : tensor<64x1xf32> -> tensor<64x32xf32>
  // CHECK-NEXT: %flat = tile.reshape %b : tensor<1x128x64xf16> -> tensor<128x64xf16>
  // CHECK-NEXT: %t = tile.trans %m : tensor<128x64xf16> -> tensor<64x128xf16>
  %row = tile.expand_dims %v, 0 : tensor<64xf32> -> tensor<1x64xf32>
  %col = tile.expand_dims %v, 1 : tensor<64xf32> -> tensor<64x1xf32>
  %rows = tile.broadcast %row : tensor<1x64xf32> -> tensor<128x64xf32>
  %cols = tile.broadcast %col : tensor<64x1xf32> -> tensor<64x32xf32>
  %flat = tile.reshape %b : tensor<1x128x64xf16> -> tensor<128x64xf16>
  %t = tile.trans %m : tensor<128x64xf16> -> tensor<64x128xf16>
  func.return
}

// CHECK-LABEL: func.func @convert
func.func @convert(%f: tensor<8x8xf32>, %i: tensor<8x8xi32>) {
  // CHECK-NEXT: %h = tile.convert %f : tensor<8x8xf32> -> tensor<8x8xf16>
  // CHECK-NEXT: %bf = tile.convert %f : tensor<8x8xf32> -> tensor<8x8xbf16>
  // CHECK-NEXT: %e4 = tile.convert %f : tensor<8x8xf32> -> tensor<8x8xf8E4M3FN>
  // CHECK-NEXT: %e5 = tile.convert %h : tensor<8x8xf16> -> tensor<8x8xf8E5M2>
  // CHECK-NEXT: %fi = tile.convert %i : tensor<8x8xi32> -> tensor<8x8xf32>
  // CHECK-NEXT: %if = tile.convert %f : tensor<8x8xf32> -> tensor<8x8xi32>
  %h = tile.convert %f : tensor<8x8xf32> -> tensor<8x8xf16>
  %bf = tile.convert %f : tensor<8x8xf32> -> tensor<8x8xbf16>
  %e4 = tile.convert %f : tensor<8x8xf32> -> tensor<8x8xf8E4M3FN>
  %e5 = tile.convert %h : tensor<8x8xf16> -> tensor<8x8xf8E5M2>
  %fi = tile.convert %i : tensor<8x8xi32> -> tensor<8x8xf32>
  %if = tile.convert %f : tensor<8x8xf32> -> tensor<8x8xi32>
  func.return
}

// CHECK-LABEL: func.func @compare
func.func @compare(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %i: tensor<1x8xi32>) {
  // CHECK-NEXT: %eq = tile.cmp eq, %a, %b : tensor<4x8xf32> -> tensor<4x8xi1>
  // CHECK-NEXT: %ne = tile.cmp ne, %a, %b : tensor<4x8xf32> -> tensor<4x8xi1>
  // CHECK-NEXT: %lt = tile.cmp lt, %i, %i : tensor<1x8xi32> -> tensor<1x8xi1>
  // CHECK-NEXT: %le = tile.cmp le, %a, %b : tensor<4x8xf32> -> tensor<4x8xi1>
  // CHECK-NEXT: %gt = tile.cmp gt, %a, %b : tensor<4x8xf32> -> tensor<4x8xi1>
  // CHECK-NEXT: %ge = tile.cmp ge, %a, %b : tensor<4x8xf32> -> tensor<4x8xi1>
  // CHECK-NEXT: %w = tile.where %lt, %i, %i : tensor<1x8xi1>, tensor<1x8xi32>
  // CHECK-NEXT: %w2 = tile.where %ge, %a, %b : tensor<4x8xi1>, tensor<4x8xf32>
  %eq = tile.cmp eq, %a, %b : tensor<4x8xf32> -> tensor<4x8xi1>
  %ne = tile.cmp ne, %a, %b : tensor<4x8xf32> -> tensor<4x8xi1>
  %lt = tile.cmp lt, %i, %i : tensor<1x8xi32> -> tensor<1x8xi1>
  %le = tile.cmp le, %a, %b : tensor<4x8xf32> -> tensor<4x8xi1>
  %gt = tile.cmp gt, %a, %b : tensor<4x8xf32> -> tensor<4x8xi1>
  %ge = tile.cmp ge, %a, %b : tensor<4x8xf32> -> tensor<4x8xi1>
  %w = tile.where %lt, %i, %i : tensor<1x8xi1>, tensor<1x8xi32>
  %w2 = tile.where %ge, %a, %b : tensor<4x8xi1>, tensor<4x8xf32>
  func.return
}

// CHECK-LABEL: func.func @compute
func.func @compute(%a: tensor<128x64xf16>, %b: tensor<64x128xf16>, %acc: tensor<128x128xf32>,
                   %acc16: tensor<128x128xf16>, %a8: tensor<64x32xf8E4M3FN>,
                   %b8: tensor<32x16xf8E4M3FN>, %acc8: tensor<64x16xf32>,
                   %abf: tensor<64x32xbf16>, %bbf: tensor<32x16xbf16>) {
  // CHECK-NEXT: %d = tile.dot %a, %b, %acc : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
  // CHECK-NEXT: %d16 = tile.dot %a, %b, %acc16 : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf16>
  // CHECK-NEXT: %d8 = tile.dot %a8, %b8, %acc8 : tensor<64x32xf8E4M3FN>, tensor<32x16xf8E4M3FN> -> tensor<64x16xf32>
  // CHECK-NEXT: %dbf = tile.dot %abf, %bbf, %acc8 : tensor<64x32xbf16>, tensor<32x16xbf16> -> tensor<64x16xf32>
  // CHECK-NEXT: %mx = tile.reduce max %d, 1 : tensor<128x128xf32> -> tensor<128xf32>
  // CHECK-NEXT: %sm = tile.reduce sum %d, 0 : tensor<128x128xf32> -> tensor<128xf32>
  %d = tile.dot %a, %b, %acc : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
  %d16 = tile.dot %a, %b, %acc16 : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf16>
  %d8 = tile.dot %a8, %b8, %acc8 : tensor<64x32xf8E4M3FN>, tensor<32x16xf8E4M3FN> -> tensor<64x16xf32>
  %dbf = tile.dot %abf, %bbf, %acc8 : tensor<64x32xbf16>, tensor<32x16xbf16> -> tensor<64x16xf32>
  %mx = tile.reduce max %d, 1 : tensor<128x128xf32> -> tensor<128xf32>
  %sm = tile.reduce sum %d, 0 : tensor<128x128xf32> -> tensor<128xf32>
  func.return
}

// CHECK-LABEL: func.func @memory
func.func @memory(%d2: !tile.desc<128x64xf16>, %d3: !tile.desc<1x64x64xbf16>, %i: i32) {
  // CHECK-NEXT: %x = tile.load %d2[%i, %i] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
  // CHECK-NEXT: %y = tile.load %d3[%i, %i, %i] : !tile.desc<1x64x64xbf16> -> tensor<1x64x64xbf16>
  // CHECK-NEXT: tile.store %d2[%i, %i], %x : !tile.desc<128x64xf16>, tensor<128x64xf16>
  // CHECK-NEXT: tile.store %d3[%i, %i, %i], %y : !tile.desc<1x64x64xbf16>, tensor<1x64x64xbf16>
  %x = tile.load %d2[%i, %i] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
  %y = tile.load %d3[%i, %i, %i] : !tile.desc<1x64x64xbf16> -> tensor<1x64x64xbf16>
  tile.store %d2[%i, %i], %x : !tile.desc<128x64xf16>, tensor<128x64xf16>
  tile.store %d3[%i, %i, %i], %y : !tile.desc<1x64x64xbf16>, tensor<1x64x64xbf16>
  func.return
}

// The enum attributes in their generic spelling.
// RUN: tawa-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// GENERIC: "tile.program_id"() <{axis = 0 : i32}> : () -> i32
// GENERIC: "tile.arange"() <{start = 16 : i32, end = 48 : i32}> : () -> tensor<32xi32>
// GENERIC: "tile.cmp"(%a, %b) <{predicate = #tile<predicate eq>}> : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
// GENERIC: "tile.reduce"(%d) <{kind = #tile<reduce_kind max>, axis = 1 : i32}> : (tensor<128x128xf32>) -> tensor<128xf32>
// GENERIC: "tile.reduce"(%d) <{kind = #tile<reduce_kind sum>, axis = 0 : i32}>
// GENERIC: "tile.load"(%d2, %i, %i) : (!tile.desc<128x64xf16>, i32, i32) -> tensor<128x64xf16>
// GENERIC: "tile.store"(%d2, %i, %i, %x) : (!tile.desc<128x64xf16>, i32, i32, tensor<128x64xf16>) -> ()
