// lower-aref on hand-written aref IR: per ring D full + D empty barriers, full count 1, empty
// count = consumer warpgroups, slot = i mod D, consumer parity (i div D) & 1, producer parity
// flipped, TMA payloads folded into tma_load with one arrive.expect_tx of their total bytes.
// RUN: tawa-opt %s -p lower-aref | filecheck %s
// RUN: tawa-opt %s -p lower-aref | tawa-opt > /dev/null

// CHECK-LABEL: func.func @gemm_ws
// CHECK:      %ring_full = nvgpu.mbarrier_alloc {tawa.ring = {name = "ring", depth = 2 : i32, consumers = 2 : i32, expect_tx = 32768 : i32}} : !nvgpu.mbarrier<2>
// CHECK-NEXT: %ring_empty = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
// CHECK-NEXT: %ring_buf0 = nvgpu.smem_alloc : !nvgpu.smem<2x128x64xf16, swizzle 128>
// CHECK-NEXT: %ring_buf1 = nvgpu.smem_alloc : !nvgpu.smem<2x64x128xf16, swizzle 128>
// CHECK-NEXT: nvgpu.mbarrier_init %ring_full, count 1 : !nvgpu.mbarrier<2>
// CHECK-NEXT: nvgpu.mbarrier_init %ring_empty, count 2 : !nvgpu.mbarrier<2>
// CHECK-NEXT: nvgpu.fence_mbarrier_init
// CHECK-NEXT: nvgpu.cta_barrier
// CHECK:      aref.group producer
// CHECK:        scf.for %i = %c0 to %k_tiles step %c1 : i32 {
// CHECK-NEXT:     %depth = arith.constant 2 : i32
// CHECK-NEXT:     %slot = arith.remui %i, %depth : i32
// CHECK-NEXT:     %depth_1 = arith.constant 2 : i32
// CHECK-NEXT:     %one = arith.constant 1 : i32
// CHECK-NEXT:     %round = arith.divui %i, %depth_1 : i32
// CHECK-NEXT:     %parity = arith.andi %round, %one : i32
// CHECK-NEXT:     %[[PP:.*]] = arith.xori %parity, %one : i32
// CHECK-NEXT:     nvgpu.mbarrier_wait %ring_empty[%slot], %[[PP]] : !nvgpu.mbarrier<2>
// CHECK-NEXT:     nvgpu.mbarrier_arrive_expect_tx %ring_full[%slot], bytes 32768 : !nvgpu.mbarrier<2>
// CHECK-NEXT:     nvgpu.tma_load %a_desc[%c0, %i] -> %ring_buf0[%slot], %ring_full[%slot]
// CHECK-NEXT:     nvgpu.tma_load %b_desc[%i, %c0] -> %ring_buf1[%slot], %ring_full[%slot]
// CHECK-NEXT:   }
// CHECK:      aref.group consumer warpgroups(2)
// CHECK:        scf.for %j = %c0 to %k_tiles step %c1 iter_args
// CHECK:          %[[S:.*]] = arith.remui %j, %{{.*}} : i32
// CHECK:          %[[R:.*]] = arith.divui %j, %{{.*}} : i32
// CHECK-NEXT:     %[[P:.*]] = arith.andi %[[R]], %{{.*}} : i32
// CHECK-NEXT:     nvgpu.mbarrier_wait %ring_full[%[[S]]], %[[P]] : !nvgpu.mbarrier<2>
// CHECK-NEXT:     %x = nvgpu.smem_load %ring_buf0[%[[S]]] : !nvgpu.smem<2x128x64xf16, swizzle 128> -> tensor<128x64xf16>
// CHECK-NEXT:     %y = nvgpu.smem_load %ring_buf1[%[[S]]] : !nvgpu.smem<2x64x128xf16, swizzle 128> -> tensor<64x128xf16>
// CHECK-NEXT:     tile.dot %x, %y
// CHECK:          %[[S2:.*]] = arith.remui %j, %{{.*}} : i32
// CHECK-NEXT:     nvgpu.mbarrier_arrive %ring_empty[%[[S2]]] : !nvgpu.mbarrier<2>
// CHECK-NOT:  aref.create
// CHECK-NOT:  aref.put
// CHECK-NOT:  aref.get
// CHECK-NOT:  aref.consumed
func.func @gemm_ws(%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<64x128xf16>, %k_tiles: i32) {
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
      %zero = arith.constant 0.0 : f32
      %acc0 = tile.splat %zero : f32 -> tensor<128x128xf32>
      %acc = scf.for %j = %c0 to %k_tiles step %c1 iter_args(%acc_iter = %acc0) -> (tensor<128x128xf32>) : i32 {
        %x, %y = aref.get %ring[%j] : !aref.ring<[tensor<128x64xf16>, tensor<64x128xf16>], 2> -> tensor<128x64xf16>, tensor<64x128xf16>
        %next = tile.dot %x, %y, %acc_iter : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
        aref.consumed %ring[%j] : !aref.ring<[tensor<128x64xf16>, tensor<64x128xf16>], 2>
        scf.yield %next : tensor<128x128xf32>
      }
    }
  }
  func.return
}

