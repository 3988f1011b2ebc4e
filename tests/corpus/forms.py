"""Operand forms, output types, block sizes, grids and loop sequences (issue 14, items 4-6).

Each kernel is written as a Triton user writes it with tensor descriptors; a case launches it
with the user's constexprs only (default compile options), so the defaults must adapt: one
consumer warpgroup for 64-row tiles, rings fitted to shared memory. Shapes are small (one or
two programs, two or three loop trips) so that the per-thread nvgpu interpreter runs them on
the CPU in seconds; partial tiles are included so that TMA clipping is exercised.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np

import tawa_xdsl
import tawa_xdsl.language as tl
from tests.corpus.case import Case, Launch

D = tawa_xdsl.TensorDescriptor.from_tensor
F16, BF16, F32 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)
E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Standard normal values, scaled down for fp8 inputs (their range is short)."""
    scale = 0.5 if dtype.itemsize == 1 else 1.0
    return (rng.standard_normal(shape) * scale).astype(dtype)


def wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


def output_tolerance(dtype: np.dtype) -> dict[str, float]:
    """fp8 outputs round to 2 (e5m2) or 3 (e4m3) mantissa bits: one ulp relative. Not half
    an ulp: the GPU sums K in f32 in another order than numpy, so a value next to a rounding
    midpoint may round to the neighbouring fp8 value (seen on the H200: 4.0 for 4.5)."""
    if dtype == E5M2:
        return {"rtol": 0.26, "atol": 0.26}
    if dtype == E4M3:
        return {"rtol": 0.13, "atol": 0.13}
    return {}


# ------------------------------------------------------------------------------ GEMMs


