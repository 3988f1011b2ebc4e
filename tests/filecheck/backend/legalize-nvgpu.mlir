// legalize-nvgpu writes the plans emit-ptx prints: smem placement and slot strides, wgmma
// descriptor bits and steps (and the row term of a slice of A), TMA boxes per 128-byte column
// slab, the corner bounds of a mask's uniform skip, the store plans of fragment stores (per
// store: first value, offset from the origin, clipping) and the address plans of ld/st.shared
// (row pitch, slab pitch, swizzle), and the partials plans of a reduction along the rows.
// RUN: tawa-opt %s -p legalize-nvgpu --split-input-file | filecheck %s
// RUN: tawa-opt %s -p legalize-nvgpu,legalize-nvgpu --split-input-file | filecheck %s

// CHECK-LABEL: func.func @ss_k_major
func.func @ss_k_major(%a_buf: !nvgpu.smem<1x128x64xf16, swizzle 128>, %b_buf: !nvgpu.smem<1x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 128x64xf32>) {
  %c0 = arith.constant 0 : i32
  // K-major 128B swizzle: SBO 1024 B, LBO 1; A steps 32 B (+2) per k16, 64 rows (+512) per block.
  // 4611686293305360384 = 0x4000004000010000 (hopper-ptx.md 4.3).
  // CHECK: nvgpu.wgmma_mma_async {{.*}} {b_desc_bits = 4611686293305360384 : i64, b_desc_steps = array<i64: 0, 2, 4, 6>, a_desc_bits = 4611686293305360384 : i64, a_desc_steps = array<i64: 0, 2, 4, 6, 512, 514, 516, 518>}
  %r = nvgpu.wgmma_mma_async %a_buf[%c0], %b_buf[%c0], %acc : !nvgpu.smem<1x128x64xf16, swizzle 128>, !nvgpu.smem<1x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 128x64xf32>
  func.return
}

// -----

// CHECK-LABEL: func.func @ss_slabs
func.func @ss_slabs(%a_buf: !nvgpu.smem<1x64x128xf16, swizzle 128>, %b_buf: !nvgpu.smem<1x64x128xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>) {
  %c0 = arith.constant 0 : i32
  // 256-byte rows are two 64x128 B slabs: k16 steps 0..3 in slab 0, 4..7 at +8192 B (+512).
  // CHECK: b_desc_steps = array<i64: 0, 2, 4, 6, 512, 514, 516, 518>
  // CHECK-SAME: a_desc_steps = array<i64: 0, 2, 4, 6, 512, 514, 516, 518>
  %r = nvgpu.wgmma_mma_async %a_buf[%c0], %b_buf[%c0], %acc : !nvgpu.smem<1x64x128xf16, swizzle 128>, !nvgpu.smem<1x64x128xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}

// -----

// CHECK-LABEL: func.func @rs_mn_major
func.func @rs_mn_major(%p: !nvgpu.fragment<wgmma_operand_a, 64x64xf16>, %v_buf: !nvgpu.smem<1x64x64xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>) {
  %c0 = arith.constant 0 : i32
  // MN-major B (transpose_b): LBO = 64 rows x 128 B, k16 step = 16 rows (+128); no A plan.
  // CHECK: nvgpu.wgmma_mma_async_rs {{.*}} transpose_b {b_desc_bits = 4611686293338849280 : i64, b_desc_steps = array<i64: 0, 128, 256, 384>}
  %r = nvgpu.wgmma_mma_async_rs %p, %v_buf[%c0], %acc transpose_b : !nvgpu.fragment<wgmma_operand_a, 64x64xf16>, !nvgpu.smem<1x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}

// -----

