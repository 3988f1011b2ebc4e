// The bundled examples round-trip through tawa-opt unchanged in meaning.
// RUN: tawa-opt %examples/gemm.mlir | tawa-opt > /dev/null
// RUN: tawa-opt %examples/gemm.mlir | filecheck %s --check-prefix=GEMM
// RUN: tawa-opt %examples/attention.mlir | tawa-opt --print-op-generic | tawa-opt | filecheck %s --check-prefix=ATTN

// GEMM: func.func @gemm(%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<128x64xf16>, %c_desc: !tile.desc<128x128xf16>, %m: i32, %n: i32, %k: i32)
// GEMM: scf.for %kt = %c0 to %k_tiles step %c1 iter_args(%acc_iter = %acc0) -> (tensor<128x128xf32>) : i32
// GEMM: tile.dot %a, %b_t, %acc_iter : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
// GEMM: tile.store %c_desc[%off_m, %off_n], %c_tile : !tile.desc<128x128xf16>, tensor<128x128xf16>

// ATTN: tile.where %in_seq, %qk_scaled, %neg_inf_t : tensor<128x64xi1>, tensor<128x64xf32>
// ATTN: tile.reduce max %s, 1 : tensor<128x64xf32> -> tensor<128xf32>