@tawa_xdsl.jit
def matmul_nt(
    a_desc, b_desc, c_desc, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """C = A @ B^T with A M x K and B N x K (both K-major), one program per C tile."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        a = a_desc.load([off_m, k])
        b = b_desc.load([off_n, k])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def matmul_nn(
    a_desc, b_desc, c_desc, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """C = A @ B with B stored K x N (N-major), loaded as K x N blocks."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        a = a_desc.load([off_m, k])
        b = b_desc.load([k, off_n])
        acc = tl.dot(a, b, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def matmul_tn(
    a_desc, b_desc, c_desc, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """C = A^T @ B^T with A stored K x M (M-major) and B N x K."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        a = a_desc.load([k, off_m])
        b = b_desc.load([off_n, k])
        acc = tl.dot(a.T, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@tawa_xdsl.jit
def matmul_tt(
    a_desc, b_desc, c_desc, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """C = A^T @ B with A stored K x M and B K x N (both operands M/N-major)."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        a = a_desc.load([k, off_m])
        b = b_desc.load([k, off_n])
        acc = tl.dot(tl.trans(a), b, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


def gemm_case(
    name: str,
    kernel,
    m: int,
    n: int,
    k: int,
    blocks: tuple[int, int, int],
    dtype: np.dtype = F16,
    out: np.dtype = F16,
    a_major: str = "k",
    b_major: str = "k",
    covers: tuple[str, ...] = (),
) -> Case:
    """A 2-D GEMM launch; `a_major`/`b_major` say which dimension is contiguous in memory."""
    bm, bn, bk = blocks

    def launch(rng: np.random.Generator) -> Launch:
        a = normal(rng, (m, k), dtype)
        b = normal(rng, (n, k), dtype)
        c = np.zeros((m, n), out)
        a_stored = a if a_major == "k" else np.ascontiguousarray(a.T)
        b_stored = b if b_major == "k" else np.ascontiguousarray(b.T)
        a_block = [bm, bk] if a_major == "k" else [bk, bm]
        b_block = [bn, bk] if b_major == "k" else [bk, bn]
        answer = (wide(a) @ wide(b).T).astype(out)
        return Launch(
            grid=(cdiv(m, bm), cdiv(n, bn)),
            args=[D(a_stored, a_block), D(b_stored, b_block), D(c, [bm, bn]), k],
            kwargs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk},
            expected=[(c, answer)],
            **output_tolerance(out),
        )

    return Case(name, kernel, launch, covers)


@tawa_xdsl.jit
def batched_matmul(
    a_desc, b_desc, c_desc, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """C[z] = A[z] @ B[z]^T over 3-D tensors, the batch index on grid axis 2."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    z = tl.program_id(2)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_K):
        a = a_desc.load([z, off_m, k]).reshape([BLOCK_M, BLOCK_K])
        b = b_desc.load([z, off_n, k]).reshape([BLOCK_N, BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([z, off_m, off_n], acc.to(c_desc.dtype).reshape([1, BLOCK_M, BLOCK_N]))


def batched_case() -> Case:
    batch, m, n, k, (bm, bn, bk) = 3, 128, 128, 128, (128, 128, 64)

    def launch(rng: np.random.Generator) -> Launch:
        a, b = normal(rng, (batch, m, k), BF16), normal(rng, (batch, n, k), BF16)
        c = np.zeros((batch, m, n), BF16)
        answer = np.einsum("zmk,znk->zmn", wide(a), wide(b)).astype(BF16)
        return Launch(
            grid=(cdiv(m, bm), cdiv(n, bn), batch),
            args=[D(a, [1, bm, bk]), D(b, [1, bn, bk]), D(c, [1, bm, bn]), k],
            kwargs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk},
            expected=[(c, answer)],
        )

    return Case("batched_gemm_3d_grid", batched_matmul, launch, ("4: 3-D grid",))


@tawa_xdsl.jit
def matmul_split_k(
    a_desc, b_desc, p_desc, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr,
):  # fmt: skip
    """Split-K: program (m, n, s) sums its share of the K tiles into an f32 partial P[s]."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    split = tl.program_id(2)
    k_tiles = tl.cdiv(K, BLOCK_K)
    per_split = tl.cdiv(k_tiles, SPLIT_K)
    first = split * per_split
    last = tl.minimum(first + per_split, k_tiles)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in tl.range(first, last):
        a = a_desc.load([off_m, kt * BLOCK_K])
        b = b_desc.load([off_n, kt * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    p_desc.store([split, off_m, off_n], acc.reshape([1, BLOCK_M, BLOCK_N]))


def split_k_case() -> Case:
    m, n, k, split, (bm, bn, bk) = 128, 128, 320, 2, (128, 128, 64)

    def launch(rng: np.random.Generator) -> Launch:
        a, b = normal(rng, (m, k), F16), normal(rng, (n, k), F16)
        partials = np.zeros((split, m, n), F32)
        per_split = cdiv(cdiv(k, bk), split) * bk
        answer = np.stack(
            [wide(a[:, s : s + per_split]) @ wide(b[:, s : s + per_split]).T
             for s in range(0, split * per_split, per_split)]
        )  # fmt: skip
        return Launch(
            grid=(cdiv(m, bm), cdiv(n, bn), split),
            args=[D(a, [bm, bk]), D(b, [bn, bk]), D(partials, [1, bm, bn]), k],
            kwargs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split},
            expected=[(partials, answer)],
        )

    return Case("split_k_f32_partials", matmul_split_k, launch, ("4: split-K, f32 out",))


@tawa_xdsl.jit
def matmul_two_sums(
    a_desc, b_desc, d_desc, e_desc, c_desc, K1, K2,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """C = A @ B^T + D @ E^T: two K loops, one after the other, into one accumulator."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, K1, BLOCK_K):
        acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
    for k in tl.range(0, K2, BLOCK_K):
        acc = tl.dot(d_desc.load([off_m, k]), e_desc.load([off_n, k]).T, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


def two_sums_case() -> Case:
    m, n, k1, k2, (bm, bn, bk) = 128, 128, 128, 192, (128, 128, 64)

    def launch(rng: np.random.Generator) -> Launch:
        a, b = normal(rng, (m, k1), F16), normal(rng, (n, k1), F16)
        d, e = normal(rng, (m, k2), F16), normal(rng, (n, k2), F16)
        c = np.zeros((m, n), F16)
        answer = (wide(a) @ wide(b).T + wide(d) @ wide(e).T).astype(F16)
        descs = [D(x, [bm if x.shape[0] == m else bn, bk]) for x in (a, b, d, e)]
        return Launch(
            grid=(cdiv(m, bm), cdiv(n, bn)),
            args=[*descs, D(c, [bm, bn]), k1, k2],
            kwargs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk},
            expected=[(c, answer)],
        )

    return Case("two_loop_gemm", matmul_two_sums, launch, ("5: two loops, one accumulator",))


@tawa_xdsl.jit
def matmul_halves(
    a_desc, b_desc, c_desc, K, USE_SECOND,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """C = A @ B^T with the K tiles walked in two loops over the same descriptors, the second
    under a run-time (uniform) condition: the rings' use counter continues across both."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    half = tl.cdiv(K, 2 * BLOCK_K) * BLOCK_K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, half, BLOCK_K):
        acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
    if USE_SECOND != 0:
        for k in tl.range(half, K, BLOCK_K):
            acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([off_n, k]).T, acc)
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


def halves_case(use_second: int) -> Case:
    m, n, k, (bm, bn, bk) = 128, 128, 256, (128, 128, 64)

    def launch(rng: np.random.Generator) -> Launch:
        a, b = normal(rng, (m, k), F16), normal(rng, (n, k), F16)
        c = np.zeros((m, n), F16)
        used = k if use_second else cdiv(k, 2 * bk) * bk
        answer = (wide(a[:, :used]) @ wide(b[:, :used]).T).astype(F16)
        return Launch(
            grid=(cdiv(m, bm), cdiv(n, bn)),
            args=[D(a, [bm, bk]), D(b, [bn, bk]), D(c, [bm, bn]), k, use_second],
            kwargs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk},
            expected=[(c, answer)],
        )

    taken = "taken" if use_second else "not taken"
    return Case(
        f"gemm_loops_same_rings_if_{taken.replace(' ', '_')}",
        matmul_halves,
        launch,
        ("5: loops in sequence over the same rings", f"5: loop in a uniform if ({taken})"),
    )


# -------------------------------------------------------------------------- attention


@tawa_xdsl.jit
def attention(
    q_desc, k_desc, v_desc, o_desc, seq_q, seq_k, sm_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
):  # fmt: skip
    """O = softmax(Q K^T * sm_scale) V per query head, online softmax in base 2; query head h
    reads kv head h // GROUP (grouped-query attention; GROUP = 1 is multi-head)."""
    start_m = tl.program_id(0)
    head = tl.program_id(1)
    kv_head = head // GROUP
    off_m = start_m * BLOCK_M
    qk_scale = sm_scale * 1.44269504
    q = q_desc.load([head, off_m, 0]).reshape([BLOCK_M, HEAD_DIM])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    offs_m = off_m + tl.arange(0, BLOCK_M)
    hi = seq_k
    if CAUSAL:
        hi = tl.minimum(off_m + BLOCK_M, seq_k)
    for start_n in tl.range(0, hi, BLOCK_N):
        k = k_desc.load([kv_head, start_n, 0]).reshape([BLOCK_N, HEAD_DIM])
        qk = tl.dot(q, k.T)
        offs_n = start_n + tl.arange(0, BLOCK_N)
        mask = offs_n[None, :] < seq_k
        if CAUSAL:
            mask = mask & (offs_n[None, :] <= offs_m[:, None])
        qk = tl.where(mask, qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([kv_head, start_n, 0]).reshape([BLOCK_N, HEAD_DIM])
        acc = tl.dot(p.to(v_desc.dtype), v, acc * alpha[:, None])
        m_i = m_ij
    out = acc / l_i[:, None]
    o_desc.store([head, off_m, 0], out.to(o_desc.dtype).reshape([1, BLOCK_M, HEAD_DIM]))


def attention_reference(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool, group: int
) -> np.ndarray:
    """softmax(Q K^T scale) V per query head, kv head h // group; causal: row r sees keys
    0..r (rows and keys counted from 0 in both)."""
    kv = np.arange(q.shape[0]) // group
    s = np.einsum("hmd,hnd->hmn", wide(q), wide(k)[kv]) * scale
    if causal:
        rows, keys = np.arange(q.shape[1])[:, None], np.arange(k.shape[1])[None, :]
        s = np.where(keys <= rows, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hmn,hnd->hmd", p, wide(v)[kv])


def attention_case(
    name: str,
    kernel,
    q_heads: int,
    kv_heads: int,
    seq_q: int,
    seq_k: int,
    head_dim: int,
    blocks: tuple[int, int],
    causal: bool,
    covers: tuple[str, ...],
    dtype: np.dtype = F16,
    has_group: bool = True,
) -> Case:
    bm, bn = blocks

    def launch(rng: np.random.Generator) -> Launch:
        q = normal(rng, (q_heads, seq_q, head_dim), dtype)
        k = normal(rng, (kv_heads, seq_k, head_dim), dtype)
        v = normal(rng, (kv_heads, seq_k, head_dim), dtype)
        o = np.zeros_like(q)
        scale = 1 / math.sqrt(head_dim)
        group = q_heads // kv_heads
        answer = attention_reference(q, k, v, scale, causal, group).astype(dtype)
        kwargs = {"HEAD_DIM": head_dim, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": causal}
        if has_group:
            kwargs["GROUP"] = group
        scalars = [seq_q, seq_k, scale] if has_group else [seq_k, scale]
        return Launch(
            grid=(cdiv(seq_q, bm), q_heads),
            args=[D(q, [1, bm, head_dim]), D(k, [1, bn, head_dim]), D(v, [1, bn, head_dim]),
                  D(o, [1, bm, head_dim]), *scalars],
            kwargs=kwargs,
            expected=[(o, answer)],
        )  # fmt: skip

    return Case(name, kernel, launch, covers)


@tawa_xdsl.jit
def attn_inner(
    acc, l_i, m_i, q, k_desc, v_desc, head, off_m, lo, hi, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    DIAGONAL: tl.constexpr,
):  # fmt: skip
    """Triton tutorial's `_attn_fwd_inner`: fold key blocks lo..hi into (acc, l_i, m_i); the
    diagonal stage masks keys past each row."""
    offs_m = off_m + tl.arange(0, BLOCK_M)
    for start_n in tl.range(lo, hi, BLOCK_N):
        k = k_desc.load([head, start_n, 0]).reshape([BLOCK_N, HEAD_DIM])
        qk = tl.dot(q, k.T)
        if DIAGONAL:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            qk = tl.where(offs_n[None, :] <= offs_m[:, None], qk, float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = v_desc.load([head, start_n, 0]).reshape([BLOCK_N, HEAD_DIM])
        acc = tl.dot(p.to(v_desc.dtype), v, acc * alpha[:, None])
        m_i = m_ij
    return acc, l_i, m_i


@tawa_xdsl.jit
def attention_two_stage(
    q_desc, k_desc, v_desc, o_desc, seq, sm_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
):  # fmt: skip
    """Triton's causal attention in two loops over the same K/V descriptors: the blocks left
    of the diagonal unmasked, then the diagonal blocks masked (seq a multiple of BLOCK_M)."""
    start_m = tl.program_id(0)
    head = tl.program_id(1)
    off_m = start_m * BLOCK_M
    qk_scale = sm_scale * 1.44269504
    q = q_desc.load([head, off_m, 0]).reshape([BLOCK_M, HEAD_DIM])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    acc, l_i, m_i = attn_inner(
        acc, l_i, m_i, q, k_desc, v_desc, head, off_m, 0, off_m, qk_scale,
        HEAD_DIM, BLOCK_M, BLOCK_N, False,
    )  # fmt: skip
    if CAUSAL:
        acc, l_i, m_i = attn_inner(
            acc, l_i, m_i, q, k_desc, v_desc, head, off_m, off_m, off_m + BLOCK_M, qk_scale,
            HEAD_DIM, BLOCK_M, BLOCK_N, True,
        )  # fmt: skip
    out = acc / l_i[:, None]
    o_desc.store([head, off_m, 0], out.to(o_desc.dtype).reshape([1, BLOCK_M, HEAD_DIM]))


# ------------------------------------------------------------------------------ cases


def gemm_cases() -> list[Case]:
    nt: Callable[..., Case] = lambda name, *a, **kw: gemm_case(name, matmul_nt, *a, **kw)  # noqa: E731
    return [
        nt("gemm_block_m64", 64, 128, 128, (64, 128, 64), covers=("6: one consumer for 64 rows",)),
        nt("gemm_block_m64_partial", 100, 96, 64, (64, 64, 64), BF16, BF16,
           covers=("6: 64 rows", "4: BLOCK_N 64")),
        gemm_case("gemm_b_k_by_n", matmul_nn, 128, 128, 128, (128, 128, 64), b_major="n",
                  covers=("4: B loaded K x N",)),
        gemm_case("gemm_b_k_by_n_bf16", matmul_nn, 64, 64, 96, (64, 64, 32), BF16, BF16,
                  b_major="n", covers=("4: B loaded K x N", "4: BLOCK_K 32")),
        gemm_case("gemm_a_transposed", matmul_tn, 128, 128, 128, (128, 128, 64), a_major="m",
                  covers=("4: A transposed (two consumers split its columns)",)),
        gemm_case("gemm_a_transposed_b_k_by_n", matmul_tt, 64, 96, 96, (64, 64, 32), BF16, BF16,
                  a_major="m", b_major="n", covers=("4: A transposed", "4: B loaded K x N")),
        nt("gemm_fp8_e4m3_out", 128, 128, 256, (128, 128, 128), E4M3, E4M3,
           covers=("4: e4m3 output",)),
        nt("gemm_e5m2_out", 128, 192, 128, (128, 64, 64), F16, E5M2,
           covers=("4: e5m2 output",)),
        nt("gemm_fp8_bk128", 128, 128, 256, (128, 128, 128), E4M3, BF16,
           covers=("4: fp8 BLOCK_K 128",)),
        nt("gemm_fp8_bk32", 128, 64, 96, (128, 64, 32), E5M2, BF16,
           covers=("4: fp8 BLOCK_K 32",)),
        nt("gemm_f32_out", 128, 128, 128, (128, 128, 64), BF16, F32, covers=("4: f32 output",)),
        nt("gemm_block_m256", 256, 128, 128, (256, 128, 64),
           covers=("4: BLOCK_M 128 per consumer group (two of them)",)),
        nt("gemm_block_n16", 128, 48, 128, (128, 16, 64), covers=("4: BLOCK_N 16",)),
        nt("gemm_block_n32", 128, 96, 128, (128, 32, 64), BF16, BF16,
           covers=("4: BLOCK_N 32",)),
        nt("gemm_block_n256", 128, 256, 128, (128, 256, 64), BF16, BF16,
           covers=("4: BLOCK_N 256",)),
        nt("gemm_block_k32", 128, 128, 96, (128, 128, 32), covers=("4: BLOCK_K 32",)),
        nt("gemm_block_k128", 128, 128, 256, (128, 128, 128), covers=("4: BLOCK_K 128",)),
        batched_case(),
        split_k_case(),
        two_sums_case(),
        halves_case(1),
        halves_case(0),
    ]  # fmt: skip


def attention_cases() -> list[Case]:
    return [
        attention_case("attention", attention, 2, 2, 128, 128, 64, (128, 64), False,
                       ("4: attention",)),
        attention_case("attention_causal", attention, 1, 1, 256, 256, 64, (128, 64), True,
                       ("4: causal attention",)),
        attention_case("attention_gqa", attention, 4, 2, 128, 192, 64, (128, 64), False,
                       ("4: GQA, kv head = q head // group",), BF16),
        attention_case("attention_decode", attention, 2, 2, 8, 512, 64, (64, 128), False,
                       ("4: decode-shaped attention, BLOCK_M 64", "6: one consumer")),
        attention_case("attention_two_stage_causal", attention_two_stage, 1, 1, 256, 256, 64,
                       (128, 64), True,
                       ("5: Triton's two-loop causal attention, counter continues",),
                       has_group=False),
    ]  # fmt: skip


CASES: list[Case] = [*gemm_cases(), *attention_cases()]
