// emit-ptx (`tawa-opt -t ptx`) on hand-written nvgpu-level kernels: header and params, smem
// placement, the mbarrier wait loop, TMA coordinates innermost first, wgmma descriptors
// (+2 per k16 step, +512 per 64 rows), an accumulator carried by a loop without copies, and
// the converted, clipped epilogue.
// RUN: tawa-opt %s -t ptx | filecheck %s
// RUN: tawa-opt %s -p legalize-nvgpu -t ptx | filecheck %s

// CHECK:      .version 8.0
// CHECK-NEXT: .target sm_90a
// CHECK-NEXT: .address_size 64
// CHECK:      .extern .shared .align 1024 .b8 smem[];
// CHECK:      .visible .entry tiny(
// CHECK-NEXT:     .param .align 64 .b8 a_tmap[128],
// CHECK-NEXT:     .param .u64 a_ptr,
// CHECK-NEXT:     .param .u32 a_dim0,
// CHECK-NEXT:     .param .u32 a_dim1,
// CHECK-NEXT:     .param .u32 a_stride0,
// CHECK:          .param .u32 k_tiles
// CHECK-NEXT: )
// CHECK-NEXT: .maxntid 128, 1, 1
// CHECK-NEXT: .minnctapersm 1
// CHECK:      mov.u32 %smem_b32_0, smem;
// CHECK-NEXT: add.u32 %smem_b32_0, %smem_b32_0, 1023;
// CHECK-NEXT: and.b32 %smem_b32_0, %smem_b32_0, -1024;
// CHECK:      mov.b64 %tmap_b64_0, a_tmap;
// CHECK-NEXT: cvta.param.u64 %tmap_b64_0, %tmap_b64_0;
// Buffers first (1024-aligned), barriers after them.
// CHECK:      add.u32 %[[A:r[0-9]+]], %smem_b32_0, 0;
// CHECK-NEXT: add.u32 %[[B:r[0-9]+]], %smem_b32_0, 16384;
// CHECK-NEXT: add.u32 %[[FULL:r[0-9]+]], %smem_b32_0, 24576;
// CHECK:      setmaxnreg.inc.sync.aligned.u32 232;
// CHECK:      mbarrier.init.shared::cta.b64 [%[[FULL]]], 1;
// CHECK-NEXT: mbarrier.init.shared::cta.b64 [%[[FULL]]+8], 1;
// The accumulator's registers are zeroed once and carried by the loop.
// CHECK:      mov.f32 %acc_f32_0, 0f00000000;
// CHECK:      $L_for_{{[0-9]+}}:
// CHECK:      mbarrier.arrive.expect_tx.shared::cta.b64 _, [{{%r[0-9]+}}], 16384;
// CHECK:      cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{{%r[0-9]+}}], [%tmap_b64_0, {%[[OFFK:r[0-9]+]], %[[C0:r[0-9]+]]}], [{{%r[0-9]+}}];
// The consumer's wait loops until the phase completes; the thread may sleep up to 10 ms a try.
// CHECK:      $L_wait_[[W:[0-9]+]]:
// CHECK-NEXT: mbarrier.try_wait.parity.shared::cta.b64 %[[DONE:p[0-9]+]], [{{%r[0-9]+}}], %{{r[0-9]+}}, 0x989680;
// CHECK-NEXT: @!%[[DONE]] bra $L_wait_[[W]];
// CHECK:      wgmma.fence.sync.aligned;
// CHECK:      or.b64 %desc_b64_0, %desc_b64_0, 0x4000004000010000;
// CHECK:      wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%acc_f32_0, {{.*}}, %acc_f32_31}, %desc_b64_0, %desc_b64_1, 1, 1, 1, 0, 0;
// CHECK-NEXT: add.s64 %desc_b64_2, %desc_b64_0, 2;
// CHECK-NEXT: add.s64 %desc_b64_3, %desc_b64_1, 2;
// CHECK:      wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%acc_f32_32, {{.*}}, %acc_f32_63}, %desc_b64_8, %desc_b64_1, 1, 1, 1, 0, 0;
// CHECK:      wgmma.commit_group.sync.aligned;
// CHECK-NEXT: wgmma.wait_group.sync.aligned 0;
// CHECK:      bra.uni $L_for_
// f32 pairs become f16x2 registers, the high value first.
// CHECK:      cvt.rn.f16x2.f32 %frag_b32_0, %acc_f32_1, %acc_f32_0;
// CHECK:      ld.param.u32 {{%r[0-9]+}}, [a_dim0];
// CHECK:      @%{{p[0-9]+}} st.global.b32 [%{{rd[0-9]+}}+0], %frag_b32_0;
// CHECK:      ret;
func.func @tiny(%a: !tile.desc<128x64xf16>, %b: !tile.desc<64x64xf16>, %k_tiles: i32) attributes {nvgpu.threads = 128 : i32} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %a_buf = nvgpu.smem_alloc : !nvgpu.smem<1x128x64xf16, swizzle 128>
  %b_buf = nvgpu.smem_alloc : !nvgpu.smem<1x64x64xf16, swizzle 128>
  %full = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
  nvgpu.setmaxnreg increase 232
  %tid = nvgpu.thread_index : i32
  %t0 = arith.cmpi eq, %tid, %c0 : i32
  scf.if %t0 {
    nvgpu.mbarrier_init %full, count 1 : !nvgpu.mbarrier<2>
    nvgpu.fence_mbarrier_init
  }
  nvgpu.cta_barrier
  %zero = arith.constant 0.0 : f32
  %acc0 = nvgpu.fragment_splat %zero : f32 -> !nvgpu.fragment<wgmma_acc, 128x64xf32>
  %acc = scf.for %i = %c0 to %k_tiles step %c1 iter_args(%acc_iter = %acc0) -> (!nvgpu.fragment<wgmma_acc, 128x64xf32>) : i32 {
    %off_k = arith.muli %i, %c64 : i32
    %par = arith.andi %i, %c1 : i32
    scf.if %t0 {
      nvgpu.mbarrier_arrive_expect_tx %full[%c0], bytes 16384 : !nvgpu.mbarrier<2>
      nvgpu.tma_load %a[%c0, %off_k] -> %a_buf[%c0], %full[%c0] : !tile.desc<128x64xf16>, !nvgpu.smem<1x128x64xf16, swizzle 128>, !nvgpu.mbarrier<2>
    }
    nvgpu.mbarrier_wait %full[%c0], %par : !nvgpu.mbarrier<2>
    nvgpu.wgmma_fence
    %next = nvgpu.wgmma_mma_async %a_buf[%c0], %b_buf[%c0], %acc_iter : !nvgpu.smem<1x128x64xf16, swizzle 128>, !nvgpu.smem<1x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 128x64xf32>
    nvgpu.wgmma_commit_group
    nvgpu.wgmma_wait_group 0
    scf.yield %next : !nvgpu.fragment<wgmma_acc, 128x64xf32>
  }
  %half = nvgpu.fragment_convert %acc : !nvgpu.fragment<wgmma_acc, 128x64xf32> -> !nvgpu.fragment<wgmma_acc, 128x64xf16>
  nvgpu.fragment_store_global %half, %a[%c0, %c0] : !nvgpu.fragment<wgmma_acc, 128x64xf16>, !tile.desc<128x64xf16>
  func.return
}
