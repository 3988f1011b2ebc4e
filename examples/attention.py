"""Attention forward, O = softmax(Q K^T * sm_scale) V, through the library kernels
`tawa_xdsl.kernels.attention.attn_fwd` and `attn_fwd_lse`, launched like Triton.

Q, K, V and O are [batch * heads, seq, head_dim] f16 (or bf16) arrays read through 3-D
descriptors. Run as a script it checks causal and non-causal, head dim 64 and 128, O and the
log-sum-exp, against numpy on the CPU interpreter (or on an sm_90 GPU when one is present):

    python examples/attention.py [--seq 150 --heads 2]
"""

from __future__ import annotations

import argparse

import numpy as np

import tawa_xdsl
from tawa_xdsl.kernels.attention import attn_fwd, attn_fwd_lse


def lse_buffer(heads, seq):
    """A [heads, seq] f32 log-sum-exp array whose rows start 16 bytes apart (a view of a
    [heads, seq rounded up to 4] array): the descriptor's row stride must be a multiple of
    16 bytes."""
    return np.zeros((heads, -(-seq // 4) * 4), np.float32)[:, :seq]


def attention(q, k, v, sm_scale, causal, block_m=128, block_n=None, return_lse=False):
    """O (and, with `return_lse`, the [batch * heads, seq] f32 log-sum-exp) for
    [batch * heads, seq, head_dim] f16 or bf16 arrays: on an sm_90 GPU when one is present,
    else in the tile interpreter. 128 query rows (two consumer warpgroups of 64) and 128 keys
    per step for d = 64, 64 for d = 128, with the jit launch's default options (the
    compiler's choices: the key loop rotated, the MMA depth and setmaxnreg chosen, rings as
    deep as shared memory holds, up to 4; `tawa_xdsl.kernels.attention.compile_attention` is
    the benchmarked configuration: 128 keys, 3-deep rings, persistent where it pays)."""
    heads, seq, head_dim = q.shape
    block_n = block_n or (128 if head_dim <= 64 else 64)
    o = np.zeros_like(q)
    q_desc = tawa_xdsl.TensorDescriptor.from_tensor(q, [1, block_m, head_dim])
    k_desc = tawa_xdsl.TensorDescriptor.from_tensor(k, [1, block_n, head_dim])
    v_desc = tawa_xdsl.TensorDescriptor.from_tensor(v, [1, block_n, head_dim])
    o_desc = tawa_xdsl.TensorDescriptor.from_tensor(o, [1, block_m, head_dim])
    meta = dict(HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal)

    def grid(meta):
        return ((seq + meta["BLOCK_M"] - 1) // meta["BLOCK_M"], heads)

    if not return_lse:
        attn_fwd[grid](q_desc, k_desc, v_desc, o_desc, seq, sm_scale, **meta)
        return o
    lse = lse_buffer(heads, seq)
    lse_desc = tawa_xdsl.TensorDescriptor.from_tensor(lse, [1, block_m])
    attn_fwd_lse[grid](q_desc, k_desc, v_desc, o_desc, lse_desc, seq, sm_scale, **meta)
    return o, lse


def reference(q, k, v, sm_scale, causal):
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float32), k.astype(np.float32)) * sm_scale
    if causal:
        seq = q.shape[1]
        s = np.where(np.tril(np.ones((seq, seq), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hqk,hkd->hqd", p, v.astype(np.float32))


def reference_lse(q, k, sm_scale, causal):
    s = np.einsum("hqd,hkd->hqk", q.astype(np.float64), k.astype(np.float64)) * sm_scale
    if causal:
        seq = q.shape[1]
        s = np.where(np.tril(np.ones((seq, seq), bool)), s, -np.inf)
    top = s.max(-1)
    return top + np.log(np.exp(s - top[..., None]).sum(-1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=150)
    parser.add_argument("--heads", type=int, default=2, help="batch * heads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    errors = {}
    for head_dim in (64, 128):
        shape = (args.heads, args.seq, head_dim)
        q, k, v = (rng.standard_normal(shape).astype(np.float16) for _ in range(3))
        sm_scale = 1.0 / np.sqrt(head_dim)
        for causal in (False, True):
            o, lse = attention(q, k, v, sm_scale, causal, return_lse=True)
            expected = reference(q, k, v, sm_scale, causal)
            errors[head_dim, causal] = max(
                float(np.max(np.abs(o.astype(np.float32) - expected))),
                float(np.max(np.abs(lse - reference_lse(q, k, sm_scale, causal)))),
            )
    bad = [f"head_dim={d} causal={c}" for (d, c), e in errors.items() if not e < 2e-2]
    print(f"attention seq={args.seq} heads={args.heads} head_dim 64,128 causal and not, O and "
          f"log-sum-exp: max abs error {max(errors.values()):.2e} "
          f"{'OK' if not bad else 'MISMATCH in ' + ', '.join(bad)}")  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
