// The tile IR the frontend generates for the library attention (tawa_xdsl/kernels/attention.py,
// launched by examples/attention.py): the inlined @jit key block carries (acc, l_i, m_i)
// through two loops, the blocks no mask touches first (to lo: every key before seq and,
// CAUSAL, before the tile's first row), then the masked ones (lo to hi), the second loop
// starting from the first's results. CAUSAL (a constexpr) bounds the second loop at the
// diagonal and adds the causal mask; the non-causal kernel has neither.
// RUN: tawa compile %examples/attention.py --kernel attn_fwd --constexpr HEAD_DIM=64 --constexpr BLOCK_M=128 --constexpr BLOCK_N=64 --constexpr CAUSAL=False --signature 'desc<1x128x64xf16>,desc<1x64x64xf16>,desc<1x64x64xf16>,desc<1x128x64xf16>,i32,f32' | filecheck %s --check-prefixes=CHECK,FULL
// RUN: tawa compile %examples/attention.py --kernel attn_fwd --constexpr HEAD_DIM=64 --constexpr BLOCK_M=128 --constexpr BLOCK_N=64 --constexpr CAUSAL=True --signature 'desc<1x128x64xf16>,desc<1x64x64xf16>,desc<1x64x64xf16>,desc<1x128x64xf16>,i32,f32' | filecheck %s --check-prefixes=CHECK,CAUSAL
// RUN: tawa compile %examples/attention.py --kernel attn_fwd --constexpr HEAD_DIM=128 --constexpr BLOCK_M=128 --constexpr BLOCK_N=64 --constexpr CAUSAL=True --signature 'desc<1x128x128xf16>,desc<1x64x128xf16>,desc<1x64x128xf16>,desc<1x128x128xf16>,i32,f32' | tawa-opt | filecheck %s --check-prefix=D128
// RUN: tawa compile %examples/attention.py --kernel attn_fwd --constexpr HEAD_DIM=64 --constexpr BLOCK_M=128 --constexpr BLOCK_N=64 --constexpr CAUSAL=False --signature 'desc<1x128x64xbf16>,desc<1x64x64xbf16>,desc<1x64x64xbf16>,desc<1x128x64xbf16>,i32,f32' | filecheck %s --check-prefix=BF16

