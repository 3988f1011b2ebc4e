# ruff: noqa: E501  (the kernel text keeps one MLIR op per line)
"""Hand-written aref-level kernels for the barrier tests, the verifier and the mutation suite.

`gemm_aref(depth, mma_depth, consumers, persistent)` is C = A @ B^T (A: M x K, B: N x K, f16,
C: f32) written directly at the aref level, in the shape the warp-specialization pipeline
produces: one producer warpgroup putting (A, B) tiles into a ring of `depth` slots, one
consumer group of `consumers` warpgroups (each gets every use; warpgroup 0 stores C), the
release of use i delayed until after the dot of use i + mma_depth - 1 (drained after the
loop), and, when `persistent`, an outer loop over output tiles (programs stride by the grid)
whose use counters continue across tiles. Launch with `gemm_args`.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.rewriter import Rewriter

from tawa_xdsl.dialects import aref

BM, BN, BK = 16, 16, 16


def gemm_aref(
    depth: int = 2, mma_depth: int = 1, consumers: int = 1, persistent: bool = False
) -> str:
    a_t, b_t = f"tensor<{BM}x{BK}xf16>", f"tensor<{BN}x{BK}xf16>"
    ring_t = f"!aref.ring<[{a_t}, {b_t}], {depth}>"
    lag = mma_depth - 1
    if persistent:
        tile_loop = "scf.for %t = %pid to %num_tiles step %nprog : i32 {"
        tile_prologue = """
        %done = arith.subi %t, %pid : i32
        %local = arith.divsi %done, %nprog : i32
        %base = arith.muli %local, %k_tiles : i32"""
        tile_end = "}"
    else:
        tile_loop = "%t = arith.addi %pid, %c0 : i32"
        tile_prologue = "\n        %base = arith.addi %c0, %c0 : i32"
        tile_end = ""
    offsets = """
        %tm = arith.divsi %t, %tiles_n : i32
        %tn = arith.remsi %t, %tiles_n : i32
        %off_m = arith.muli %tm, %bm : i32
        %off_n = arith.muli %tn, %bn : i32"""
    if lag == 0:
        release = f"aref.consumed %ring[%i] : {ring_t}"
        drain = ""
    else:
        release = f"""%lag = arith.constant {lag} : i32
            %late = arith.cmpi sge, %kt, %lag : i32
            scf.if %late {{
              %r = arith.subi %i, %lag : i32
              aref.consumed %ring[%r] lag({lag}) : {ring_t}
              scf.yield
            }}"""
        drain = f"""
        %end = arith.addi %base, %k_tiles : i32
        aref.drain %ring[%base, %end] lag({lag}) : {ring_t}"""
    return f"""
func.func @gemm(%a_desc: !tile.desc<{BM}x{BK}xf16>, %b_desc: !tile.desc<{BN}x{BK}xf16>,
                %c_desc: !tile.desc<{BM}x{BN}xf32>, %k_tiles: i32, %tiles_n: i32, %num_tiles: i32) {{
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %bm = arith.constant {BM} : i32
  %bn = arith.constant {BN} : i32
  %bk = arith.constant {BK} : i32
  %pid = tile.program_id 0 : i32
  %nprog = tile.num_programs 0 : i32
  %ring = aref.create : {ring_t}
  aref.warp_specialize {{
    aref.group producer warpgroups(1) registers(40) {{
      {tile_loop}{tile_prologue}{offsets}
        scf.for %kt = %c0 to %k_tiles step %c1 : i32 {{
          %i = arith.addi %base, %kt : i32
          %off_k = arith.muli %kt, %bk : i32
          %a = tile.load %a_desc[%off_m, %off_k] : !tile.desc<{BM}x{BK}xf16> -> {a_t}
          %b = tile.load %b_desc[%off_n, %off_k] : !tile.desc<{BN}x{BK}xf16> -> {b_t}
          aref.put %ring[%i], %a, %b : {ring_t}, {a_t}, {b_t}
        }}
      {tile_end}
    }}
    aref.group consumer warpgroups({consumers}) registers(232) {{
      %wg = aref.warpgroup_index : i32
      %leader = arith.cmpi eq, %wg, %c0 : i32
      {tile_loop}{tile_prologue}{offsets}
        %zero = arith.constant 0.0 : f32
        %acc0 = tile.splat %zero : f32 -> tensor<{BM}x{BN}xf32>
        %acc = scf.for %kt = %c0 to %k_tiles step %c1 iter_args(%acc_iter = %acc0) -> (tensor<{BM}x{BN}xf32>) : i32 {{
          %i = arith.addi %base, %kt : i32
          %x, %y = aref.get %ring[%i] : {ring_t} -> {a_t}, {b_t}
          %yt = tile.trans %y : {b_t} -> tensor<{BK}x{BN}xf16>
          %next = tile.dot %x, %yt, %acc_iter : {a_t}, tensor<{BK}x{BN}xf16> -> tensor<{BM}x{BN}xf32>
          {release}
          scf.yield %next : tensor<{BM}x{BN}xf32>
        }}{drain}
        scf.if %leader {{
          tile.store %c_desc[%off_m, %off_n], %acc : !tile.desc<{BM}x{BN}xf32>, tensor<{BM}x{BN}xf32>
          scf.yield
        }}
      {tile_end}
    }}
  }}
  func.return
}}
"""


def gemm_args(m_tiles: int, n_tiles: int, k_tiles: int, seed: int = 0):
    """(a, b, c, scalars) for `gemm_aref`; C's reference is a @ b.T in f32."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m_tiles * BM, k_tiles * BK)).astype(np.float16)
    b = rng.standard_normal((n_tiles * BN, k_tiles * BK)).astype(np.float16)
    c = np.zeros((m_tiles * BM, n_tiles * BN), np.float32)
    return a, b, c, [k_tiles, n_tiles, m_tiles * n_tiles]


def gemm_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) @ b.astype(np.float32).T


def shrink_rings(module: ModuleOp, depth: int) -> None:
    """Give every ring of `module` `depth` slots, unverified: a lag the aref dialect refuses
    (lag >= depth) planted for the levels below it (lower-aref, the interpreters, the proof)."""
    for create in [op for op in module.walk() if isinstance(op, aref.CreateOp)]:
        ring = create.ring.type
        assert isinstance(ring, aref.RingType)
        Rewriter.replace_value_with_new_type(
            create.ring, aref.RingType(ring.payload_types(), depth)
        )
