// C = A @ B^T with fp32 accumulation. A is MxK and B is NxK (both K-major), C is MxN.
// One program computes one 128x128 tile of C. Programs walk the tiles in groups of 8 tile
// rows so that neighbouring programs share B tiles in L2 (Triton's grouped ordering).
// Launch with grid = (cdiv(M, 128) * cdiv(N, 128), 1, 1).
func.func @gemm(%a_desc: !tile.desc<128x64xf16>, %b_desc: !tile.desc<128x64xf16>,
                %c_desc: !tile.desc<128x128xf16>, %m: i32, %n: i32, %k: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %block_m = arith.constant 128 : i32
  %block_n = arith.constant 128 : i32
  %block_k = arith.constant 64 : i32
  %group_m = arith.constant 8 : i32
  %block_m_minus_1 = arith.constant 127 : i32
  %block_k_minus_1 = arith.constant 63 : i32
  %pid = tile.program_id 0 : i32
  // Grouped ordering: pid -> (pid_m, pid_n).
  %m_round = arith.addi %m, %block_m_minus_1 : i32
  %tiles_m = arith.divsi %m_round, %block_m : i32
  %n_round = arith.addi %n, %block_m_minus_1 : i32
  %tiles_n = arith.divsi %n_round, %block_n : i32
  %tiles_per_group = arith.muli %group_m, %tiles_n : i32
  %group_id = arith.divsi %pid, %tiles_per_group : i32
  %first_m = arith.muli %group_id, %group_m : i32
  %rows_left = arith.subi %tiles_m, %first_m : i32
  %group_size = arith.minsi %rows_left, %group_m : i32
  %in_group = arith.remsi %pid, %tiles_per_group : i32
  %row_in_group = arith.remsi %in_group, %group_size : i32
  %pid_m = arith.addi %first_m, %row_in_group : i32
  %pid_n = arith.divsi %in_group, %group_size : i32
  %off_m = arith.muli %pid_m, %block_m : i32
  %off_n = arith.muli %pid_n, %block_n : i32
  // Main loop over K.
  %k_round = arith.addi %k, %block_k_minus_1 : i32
  %k_tiles = arith.divsi %k_round, %block_k : i32
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = tile.splat %zero : f32 -> tensor<128x128xf32>
  %acc = scf.for %kt = %c0 to %k_tiles step %c1 iter_args(%acc_iter = %acc0) -> (tensor<128x128xf32>) : i32 {
    %off_k = arith.muli %kt, %block_k : i32
    %a = tile.load %a_desc[%off_m, %off_k] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
    %b = tile.load %b_desc[%off_n, %off_k] : !tile.desc<128x64xf16> -> tensor<128x64xf16>
    %b_t = tile.trans %b : tensor<128x64xf16> -> tensor<64x128xf16>
    %acc_next = tile.dot %a, %b_t, %acc_iter : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
    scf.yield %acc_next : tensor<128x128xf32>
  }
  // Epilogue: round to f16 and store.
  %c_tile = tile.convert %acc : tensor<128x128xf32> -> tensor<128x128xf16>
  tile.store %c_desc[%off_m, %off_n], %c_tile : !tile.desc<128x128xf16>, tensor<128x128xf16>
  func.return
}
