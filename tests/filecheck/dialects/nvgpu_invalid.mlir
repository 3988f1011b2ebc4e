// One case per nvgpu verifier rule; each must fail with exactly its message.
// RUN: tawa-opt %s --split-input-file --verify-diagnostics | filecheck %s

// === types

%b = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<0>
// CHECK: !nvgpu.mbarrier needs at least one barrier, got 0

// -----

%s = nvgpu.smem_alloc : !nvgpu.smem<128xf16>
// CHECK: !nvgpu.smem needs a slot count and a tile shape (rank >= 2), got 128

// -----

%s = nvgpu.smem_alloc : !nvgpu.smem<0x128x64xf16>
// CHECK: !nvgpu.smem dims must be positive, got (0, 128, 64)

// -----

%s = nvgpu.smem_alloc : !nvgpu.smem<2x64x64xi32>
// CHECK: !nvgpu.smem element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, got i32

// -----

%s = nvgpu.smem_alloc : !nvgpu.smem<2x64x64xf16, swizzle 16>
// CHECK: !nvgpu.smem swizzle must be 0, 32, 64 or 128, got 16

// -----

%s = nvgpu.smem_alloc : !nvgpu.smem<2x64x32xf16, swizzle 128>
// CHECK: !nvgpu.smem with swizzle 128 needs rows of a multiple of 128 bytes, got 32 x 2 = 64 bytes

// -----

func.func private @f(!nvgpu.fragment<wgmma_row, 64x64xf32>)
// CHECK: !nvgpu.fragment<wgmma_row> needs a rank-1 shape, got 64x64

// -----

func.func private @f(!nvgpu.fragment<wgmma_acc, 32x64xf32>)
// CHECK: !nvgpu.fragment<wgmma_acc> rows must be a positive multiple of 64, got 32

// -----

func.func private @f(!nvgpu.fragment<wgmma_acc, 64x64xi32>)
// CHECK: !nvgpu.fragment element type must be f16, bf16, f8E4M3FN, f8E5M2 or f32, got i32

// -----

func.func private @f(!nvgpu.fragment<wgmma_acc, 64x264xf32>)
// CHECK: !nvgpu.fragment<wgmma_acc> columns must be a multiple of 8 in 8..256 (wgmma N), got 264

// -----

func.func private @f(!nvgpu.fragment<wgmma_acc, 64x12xf32>)
// CHECK: !nvgpu.fragment<wgmma_acc> columns must be a multiple of 8 in 8..256 (wgmma N), got 12

// -----

func.func private @f(!nvgpu.fragment<wgmma_operand_a, 64x16xf32>)
// CHECK: !nvgpu.fragment<wgmma_operand_a> element type must be f16 or bf16, got f32

// -----

func.func private @f(!nvgpu.fragment<wgmma_operand_a, 64x8xf16>)
// CHECK: !nvgpu.fragment<wgmma_operand_a> columns must be a positive multiple of 16 (wgmma K), got 8

// -----

// === mbarriers

%b = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
nvgpu.mbarrier_init %b, count 0 : !nvgpu.mbarrier<2>
// CHECK: error: 'nvgpu.mbarrier_init' count must be in 1..1048575, got 0

// -----

%b = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
%slot = arith.constant 2 : i32
nvgpu.mbarrier_arrive %b[%slot] : !nvgpu.mbarrier<2>
// CHECK: error: 'nvgpu.mbarrier_arrive' barrier slot 2 is out of range 0..1

// -----

%b = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
%slot = arith.constant 0 : i32
nvgpu.mbarrier_arrive_expect_tx %b[%slot], bytes 0 : !nvgpu.mbarrier<2>
// CHECK: error: 'nvgpu.mbarrier_arrive_expect_tx' bytes must be in 1..1048575 (the 20-bit tx-count), got 0

// -----

%b = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
%slot = arith.constant 0 : i32
%parity = arith.constant 2 : i32
nvgpu.mbarrier_wait %b[%slot], %parity : !nvgpu.mbarrier<2>
// CHECK: error: 'nvgpu.mbarrier_wait' parity must be 0 or 1, got 2

