// lower-to-nvgpu on hand-written mbarrier-level IR (the form lower-aref produces): barrier
// inits in CTA thread 0; groups become an scf.if chain on the warpgroup index with setmaxnreg;
// the TMA producer runs in thread 0; consumer tiles become fragments op by op, whatever the
// kernel computes; dots on smem slots become fence/wgmma/commit, releases run in thread 0 of
// each warpgroup after wait_group(the `tawa.lag` lower-aref wrote on the release), and stores
// become clipped fragment stores, or (`epilogue=tma`, prefix TMA) staged TMA stores. The whole
// programs of examples/ through the pipeline: lower-to-nvgpu-examples.mlir.
// RUN: tawa-opt %s --split-input-file -p lower-to-nvgpu | filecheck %s
// RUN: tawa-opt %s --split-input-file -p "lower-to-nvgpu{epilogue=tma}" | filecheck %s --check-prefix=TMA
// RUN: tawa-opt %s --split-input-file -p lower-to-nvgpu -t ptx > /dev/null
// RUN: tawa-opt %s --split-input-file -p "lower-to-nvgpu{epilogue=tma}" -t ptx > /dev/null

// Cooperative consumers (2 warpgroups, rows [64 w, 64 w + 64) of A), MMA depth 2.
// CHECK-LABEL: func.func @coop_p2
// CHECK-SAME:  attributes {nvgpu.threads = 384 : i32}
// CHECK:       %wg = nvgpu.warpgroup_index : i32
// CHECK-NEXT:  %tid = nvgpu.thread_index : i32
// CHECK-NEXT:  %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK-NEXT:  %is_t0 = arith.cmpi eq, %tid, %[[ZERO]] : i32
// CHECK:       %[[WG0:.*]] = arith.cmpi eq, %wg, %[[ZERO]] : i32
// CHECK-NEXT:  %[[CTA_T0:.*]] = arith.andi %[[WG0]], %is_t0 : i1
// CHECK-NEXT:  scf.if %[[CTA_T0]] {
// CHECK-NEXT:    nvgpu.mbarrier_init %full, count 1
// CHECK-NEXT:    nvgpu.mbarrier_init %empty, count 2
// CHECK-NEXT:    nvgpu.fence_mbarrier_init
// CHECK-NEXT:  }
// CHECK-NEXT:  nvgpu.cta_barrier
// CHECK-NEXT:  %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:  %[[IS_PRODUCER:.*]] = arith.cmpi ult, %wg, %[[ONE]] : i32
// CHECK-NEXT:  scf.if %[[IS_PRODUCER]] {
// CHECK-NEXT:    nvgpu.setmaxnreg decrease 40
// CHECK-NEXT:    scf.if %is_t0 {
// CHECK:           nvgpu.mbarrier_wait %empty[%slot], %pp
// CHECK-NEXT:      nvgpu.mbarrier_arrive_expect_tx %full[%slot], bytes 32768
// CHECK:           nvgpu.tma_load %a_desc
// CHECK-NEXT:      nvgpu.tma_load %b_desc
// CHECK:       } else {
// CHECK-NEXT:    nvgpu.setmaxnreg increase 232
// CHECK:         %[[W:.*]] = arith.subi %wg, %{{.*}} : i32
// CHECK-NEXT:    %row = arith.muli %[[W]], %{{.*}} : i32
// CHECK:         %acc0 = nvgpu.fragment_splat %zero : f32 -> !nvgpu.fragment<wgmma_acc, 64x128xf32>
// CHECK-NEXT:    %acc = scf.for {{.*}} iter_args(%acc_iter = %acc0) -> (!nvgpu.fragment<wgmma_acc, 64x128xf32>)
// CHECK:           nvgpu.mbarrier_wait %full[%rslot], %rpar
// CHECK-NEXT:      nvgpu.wgmma_fence
// CHECK-NEXT:      %next = nvgpu.wgmma_mma_async %a_buf[%rslot, %row], %b_buf[%rslot], %acc_iter
// CHECK-NEXT:      nvgpu.wgmma_commit_group
// CHECK-NEXT:      nvgpu.wgmma_wait_group 1
// CHECK:           scf.if %late {
// CHECK:             scf.if %is_t0 {
// CHECK-NEXT:          nvgpu.mbarrier_arrive %empty[%old_slot]
// CHECK:         nvgpu.wgmma_wait_group 0
// CHECK:         scf.for
// CHECK:           scf.if %is_t0 {
// CHECK-NEXT:        nvgpu.mbarrier_arrive %empty[%drain_slot]
// CHECK:         %c = nvgpu.fragment_convert %acc : !nvgpu.fragment<wgmma_acc, 64x128xf32> -> !nvgpu.fragment<wgmma_acc, 64x128xf16>
// CHECK-NEXT:    %out_m = arith.addi %coff_m, %row : i32
// CHECK-NEXT:    nvgpu.fragment_store_global %c, %c_desc[%out_m, %off_n]
func.func @coop_p2(%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<128x64xf16>,
                   %c_desc: !tile.desc<128x128xf16>, %k_tiles: i32) {
  %full = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
  %empty = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
  %a_buf = nvgpu.smem_alloc : !nvgpu.smem<2x128x64xf16, swizzle 128>
  %b_buf = nvgpu.smem_alloc : !nvgpu.smem<2x128x64xf16, swizzle 128>
  nvgpu.mbarrier_init %full, count 1 : !nvgpu.mbarrier<2>
  nvgpu.mbarrier_init %empty, count 2 : !nvgpu.mbarrier<2>
  nvgpu.fence_mbarrier_init
  nvgpu.cta_barrier
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c2 = arith.constant 2 : i32
      %c64 = arith.constant 64 : i32
      %pid = tile.program_id 0 : i32
      %off_m = arith.muli %pid, %c64 : i32
      scf.for %i = %c0 to %k_tiles step %c1 : i32 {
        %slot = arith.remui %i, %c2 : i32
        %round = arith.divui %i, %c2 : i32
        %par = arith.andi %round, %c1 : i32
        %pp = arith.xori %par, %c1 : i32
        nvgpu.mbarrier_wait %empty[%slot], %pp : !nvgpu.mbarrier<2>
        nvgpu.mbarrier_arrive_expect_tx %full[%slot], bytes 32768 : !nvgpu.mbarrier<2>
        %off_k = arith.muli %i, %c64 : i32
        nvgpu.tma_load %a_desc[%off_m, %off_k] -> %a_buf[%slot], %full[%slot] : !tile.desc<128x64xf16>, !nvgpu.smem<2x128x64xf16, swizzle 128>, !nvgpu.mbarrier<2>
        nvgpu.tma_load %b_desc[%c0, %off_k] -> %b_buf[%slot], %full[%slot] : !tile.desc<128x64xf16>, !nvgpu.smem<2x128x64xf16, swizzle 128>, !nvgpu.mbarrier<2>
      }
    }
    aref.group consumer warpgroups(2) registers(232) {
      %k0 = arith.constant 0 : i32
      %k1 = arith.constant 1 : i32
      %k2 = arith.constant 2 : i32
      %k64 = arith.constant 64 : i32
      %cpid = tile.program_id 0 : i32
      %coff_m = arith.muli %cpid, %k64 : i32
      %off_n = arith.constant 0 : i32
      %w = aref.warpgroup_index : i32
      %row = arith.muli %w, %k64 : i32
      %zero = arith.constant 0.0 : f32
      %acc0 = tile.splat %zero : f32 -> tensor<64x128xf32>
      %acc = scf.for %j = %k0 to %k_tiles step %k1 iter_args(%acc_iter = %acc0) -> (tensor<64x128xf32>) : i32 {
        %rslot = arith.remui %j, %k2 : i32
        %rround = arith.divui %j, %k2 : i32
        %rpar = arith.andi %rround, %k1 : i32
        nvgpu.mbarrier_wait %full[%rslot], %rpar : !nvgpu.mbarrier<2>
        %a = nvgpu.smem_load %a_buf[%rslot] : !nvgpu.smem<2x128x64xf16, swizzle 128> -> tensor<128x64xf16>
        %b = nvgpu.smem_load %b_buf[%rslot] : !nvgpu.smem<2x128x64xf16, swizzle 128> -> tensor<128x64xf16>
        %a_rows = tile.extract_slice %a[%row, %k0] : tensor<128x64xf16> -> tensor<64x64xf16>
        %b_t = tile.trans %b : tensor<128x64xf16> -> tensor<64x128xf16>
        %next = tile.dot %a_rows, %b_t, %acc_iter : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
        %late = arith.cmpi sge, %j, %k1 : i32
        scf.if %late {
          %old = arith.subi %j, %k1 : i32
          %old_slot = arith.remui %old, %k2 : i32
          nvgpu.mbarrier_arrive %empty[%old_slot] {tawa.lag = 1 : i32} : !nvgpu.mbarrier<2>
        }
        scf.yield %next : tensor<64x128xf32>
      }
      %first = arith.subi %k_tiles, %k1 : i32
      %from = arith.maxsi %first, %k0 : i32
      scf.for %d = %from to %k_tiles step %k1 : i32 {
        %drain_slot = arith.remui %d, %k2 : i32
        nvgpu.mbarrier_arrive %empty[%drain_slot] : !nvgpu.mbarrier<2>
      } {tawa.drain = 1 : i32}
      %c = tile.convert %acc : tensor<64x128xf32> -> tensor<64x128xf16>
      %out_m = arith.addi %coff_m, %row : i32
      tile.store_slice %c_desc[%out_m, %off_n], %c : !tile.desc<128x128xf16>, tensor<64x128xf16>
    }
  }
  func.return
}

