// The tile IR the frontend generates for examples/gemm.py: grouped tile ordering from the
// inlined @jit helper, a K loop carrying the f32 accumulator, B transposed into the dot.
// RUN: tawa compile %examples/gemm.py --kernel matmul_kernel --constexpr BLOCK_M=128 --constexpr BLOCK_N=128 --constexpr BLOCK_K=64 --constexpr GROUP_M=8 --signature 'desc<128x64xf16>,desc<128x64xf16>,desc<128x128xf16>,i32,i32,i32' --stage tile | filecheck %s
// RUN: tawa compile %examples/gemm.py --kernel matmul_kernel --constexpr BLOCK_M=128 --constexpr BLOCK_N=128 --constexpr BLOCK_K=64 --constexpr GROUP_M=8 --signature 'desc<128x64xf16>,desc<128x64xf16>,desc<128x128xf16>,i32,i32,i32' | tawa-opt | filecheck %s --check-prefix=VALID

// CHECK-LABEL: func.func @matmul_kernel(%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<128x64xf16>, %c_desc: !tile.desc<128x128xf16>, %M: i32, %N: i32, %K: i32) {
// CHECK-NEXT:    %pid = tile.program_id 0 : i32
// tl.cdiv(M, BLOCK_M) with a constant divisor: (M + 127) / 128.
// CHECK-NEXT:    %[[M_PAD:.*]] = arith.constant 127 : i32
// CHECK-NEXT:    %[[M_ROUND:.*]] = arith.addi %M, %[[M_PAD]] : i32
// CHECK-NEXT:    %[[BLOCK:.*]] = arith.constant 128 : i32
// CHECK-NEXT:    %tiles_m = arith.divsi %[[M_ROUND]], %[[BLOCK]] : i32
// CHECK:         %tiles_per_group = arith.muli %{{.*}}, %tiles_n : i32
// CHECK:         %group_size = arith.minsi %{{.*}}, %{{.*}} : i32
// CHECK:         %pid_m = arith.addi %first_m, %{{.*}} : i32
// CHECK:         %pid_n = arith.divsi %{{.*}}, %group_size : i32
// CHECK-NEXT:    %off_m = arith.muli %pid_m, %[[BLOCK]] : i32
// CHECK-NEXT:    %off_n = arith.muli %pid_n, %[[BLOCK]] : i32
// CHECK:         %acc = tile.splat %{{.*}} : f32 -> tensor<128x128xf32>
// CHECK:         %[[BLOCK_K:.*]] = arith.constant 64 : i32
// CHECK-NEXT:    %[[K_TILES:.*]] = arith.divsi %{{.*}}, %[[BLOCK_K]] : i32
// CHECK:         %[[ACC_OUT:.*]] = scf.for %k = %{{.*}} to %[[K_TILES]] step %{{.*}} iter_args(%[[ACC_IN:.*]] = %acc) -> (tensor<128x128xf32>) : i32 {
// CHECK-NEXT:      %off_k = arith.muli %k, %[[BLOCK_K]] : i32
// CHECK-NEXT:      %a = tile.load %a_desc[%off_m, %off_k] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
// CHECK-NEXT:      %b = tile.load %b_desc[%off_n, %off_k] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
// CHECK-NEXT:      %[[B_T:.*]] = tile.trans %b : tensor<128x64xf16> -> tensor<64x128xf16>
// CHECK-NEXT:      %[[ACC_NEXT:.*]] = tile.dot %a, %[[B_T]], %[[ACC_IN]] : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
// CHECK-NEXT:      scf.yield %[[ACC_NEXT]] : tensor<128x128xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[C:.*]] = tile.convert %[[ACC_OUT]] : tensor<128x128xf32> -> tensor<128x128xf16>
// CHECK-NEXT:    tile.store %c_desc[%off_m, %off_n], %[[C]] : !tile.desc<128x128xf16>, tensor<128x128xf16>
// CHECK-NEXT:    func.return

// VALID: tile.dot
