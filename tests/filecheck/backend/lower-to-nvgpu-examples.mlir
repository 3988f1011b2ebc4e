// lower-to-nvgpu on whole programs of examples/ through the warp-specialization pipeline (the
// hand-written mbarrier-level forms are in lower-to-nvgpu.mlir).
//
// The causal attention forward (examples/attention_causal.mlir): 1x..x.. boxes fill 2-D slots; S = Q K^T is an SS wgmma on this
// warpgroup's 64 rows of Q (the peeled one waited before its K slot is released; the in-loop
// lookahead QK^T(j+1) stays in flight under softmax(j), `wait_group 0` after P V(j), then the
// K(j+1) release; in the last iteration the lookahead yields an undefined fragment, since
// writing zeros to its accumulator registers would make ptxas serialize every wgmma); the
// mask is one fragment_mask (keys < seq, keys <= query row) that the PTX
// skips by a uniform branch on unmasked blocks; row max / row sum are per-thread reductions
// and two butterflies; P feeds the P V wgmma from registers with V read N-major; the epilogue
// multiplies by the row sum's reciprocal (one rcp a row, not a division a value) and stores through the rank-3 descriptor. The key loop as written
// (split-loops=false: split-masked-loops.mlir shows the unmasked blocks split off).
// RUN: tawa-opt %examples/attention_causal.mlir -p 'tawa-warp-specialize{stages=2 mma-depth=2 consumers=2 split-loops=false},lower-aref,lower-to-nvgpu' | filecheck %s
// RUN: tawa-opt %examples/attention_causal.mlir -p 'tawa-warp-specialize{stages=2 mma-depth=2 consumers=2 split-loops=false},lower-aref,lower-to-nvgpu' -t ptx | filecheck %s --check-prefix=PTX
// RUN: tawa-opt %examples/attention_causal.mlir -p 'tawa-warp-specialize{stages=2 mma-depth=2 consumers=2 split-loops=false},lower-aref,lower-to-nvgpu{epilogue=tma}' | filecheck %s --check-prefix=TMA
// RUN: tawa-opt %examples/attention_causal.mlir -p 'tawa-warp-specialize{stages=2 mma-depth=2 consumers=2 split-loops=false},lower-aref,lower-to-nvgpu{epilogue=tma}' -t ptx | filecheck %s --check-prefix=TMA-PTX

// CHECK:     func.func @attention_causal({{.*}}) attributes {nvgpu.threads = 384 : i32}
// CHECK:     %q3_ring_buf0 = nvgpu.smem_alloc : !nvgpu.smem<1x128x64xf16, swizzle 128>
// CHECK:     %k3_ring_buf0 = nvgpu.smem_alloc : !nvgpu.smem<2x64x64xf16, swizzle 128>
// Every ring is allocated before the thread-0 block that initializes all barriers:
// CHECK:     %v3_ring_buf0 = nvgpu.smem_alloc : !nvgpu.smem<2x64x64xf16, swizzle 128>
// CHECK:     nvgpu.mbarrier_init %q3_ring_full, count 1
// CHECK:     nvgpu.mbarrier_init %v3_ring_empty, count 2
// CHECK:     nvgpu.setmaxnreg increase 232
// CHECK:     %m0 = nvgpu.fragment_splat %neg_inf : f32 -> !nvgpu.fragment<wgmma_row, 64xf32>
// CHECK:     %acc0 = nvgpu.fragment_splat %zero : f32 -> !nvgpu.fragment<wgmma_acc, 64x64xf32>

// The first S, peeled before the loop:
// CHECK:       nvgpu.wgmma_fence
// CHECK-NEXT:  %qk = nvgpu.wgmma_mma_async %q3_ring_buf0[%slot_3, %row0], %k3_ring_buf0[%slot_4], %{{.*}} :
// CHECK-NEXT:  nvgpu.wgmma_commit_group
// CHECK-NEXT:  nvgpu.wgmma_wait_group 0
// CHECK:       nvgpu.mbarrier_arrive %k3_ring_empty

