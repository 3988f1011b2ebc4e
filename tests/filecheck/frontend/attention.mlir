// The tile IR the frontend generates for the library attention (tawa_xdsl/kernels/attention.py,
// launched by examples/attention.py): the inlined @jit inner loop carries (l_i, acc, m_i);
// CAUSAL (a constexpr) bounds the key loop at the diagonal and adds the causal mask, and the
// non-causal kernel has neither. One masked loop, as a user writes it: the compiler splits
// off the blocks no mask touches (transforms/split-masked-loops.mlir).
// RUN: tawa compile %examples/attention.py --kernel attn_fwd --constexpr HEAD_DIM=64 --constexpr BLOCK_M=128 --constexpr BLOCK_N=64 --constexpr CAUSAL=False --signature 'desc<1x128x64xf16>,desc<1x64x64xf16>,desc<1x64x64xf16>,desc<1x128x64xf16>,i32,f32' | filecheck %s --check-prefixes=CHECK,FULL
// RUN: tawa compile %examples/attention.py --kernel attn_fwd --constexpr HEAD_DIM=64 --constexpr BLOCK_M=128 --constexpr BLOCK_N=64 --constexpr CAUSAL=True --signature 'desc<1x128x64xf16>,desc<1x64x64xf16>,desc<1x64x64xf16>,desc<1x128x64xf16>,i32,f32' | filecheck %s --check-prefixes=CHECK,CAUSAL
// RUN: tawa compile %examples/attention.py --kernel attn_fwd --constexpr HEAD_DIM=128 --constexpr BLOCK_M=128 --constexpr BLOCK_N=64 --constexpr CAUSAL=True --signature 'desc<1x128x128xf16>,desc<1x64x128xf16>,desc<1x64x128xf16>,desc<1x128x128xf16>,i32,f32' | tawa-opt | filecheck %s --check-prefix=D128
// RUN: tawa compile %examples/attention.py --kernel attn_fwd --constexpr HEAD_DIM=64 --constexpr BLOCK_M=128 --constexpr BLOCK_N=64 --constexpr CAUSAL=False --signature 'desc<1x128x64xbf16>,desc<1x64x64xbf16>,desc<1x64x64xbf16>,desc<1x128x64xbf16>,i32,f32' | filecheck %s --check-prefix=BF16

// CHECK-LABEL: func.func @attn_fwd(%q_desc: !tile.desc<1x128x64xf16>, %k_desc: !tile.desc<1x64x64xf16>, %v_desc: !tile.desc<1x64x64xf16>, %o_desc: !tile.desc<1x128x64xf16>, %seq: i32, %sm_scale: f32) {
// Causal: program i takes row block (blocks - 1 - i), the longest first.
// CAUSAL:        %start_m = tile.program_id 0 : i32
// CAUSAL-NEXT:   %[[BLOCKS:.*]] = tile.num_programs 0 : i32
// CAUSAL:        %[[LAST:.*]] = arith.subi %[[BLOCKS]], %{{.*}} : i32
// CAUSAL-NEXT:   %start_m_1 = arith.subi %[[LAST]], %start_m : i32
// FULL-NOT:      tile.num_programs
// CHECK:         %head = tile.program_id 1 : i32
// CHECK:         %qk_scale = arith.mulf %sm_scale, %{{.*}} : f32
// CHECK:         %q = tile.reshape %{{.*}} : tensor<1x128x64xf16> -> tensor<128x64xf16>
// CHECK:         %m_i = tile.splat %{{.*}} : f32 -> tensor<128xf32>
// CHECK:         %l_i = tile.splat %{{.*}} : f32 -> tensor<128xf32>
// CHECK:         %acc = tile.splat %{{.*}} : f32 -> tensor<128x64xf32>
// Causal: the loop stops after the diagonal block, hi = min(off_m + BLOCK_M, seq).
// CAUSAL:        %hi = arith.minsi %{{.*}}, %seq : i32
// CAUSAL:        scf.for %start_n = %{{.*}} to %hi step
// FULL-NOT:      arith.minsi
// FULL:          scf.for %start_n = %{{.*}} to %seq step
// CHECK-SAME:        iter_args(%[[L:.*]] = %l_i, %[[ACC:.*]] = %acc, %[[M:.*]] = %m_i) -> (tensor<128xf32>, tensor<128x64xf32>, tensor<128xf32>) : i32 {
// CHECK:           %k = tile.reshape %{{.*}} : tensor<1x64x64xf16> -> tensor<64x64xf16>
// CHECK-NEXT:      %[[K_T:.*]] = tile.trans %k : tensor<64x64xf16> -> tensor<64x64xf16>
// CHECK:           %qk = tile.dot %q, %[[K_T]], %{{.*}} : tensor<128x64xf16>, tensor<64x64xf16> -> tensor<128x64xf32>
// CHECK:           %mask = tile.cmp lt, %{{.*}}, %{{.*}} : tensor<1x64xi32> -> tensor<1x64xi1>
// CAUSAL:          tile.cmp le, %{{.*}}, %{{.*}} : tensor<128x64xi32> -> tensor<128x64xi1>
// CAUSAL:          %[[MASK:.*]] = arith.andi %{{.*}}, %{{.*}} : tensor<128x64xi1>
// CAUSAL:          %[[MASKED:.*]] = tile.where %[[MASK]], %qk, %{{.*}} : tensor<128x64xi1>, tensor<128x64xf32>
// FULL-NOT:        tile.cmp le
// FULL:            %[[MASKED:.*]] = tile.where %{{.*}}, %qk, %{{.*}} : tensor<128x64xi1>, tensor<128x64xf32>
// Online softmax in base 2, the scale applied to the row max and inside exp2's argument.
// CHECK-NEXT:      %[[ROW_MAX:.*]] = tile.reduce max %[[MASKED]], 1 : tensor<128x64xf32> -> tensor<128xf32>
// CHECK:           %[[MAX_SCALED:.*]] = arith.mulf %[[ROW_MAX]], %{{.*}} : tensor<128xf32>
// CHECK-NEXT:      %m_ij = arith.maximumf %[[M]], %[[MAX_SCALED]] : tensor<128xf32>
// CHECK:           %[[S_SCALED:.*]] = arith.mulf %[[MASKED]], %{{.*}} : tensor<128x64xf32>
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
// CHECK-NEXT:      scf.yield %[[L_NEXT]], %[[ACC_NEXT]], %m_ij : tensor<128xf32>, tensor<128x64xf32>, tensor<128xf32>
// CHECK-NEXT:    }
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