// -----

// One consumer warpgroup owning the whole 128-row tile (two m64 blocks), MMA depth 1: the
// release of use i follows wait_group 0; 256 threads.
// CHECK-LABEL: func.func @single_p1
// CHECK-SAME:  attributes {nvgpu.threads = 256 : i32}
// CHECK:       nvgpu.wgmma_mma_async %a_buf[%rslot], %b_buf[%rslot], %acc_iter {{.*}} !nvgpu.fragment<wgmma_acc, 128x128xf32>
// CHECK-NEXT:  nvgpu.wgmma_commit_group
// CHECK-NEXT:  nvgpu.wgmma_wait_group 0
// CHECK-NEXT:  scf.if %is_t0 {
// CHECK-NEXT:    nvgpu.mbarrier_arrive %empty[%rslot]
// CHECK:       nvgpu.fragment_store_global {{.*}} : !nvgpu.fragment<wgmma_acc, 128x128xf32>, !tile.desc<128x128xf32>
func.func @single_p1(%a_desc: !tile.desc<128x64xbf16>, %b_desc: !tile.desc<128x64xbf16>,
                     %c_desc: !tile.desc<128x128xf32>, %k_tiles: i32) {
  %full = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<3>
  %empty = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<3>
  %a_buf = nvgpu.smem_alloc : !nvgpu.smem<3x128x64xbf16, swizzle 128>
  %b_buf = nvgpu.smem_alloc : !nvgpu.smem<3x128x64xbf16, swizzle 128>
  nvgpu.mbarrier_init %full, count 1 : !nvgpu.mbarrier<3>
  nvgpu.mbarrier_init %empty, count 1 : !nvgpu.mbarrier<3>
  nvgpu.fence_mbarrier_init
  nvgpu.cta_barrier
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c3 = arith.constant 3 : i32
      %c64 = arith.constant 64 : i32
      scf.for %i = %c0 to %k_tiles step %c1 : i32 {
        %slot = arith.remui %i, %c3 : i32
        %round = arith.divui %i, %c3 : i32
        %par = arith.andi %round, %c1 : i32
        %pp = arith.xori %par, %c1 : i32
        nvgpu.mbarrier_wait %empty[%slot], %pp : !nvgpu.mbarrier<3>
        nvgpu.mbarrier_arrive_expect_tx %full[%slot], bytes 32768 : !nvgpu.mbarrier<3>
        %off_k = arith.muli %i, %c64 : i32
        nvgpu.tma_load %a_desc[%c0, %off_k] -> %a_buf[%slot], %full[%slot] : !tile.desc<128x64xbf16>, !nvgpu.smem<3x128x64xbf16, swizzle 128>, !nvgpu.mbarrier<3>
        nvgpu.tma_load %b_desc[%c0, %off_k] -> %b_buf[%slot], %full[%slot] : !tile.desc<128x64xbf16>, !nvgpu.smem<3x128x64xbf16, swizzle 128>, !nvgpu.mbarrier<3>
      }
    }
    aref.group consumer warpgroups(1) registers(232) {
      %k0 = arith.constant 0 : i32
      %k1 = arith.constant 1 : i32
      %k3 = arith.constant 3 : i32
      %zero = arith.constant 0.0 : f32
      %acc0 = tile.splat %zero : f32 -> tensor<128x128xf32>
      %acc = scf.for %j = %k0 to %k_tiles step %k1 iter_args(%acc_iter = %acc0) -> (tensor<128x128xf32>) : i32 {
        %rslot = arith.remui %j, %k3 : i32
        %rround = arith.divui %j, %k3 : i32
        %rpar = arith.andi %rround, %k1 : i32
        nvgpu.mbarrier_wait %full[%rslot], %rpar : !nvgpu.mbarrier<3>
        %a = nvgpu.smem_load %a_buf[%rslot] : !nvgpu.smem<3x128x64xbf16, swizzle 128> -> tensor<128x64xbf16>
        %b = nvgpu.smem_load %b_buf[%rslot] : !nvgpu.smem<3x128x64xbf16, swizzle 128> -> tensor<128x64xbf16>
        %b_t = tile.trans %b : tensor<128x64xbf16> -> tensor<64x128xbf16>
        %next = tile.dot %a, %b_t, %acc_iter : tensor<128x64xbf16>, tensor<64x128xbf16> -> tensor<128x128xf32>
        nvgpu.mbarrier_arrive %empty[%rslot] : !nvgpu.mbarrier<3>
        scf.yield %next : tensor<128x128xf32>
      }
      tile.store %c_desc[%k0, %k0], %acc : !tile.desc<128x128xf32>, tensor<128x128xf32>
    }
  }
  func.return
}

