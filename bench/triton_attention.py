"""A FlashAttention-2-style forward in Triton (the tutorial's structure, pointer loads), the
Triton peer of `bench/attention.py`. q, k, v, o: contiguous [batch * heads, seq, d]."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _attn_fwd(
    Q, K, V, O, sm_scale, seq,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
):  # fmt: skip
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * seq * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < seq)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.44269504
    hi = tl.minimum((start_m + 1) * BLOCK_M, seq) if CAUSAL else seq
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * HEAD_DIM + offs_d[:, None], mask=cols[None, :] < seq)
        qk = tl.dot(q, k) * qk_scale
        mask = cols[None, :] < seq
        if CAUSAL:
            mask = mask & (cols[None, :] <= offs_m[:, None])
        qk = tl.where(mask, qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * HEAD_DIM + offs_d[None, :], mask=cols[:, None] < seq)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_ij
    acc = acc / l_i[:, None]
    o_ptrs = O + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(o_ptrs, acc.to(O.dtype.element_ty), mask=offs_m[:, None] < seq)


CONFIGS = [(128, 64, 4, 3), (128, 64, 8, 3)]  # BLOCK_M, BLOCK_N, warps, stages


def launcher(q, k, v, o, sm_scale: float, causal: bool, config=CONFIGS[0]):
    """A no-argument callable running the kernel once with `config`."""
    bh, seq, d = q.shape
    block_m, block_n, warps, stages = config
    grid = (triton.cdiv(seq, block_m), bh)

    def run() -> None:
        _attn_fwd[grid](
            q, k, v, o, sm_scale, seq, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n,
            CAUSAL=causal, num_warps=warps, num_stages=stages,
        )  # fmt: skip

    return run