// -----

// === TMA

func.func @f(%d: !tile.desc<128x64xf16>, %i: i32) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<2x128x64xf16, swizzle 128>
  %b = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
  nvgpu.tma_load %d[%i] -> %s[%i], %b[%i] : !tile.desc<128x64xf16>, !nvgpu.smem<2x128x64xf16, swizzle 128>, !nvgpu.mbarrier<2>
  func.return
}
// CHECK: error: 'nvgpu.tma_load' needs one offset per descriptor dim: !tile.desc<128x64xf16> has rank 2, got 1 offsets

// -----

func.func @f(%d: !tile.desc<128x64xf16>, %i: i32) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<2x64x64xf16, swizzle 128>
  %b = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
  nvgpu.tma_load %d[%i, %i] -> %s[%i], %b[%i] : !tile.desc<128x64xf16>, !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.mbarrier<2>
  func.return
}
// CHECK: error: 'nvgpu.tma_load' descriptor block 128x64xf16 must equal the smem slot 64x64xf16

// -----

func.func @f(%d: !tile.desc<128x64xbf16>, %i: i32) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<2x128x64xf16, swizzle 128>
  %b = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
  nvgpu.tma_load %d[%i, %i] -> %s[%i], %b[%i] : !tile.desc<128x64xbf16>, !nvgpu.smem<2x128x64xf16, swizzle 128>, !nvgpu.mbarrier<2>
  func.return
}
// CHECK: error: 'nvgpu.tma_load' descriptor block 128x64xbf16 must equal the smem slot 128x64xf16

// -----

func.func @f(%d: !tile.desc<512x64xf16>, %i: i32) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<1x512x64xf16, swizzle 128>
  %b = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<1>
  nvgpu.tma_load %d[%i, %i] -> %s[%i], %b[%i] : !tile.desc<512x64xf16>, !nvgpu.smem<1x512x64xf16, swizzle 128>, !nvgpu.mbarrier<1>
  func.return
}
// CHECK: error: 'nvgpu.tma_load' box dims must be at most 256, got 512x64

// -----

func.func @f(%d: !tile.desc<64x4xf16>, %i: i32) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<1x64x4xf16>
  %b = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<1>
  nvgpu.tma_load %d[%i, %i] -> %s[%i], %b[%i] : !tile.desc<64x4xf16>, !nvgpu.smem<1x64x4xf16>, !nvgpu.mbarrier<1>
  func.return
}
// CHECK: error: 'nvgpu.tma_load' innermost box dim must span a multiple of 16 bytes, got 8 bytes

// -----

func.func @f(%d: !tile.desc<128x64xf16>, %i: i32) {
  %slot = arith.constant 3 : i32
  %s = nvgpu.smem_alloc : !nvgpu.smem<3x128x64xf16, swizzle 128>
  %b = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<3>
  nvgpu.tma_load %d[%i, %i] -> %s[%slot], %b[%i] : !tile.desc<128x64xf16>, !nvgpu.smem<3x128x64xf16, swizzle 128>, !nvgpu.mbarrier<3>
  func.return
}
// CHECK: error: 'nvgpu.tma_load' buffer slot 3 is out of range 0..2

// -----

func.func @f(%d: !tile.desc<128x128xf32>, %i: i32) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<1x128x128xf16>
  nvgpu.tma_store %d[%i, %i], %s[%i] : !tile.desc<128x128xf32>, !nvgpu.smem<1x128x128xf16>
  func.return
}
// CHECK: error: 'nvgpu.tma_store' descriptor block 128x128xf32 must equal the smem slot 128x128xf16

// -----

nvgpu.tma_store_wait -1
// CHECK: error: 'nvgpu.tma_store_wait' pending must be >= 0, got -1

// -----

// === smem as tile values