// CHECK-LABEL: func.func @tma_boxes
func.func @tma_boxes(%q: !tile.desc<64x128xf16>, %k: !tile.desc<64x64xf16>, %i: i32) {
  %c0 = arith.constant 0 : i32
  %q_buf = nvgpu.smem_alloc : !nvgpu.smem<1x64x128xf16, swizzle 128>
  %k_buf = nvgpu.smem_alloc : !nvgpu.smem<2x64x64xf16, swizzle 128>
  %bars = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<2>
  // One box per 64-column slab: the second lands 8192 B on, 64 columns right.
  // CHECK: nvgpu.tma_load {{.*}} {box_smem_offsets = array<i32: 0, 8192>, box_col_offsets = array<i32: 0, 64>}
  nvgpu.tma_load %q[%c0, %i] -> %q_buf[%c0], %bars[%c0] : !tile.desc<64x128xf16>, !nvgpu.smem<1x64x128xf16, swizzle 128>, !nvgpu.mbarrier<2>
  // Rows of exactly the span: one box.
  // CHECK: nvgpu.tma_load {{.*}} {box_smem_offsets = array<i32: 0>, box_col_offsets = array<i32: 0>}
  nvgpu.tma_load %k[%c0, %i] -> %k_buf[%c0], %bars[%c0] : !tile.desc<64x64xf16>, !nvgpu.smem<2x64x64xf16, swizzle 128>, !nvgpu.mbarrier<2>
  func.return
}

// -----

// CHECK-LABEL: func.func @mask_corners
func.func @mask_corners(%s: !nvgpu.fragment<wgmma_acc, 128x64xf32>, %seq: i32, %diag: i32) {
  %ninf = arith.constant 0xFF800000 : f32
  // Keys past the end (0 r + 1 c < seq): largest left side 63. Causal (-r + c < diag): 63.
  // CHECK: nvgpu.fragment_mask {{.*}} skip_corners = array<i32: 63, 63>
  %m = nvgpu.fragment_mask %s, %ninf where [%seq, %diag] {row_coefficients = array<i32: 0, -1>, col_coefficients = array<i32: 1, 1>} : !nvgpu.fragment<wgmma_acc, 128x64xf32>, f32
  // Rows count too: r + 0 c < bound peaks at row 127.
  // CHECK: nvgpu.fragment_mask {{.*}} skip_corners = array<i32: 127>
  %n = nvgpu.fragment_mask %s, %ninf where [%seq] {row_coefficients = array<i32: 1>, col_coefficients = array<i32: 0>} : !nvgpu.fragment<wgmma_acc, 128x64xf32>, f32
  func.return
}

// -----

// CHECK-LABEL: func.func @smem_placement
func.func @smem_placement() {
  // Buffers first, each 1024-aligned: 3 x 8 KiB, then 2 KiB (64x16xf16), then the barriers,
  // 8 bytes each. A buffer's slots are its slot bytes apart.
  // CHECK: nvgpu.smem_alloc {offset = 0 : i32, slot_stride = 8192 : i32} : !nvgpu.smem<3x64x64xf16, swizzle 128>
  %a = nvgpu.smem_alloc : !nvgpu.smem<3x64x64xf16, swizzle 128>
  // CHECK-NEXT: nvgpu.mbarrier_alloc {offset = 26624 : i32} : !nvgpu.mbarrier<3>
  %full = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<3>
  // CHECK-NEXT: nvgpu.smem_alloc {offset = 24576 : i32, slot_stride = 2048 : i32} : !nvgpu.smem<1x64x16xf16, swizzle 0>
  %bias = nvgpu.smem_alloc : !nvgpu.smem<1x64x16xf16>
  // CHECK-NEXT: nvgpu.mbarrier_alloc {offset = 26648 : i32} : !nvgpu.mbarrier<3>
  %empty = nvgpu.mbarrier_alloc : !nvgpu.mbarrier<3>
  func.return
}

// -----

