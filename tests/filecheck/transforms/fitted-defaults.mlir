// Defaults that adapt to the tile: `ring-depth{stages}` (unset) fits the ring depth to
// shared memory, counting the TMA-store staging with `epilogue="tma"`;
// `cooperative-consumers{consumers}` (unset) gives a 64-row tile one consumer warpgroup and
// a 128-row tile two.
// RUN: tawa-opt %s --split-input-file -p 'partition,insert-aref,ring-depth{stages},distribute,cooperative-consumers{consumers}' | filecheck %s
// RUN: tawa-opt %s --split-input-file -p 'partition,insert-aref,ring-depth{stages epilogue="tma"}' | filecheck %s --check-prefix=TMA

// 64 rows, 24 KiB per slot: the deepest default ring (4), one consumer warpgroup.
// CHECK:      %a_b_ring = aref.create : !aref.ring<[tensor<64x64xf16>, tensor<128x64xf16>], 4>
// CHECK:      aref.group consumer warpgroups(1)
// TMA:        !aref.ring<[tensor<64x64xf16>, tensor<128x64xf16>], 4>
func.func @rows64(%a_desc: !tile.desc<64x64xf16>, %b_desc: !tile.desc<128x64xf16>, %c_desc: !tile.desc<64x128xf16>, %k: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = tile.splat %zero : f32 -> tensor<64x128xf32>
  %acc = scf.for %kk = %c0 to %k step %c64 iter_args(%acc_iter = %acc0) -> (tensor<64x128xf32>) : i32 {
    %a = tile.load %a_desc[%c0, %kk] : !tile.desc<64x64xf16> -> tensor<64x64xf16>
    %b = tile.load %b_desc[%c0, %kk] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
    %b_t = tile.trans %b : tensor<128x64xf16> -> tensor<64x128xf16>
    %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
    scf.yield %acc_next : tensor<64x128xf32>
  }
  %c = tile.convert %acc : tensor<64x128xf32> -> tensor<64x128xf16>
  tile.store %c_desc[%c0, %c0], %c : !tile.desc<64x128xf16>, tensor<64x128xf16>
  func.return
}

// -----

// 128 rows, 96 KiB per slot: two slots fit (192 KiB); beside the 64 KiB staging of C only
// one; two consumer warpgroups.
// CHECK:      %a_b_ring = aref.create : !aref.ring<[tensor<128x128xf16>, tensor<256x128xf16>], 2>
// CHECK:      aref.group consumer warpgroups(2)
// TMA:        !aref.ring<[tensor<128x128xf16>, tensor<256x128xf16>], 1>
func.func @wide(%a_desc: !tile.desc<128x128xf16>, %b_desc: !tile.desc<256x128xf16>, %c_desc: !tile.desc<128x256xf16>, %k: i32) {
  %c0 = arith.constant 0 : i32
  %c128 = arith.constant 128 : i32
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = tile.splat %zero : f32 -> tensor<128x256xf32>
  %acc = scf.for %kk = %c0 to %k step %c128 iter_args(%acc_iter = %acc0) -> (tensor<128x256xf32>) : i32 {
    %a = tile.load %a_desc[%c0, %kk] : !tile.desc<128x128xf16> -> tensor<128x128xf16>
    %b = tile.load %b_desc[%c0, %kk] : !tile.desc<256x128xf16> -> tensor<256x128xf16>
    %b_t = tile.trans %b : tensor<256x128xf16> -> tensor<128x256xf16>
    %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<128x128xf16>, tensor<128x256xf16> -> tensor<128x256xf32>
    scf.yield %acc_next : tensor<128x256xf32>
  }
  %c = tile.convert %acc : tensor<128x256xf32> -> tensor<128x256xf16>
  tile.store %c_desc[%c0, %c0], %c : !tile.desc<128x256xf16>, tensor<128x256xf16>
  func.return
}