func.func @f(%i: i32) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<2x128x64xf16, swizzle 128>
  %t = nvgpu.smem_load %s[%i] : !nvgpu.smem<2x128x64xf16, swizzle 128> -> tensor<64x64xf16>
  func.return
}
// CHECK: error: 'nvgpu.smem_load' of a slot of !nvgpu.smem<2x128x64xf16, swizzle 128> must produce tensor<128x64xf16>, got tensor<64x64xf16>

// -----

func.func @f(%i: i32, %t: tensor<128x64xbf16>) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<2x128x64xf16, swizzle 128>
  nvgpu.smem_store %t, %s[%i] : tensor<128x64xbf16>, !nvgpu.smem<2x128x64xf16, swizzle 128>
  func.return
}
// CHECK: error: 'nvgpu.smem_store' into a slot of !nvgpu.smem<2x128x64xf16, swizzle 128> needs a tensor<128x64xf16> value, got tensor<128x64xbf16>

// -----

// === wgmma

nvgpu.wgmma_wait_group -1
// CHECK: error: 'nvgpu.wgmma_wait_group' pending must be >= 0, got -1

// -----

func.func @f(%a: !nvgpu.smem<2x64x64xf16, swizzle 128>, %b: !nvgpu.smem<2x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf16>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%i], %acc : !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf16>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' accumulator must be a wgmma_acc fragment of f32, got !nvgpu.fragment<wgmma_acc, 64x64xf16>

// -----

func.func @f(%a: !nvgpu.smem<2x64x64xf16, swizzle 128>, %b: !nvgpu.smem<2x64x64xbf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%i], %acc : !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.smem<2x64x64xbf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' inputs must both be f16, both bf16, or both fp8, got f16 and bf16

// -----

func.func @f(%a: !nvgpu.smem<2x64x64xf32>, %b: !nvgpu.smem<2x64x64xf32>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%i], %acc : !nvgpu.smem<2x64x64xf32>, !nvgpu.smem<2x64x64xf32>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' inputs must both be f16, both bf16, or both fp8, got f32 and f32

// -----

func.func @f(%a: !nvgpu.smem<2x64x64xf8E4M3FN, swizzle 64>, %b: !nvgpu.smem<2x64x64xf8E4M3FN, swizzle 64>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%i], %acc transpose_b : !nvgpu.smem<2x64x64xf8E4M3FN, swizzle 64>, !nvgpu.smem<2x64x64xf8E4M3FN, swizzle 64>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' transpose_b is not available for fp8 inputs (both must be K-major)

// -----

func.func @f(%a: !nvgpu.smem<2x64x64xf16, swizzle 128>, %b: !nvgpu.smem<2x2x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%i], %acc : !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.smem<2x2x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' B slots must be 2-D, got !nvgpu.smem<2x2x64x64xf16, swizzle 128>

// -----

func.func @f(%a: !nvgpu.smem<2x2x64x64xf16, swizzle 128>, %b: !nvgpu.smem<2x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%i], %acc : !nvgpu.smem<2x2x64x64xf16, swizzle 128>, !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' A slots must be 2-D, got !nvgpu.smem<2x2x64x64xf16, swizzle 128>

// -----

func.func @f(%a: !nvgpu.smem<2x64x64xf16, swizzle 128>, %b: !nvgpu.smem<2x128x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%i], %acc : !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.smem<2x128x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' shape mismatch: A 64x64, B 128x64, acc 64x64 (needs A MxK, B NxK, acc MxN)

// -----

func.func @f(%a: !nvgpu.smem<2x64x64xf16, swizzle 128>, %b: !nvgpu.smem<2x128x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x128xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%i], %acc transpose_b : !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.smem<2x128x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x128xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' shape mismatch: A 64x64, B 128x64, acc 64x128 (needs A MxK, B KxN (transpose_b), acc MxN)

// -----

func.func @f(%a: !nvgpu.smem<2x64x8xf16>, %b: !nvgpu.smem<2x64x8xf16>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%i], %acc : !nvgpu.smem<2x64x8xf16>, !nvgpu.smem<2x64x8xf16>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' K = 8 must be a multiple of the instruction K 16 for f16

