// partition: loads and their address math -> producer; dot, softmax, epilogue -> consumer;
// loop counters, offsets and the loops themselves -> both.
// RUN: tawa-opt %examples/gemm.mlir -p partition | filecheck %s --check-prefix=GEMM
// RUN: tawa-opt %examples/attention_causal.mlir -p partition | filecheck %s --check-prefix=ATTN

// GEMM:      %pid = tile.program_id 0 {aref.role = "both"} : i32
// GEMM:      %off_m = arith.muli %pid_m, %block_m {aref.role = "both"} : i32
// GEMM:      %k_tiles = arith.divsi %k_round, %block_k {aref.role = "both"} : i32
// GEMM-NEXT: %zero = arith.constant {aref.role = "consumer"} 0.000000e+00 : f32
// GEMM-NEXT: %acc0 = tile.splat %zero {aref.role = "consumer"}
// GEMM-NEXT: %acc = scf.for %kt = %c0 to %k_tiles step %c1
// GEMM-NEXT:   %off_k = arith.muli %kt, %block_k {aref.role = "producer"} : i32
// GEMM-NEXT:   %a = tile.load %a_desc[%off_m, %off_k] {aref.role = "producer"}
// GEMM-NEXT:   %b = tile.load %b_desc[%off_n, %off_k] {aref.role = "producer"}
// GEMM-NEXT:   %b_t = tile.trans %b {aref.role = "consumer"}
// GEMM-NEXT:   %acc_next = tile.dot %a, %b_t, %acc_iter {aref.role = "consumer"}
// GEMM-NEXT:   scf.yield {aref.role = "both"} %acc_next
// GEMM-NEXT: } {aref.role = "both"}
// GEMM-NEXT: %c_tile = tile.convert %acc {aref.role = "consumer"}
// GEMM-NEXT: tile.store %c_desc[%off_m, %off_n], %c_tile {aref.role = "consumer"}
// GEMM-NEXT: func.return {aref.role = "both"}

// ATTN:      %head = tile.program_id 1 {aref.role = "both"} : i32
// ATTN:      %q3 = tile.load %q_desc[%head, %off_m, %c0] {aref.role = "producer"}
// ATTN-NEXT: %q = tile.reshape %q3 {aref.role = "consumer"}
// The causal bound is needed by both loops.
// ATTN:      %hi = arith.minsi %diagonal_end, %seq {aref.role = "both"} : i32
// ATTN:      %k3 = tile.load %k_desc[%head, %start_n, %c0] {aref.role = "producer"}
// ATTN:      %qk = tile.dot %q, %k_t, %qk_zero {aref.role = "consumer"}
// ATTN:      %start_n_t = tile.splat %start_n {aref.role = "consumer"}
// ATTN:      %row_max = tile.reduce max %s, 1 {aref.role = "consumer"}
// ATTN:      %p = math.exp2 %s_shifted {aref.role = "consumer"}
// ATTN:      %v3 = tile.load %v_desc[%head, %start_n, %c0] {aref.role = "producer"}
// ATTN:      tile.store %o_desc[%head, %off_m, %c0], %o3 {aref.role = "consumer"}