// CHECK-LABEL: func.func @store_plan
func.func @store_plan(%acc: !nvgpu.fragment<wgmma_acc, 128x16xf32>, %lse: !nvgpu.fragment<wgmma_row, 128xf32>, %c: !tile.desc<128x16xf32>, %l: !tile.desc<1x1x128xf32>, %h: i32, %m: i32) {
  %c0 = arith.constant 0 : i32
  // One st.global per column pair, at the layout's offset from the thread's origin:
  // value 4 g + 2 h (h: rows +8) of block b at (64 b + 8 h, 8 g). Rows and columns clipped.
  // CHECK: nvgpu.fragment_store_global {{.*}} {store_values = array<i32: 0, 2, 4, 6, 8, 10, 12, 14>, store_rows = array<i32: 0, 8, 0, 8, 64, 72, 64, 72>, store_cols = array<i32: 0, 0, 8, 8, 0, 0, 8, 8>, clip_dims = array<i32: 0, 1>}
  nvgpu.fragment_store_global %acc, %c[%m, %c0] : !nvgpu.fragment<wgmma_acc, 128x16xf32>, !tile.desc<128x16xf32>
  // A row vector: value 2 b + h is query row 64 b + 8 h from the origin, along the plane's
  // columns; the leading offset selects the plane and is not clipped.
  // CHECK: nvgpu.fragment_store_global {{.*}} {store_values = array<i32: 0, 1, 2, 3>, store_rows = array<i32: 0, 0, 0, 0>, store_cols = array<i32: 0, 8, 64, 72>, clip_dims = array<i32: 1, 2>}
  nvgpu.fragment_store_global %lse, %l[%h, %c0, %m] : !nvgpu.fragment<wgmma_row, 128xf32>, !tile.desc<1x1x128xf32>
  func.return
}

// -----

// CHECK-LABEL: func.func @staging_store_plan
func.func @staging_store_plan(%acc: !nvgpu.fragment<wgmma_acc, 64x32xf16>, %buf: !nvgpu.smem<1x64x32xf16, swizzle 64>, %wide: !nvgpu.fragment<wgmma_acc, 64x32xf32>, %fbuf: !nvgpu.smem<1x64x32xf32, swizzle 128>) {
  %c0 = arith.constant 0 : i32
  // st.shared pairs as the layout places them: value 4 g + 2 h at (8 h, 8 g); 64-byte rows
  // swizzled by 64 bytes, one 4096-byte slab. Row offset 8 moves 512 bytes, one whole
  // 64-byte swizzle repeat, and a thread's 16-bit pairs stay in one chunk: uniform_phase.
  // CHECK: nvgpu.fragment_store {{.*}} {store_values = array<i32: 0, 2, 4, 6, 8, 10, 12, 14>, store_rows = array<i32: 0, 8, 0, 8, 0, 8, 0, 8>, store_cols = array<i32: 0, 0, 8, 8, 16, 16, 24, 24>, row_pitch = 64 : i32, slab_pitch = 4096 : i32, swizzle = 64 : i32, uniform_phase}
  nvgpu.fragment_store %acc, %buf[%c0] : !nvgpu.fragment<wgmma_acc, 64x32xf16>, !nvgpu.smem<1x64x32xf16, swizzle 64>
  // f32 pairs are 8 bytes and the origin columns of a quad span 32 bytes, more than a
  // chunk: each store gets its own phase (no uniform_phase).
  // CHECK: nvgpu.fragment_store {{.*}} row_pitch = 128 : i32, slab_pitch = 8192 : i32, swizzle = 128 : i32} :
  nvgpu.fragment_store %wide, %fbuf[%c0] : !nvgpu.fragment<wgmma_acc, 64x32xf32>, !nvgpu.smem<1x64x32xf32, swizzle 128>
  func.return
}

// -----

