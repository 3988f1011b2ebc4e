"""Attention forward, O = softmax(Q K^T * sm_scale) V, written in `tawa_xdsl.language`.

FlashAttention's online softmax in base 2: each program owns BLOCK_M query rows of one head
and walks the keys in blocks of BLOCK_N, keeping the running row max `m_i`, the running row
sum `l_i` and the unnormalized output `acc`. Q, K, V and O are [batch * heads, seq, head_dim]
arrays read through 3-D descriptors (with GQA, K and V are [batch * heads / GROUP, seq,
head_dim]: query row r of the grid reads K/V row r // GROUP, no copies), so blocks past `seq`
read zeros and their stores are clipped; key columns past `seq` are masked. With CAUSAL, row
r sees keys 0..r and the key loop stops after the diagonal block, and program i takes row
block (blocks - 1 - i): the GPU starts programs in grid order, so the longest row blocks start
first and the shortest fill the end of the grid (the row blocks of all heads longest first
were 4-11% slower on the H200: the programs running together then read as many K/V heads,
more than L2 holds; bench/NOTES.md, round 10). `sm_scale` must be
positive: the row max is taken over the raw scores and then scaled (one FFMA per score
instead of a multiply and a subtract).
The element type (f16, bf16 or e4m3) is the descriptors': P is rounded to V's type before P V,
O to O's type. With e4m3 (`V_T`) V comes as `fp8_v(v)` lays it out: transposed, [batch * heads,
head_dim, keys] (fp8 wgmma reads its B operand K-major only), the keys padded to a multiple of
32 and, within each 32, in the order `fp8_key_order` gives P's columns, and O is bf16.
`attn_fwd_lse` also writes each row's log-sum-exp into an f32 [batch * heads, seq] tensor.

For the H200 (BLOCK_M = 128 query rows per program, two consumer warpgroups of 64):

    from tawa_xdsl.kernels.attention import compile_attention, grid
    kernel = compile_attention(head_dim=128, dtype="bf16", causal=True)
    kernel.launch(grid(seq, batch_heads), q, k, v, o, seq, sm_scale)   # [B*H, seq, d] tensors
    kernel = compile_attention(head_dim=128, return_lse=True)          # also the log-sum-exp:
    kernel.launch(grid(seq, batch_heads), q, k, v, o, lse, seq, sm_scale)  # lse [B*H, seq] f32
    kernel = compile_attention(head_dim=64, block_m=192)              # 3 consumer warpgroups
    kernel.launch(grid(seq, batch_heads, 192), q, k, v, o, seq, sm_scale)
    kernel = compile_attention(head_dim=128, dtype="e4m3")            # fp8: fp8_v(v8), O bf16
    kernel.launch(grid(seq, batch_heads), q8, k8, fp8_v(v8), o_bf16, seq, sm_scale)

The lse tensor's row stride must be a multiple of 4 elements (16 bytes, for TMA).
`examples/attention.mlir` and `attention_causal.mlir` are hand-written d = 64, f16 forms of
the same program.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.compiler import CompiledKernel, CompileOptions, compile_to_ptx
from tawa_xdsl.dialects.nvgpu import WGMMA_OPERAND_A8
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg

BLOCK_M = 128  # two consumer warpgroups of 64 rows
DTYPES = {"f16": tl.float16, "bf16": tl.bfloat16, "e4m3": tl.float8e4nv}
OUT_DTYPES = {"f16": tl.float16, "bf16": tl.bfloat16, "e4m3": tl.bfloat16}  # fp8 in, bf16 out


KEY_GROUP = 32  # the keys of one k32 slice of an fp8 wgmma


@tawa_xdsl.jit
def fp8_key_order(p, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """P's columns in the order in which wgmma's fp8 A layout finds them in the accumulator's
    registers: within each 32 keys, key 16 j1 + 8 j0 + 4 q1 + 2 q0 + b (j = j1 j0 the
    accumulator's 8-column group, q = q1 q0 the lane in the quad, b the value of the pair)
    moves to column 16 j1 + 8 q1 + 4 q0 + 2 j0 + b, which is where the A layout wants the
    value the same thread holds. So converting P into the A operand moves no value between
    lanes (bench/NOTES.md, round 20); `fp8_v` puts V's keys in the same order."""
    p = p.reshape([BLOCK_M, BLOCK_N // 32, 2, 2, 2, 2, 2])
    return tl.permute(p, 0, 1, 2, 4, 5, 3, 6).reshape([BLOCK_M, BLOCK_N])


def fp8_key_positions(keys: int) -> np.ndarray:
    """The key each column of `fp8_key_order`'s result holds, for `keys` (a multiple of
    32) keys: the fp8 A layout's own columns."""
    return np.array(WGMMA_OPERAND_A8.own_columns(keys))


def fp8_v(v: Any) -> Any:
    """V [batch * heads, seq, head_dim] (a numpy array or a torch tensor) as the e4m3 kernel
    reads it: transposed to [batch * heads, head_dim, keys], keys = seq rounded up to 32
    (zeros past seq), and within each 32 in `fp8_key_order`'s order."""
    seq = v.shape[1]
    keys = -(-seq // KEY_GROUP) * KEY_GROUP
    if isinstance(v, np.ndarray):
        vt = np.zeros((v.shape[0], v.shape[2], keys), v.dtype)
        vt[..., :seq] = v.transpose(0, 2, 1)
        return np.ascontiguousarray(vt[..., fp8_key_positions(keys)])
    import torch  # a torch tensor: the same layout on its device, moved as bytes

    vt = torch.zeros((v.shape[0], v.shape[2], keys), dtype=torch.uint8, device=v.device)
    vt[..., :seq] = v.view(torch.uint8).transpose(1, 2)
    positions = torch.as_tensor(fp8_key_positions(keys), device=v.device)
    return vt[..., positions].contiguous().view(v.dtype)


@tawa_xdsl.jit
def attn_inner(
    acc, l_i, m_i, q, k_desc, v_desc, head, off_m, seq, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, V_T: tl.constexpr,
):  # fmt: skip
    """Fold the key blocks of this program's rows into (acc, l_i, m_i): one masked loop, as
    a user writes it. The compiler splits it (split-masked-loops): the blocks no mask touches
    (every key before `seq` and, CAUSAL, before the tile's first row) run a body without the
    selects and without a copy of the scores out of the wgmma accumulator (bench/NOTES.md,
    round 7), the rings' counter continuing into the masked blocks."""
    if CAUSAL:
        hi = tl.minimum(off_m + BLOCK_M, seq)
    else:
        hi = seq
    offs_m = off_m + tl.arange(0, BLOCK_M)
    for start_n in tl.range(0, hi, BLOCK_N):
        k = k_desc.load([head, start_n, 0]).reshape([BLOCK_N, HEAD_DIM])
        qk = tl.dot(q, k.T)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask = offs_n[None, :] < seq
        if CAUSAL:
            mask = mask & (offs_n[None, :] <= offs_m[:, None])
        qk = tl.where(mask, qk, float("-inf"))
        # max(qk * scale) = max(qk) * scale for scale > 0: one FFMA per score below
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        if V_T:  # V^T [d, keys]: keys contiguous, the K-major B fp8 wgmma needs
            v = v_desc.load([head, 0, start_n]).reshape([HEAD_DIM, BLOCK_N]).T
            p = fp8_key_order(p, BLOCK_M, BLOCK_N)  # V's keys are in this order (fp8_v)
        else:
            v = v_desc.load([head, start_n, 0]).reshape([BLOCK_N, HEAD_DIM])
        acc = tl.dot(p.to(v_desc.dtype), v, acc * alpha[:, None])
        m_i = m_ij
    return acc, l_i, m_i


@tawa_xdsl.jit
def attn_rows(
    q_desc, k_desc, v_desc, o_desc, seq, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, GROUP: tl.constexpr, V_T: tl.constexpr,
):  # fmt: skip
    """Store O for this program's BLOCK_M rows; return where they are and their softmax
    statistics (the row max m_i, in scaled base-2 units, and the row sum l_i)."""
    start_m = tl.program_id(0)
    if CAUSAL:  # longest first: the last row blocks have the most keys (FA3's causal order)
        start_m = tl.num_programs(0) - 1 - start_m
    head = tl.program_id(1)
    off_m = start_m * BLOCK_M
    qk_scale = sm_scale * 1.44269504  # log2(e): exp(x) = exp2(x * log2(e))
    q = q_desc.load([head, off_m, 0]).reshape([BLOCK_M, HEAD_DIM])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    kv_head = head
    if GROUP > 1:  # GQA: GROUP consecutive query heads of a batch share one K/V head
        kv_head = head // GROUP
    acc, l_i, m_i = attn_inner(
        acc, l_i, m_i, q, k_desc, v_desc, kv_head, off_m, seq, qk_scale,
        HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL, V_T,
    )  # fmt: skip
    out = acc / l_i[:, None]
    o_desc.store([head, off_m, 0], out.to(o_desc.dtype).reshape([1, BLOCK_M, HEAD_DIM]))
    return head, off_m, m_i, l_i


@tawa_xdsl.jit
def attn_fwd(
    q_desc, k_desc, v_desc, o_desc, seq, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, GROUP: tl.constexpr = 1, V_T: tl.constexpr = False,
):  # fmt: skip
    attn_rows(
        q_desc, k_desc, v_desc, o_desc, seq, sm_scale, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL,
        GROUP, V_T,
    )  # fmt: skip


@tawa_xdsl.jit
def attn_fwd_lse(
    q_desc, k_desc, v_desc, o_desc, lse_desc, seq, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, GROUP: tl.constexpr = 1, V_T: tl.constexpr = False,
):  # fmt: skip
    """attn_fwd that also writes each row's log-sum-exp of the scaled scores, natural log
    (what a backward pass needs): ln(sum_j exp(s_j)) = (m_i + log2(l_i)) * ln(2)."""
    head, off_m, m_i, l_i = attn_rows(
        q_desc, k_desc, v_desc, o_desc, seq, sm_scale, HEAD_DIM, BLOCK_M, BLOCK_N, CAUSAL,
        GROUP, V_T,
    )  # fmt: skip
    lse = (m_i + tl.log2(l_i)) * 0.6931471805599453
    lse_desc.store([head, off_m], lse.reshape([1, BLOCK_M]))


# ------------------------------------------------------------------------ for the H200


def default_block_n(head_dim: int) -> int:
    """Keys per step: 128 for d = 64 and d = 128 (d = 128 with setmaxnreg 24/240, which
    set-registers chooses for those tiles: +16-24% over 64 keys on the H200, bench/NOTES.md
    round 3)."""
    return 128


# Causal attention is persistent up to this many keys: one program per SM over the row blocks
# of one head in turn, +22% / +12% at d = 64 seq 1K / 2K and +13% / +1% at d = 128 on the H200;
# from 4K, -4% to +2%, and -26% at d = 128 16K (bench/NOTES.md, round 11).
CAUSAL_PERSISTENT_SEQ = 2048
# FA3's d = 64 tile: 192 query rows over three consumer warpgroups (24/160 registers), for
# longer than this many keys.
WIDE_BLOCK_M, WIDE_MIN_SEQ = 192, 1024


def persistent_default(
    causal: bool, pingpong: bool = False, seq: int | None = None, block_m: int = BLOCK_M
) -> bool:
    """Whether the library launches one program per SM (the tile loop walking the row blocks)
    for `seq` keys (None: not known at compile time) and `block_m` rows. Without a causal
    mask, at 128 rows: the CTA setup, Q's load and the first QK^T of a tile run under the
    previous tile's last MMAs (+3 to +15% at seq 1K-4K on the H200, even at 16K; round 10).
    Causal tiles are 1 to seq / 128 key blocks long: a fixed deal evens them out only while a
    wave of programs spans few heads' worth of lengths (`CAUSAL_PERSISTENT_SEQ`); longer, the
    GPU's own launch order, longest first, balances them better. Not at 192 rows (as fast to
    4K keys, 12% slower at 16K: the last row block of a head is a third full; round 12), not
    with ping-pong: over a tile loop its turns let the warpgroups drift further apart than
    the proof models (it refuses)."""
    if pingpong or block_m == WIDE_BLOCK_M:
        return False
    return not causal or (seq is not None and seq <= CAUSAL_PERSISTENT_SEQ)


def fold_default(dtype: str, causal: bool, pingpong: bool = False, block_m: int = BLOCK_M) -> bool:
    """Whether the library folds causal row blocks in pairs (fold-grid) and deals the pairs to
    persistent programs, at every length: in fp8, whose key loop is short beside a tile's
    setup and epilogue, +2 / +11 / +7.5% over the per-tile form at 2K / 4K / 16K keys; at 16
    bits it measured +0 to +3%, within the method's noise (bench/NOTES.md, round 20)."""
    return causal and dtype == "e4m3" and not pingpong and block_m == BLOCK_M


def default_form(
    head_dim: int,
    causal: bool,
    seq: int | None = None,
    pingpong: bool = False,
    dtype: str = "f16",
) -> tuple[int, bool]:
    """(query rows per program, persistent) the library launches for `seq` keys (None: not
    known). At d = 64 from 1K keys on, 192 rows in one program per row block (`WIDE_BLOCK_M`):
    +5 to +15% over 128 rows' persistent form without a mask from 2K keys, +3 to +11% causal
    from 4K (rounds 12-13); up to 1K keys 128 rows persistent (the last of a head's 192-row
    blocks is a third full there: 0.93-1.04x), and causal up to `CAUSAL_PERSISTENT_SEQ` keys
    too (192 rows were 12% / 2% slower). Elsewhere 128 rows (d = 128 spills at three
    warpgroups' 160 registers; ping-pong takes turns between two)."""
    if fold_default(dtype, causal, pingpong):
        return BLOCK_M, True
    short = seq is not None and seq <= (CAUSAL_PERSISTENT_SEQ if causal else WIDE_MIN_SEQ)
    wide = head_dim == 64 and not pingpong and not short
    block_m = WIDE_BLOCK_M if wide else BLOCK_M
    return block_m, persistent_default(causal, pingpong, seq, block_m)


def tile_module(
    head_dim: int,
    dtype: str = "f16",
    causal: bool = False,
    block_n: int | None = None,
    return_lse: bool = False,
    block_m: int = BLOCK_M,
    group: int = 1,
) -> ModuleOp:
    """The tile IR of `attn_fwd` (`attn_fwd_lse` with `return_lse`) for these parameters, with
    Q, K, V of `dtype` ("f16", "bf16" or "e4m3") and O of `OUT_DTYPES[dtype]` (a fresh
    module); `group` query heads share each K/V head (GQA). With e4m3, V comes as `fp8_v`
    lays it out ([B*H, d, keys]: fp8 wgmma reads its B operand K-major only, and its keys in
    `fp8_key_order`'s order) and P is rounded to e4m3."""
    if dtype not in DTYPES:
        raise ValueError(f"attention: dtype must be f16, bf16 or e4m3, got {dtype}")
    element, bn = DTYPES[dtype], block_n or default_block_n(head_dim)
    v_transposed = dtype == "e4m3"
    v_block = (1, head_dim, bn) if v_transposed else (1, bn, head_dim)
    lse = [DescriptorArg(tl.float32, (1, block_m))] if return_lse else []
    kernel = (attn_fwd_lse if return_lse else attn_fwd).compile(
        DescriptorArg(element, (1, block_m, head_dim)),
        DescriptorArg(element, (1, bn, head_dim)),
        DescriptorArg(element, v_block),
        DescriptorArg(OUT_DTYPES[dtype], (1, block_m, head_dim)),
        *lse,
        ScalarArg(tl.int32),
        ScalarArg(tl.float32),
        HEAD_DIM=head_dim,
        BLOCK_M=block_m,
        BLOCK_N=bn,
        CAUSAL=causal,
        GROUP=group,
        V_T=v_transposed,
    )
    return kernel.module.clone()


def compile_options(
    head_dim: int,
    stages: int = 3,
    registers: tuple[int, int] | None = None,
    pingpong: bool = False,
    mma_depth: int = 1,
    rotate: bool = True,
    split: bool = True,
    persistent: bool | None = None,
    block_m: int = BLOCK_M,
    causal: bool = False,
    tile_order: str = "xyz",
    exp2_emulation: int | None = None,
    peel: bool | None = None,
    epilogue: str = "global",
    fold: bool = False,
) -> CompileOptions:
    """The options of the tuned attention (`compile_attention` says what each one does): one
    consumer warpgroup per 64 query rows; persistent or not by `persistent_default` unless
    told."""
    consumers = block_m // 64
    return CompileOptions(
        stages=stages,
        mma_depth=mma_depth,
        consumers=consumers,
        registers=registers,
        pingpong=pingpong,
        rotate=rotate,
        split_loops=split,
        persistent=persistent_default(causal, pingpong, block_m=block_m)
        if persistent is None
        else persistent,
        tile_order=tile_order,
        exp2_emulation=exp2_emulation,
        peel=peel,
        epilogue=epilogue,
        fold=fold,
    )


@functools.cache
def compile_attention(
    head_dim: int,
    dtype: str = "f16",
    causal: bool = False,
    block_n: int | None = None,
    stages: int = 3,
    registers: tuple[int, int] | None = None,
    pingpong: bool = False,
    mma_depth: int = 1,
    return_lse: bool = False,
    rotate: bool = True,
    group: int = 1,
    split: bool = True,
    persistent: bool | None = None,
    block_m: int = BLOCK_M,
    tile_order: str = "xyz",
    exp2_emulation: int | None = None,
    peel: bool | None = None,
    epilogue: str = "global",
    fold: bool | None = None,
) -> CompiledKernel:
    """The attention forward as a launchable kernel (cached per configuration). K and V
    rings are 3 deep: with QK^T(j+1) and P V(j) in flight, a 2-deep ring left the producer
    too little time to refill (bench/NOTES.md, attention). `registers` overrides the
    setmaxnreg split (None: set-registers chooses, 24/240 at d = 128); `pingpong` alternates
    the two consumer warpgroups' MMA issue with named barriers (CompileOptions.pingpong).
    MMA depth 1: each iteration waits for its P V (a wgmma in flight across the loop's back
    edge, under a rescale of O, makes ptxas serialize them all), so V(j) is released in
    iteration j.
    `rotate` (CompileOptions.rotate): iteration j issues QK^T(j+1) and P V(j) back to back
    and runs the softmax of j+1 under P V(j), P held in registers as 16-bit
    (FlashAttention-3's two-stage pipeline); False: the softmax of j under QK^T(j+1).
    `peel` (CompileOptions.peel): the rotated loop runs to ub - step and the last P V
    follows it (None: peeled unless `pingpong`).
    `group` query heads share each K/V head (GQA, `tile_module`); `split`
    (CompileOptions.split_loops): the key blocks no mask touches in a loop of their own;
    `persistent`: one program per SM walks the row blocks (launched the same way: the
    compiled kernel maps the grid; None: `persistent_default`). `block_m` query rows per
    program, a multiple of 64 (one consumer warpgroup each): launch it over
    `grid(seq, heads, block_m)`; `tile_order` the persistent walk's (CompileOptions:
    "yxz" takes row block x of every head before x + 1). The rows stay 128 unless told (the
    grid is the caller's); `default_form` says which rows and form `tawa_xdsl.ops.attention`
    launches for a length: 192 at d = 64 (three warpgroups at 160 registers, FA3's d = 64
    tile; d = 128 spills at 160). `exp2_emulation` (CompileOptions): eighths of the scores'
    exp2s on the FMA units (None: emulate-exp2 chooses; none for these tiles). `epilogue`
    (CompileOptions): "tma" stages O in shared memory for TMA stores (d = 128 fits it with
    2-deep rings), "global" stores it from registers. `fold` (CompileOptions, fold-grid): each
    program takes a row block and its mirror, causal's longest with its shortest, so that
    every program walks the same keys (launched over the same grid: the kernel halves it;
    None: `fold_default`, and then persistent unless told)."""
    bn = block_n or default_block_n(head_dim)
    if fold is None:
        fold = fold_default(dtype, causal, pingpong, block_m)
        persistent = True if fold and persistent is None else persistent
    options = compile_options(
        head_dim, stages, registers, pingpong, mma_depth, rotate, split, persistent, block_m,
        causal, tile_order, exp2_emulation, peel, epilogue, fold,
    )  # fmt: skip
    module = tile_module(head_dim, dtype, causal, bn, return_lse, block_m, group)
    return compile_to_ptx(module, options)


def grid(seq: int, batch_heads: int, block_m: int = BLOCK_M) -> tuple[int, int, int]:
    """One program per `block_m` query rows of one (batch, head)."""
    return (-(-seq // block_m), batch_heads, 1)