// -----

func.func @f(%a: !nvgpu.smem<2x64x16xf8E5M2>, %b: !nvgpu.smem<2x64x16xf8E5M2>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%i], %acc : !nvgpu.smem<2x64x16xf8E5M2>, !nvgpu.smem<2x64x16xf8E5M2>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' K = 16 must be a multiple of the instruction K 32 for f8E5M2

// -----

func.func @f(%a: !nvgpu.smem<2x128x64xf16, swizzle 128>, %b: !nvgpu.smem<2x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%i], %acc : !nvgpu.smem<2x128x64xf16, swizzle 128>, !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' A slot has 128 rows but acc has 64: pass a row offset to use a slice of the slot

// -----

func.func @f(%a: !nvgpu.smem<2x96x64xf16, swizzle 128>, %b: !nvgpu.smem<2x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async %a[%i, %i], %b[%i], %acc : !nvgpu.smem<2x96x64xf16, swizzle 128>, !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' A slot rows 96 must be a multiple of acc rows 64

// -----

func.func @f(%a: !nvgpu.smem<2x64x64xf16, swizzle 128>, %b: !nvgpu.smem<2x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %slot = arith.constant 2 : i32
  %d = nvgpu.wgmma_mma_async %a[%i], %b[%slot], %acc : !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' B slot 2 is out of range 0..1

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x64xf16>, %b: !nvgpu.smem<2x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async_rs %a, %b[%i], %acc : !nvgpu.fragment<wgmma_acc, 64x64xf16>, !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async_rs' A of f16 must be a wgmma_operand_a fragment, got !nvgpu.fragment<wgmma_acc, 64x64xf16>

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_operand_a, 64x32xf16>, %b: !nvgpu.smem<2x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %d = nvgpu.wgmma_mma_async_rs %a, %b[%i], %acc : !nvgpu.fragment<wgmma_operand_a, 64x32xf16>, !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async_rs' shape mismatch: A 64x32, B 64x64, acc 64x64 (needs A MxK, B NxK, acc MxN)

// -----

// === threads and registers

nvgpu.setmaxnreg increase 20
// CHECK: error: 'nvgpu.setmaxnreg' registers must be a multiple of 8 in 24..256, got 20

// -----

nvgpu.setmaxnreg decrease 44
// CHECK: error: 'nvgpu.setmaxnreg' registers must be a multiple of 8 in 24..256, got 44

// -----

nvgpu.named_barrier_sync 0, 128
// CHECK: error: 'nvgpu.named_barrier_sync' id 0 is reserved for the CTA-wide barrier (use nvgpu.cta_barrier)

// -----

nvgpu.named_barrier_sync 16, 128
// CHECK: error: 'nvgpu.named_barrier_sync' id must be in 1..15, got 16

// -----

nvgpu.named_barrier_sync 1, 48
// CHECK: error: 'nvgpu.named_barrier_sync' threads must be a multiple of 32 in 32..1024, got 48

// -----

// === fragments

func.func @f(%x: f16) {
  %f = nvgpu.fragment_splat %x : f16 -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.fragment_splat' scalar type f16 must equal the element type of !nvgpu.fragment<wgmma_acc, 64x64xf32>

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %b: !nvgpu.fragment<wgmma_acc, 64x128xf32>) {
  %c = "nvgpu.fragment_binary"(%a, %b) <{kind = #nvgpu<binary_kind add>}> : (!nvgpu.fragment<wgmma_acc, 64x64xf32>, !nvgpu.fragment<wgmma_acc, 64x128xf32>) -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: operand 'rhs' at position 1 does not verify:

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x64xf8E4M3FN>) {
  %c = nvgpu.fragment_unary exp2 %a : !nvgpu.fragment<wgmma_acc, 64x64xf8E4M3FN>
  func.return
}
// CHECK: error: 'nvgpu.fragment_unary' computes on f32, f16 or bf16 elements, got f8E4M3FN

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x64xf32>) {
  %c = nvgpu.fragment_convert %a : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_acc, 64x128xbf16>
  func.return
}
// CHECK: error: 'nvgpu.fragment_convert' must keep the shape and layout (or turn wgmma_acc into wgmma_operand_a or wgmma_operand_a8), got !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_acc, 64x128xbf16>

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_operand_a, 64x64xbf16>) {
  %c = nvgpu.fragment_convert %a : !nvgpu.fragment<wgmma_operand_a, 64x64xbf16> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.fragment_convert' must keep the shape and layout (or turn wgmma_acc into wgmma_operand_a or wgmma_operand_a8), got !nvgpu.fragment<wgmma_operand_a, 64x64xbf16> -> !nvgpu.fragment<wgmma_acc, 64x64xf32>

// -----

// columns move only into the fp8 A layout
func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x32xf32>) {
  %c = nvgpu.fragment_convert %a {columns = array<i32: 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 16, 17, 24, 25, 18, 19, 26, 27, 20, 21, 28, 29, 22, 23, 30, 31>} : !nvgpu.fragment<wgmma_acc, 64x32xf32> -> !nvgpu.fragment<wgmma_acc, 64x32xf8E4M3FN>
  func.return
}
// CHECK: error: 'nvgpu.fragment_convert' moves columns only from wgmma_acc into wgmma_operand_a8, got !nvgpu.fragment<wgmma_acc, 64x32xf32> -> !nvgpu.fragment<wgmma_acc, 64x32xf8E4M3FN>

// -----

// the columns in their own order would need values of other lanes (the quad exchange)
func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x32xf32>) {
  %c = nvgpu.fragment_convert %a {columns = array<i32: 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31>} : !nvgpu.fragment<wgmma_acc, 64x32xf32> -> !nvgpu.fragment<wgmma_operand_a8, 64x32xf8E4M3FN>
  func.return
}
// CHECK: error: 'nvgpu.fragment_convert' column 4 would come from column 4, held by other threads

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x32xf32>) {
  %c = nvgpu.fragment_convert %a {columns = array<i32: 0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 16, 17, 24, 25, 18, 19, 26, 27, 20, 21, 28, 29, 22, 23, 30, 32>} : !nvgpu.fragment<wgmma_acc, 64x32xf32> -> !nvgpu.fragment<wgmma_operand_a8, 64x32xf8E4M3FN>
  func.return
}
// CHECK: error: 'nvgpu.fragment_convert' names a column the source does not have

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 128x64xf32>) {
  %c = nvgpu.fragment_row_reduce max %a : !nvgpu.fragment<wgmma_acc, 128x64xf32> -> !nvgpu.fragment<wgmma_row, 64xf32>
  func.return
}
// CHECK: error: 'nvgpu.fragment_row_reduce' reduces a wgmma_acc fragment to its wgmma_row fragment, got !nvgpu.fragment<wgmma_acc, 128x64xf32> -> !nvgpu.fragment<wgmma_row, 64xf32>

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x64xf32>) {
  %c = nvgpu.shuffle_xor %a, 1 : !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.shuffle_xor' needs a wgmma_row fragment, got !nvgpu.fragment<wgmma_acc, 64x64xf32>

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_row, 64xf32>) {
  %c = nvgpu.shuffle_xor %a, 4 : !nvgpu.fragment<wgmma_row, 64xf32>
  func.return
}
// CHECK: error: 'nvgpu.shuffle_xor' mask must be 1 or 2 (the lanes of a quad), got 4

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_row, 64xf32>) {
  %c = nvgpu.fragment_broadcast_rows %a : !nvgpu.fragment<wgmma_row, 64xf32> -> !nvgpu.fragment<wgmma_acc, 128x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.fragment_broadcast_rows' turns a wgmma_row fragment into a wgmma_acc fragment of the same rows and element type, got !nvgpu.fragment<wgmma_row, 64xf32> -> !nvgpu.fragment<wgmma_acc, 128x64xf32>

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_operand_a, 64x64xf16>, %i: i32) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<1x64x64xf16>
  nvgpu.fragment_store %a, %s[%i] : !nvgpu.fragment<wgmma_operand_a, 64x64xf16>, !nvgpu.smem<1x64x64xf16>
  func.return
}
// CHECK: error: 'nvgpu.fragment_store' needs a wgmma_acc fragment, got !nvgpu.fragment<wgmma_operand_a, 64x64xf16>

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %i: i32) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<1x64x64xf16>
  nvgpu.fragment_store %a, %s[%i] : !nvgpu.fragment<wgmma_acc, 64x64xf32>, !nvgpu.smem<1x64x64xf16>
  func.return
}
// CHECK: error: 'nvgpu.fragment_store' element types differ: f32 into f16 (convert first)

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x64xf16>, %i: i32) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<1x128x64xf16>
  nvgpu.fragment_store %a, %s[%i] : !nvgpu.fragment<wgmma_acc, 64x64xf16>, !nvgpu.smem<1x128x64xf16>
  func.return
}
// CHECK: error: 'nvgpu.fragment_store' of 64x64 into a 128x64 slot: the slot must have the same shape, or, with a row offset, a multiple of the rows