// A payload computed in registers is stored by every producer thread, fenced for the async
// proxy and published with a named barrier of the producer group before the one arrive; a
// consumer warpgroup of each of two groups arrives on empty (count 1 + 2 = 3).
// CHECK-LABEL: func.func @register_payload
// CHECK:      %p_full = nvgpu.mbarrier_alloc {tawa.ring = {name = "p", depth = 3 : i32, consumers = 3 : i32, expect_tx = 0 : i32}} : !nvgpu.mbarrier<3>
// CHECK:      nvgpu.mbarrier_init %p_empty, count 3 : !nvgpu.mbarrier<3>
// CHECK:      nvgpu.mbarrier_wait %p_empty[%slot], %{{.*}} : !nvgpu.mbarrier<3>
// CHECK-NEXT: nvgpu.smem_store %v, %p_buf0[%slot] : tensor<64x64xf32>, !nvgpu.smem<3x64x64xf32, swizzle 128>
// CHECK-NEXT: nvgpu.fence_proxy_async
// CHECK-NEXT: nvgpu.named_barrier_sync 1, 128
// CHECK-NEXT: nvgpu.mbarrier_arrive %p_full[%slot] : !nvgpu.mbarrier<3>
func.func @register_payload(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %p = aref.create : !aref.ring<[tensor<64x64xf32>], 3>
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(24) {
      scf.for %i = %c0 to %n step %c1 : i32 {
        %f = arith.constant 1.0 : f32
        %v = tile.splat %f : f32 -> tensor<64x64xf32>
        aref.put %p[%i], %v : !aref.ring<[tensor<64x64xf32>], 3>, tensor<64x64xf32>
      }
    }
    aref.group consumer warpgroups(1) registers(160) {
      scf.for %j = %c0 to %n step %c1 : i32 {
        %x = aref.get %p[%j] : !aref.ring<[tensor<64x64xf32>], 3> -> tensor<64x64xf32>
        aref.consumed %p[%j] : !aref.ring<[tensor<64x64xf32>], 3>
      }
    }
    aref.group consumer warpgroups(2) registers(160) {
      scf.for %j = %c0 to %n step %c1 : i32 {
        %x = aref.get %p[%j] : !aref.ring<[tensor<64x64xf32>], 3> -> tensor<64x64xf32>
        aref.consumed %p[%j] : !aref.ring<[tensor<64x64xf32>], 3>
      }
    }
  }
  func.return
}

// A release lagged by 1 (mma-lag): the arrive carries the lag for lower-to-nvgpu and the
// verifier; the drain becomes the loop of the uses still held, marked with its lag.
// CHECK-LABEL: func.func @lagged
// CHECK:        scf.if %late {
// CHECK-NEXT:     %[[D:.*]] = arith.constant 3 : i32
// CHECK-NEXT:     %[[LS:.*]] = arith.remui %old, %[[D]] : i32
// CHECK-NEXT:     nvgpu.mbarrier_arrive %held_empty[%[[LS]]] {tawa.lag = 1 : i32} : !nvgpu.mbarrier<3>
// CHECK:        %lag = arith.constant 1 : i32
// CHECK-NEXT:   %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:   %[[BACK:.*]] = arith.subi %k_tiles, %lag : i32
// CHECK-NEXT:   %drain_from = arith.maxsi %[[BACK]], %c0 : i32
// CHECK-NEXT:   scf.for %j_1 = %drain_from to %k_tiles step %[[ONE]] : i32 {
// CHECK-NEXT:     %[[DD:.*]] = arith.constant 3 : i32
// CHECK-NEXT:     %[[DS:.*]] = arith.remui %j_1, %[[DD]] : i32
// CHECK-NEXT:     nvgpu.mbarrier_arrive %held_empty[%[[DS]]] : !nvgpu.mbarrier<3>
// CHECK-NEXT:   } {tawa.drain = 1 : i32}
// CHECK-NOT:    aref.drain
func.func @lagged(%a_desc: !tile.desc<64x64xf16>, %k_tiles: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %held = aref.create : !aref.ring<[tensor<64x64xf16>], 3>
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      scf.for %i = %c0 to %k_tiles step %c1 : i32 {
        %a = tile.load %a_desc[%c0, %i] : !tile.desc<64x64xf16> -> tensor<64x64xf16>
        aref.put %held[%i], %a : !aref.ring<[tensor<64x64xf16>], 3>, tensor<64x64xf16>
      }
    }
    aref.group consumer warpgroups(1) registers(232) {
      scf.for %j = %c0 to %k_tiles step %c1 : i32 {
        %x = aref.get %held[%j] : !aref.ring<[tensor<64x64xf16>], 3> -> tensor<64x64xf16>
        %one = arith.constant 1 : i32
        %old = arith.subi %j, %one : i32
        %late = arith.cmpi sge, %j, %one : i32
        scf.if %late {
          aref.consumed %held[%old] lag(1) : !aref.ring<[tensor<64x64xf16>], 3>
        }
      }
      aref.drain %held[%c0, %k_tiles] lag(1) : !aref.ring<[tensor<64x64xf16>], 3>
    }
  }
  func.return
}
