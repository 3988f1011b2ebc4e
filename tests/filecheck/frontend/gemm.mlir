// The tile IR the frontend generates for the library GEMM (tawa_xdsl/kernels/gemm.py, launched
// by examples/gemm.py): grouped tile ordering from the inlined @jit helper, a K loop carrying
// the f32 accumulator, B transposed into the dot, C's element type from its descriptor.
// RUN: tawa compile %examples/gemm.py --kernel gemm --constexpr BLOCK_M=128 --constexpr BLOCK_N=128 --constexpr BLOCK_K=64 --constexpr GROUP_M=8 --signature 'desc<128x64xf16>,desc<128x64xf16>,desc<128x128xf16>,i32,i32,i32' --stage tile | filecheck %s
// RUN: tawa compile %examples/gemm.py --kernel gemm --constexpr BLOCK_M=128 --constexpr BLOCK_N=128 --constexpr BLOCK_K=64 --constexpr GROUP_M=8 --signature 'desc<128x64xf16>,desc<128x64xf16>,desc<128x128xf16>,i32,i32,i32' | tawa-opt | filecheck %s --check-prefix=VALID
// RUN: tawa compile %examples/gemm.py --kernel gemm --constexpr BLOCK_M=128 --constexpr BLOCK_N=256 --constexpr BLOCK_K=128 --constexpr GROUP_M=8 --signature 'desc<128x128xf8E4M3FN>,desc<256x128xf8E4M3FN>,desc<128x256xbf16>,i32,i32,i32' --stage tile | filecheck %s --check-prefix=FP8

// CHECK-LABEL: func.func @gemm(%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<128x64xf16>, %c_desc: !tile.desc<128x128xf16>, %m: i32, %n: i32, %k: i32) {
// CHECK-NEXT:    %pid = tile.program_id 0 : i32
// tl.cdiv(m, BLOCK_M) with a constant divisor: (m + 127) / 128.
// CHECK-NEXT:    %[[M_PAD:.*]] = arith.constant 127 : i32
// CHECK-NEXT:    %[[M_ROUND:.*]] = arith.addi %m, %[[M_PAD]] : i32
// CHECK-NEXT:    %[[BLOCK:.*]] = arith.constant 128 : i32
// CHECK-NEXT:    %tiles_m = arith.divsi %[[M_ROUND]], %[[BLOCK]] : i32
// CHECK:         %tiles_per_group = arith.muli %{{.*}}, %tiles_n : i32
// CHECK:         %group_size = arith.minsi %{{.*}}, %{{.*}} : i32
// The tile's position in its group, computed once for both coordinates.
// CHECK:         %in_group = arith.remsi %pid, %tiles_per_group : i32
// CHECK:         %pid_m = arith.addi %first_m, %{{.*}} : i32
// CHECK-NEXT:    %pid_n = arith.divsi %in_group, %group_size : i32
// CHECK-NEXT:    %off_m = arith.muli %pid_m, %[[BLOCK]] : i32
// CHECK-NEXT:    %off_n = arith.muli %pid_n, %[[BLOCK]] : i32
// CHECK:         %[[BLOCK_K:.*]] = arith.constant 64 : i32
// CHECK-NEXT:    %k_tiles = arith.divsi %{{.*}}, %[[BLOCK_K]] : i32
// CHECK:         %acc = tile.splat %{{.*}} : f32 -> tensor<128x128xf32>
// CHECK:         %[[ACC_OUT:.*]] = scf.for %kt = %{{.*}} to %k_tiles step %{{.*}} iter_args(%[[ACC_IN:.*]] = %acc) -> (tensor<128x128xf32>) : i32 {
// CHECK-NEXT:      %off_k = arith.muli %kt, %[[BLOCK_K]] : i32
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

// FP8 inputs, bf16 output: the same program, the dot on e4m3 tiles, the accumulator rounded to
// C's type.
// FP8-LABEL: func.func @gemm(%a_desc: !tile.desc<128x128xf8E4M3FN>, %b_desc: !tile.desc<256x128xf8E4M3FN>, %c_desc: !tile.desc<128x256xbf16>
// FP8:         tile.dot %a, %{{.*}}, %{{.*}} : tensor<128x128xf8E4M3FN>, tensor<128x256xf8E4M3FN> -> tensor<128x256xf32>
// FP8:         tile.convert %{{.*}} : tensor<128x256xf32> -> tensor<128x256xbf16>
