// The tile ops of the warp-specialized forms round-trip, in custom and generic syntax.
// RUN: tawa-opt %s | tawa-opt | filecheck %s
// RUN: tawa-opt %s --print-op-generic | tawa-opt | filecheck %s

func.func @slices(%c_desc: !tile.desc<128x128xf16>, %a: tensor<128x64xf16>, %c: tensor<64x128xf16>, %row0: i32, %col: i32) {
  %c0 = arith.constant 0 : i32
  %half = tile.extract_slice %a[%row0, %c0] : tensor<128x64xf16> -> tensor<64x64xf16>
  tile.store_slice %c_desc[%row0, %col], %c : !tile.desc<128x128xf16>, tensor<64x128xf16>
  func.return
}

// CHECK:      %half = tile.extract_slice %a[%row0, %c0] : tensor<128x64xf16> -> tensor<64x64xf16>
// CHECK-NEXT: tile.store_slice %c_desc[%row0, %col], %c : !tile.desc<128x128xf16>, tensor<64x128xf16>
