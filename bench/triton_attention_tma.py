"""A FlashAttention-2-style forward in Triton reading Q, K, V and writing O through host TMA
descriptors (`triton.tools.tensor_descriptor.TensorDescriptor`), the structure of Triton's
fused-attention tutorial: the peer `bench/attention.py` quotes as `triton` (ANCHORS.md: a
pointer-load kernel is the weaker peer).

Tensors are contiguous [batch * heads, seq, d] (K and V [batch * kv_heads, seq, d] for GQA:
query head h of a batch reads K/V head h // (heads / kv_heads)), seen by the descriptors as
[rows, d] matrices; seq must be a multiple of BLOCK_M (every ANCHORS shape is), so no block
crosses a head. Causal runs the blocks left of the diagonal unmasked and the diagonal block
masked. `best(...)` times every config of `CONFIGS` (BLOCK_M, BLOCK_N, stages, warps,
warp_specialize) and returns the fastest; a config that does not compile is skipped. fp8
(e4m3) takes V transposed, [B*H, d, seq], as Triton's fused-attention tutorial does for fp8,
and writes bf16.
"""

from __future__ import annotations

from collections.abc import Callable

import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _key_blocks(
    acc, l_i, m_i, q, desc_k, desc_v, kv_row, vt_row, offs_m, qk_scale, lo, hi,
    BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
    V_T: tl.constexpr,
):  # fmt: skip
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = desc_k.load([kv_row + start_n, 0])
        qk = tl.dot(q, k.T)
        if DIAGONAL:
            keep = offs_m[:, None] >= start_n + offs_n[None, :]
            qk = tl.where(keep, qk * qk_scale, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if V_T:  # fp8: V^T rows [d, keys], so that P V reads a K-major B
            v = desc_v.load([vt_row, start_n]).T
        else:
            v = desc_v.load([kv_row + start_n, 0])
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _attn_fwd_tma(
    desc_q, desc_k, desc_v, desc_o, sm_scale, heads, kv_heads, seq,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, V_T: tl.constexpr,
):  # fmt: skip
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    batch, head = bh // heads, bh % heads
    q_row = bh * seq + start_m * BLOCK_M
    kv_bh = batch * kv_heads + head // (heads // kv_heads)
    kv_row, vt_row = kv_bh * seq, kv_bh * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.44269504  # log2(e)
    q = desc_q.load([q_row, 0])
    if CAUSAL:
        diagonal = start_m * BLOCK_M
        acc, l_i, m_i = _key_blocks(
            acc, l_i, m_i, q, desc_k, desc_v, kv_row, vt_row, offs_m, qk_scale, 0, diagonal,
            BLOCK_N, False, WARP_SPECIALIZE, V_T,
        )  # fmt: skip
        acc, l_i, m_i = _key_blocks(
            acc, l_i, m_i, q, desc_k, desc_v, kv_row, vt_row, offs_m, qk_scale, diagonal,
            diagonal + BLOCK_M, BLOCK_N, True, WARP_SPECIALIZE, V_T,
        )  # fmt: skip
    else:
        acc, l_i, m_i = _key_blocks(
            acc, l_i, m_i, q, desc_k, desc_v, kv_row, vt_row, offs_m, qk_scale, 0, seq,
            BLOCK_N, False, WARP_SPECIALIZE, V_T,
        )  # fmt: skip
    acc = acc / l_i[:, None]
    if V_T:  # fp8 in, bf16 out
        desc_o.store([q_row, 0], acc.to(tl.bfloat16))
    else:
        desc_o.store([q_row, 0], acc.to(q.dtype))


# BLOCK_M, BLOCK_N, stages, warps, warp_specialize
CONFIGS = [
    (128, 64, 3, 4, False),
    (128, 128, 3, 8, False),
    (128, 64, 3, 4, True),
    (128, 128, 3, 8, True),
]
# fp8 also sweeps ring depth (its tiles are half the bytes) and 8 warps at 128 x 64
FP8_CONFIGS = [
    *CONFIGS,
    (128, 64, 2, 4, False),
    (128, 64, 4, 4, False),
    (128, 64, 3, 8, False),
    (128, 128, 2, 8, False),
    (128, 128, 4, 8, False),
    (128, 128, 3, 4, False),
]


def launcher(
    q, k, v, o, sm_scale: float, causal: bool, heads: int, config, v_transposed: bool = False
) -> Callable[[], None]:
    """A no-argument callable running the kernel once with `config` on [B*H, S, D] tensors
    (`heads` query heads per batch; K/V heads follow from their leading dim). With
    `v_transposed` (fp8), v is V^T [B*H_kv, D, S] and o is bf16."""
    bh, seq, d = q.shape
    kv_heads = heads * k.shape[0] // bh
    block_m, block_n, stages, warps, ws = config
    if seq % block_m or block_m % block_n:
        raise ValueError(f"seq {seq} must be a multiple of BLOCK_M {block_m} (and BLOCK_N of it)")
    descs = [
        TensorDescriptor.from_tensor(x.view(-1, d), [block, d])
        for x, block in ((q, block_m), (k, block_n))
    ]
    if v_transposed:
        descs.append(TensorDescriptor.from_tensor(v.view(-1, seq), [d, block_n]))
    else:
        descs.append(TensorDescriptor.from_tensor(v.view(-1, d), [block_n, d]))
    descs.append(TensorDescriptor.from_tensor(o.view(-1, d), [block_m, d]))
    grid = (seq // block_m, bh)

    def run() -> None:
        _attn_fwd_tma[grid](
            *descs, sm_scale, heads, kv_heads, seq, HEAD_DIM=d, BLOCK_M=block_m,
            BLOCK_N=block_n, CAUSAL=causal, WARP_SPECIALIZE=ws, V_T=v_transposed, num_warps=warps,
            num_stages=stages,
        )  # fmt: skip

    return run


def best(
    q,
    k,
    v,
    o,
    sm_scale: float,
    causal: bool,
    heads: int,
    timer: Callable[..., float],
    v_transposed: bool = False,
) -> tuple[float | None, tuple | None, list[str]]:
    """(fastest time in ms, its config, one line per config that failed) over `CONFIGS`
    (`FP8_CONFIGS` for fp8); `timer(fn)` times a no-argument callable."""  # fmt: skip
    fastest: tuple[float, tuple] | None = None
    errors = []
    for config in FP8_CONFIGS if v_transposed else CONFIGS:
        try:
            ms = timer(launcher(q, k, v, o, sm_scale, causal, heads, config, v_transposed))
        except Exception as exc:  # noqa: BLE001 (a config that does not compile: skip it)
            errors.append(f"{config}: {str(exc).splitlines()[0][:160] if str(exc) else exc!r}")
            continue
        if fastest is None or ms < fastest[0]:
            fastest = (ms, config)
    return (fastest[0], fastest[1], errors) if fastest else (None, None, errors)