// CHECK-LABEL: func.func @load_address_plans
func.func @load_address_plans(%wide: !nvgpu.smem<2x64x128xf16, swizzle 128>, %plain: !nvgpu.smem<1x64x8xf32>) {
  %c0 = arith.constant 0 : i32
  // 256-byte rows of a 128-byte swizzle: rows 128 bytes apart in two 8192-byte slabs.
  // CHECK: nvgpu.fragment_load {{.*}} {row_pitch = 128 : i32, slab_pitch = 8192 : i32, swizzle = 128 : i32}
  %t = nvgpu.fragment_load %wide[%c0] : !nvgpu.smem<2x64x128xf16, swizzle 128> -> !nvgpu.fragment<wgmma_acc, 64x128xf16>
  // Unswizzled: each row is one 32-byte slab row.
  // CHECK: nvgpu.fragment_load {{.*}} {row_pitch = 32 : i32, slab_pitch = 2048 : i32, swizzle = 0 : i32}
  %u = nvgpu.fragment_load %plain[%c0] : !nvgpu.smem<1x64x8xf32> -> !nvgpu.fragment<wgmma_acc, 64x8xf32>
  func.return
}

// -----

// CHECK-LABEL: func.func @a_row_pitch
func.func @a_row_pitch(%a: !nvgpu.smem<1x128x64xf16, swizzle 128>, %at: !nvgpu.smem<1x128x128xf16, swizzle 128>, %b: !nvgpu.smem<1x64x64xf16, swizzle 128>, %bk: !nvgpu.smem<1x64x128xf16, swizzle 128>, %acc: !nvgpu.fragment<wgmma_acc, 64x64xf32>, %row: i32) {
  %c0 = arith.constant 0 : i32
  // A K-major slice of A starts `row` slot rows of 128 bytes in.
  // CHECK: nvgpu.wgmma_mma_async {{.*}} a_row_pitch = 128 : i32
  %r = nvgpu.wgmma_mma_async %a[%c0, %row], %b[%c0], %acc : !nvgpu.smem<1x128x64xf16, swizzle 128>, !nvgpu.smem<1x64x64xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  // M-major (128 K rows x 128 M columns): row 64 of M starts the second column slab, 128 x
  // 128 bytes on, so one row of M is 256 bytes.
  // CHECK: nvgpu.wgmma_mma_async {{.*}} a_row_pitch = 256 : i32
  %s = nvgpu.wgmma_mma_async %at[%c0, %row] transpose_a, %bk[%c0], %acc : !nvgpu.smem<1x128x128xf16, swizzle 128>, !nvgpu.smem<1x64x128xf16, swizzle 128>, !nvgpu.fragment<wgmma_acc, 64x64xf32>
  func.return
}

// -----

// CHECK-LABEL: func.func @column_partials
func.func @column_partials(%acc: !nvgpu.fragment<wgmma_acc, 64x32xf32>) {
  %c0 = arith.constant 0 : i32
  %partials = nvgpu.smem_alloc : !nvgpu.smem<1x4x32xf32>
  %p = nvgpu.fragment_column_reduce sum %acc : !nvgpu.fragment<wgmma_acc, 64x32xf32> -> !nvgpu.fragment<wgmma_col, 32xf32>
  // One 128-byte row of partials per warp: a thread whose origin row is a multiple of the
  // warp's 16 accumulator rows stores its 8 values at columns origin + 8 (v >> 1) + (v & 1).
  // CHECK: nvgpu.fragment_column_stage {{.*}} {row_pitch = 128 : i32, value_cols = array<i32: 0, 1, 8, 9, 16, 17, 24, 25>, warp_rows = 16 : i32}
  nvgpu.fragment_column_stage %p, %partials[%c0] : !nvgpu.fragment<wgmma_col, 32xf32>, !nvgpu.smem<1x4x32xf32>
  nvgpu.named_barrier_sync 6, 128
  // Every thread combines the 4 rows of its columns.
  // CHECK: nvgpu.fragment_column_combine sum {{.*}} {row_pitch = 128 : i32, value_cols = array<i32: 0, 1, 8, 9, 16, 17, 24, 25>, partial_rows = 4 : i32}
  %t = nvgpu.fragment_column_combine sum %partials[%c0] : !nvgpu.smem<1x4x32xf32> -> !nvgpu.fragment<wgmma_col, 32xf32>
  func.return
}