// CHECK:     scf.for %start_n_1 = {{.*}} iter_args(%acc_i = %acc0, %l_i = %l0, %m_i = %m0, {{.*}}) -> (!nvgpu.fragment<wgmma_acc, 64x64xf32>, !nvgpu.fragment<wgmma_row, 64xf32>, !nvgpu.fragment<wgmma_row, 64xf32>, i32, i32, !nvgpu.fragment<wgmma_acc, 64x64xf32>)
// CHECK:       %qk_2 = nvgpu.wgmma_mma_async
// CHECK-NEXT:  nvgpu.wgmma_commit_group
// CHECK-NOT:   nvgpu.wgmma_wait_group
// CHECK:       } else {
// CHECK-NEXT:    %[[UNDEF:.*]] = nvgpu.fragment_undef : !nvgpu.fragment<wgmma_acc, 64x64xf32>
// CHECK-NEXT:    scf.yield %[[UNDEF]],
// CHECK:       %qk_scaled = nvgpu.fragment_binary mul %qk_1, %qk_scale_t
// CHECK:       %mask_bound = arith.addi %{{.*}}, %seq : i32
// CHECK:       %mask_bound_1 = arith.addi %{{.*}}, %off_m_1 : i32
// CHECK-NEXT:  %[[S:.*]] = nvgpu.fragment_mask %qk_scaled, %neg_inf where[%mask_bound, %mask_bound_1] {row_coefficients = array<i32: 0, -1>, col_coefficients = array<i32: 1, 1>}
// CHECK-NEXT:  %row_max = nvgpu.fragment_row_reduce max %[[S]]
// CHECK-NEXT:  %row_max_1 = nvgpu.shuffle_xor %row_max, 1
// CHECK-NEXT:  %row_max_2 = nvgpu.fragment_binary max %row_max, %row_max_1
// CHECK-NEXT:  %row_max_3 = nvgpu.shuffle_xor %row_max_2, 2
// CHECK-NEXT:  %row_max_4 = nvgpu.fragment_binary max %row_max_2, %row_max_3
// CHECK-NEXT:  %m_next = nvgpu.fragment_binary max %m_i, %row_max_4 : !nvgpu.fragment<wgmma_row, 64xf32>
// CHECK-NEXT:  %m_next_b = nvgpu.fragment_broadcast_rows %m_next
// CHECK-NEXT:  %s_shifted = nvgpu.fragment_binary sub %[[S]], %m_next_b
// CHECK-NEXT:  %p = nvgpu.fragment_unary exp2 %s_shifted
// CHECK:       %alpha = nvgpu.fragment_unary exp2 %m_diff : !nvgpu.fragment<wgmma_row, 64xf32>
// CHECK-NOT:   nvgpu.wgmma_wait_group
// CHECK:         nvgpu.mbarrier_arrive %v3_ring_empty
// CHECK:       %acc_scaled = nvgpu.fragment_binary mul %acc_i, %alpha_b
// CHECK:       %p16 = nvgpu.fragment_convert %p : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_operand_a, 64x64xf16>
// CHECK-NEXT:  nvgpu.wgmma_fence
// CHECK-NEXT:  %acc_next = nvgpu.wgmma_mma_async_rs %p16, %v3_ring_buf0[%slot_{{[0-9]+}}], %acc_scaled transpose_b
// CHECK-NEXT:  nvgpu.wgmma_commit_group
// CHECK-NEXT:  nvgpu.wgmma_wait_group 0
// CHECK-NEXT:  scf.if %{{.*}} {
// CHECK:         nvgpu.mbarrier_arrive %k3_ring_empty

// Epilogue:
// CHECK:     %l_inv = nvgpu.fragment_unary rcp %l : !nvgpu.fragment<wgmma_row, 64xf32>
// CHECK-NEXT: %l_inv_b = nvgpu.fragment_broadcast_rows %l_inv
// CHECK-NEXT: %o = nvgpu.fragment_binary mul %acc, %l_inv_b
// CHECK-NEXT: %o16 = nvgpu.fragment_convert %o : !nvgpu.fragment<wgmma_acc, 64x64xf32> -> !nvgpu.fragment<wgmma_acc, 64x64xf16>
// CHECK:     nvgpu.fragment_store_global %o16, %o_desc[%head_1, %{{.*}}, %c0_1] : !nvgpu.fragment<wgmma_acc, 64x64xf16>, !tile.desc<1x128x64xf16>

// PTX: .maxntid 384, 1, 1
// PTX: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, %desc_b64_{{[0-9]+}}, %desc_b64_{{[0-9]+}}, 1, 1, 1, 0, 0;
// PTX: @%p{{[0-9]+}} bra $L_unmasked_{{[0-9]+}};
// PTX: selp.f32
// PTX: $L_unmasked_{{[0-9]+}}:
// PTX: shfl.sync.bfly.b32 {{.*}}, 1, 0x1f, 0xffffffff;
// PTX: ex2.approx.ftz.f32
// PTX: cvt.rn.f16x2.f32
// PTX: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, {%frag_b32_{{[0-9]+}}, %frag_b32_{{[0-9]+}}, %frag_b32_{{[0-9]+}}, %frag_b32_{{[0-9]+}}}, %desc_b64_{{[0-9]+}}, 1, 1, 1, 1;
// PTX: st.global.b32

// With `epilogue=tma` the same epilogue ends in the TMA store, as a GEMM's does: the rank-3
// output descriptor is re-blocked to the box 1x64x64, each consumer warpgroup stages its 64
// rows in its own slot, meets only its own threads around the write (barrier 2 for the
// first warpgroup, 7 for the second), and its thread 0 stores them at (head, its first row, 0).
// TMA:       func.func @attention_causal({{.*}}, %o_desc: !tile.desc<1x64x64xf16>,
// TMA:       %c_stage = nvgpu.smem_alloc : !nvgpu.smem<2x64x64xf16, swizzle 128>
// TMA:       %o16 = nvgpu.fragment_convert %o
// TMA:       nvgpu.named_barrier_sync 2, 128
// TMA-NEXT:  } else {
// TMA-NEXT:    nvgpu.named_barrier_sync 7, 128
// TMA-NEXT:  }
// TMA-NEXT:  nvgpu.fragment_store %o16, %c_stage[%[[SLOT:.*]]] :
// TMA-NEXT:  nvgpu.fence_proxy_async
// TMA:       nvgpu.named_barrier_sync 2, 128
// TMA-NEXT:  } else {
// TMA-NEXT:    nvgpu.named_barrier_sync 7, 128
// TMA-NEXT:  }
// TMA-NEXT:  scf.if %is_t0 {
// TMA-NEXT:    nvgpu.tma_store %o_desc[%head_1, %{{.*}}, %c0_1], %c_stage[%[[SLOT]]]
// TMA-NEXT:    nvgpu.tma_store_commit
// TMA-NOT:   nvgpu.fragment_store_global
// TMA:       func.return
// TMA-PTX:   cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group
// TMA-PTX-NOT: st.global