// -----

// A uniform phase for f32 pairs: 8 bytes each, a quad's origin columns span 32 bytes.
func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x32xf32>, %i: i32) {
  %s = nvgpu.smem_alloc : !nvgpu.smem<1x64x32xf32, swizzle 128>
  nvgpu.fragment_store %a, %s[%i] {store_values = array<i32: 0, 2, 4, 6, 8, 10, 12, 14>, store_rows = array<i32: 0, 8, 0, 8, 0, 8, 0, 8>, store_cols = array<i32: 0, 0, 8, 8, 16, 16, 24, 24>, row_pitch = 128 : i32, slab_pitch = 8192 : i32, swizzle = 128 : i32, uniform_phase} : !nvgpu.fragment<wgmma_acc, 64x32xf32>, !nvgpu.smem<1x64x32xf32, swizzle 128>
  func.return
}
// CHECK: error: 'nvgpu.fragment_store' uniform_phase: some store of the plan changes the swizzle phase of the origin row, leaves a 16-byte chunk or is not one 32-bit pair

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_operand_a, 64x64xf16>, %d: !tile.desc<64x64xf16>, %i: i32) {
  nvgpu.fragment_store_global %a, %d[%i, %i] : !nvgpu.fragment<wgmma_operand_a, 64x64xf16>, !tile.desc<64x64xf16>
  func.return
}
// CHECK: error: 'nvgpu.fragment_store_global' needs a wgmma_acc or wgmma_row fragment, got !nvgpu.fragment<wgmma_operand_a, 64x64xf16>

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %d: !tile.desc<2x64x64xf32>, %i: i32) {
  nvgpu.fragment_store_global %a, %d[%i, %i, %i] : !nvgpu.fragment<wgmma_acc, 64x64xf32>, !tile.desc<2x64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.fragment_store_global' needs a rank-2 descriptor, or one whose leading block dims are 1 (a row vector also a rank-1 one), got !tile.desc<2x64x64xf32>

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %d: !tile.desc<64x64xf32>, %i: i32) {
  nvgpu.fragment_store_global %a, %d[%i] : !nvgpu.fragment<wgmma_acc, 64x64xf32>, !tile.desc<64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.fragment_store_global' needs one offset per descriptor dim: !tile.desc<64x64xf32> has rank 2, got 1 offsets

// -----

func.func @f(%a: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %d: !tile.desc<64x64xbf16>, %i: i32) {
  nvgpu.fragment_store_global %a, %d[%i, %i] : !nvgpu.fragment<wgmma_acc, 64x64xf32>, !tile.desc<64x64xbf16>
  func.return
}
// CHECK: error: 'nvgpu.fragment_store_global' element types differ: f32 into bf16 (convert first)

// === plans written by legalize-nvgpu

// -----

%buf = nvgpu.smem_alloc {offset = 512 : i32} : !nvgpu.smem<1x64x64xf16, swizzle 128>
// CHECK: error: 'nvgpu.smem_alloc' offset must be a non-negative multiple of 1024, got 512

// -----

%bars = nvgpu.mbarrier_alloc {offset = 4 : i32} : !nvgpu.mbarrier<2>
// CHECK: error: 'nvgpu.mbarrier_alloc' offset must be a non-negative multiple of 8, got 4

// -----

func.func @f(%a: !nvgpu.smem<1x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %c0: i32) {
  %r = nvgpu.wgmma_mma_async %a[%c0], %a[%c0], %acc {b_desc_bits = 1 : i64, b_desc_steps = array<i64: 0, 2>} : !nvgpu.smem<1x64x64xf16, swizzle 128>, !nvgpu.smem<1x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' b_desc_steps needs one step per wgmma instruction (4), got 2

// -----

func.func @f(%a: !nvgpu.smem<1x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %c0: i32) {
  %r = nvgpu.wgmma_mma_async %a[%c0], %a[%c0], %acc {a_desc_bits = 1 : i64} : !nvgpu.smem<1x64x64xf16, swizzle 128>, !nvgpu.smem<1x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.wgmma_mma_async' needs both a_desc_bits and a_desc_steps, or neither

// -----

func.func @f(%d: !tile.desc<64x64xf16>, %i: i32) {
  %buf = nvgpu.smem_alloc : !nvgpu.smem<1x64x64xf16, swizzle 128>
  %bars = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<1>
  nvgpu.tma_load %d[%i, %i] -> %buf[%i], %bars[%i] {box_smem_offsets = array<i32: 0, 8192>, box_col_offsets = array<i32: 0>} : !tile.desc<64x64xf16>, !nvgpu.smem<1x64x64xf16, swizzle 128>, !nvgpu.mbarrier<1>
  func.return
}
// CHECK: error: 'nvgpu.tma_load' needs box_smem_offsets and box_col_offsets of one equal, positive length, or neither

// -----

func.func @f(%s: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %fill: f32, %n: i32) {
  %m = nvgpu.fragment_mask %s, %fill where [%n] {row_coefficients = array<i32: 0>, col_coefficients = array<i32: 1>, skip_corners = array<i32: 63, 0>} : !nvgpu.fragment<wgmma_acc, 64x64xf32>, f32
  func.return
}
// CHECK: error: 'nvgpu.fragment_mask' skip_corners needs one value per condition (1), got 2

// -----

func.func @f(%acc: !nvgpu.fragment<wgmma_acc, 64x16xf32>, %c: !tile.desc<64x16xf32>, %c0: i32) {
  nvgpu.fragment_store_global %acc, %c[%c0, %c0] {store_values = array<i32: 0, 2, 4, 4>, store_rows = array<i32: 0, 8, 0, 8>, store_cols = array<i32: 0, 0, 8, 8>, clip_dims = array<i32: 0, 1>} : !nvgpu.fragment<wgmma_acc, 64x16xf32>, !tile.desc<64x16xf32>
  func.return
}
// CHECK: error: 'nvgpu.fragment_store_global' store plan must store each of the 8 values of a thread once, in groups of 2

// -----

func.func @f(%lse: !nvgpu.fragment<wgmma_row, 64xf32>, %l: !tile.desc<1x1x64xf32>, %c0: i32) {
  nvgpu.fragment_store_global %lse, %l[%c0, %c0, %c0] {store_values = array<i32: 0, 1>, store_rows = array<i32: 0, 0>, store_cols = array<i32: 0, 8>, clip_dims = array<i32: 0, 1, 2>} : !nvgpu.fragment<wgmma_row, 64xf32>, !tile.desc<1x1x64xf32>
  func.return
}
// CHECK: error: 'nvgpu.fragment_store_global' clip_dims [0, 1, 2] must name the plane's dims (1, 2) in order: leading offsets select the plane, they are not clipped