// -----

// A GEMM with a bias vector and a leaky relu in its epilogue (a fuzzer program at the mbarrier
// level), lowered by the same code as any other kernel: the bias ring's allocations move to
// the entry (its barriers are initialized in the one thread-0 block); the bias slot read,
// converted and spread over the rows is one fragment_load_columns; the float compare and
// where are a fragment_select; the K-loop wgmma stays in flight until the loop's wait; the
// store is st.global by default and, with `epilogue=tma`, the staged TMA store (64x128 f32:
// four 32-column slabs).
// CHECK-LABEL: func.func @bias_leaky
// CHECK-SAME:  attributes {nvgpu.threads = 256 : i32}
// CHECK:       %bias_full = nvgpu.mbarrier_alloc
// CHECK:       %bias_buf = nvgpu.smem_alloc
// CHECK-NEXT:  %{{.*}} = arith.cmpi eq, %wg
// CHECK:       scf.if
// CHECK:         nvgpu.mbarrier_init %bias_empty, count 1
// CHECK-NEXT:    nvgpu.fence_mbarrier_init
// CHECK-NEXT:  }
// CHECK:       %acc = scf.for {{.*}} -> (!nvgpu.fragment<wgmma_acc, 64x128xf32>)
// CHECK:         %acc_next = nvgpu.wgmma_mma_async %a_buf[%rslot], %b_buf[%rslot], %acc_iter
// CHECK-NEXT:    nvgpu.wgmma_commit_group
// CHECK-NEXT:    nvgpu.wgmma_wait_group 0
// CHECK-NEXT:    scf.if %is_t0 {
// CHECK-NEXT:      nvgpu.mbarrier_arrive %a_empty[%rslot]
// CHECK:       nvgpu.wgmma_wait_group 0
// CHECK:       nvgpu.mbarrier_wait %bias_full[%c0_1], %c0_1
// CHECK-NEXT:  %[[BIAS:.*]] = nvgpu.fragment_load_columns %bias_buf[%c0_1] : !nvgpu.smem<1x128xf16, swizzle 0> -> !nvgpu.fragment<wgmma_acc, 64x128xf32>
// CHECK-NEXT:  %biased = nvgpu.fragment_binary add %acc, %[[BIAS]]
// CHECK:       nvgpu.mbarrier_arrive %bias_empty[%c0_1]
// CHECK:       %leaky = nvgpu.fragment_select lt %biased, %zeros, %scaled, %biased
// CHECK-NEXT:  nvgpu.fragment_store_global %leaky, %c_desc[%coff_m, %coff_n] : !nvgpu.fragment<wgmma_acc, 64x128xf32>, !tile.desc<64x128xf32>
// TMA-LABEL:   func.func @bias_leaky(
// TMA-SAME:    %c_desc: !tile.desc<64x32xf32>
// TMA:         %c_stage = nvgpu.smem_alloc : !nvgpu.smem<4x64x32xf32, swizzle 128>
// TMA:         %leaky = nvgpu.fragment_select
// TMA-NEXT:    scf.if %is_t0 {
// TMA-NEXT:      nvgpu.tma_store_wait 0
// TMA-NEXT:    }
// TMA-NEXT:    nvgpu.named_barrier_sync 2, 128
// TMA-NEXT:    nvgpu.fragment_store %leaky, %c_stage[%{{.*}}]
// TMA-NEXT:    nvgpu.fence_proxy_async
// TMA-NEXT:    nvgpu.named_barrier_sync 2, 128
// TMA-NEXT:    scf.if %is_t0 {
// TMA-NEXT:      nvgpu.tma_store %c_desc[%coff_m, %coff_n], %c_stage[%{{.*}}]
// TMA-COUNT-3:   nvgpu.tma_store %c_desc
// TMA-NEXT:      nvgpu.tma_store_commit
// TMA-NOT:     nvgpu.fragment_store_global
// TMA:         func.return
func.func @bias_leaky(%a_desc: !tile.desc<64x64xf16>, %b_desc: !tile.desc<128x64xf16>,
                      %c_desc: !tile.desc<64x128xf32>, %bias_desc: !tile.desc<128xf16>,
                      %m: i32, %n: i32, %k_tiles: i32) {
  %a_full = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
  %a_empty = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
  %a_buf = nvgpu.smem_alloc : !nvgpu.smem<2x64x64xf16, swizzle 128>
  %b_buf = nvgpu.smem_alloc : !nvgpu.smem<2x128x64xf16, swizzle 128>
  nvgpu.mbarrier_init %a_full, count 1 : !nvgpu.mbarrier<2>
  nvgpu.mbarrier_init %a_empty, count 1 : !nvgpu.mbarrier<2>
  nvgpu.fence_mbarrier_init
  nvgpu.cta_barrier
  %bias_full = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<1>
  %bias_empty = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<1>
  %bias_buf = nvgpu.smem_alloc : !nvgpu.smem<1x128xf16, swizzle 0>
  nvgpu.mbarrier_init %bias_full, count 1 : !nvgpu.mbarrier<1>
  nvgpu.mbarrier_init %bias_empty, count 1 : !nvgpu.mbarrier<1>
  nvgpu.fence_mbarrier_init
  nvgpu.cta_barrier
  aref.warp_specialize {
    aref.group producer warpgroups(1) registers(40) {
      %c0 = arith.constant 0 : i32
      %c1 = arith.constant 1 : i32
      %c2 = arith.constant 2 : i32
      %c64 = arith.constant 64 : i32
      %c128 = arith.constant 128 : i32
      %pid = tile.program_id 0 : i32
      %off_m = arith.muli %pid, %c64 : i32
      %off_n = arith.constant 0 : i32
      scf.for %i = %c0 to %k_tiles step %c1 : i32 {
        %slot = arith.remui %i, %c2 : i32
        %round = arith.divui %i, %c2 : i32
        %par = arith.andi %round, %c1 : i32
        %pp = arith.xori %par, %c1 : i32
        nvgpu.mbarrier_wait %a_empty[%slot], %pp : !nvgpu.mbarrier<2>
        nvgpu.mbarrier_arrive_expect_tx %a_full[%slot], bytes 24576 : !nvgpu.mbarrier<2>
        %off_k = arith.muli %i, %c64 : i32
        nvgpu.tma_load %a_desc[%off_m, %off_k] -> %a_buf[%slot], %a_full[%slot] : !tile.desc<64x64xf16>, !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.mbarrier<2>
        nvgpu.tma_load %b_desc[%off_n, %off_k] -> %b_buf[%slot], %a_full[%slot] : !tile.desc<128x64xf16>, !nvgpu.smem<2x128x64xf16, swizzle 128>, !nvgpu.mbarrier<2>
      }
      nvgpu.mbarrier_wait %bias_empty[%c0], %c1 : !nvgpu.mbarrier<1>
      nvgpu.mbarrier_arrive_expect_tx %bias_full[%c0], bytes 256 : !nvgpu.mbarrier<1>
      nvgpu.tma_load %bias_desc[%off_n] -> %bias_buf[%c0], %bias_full[%c0] : !tile.desc<128xf16>, !nvgpu.smem<1x128xf16, swizzle 0>, !nvgpu.mbarrier<1>
    }
    aref.group consumer warpgroups(1) registers(232) {
      %c0_1 = arith.constant 0 : i32
      %k1 = arith.constant 1 : i32
      %k2 = arith.constant 2 : i32
      %k64 = arith.constant 64 : i32
      %cpid = tile.program_id 0 : i32
      %coff_m = arith.muli %cpid, %k64 : i32
      %coff_n = arith.constant 0 : i32
      %zero = arith.constant 0.0 : f32
      %acc0 = tile.splat %zero : f32 -> tensor<64x128xf32>
      %acc = scf.for %j = %c0_1 to %k_tiles step %k1 iter_args(%acc_iter = %acc0) -> (tensor<64x128xf32>) : i32 {
        %rslot = arith.remui %j, %k2 : i32
        %rround = arith.divui %j, %k2 : i32
        %rpar = arith.andi %rround, %k1 : i32
        nvgpu.mbarrier_wait %a_full[%rslot], %rpar : !nvgpu.mbarrier<2>
        %a = nvgpu.smem_load %a_buf[%rslot] : !nvgpu.smem<2x64x64xf16, swizzle 128> -> tensor<64x64xf16>
        %b = nvgpu.smem_load %b_buf[%rslot] : !nvgpu.smem<2x128x64xf16, swizzle 128> -> tensor<128x64xf16>
        %b_t = tile.trans %b : tensor<128x64xf16> -> tensor<64x128xf16>
        %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
        nvgpu.mbarrier_arrive %a_empty[%rslot] : !nvgpu.mbarrier<2>
        scf.yield %acc_next : tensor<64x128xf32>
      }
      nvgpu.mbarrier_wait %bias_full[%c0_1], %c0_1 : !nvgpu.mbarrier<1>
      %bias16 = nvgpu.smem_load %bias_buf[%c0_1] : !nvgpu.smem<1x128xf16, swizzle 0> -> tensor<128xf16>
      %bias = tile.convert %bias16 : tensor<128xf16> -> tensor<128xf32>
      %bias_row = tile.expand_dims %bias, 0 : tensor<128xf32> -> tensor<1x128xf32>
      %bias_b = tile.broadcast %bias_row : tensor<1x128xf32> -> tensor<64x128xf32>
      %biased = arith.addf %acc, %bias_b : tensor<64x128xf32>
      nvgpu.mbarrier_arrive %bias_empty[%c0_1] : !nvgpu.mbarrier<1>
      %alpha = arith.constant 0.125 : f32
      %alphas = tile.splat %alpha : f32 -> tensor<64x128xf32>
      %zeros = tile.splat %zero : f32 -> tensor<64x128xf32>
      %negative = tile.cmp lt, %biased, %zeros : tensor<64x128xf32> -> tensor<64x128xi1>
      %scaled = arith.mulf %biased, %alphas : tensor<64x128xf32>
      %leaky = tile.where %negative, %scaled, %biased : tensor<64x128xi1>, tensor<64x128xf32>
      tile.store %c_desc[%coff_m, %coff_n], %leaky : !tile.desc<64x128xf32>, tensor<64x128xf32>
    }
  }
  func.return
}