// CHECK-LABEL: func.func @attn_fwd(%q_desc: !tile.desc<1x128x64xf16>, %k_desc: !tile.desc<1x64x64xf16>, %v_desc: !tile.desc<1x64x64xf16>, %o_desc: !tile.desc<1x128x64xf16>, %seq: i32, %sm_scale: f32) {
// CHECK:         %head = tile.program_id 1 : i32
// CHECK:         %qk_scale = arith.mulf %sm_scale, %{{.*}} : f32
// CHECK:         %q = tile.reshape %{{.*}} : tensor<1x128x64xf16> -> tensor<128x64xf16>
// CHECK:         %m_i = tile.splat %{{.*}} : f32 -> tensor<128xf32>
// CHECK:         %l_i = tile.splat %{{.*}} : f32 -> tensor<128xf32>
// CHECK:         %acc = tile.splat %{{.*}} : f32 -> tensor<128x64xf32>
// Causal: the masked loop stops after the diagonal block, hi = min(off_m + BLOCK_M, seq).
// CAUSAL:        %hi = arith.minsi %{{.*}}, %seq : i32
// lo = seq // BLOCK_N * BLOCK_N (and, causal, at most (off_m + 1) // BLOCK_N * BLOCK_N).
// CHECK:         %[[WHOLE:.*]] = arith.divsi %seq, %{{.*}} : i32
// CHECK-NEXT:    %lo = arith.muli %[[WHOLE]], %{{.*}} : i32
// CAUSAL:        %[[LO:lo_1]] = arith.minsi %{{.*}}, %lo : i32
// CAUSAL:        scf.for %start_n = %{{.*}} to %[[LO]] step
// FULL-NOT:      arith.minsi
// FULL:          scf.for %start_n = %{{.*}} to %lo step
// CHECK-SAME:        iter_args(%[[ACC:.*]] = %acc, %[[L:.*]] = %l_i, %[[M:.*]] = %m_i) -> (tensor<128x64xf32>, tensor<128xf32>, tensor<128xf32>) : i32 {
// CHECK:           %k = tile.reshape %{{.*}} : tensor<1x64x64xf16> -> tensor<64x64xf16>
// CHECK-NEXT:      %[[K_T:.*]] = tile.trans %k : tensor<64x64xf16> -> tensor<64x64xf16>
// CHECK:           %qk = tile.dot %q, %[[K_T]], %{{.*}} : tensor<128x64xf16>, tensor<64x64xf16> -> tensor<128x64xf32>
// The unmasked loop: the scores go straight into the online softmax, in base 2, the scale
// applied to the row max and inside exp2's argument.
// CHECK-NOT:       tile.where
// CHECK-NEXT:      %[[ROW_MAX:.*]] = tile.reduce max %qk, 1 : tensor<128x64xf32> -> tensor<128xf32>
// CHECK:           %[[MAX_SCALED:.*]] = arith.mulf %[[ROW_MAX]], %{{.*}} : tensor<128xf32>
// CHECK-NEXT:      %m_ij = arith.maximumf %[[M]], %[[MAX_SCALED]] : tensor<128xf32>
// CHECK:           %[[S_SCALED:.*]] = arith.mulf %qk, %{{.*}} : tensor<128x64xf32>
// CHECK:           %[[SHIFTED:.*]] = arith.subf %[[S_SCALED]], %{{.*}} : tensor<128x64xf32>
// CHECK-NEXT:      %p = math.exp2 %[[SHIFTED]] : tensor<128x64xf32>
// CHECK-NEXT:      %[[M_DIFF:.*]] = arith.subf %[[M]], %m_ij : tensor<128xf32>
// CHECK-NEXT:      %alpha = math.exp2 %[[M_DIFF]] : tensor<128xf32>
// CHECK-NEXT:      %[[L_SCALED:.*]] = arith.mulf %[[L]], %alpha : tensor<128xf32>
// CHECK-NEXT:      %[[ROW_SUM:.*]] = tile.reduce sum %p, 1 : tensor<128x64xf32> -> tensor<128xf32>
// CHECK-NEXT:      %[[L_NEXT:.*]] = arith.addf %[[L_SCALED]], %[[ROW_SUM]] : tensor<128xf32>
// CHECK:           %[[P16:.*]] = tile.convert %p : tensor<128x64xf32> -> tensor<128x64xf16>
// CHECK:           %[[ACC_SCALED:.*]] = arith.mulf %[[ACC]], %{{.*}} : tensor<128x64xf32>
// CHECK-NEXT:      %[[ACC_NEXT:.*]] = tile.dot %[[P16]], %v, %[[ACC_SCALED]] : tensor<128x64xf16>, tensor<64x64xf16> -> tensor<128x64xf32>
// CHECK-NEXT:      scf.yield %[[ACC_NEXT]], %[[L_NEXT]], %m_ij : tensor<128x64xf32>, tensor<128xf32>, tensor<128xf32>
// CHECK-NEXT:    }
// The masked loop, from lo on, continuing from the first loop's results.
// CAUSAL:        scf.for %start_n_1 = %[[LO]] to %hi step
// FULL:          scf.for %start_n_1 = %lo to %seq step
// CHECK-SAME:        iter_args(%{{.*}} = %acc_1, %{{.*}} = %l_i_1, %{{.*}} = %m_i_1)
// CHECK:           %qk_1 = tile.dot %q, %{{.*}}, %{{.*}} : tensor<128x64xf16>, tensor<64x64xf16> -> tensor<128x64xf32>
// CHECK:           %mask = tile.cmp lt, %{{.*}}, %{{.*}} : tensor<1x64xi32> -> tensor<1x64xi1>
// CAUSAL:          tile.cmp le, %{{.*}}, %{{.*}} : tensor<128x64xi32> -> tensor<128x64xi1>
// CAUSAL:          %[[MASK:.*]] = arith.andi %{{.*}}, %{{.*}} : tensor<128x64xi1>
// CAUSAL:          %[[MASKED:.*]] = tile.where %[[MASK]], %qk_1, %{{.*}} : tensor<128x64xi1>, tensor<128x64xf32>
// FULL-NOT:        tile.cmp le
// FULL:            %[[MASKED:.*]] = tile.where %{{.*}}, %qk_1, %{{.*}} : tensor<128x64xi1>, tensor<128x64xf32>
// CHECK-NEXT:      tile.reduce max %[[MASKED]], 1 : tensor<128x64xf32> -> tensor<128xf32>
// Epilogue: O = acc / l, stored as f16.
// CHECK:         %out = arith.divf %{{.*}}, %{{.*}} : tensor<128x64xf32>
// CHECK-NEXT:    %[[O16:.*]] = tile.convert %out : tensor<128x64xf32> -> tensor<128x64xf16>
// CHECK-NEXT:    %[[O3:.*]] = tile.reshape %[[O16]] : tensor<128x64xf16> -> tensor<1x128x64xf16>
// CHECK-NEXT:    tile.store %o_desc[%head, %off_m, %{{.*}}], %[[O3]] : !tile.desc<1x128x64xf16>, tensor<1x128x64xf16>

// D128: tile.dot %q, %{{.*}}, %{{.*}} : tensor<128x128xf16>, tensor<128x64xf16> -> tensor<128x64xf32>
// D128: tile.dot %{{.*}}, %v, %{{.*}} : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>

// bf16 descriptors: the same program, P and O rounded to bf16 (the descriptors' type).
// BF16:        tile.convert %p : tensor<128x64xf32> -> tensor<128x64xbf16>
// BF16:        tile.dot %{{.*}}, %v, %{{.*}} : tensor<128x64xbf16>, tensor<64x64xbf16> -> tensor<128x64xf32>
// BF16:        tile.convert %out : tensor<128x64xf32> -> tensor<128x64xbf16>
