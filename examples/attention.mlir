// Attention forward, O = softmax(Q K^T * scale) V, with the online softmax of FlashAttention
// computed in base 2. Q, K, V and O are [batch * heads, seq, 64] f16 tensors read through 3-D
// descriptors, so blocks that run past `seq` read zeros and their stores are clipped.
// One program computes 128 query rows of one head; launch with
// grid = (cdiv(seq, 128), batch * heads, 1). Key columns at or past `seq` are masked out.
func.func @attention(%q_desc: !tile.desc<1x128x64xf16>, %k_desc: !tile.desc<1x64x64xf16>,
                     %v_desc: !tile.desc<1x64x64xf16>, %o_desc: !tile.desc<1x128x64xf16>,
                     %seq: i32, %sm_scale: f32) {
  %c0 = arith.constant 0 : i32
  %block_m = arith.constant 128 : i32
  %block_n = arith.constant 64 : i32
  %log2e = arith.constant 1.44269504 : f32
  %neg_inf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %start_m = tile.program_id 0 : i32
  %head = tile.program_id 1 : i32
  %off_m = arith.muli %start_m, %block_m : i32
  %qk_scale = arith.mulf %sm_scale, %log2e : f32
  %qk_scale_t = tile.splat %qk_scale : f32 -> tensor<128x64xf32>
  %q3 = tile.load %q_desc[%head, %off_m, %c0] : !tile.desc<1x128x64xf16> -> tensor<1x128x64xf16>
  %q = tile.reshape %q3 : tensor<1x128x64xf16> -> tensor<128x64xf16>
  %m0 = tile.splat %neg_inf : f32 -> tensor<128xf32>
  %l0 = tile.splat %zero : f32 -> tensor<128xf32>
  %acc0 = tile.splat %zero : f32 -> tensor<128x64xf32>
  %qk_zero = tile.splat %zero : f32 -> tensor<128x64xf32>
  %neg_inf_t = tile.splat %neg_inf : f32 -> tensor<128x64xf32>
  %seq_t = tile.splat %seq : i32 -> tensor<1x64xi32>
  %cols0 = tile.arange 0, 64 : tensor<64xi32>
  %acc, %l, %m = scf.for %start_n = %c0 to %seq step %block_n
      iter_args(%acc_i = %acc0, %l_i = %l0, %m_i = %m0)
      -> (tensor<128x64xf32>, tensor<128xf32>, tensor<128xf32>) : i32 {
    // S = Q K^T for this block of keys, scaled into base 2, masked past the sequence end.
    %k3 = tile.load %k_desc[%head, %start_n, %c0] : !tile.desc<1x64x64xf16> -> tensor<1x64x64xf16>
    %k = tile.reshape %k3 : tensor<1x64x64xf16> -> tensor<64x64xf16>
    %k_t = tile.trans %k : tensor<64x64xf16> -> tensor<64x64xf16>
    %qk = tile.dot %q, %k_t, %qk_zero : tensor<128x64xf16>, tensor<64x64xf16> -> tensor<128x64xf32>
    %qk_scaled = arith.mulf %qk, %qk_scale_t : tensor<128x64xf32>
    %start_n_t = tile.splat %start_n : i32 -> tensor<64xi32>
    %cols = arith.addi %cols0, %start_n_t : tensor<64xi32>
    %cols_row = tile.expand_dims %cols, 0 : tensor<64xi32> -> tensor<1x64xi32>
    %in_seq_row = tile.cmp lt, %cols_row, %seq_t : tensor<1x64xi32> -> tensor<1x64xi1>
    %in_seq = tile.broadcast %in_seq_row : tensor<1x64xi1> -> tensor<128x64xi1>
    %s = tile.where %in_seq, %qk_scaled, %neg_inf_t : tensor<128x64xi1>, tensor<128x64xf32>
    // Online softmax: new running max, rescale factor for what was accumulated so far.
    %row_max = tile.reduce max %s, 1 : tensor<128x64xf32> -> tensor<128xf32>
    %m_next = arith.maximumf %m_i, %row_max : tensor<128xf32>
    %m_next_col = tile.expand_dims %m_next, 1 : tensor<128xf32> -> tensor<128x1xf32>
    %m_next_b = tile.broadcast %m_next_col : tensor<128x1xf32> -> tensor<128x64xf32>
    %s_shifted = arith.subf %s, %m_next_b : tensor<128x64xf32>
    %p = math.exp2 %s_shifted : tensor<128x64xf32>
    %row_sum = tile.reduce sum %p, 1 : tensor<128x64xf32> -> tensor<128xf32>
    %m_diff = arith.subf %m_i, %m_next : tensor<128xf32>
    %alpha = math.exp2 %m_diff : tensor<128xf32>
    %l_scaled = arith.mulf %l_i, %alpha : tensor<128xf32>
    %l_next = arith.addf %l_scaled, %row_sum : tensor<128xf32>
    %alpha_col = tile.expand_dims %alpha, 1 : tensor<128xf32> -> tensor<128x1xf32>
    %alpha_b = tile.broadcast %alpha_col : tensor<128x1xf32> -> tensor<128x64xf32>
    %acc_scaled = arith.mulf %acc_i, %alpha_b : tensor<128x64xf32>
    // O += P V.
    %v3 = tile.load %v_desc[%head, %start_n, %c0] : !tile.desc<1x64x64xf16> -> tensor<1x64x64xf16>
    %v = tile.reshape %v3 : tensor<1x64x64xf16> -> tensor<64x64xf16>
    %p16 = tile.convert %p : tensor<128x64xf32> -> tensor<128x64xf16>
    %acc_next = tile.dot %p16, %v, %acc_scaled : tensor<128x64xf16>, tensor<64x64xf16> -> tensor<128x64xf32>
    scf.yield %acc_next, %l_next, %m_next : tensor<128x64xf32>, tensor<128xf32>, tensor<128xf32>
  }
  // Epilogue: O = acc / l.
  %l_col = tile.expand_dims %l, 1 : tensor<128xf32> -> tensor<128x1xf32>
  %l_b = tile.broadcast %l_col : tensor<128x1xf32> -> tensor<128x64xf32>
  %o = arith.divf %acc, %l_b : tensor<128x64xf32>
  %o16 = tile.convert %o : tensor<128x64xf32> -> tensor<128x64xf16>
  %o3 = tile.reshape %o16 : tensor<128x64xf16> -> tensor<1x128x64xf16>
  tile.store %o_desc[%head, %off_m, %c0], %o3 : !tile.desc<1x128x64xf16>, tensor<1x128x64xf16>
  func.return
}
