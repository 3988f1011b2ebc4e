"""A transformer block whose matmuls and attention are `torch.ops.tawa.*`, under
`torch.compile(fullgraph=True)`, checked against the same block in eager PyTorch.

    python examples/torch_block.py [--batch 4 --seq 2048 --dim 2048 --heads 16 --kv-heads 4]

x -> x + W_o attention(RMSNorm(x) W_qkv) -> x + W_down gelu(RMSNorm(x) W_up + b_up): RMSNorm
by torch, causal attention with GQA (`ops.attention` reads each K/V head for its group of query
heads in place), and every projection `ops.matmul` on nn.Linear-layout weights ([out, in],
passed as `w.t()`, a view the kernel reads as it is); the up projection's bias and gelu are
the GEMM's epilogue. The reference is the same block with `F.linear` (cuBLAS) and
`F.scaled_dot_product_attention` (cuDNN / flash; K/V repeated to the query heads), in eager
mode.

On an sm_90 GPU it prints both blocks' time per forward. Without one (torch installed, CPU
only) it runs a tiny block in the tile interpreter (slow, so the sizes are small) and checks it
the same way; torch.compile then uses the "aot_eager" backend, which needs no C++ compiler.
"""

from __future__ import annotations

import argparse
import sys

try:
    import torch
    import torch.nn.functional as F  # noqa: N812 -- PyTorch's own spelling
except ModuleNotFoundError:
    torch = None

import tawa_xdsl.ops as ops


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm in f32, back in x's type."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight).to(x.dtype)


def make_weights(dim: int, heads: int, kv_heads: int, hidden: int, device: str) -> dict:
    """nn.Linear-layout weights ([out, in]) scaled so activations stay near unit size."""
    head_dim = dim // heads
    qkv = (heads + 2 * kv_heads) * head_dim

    def linear(out: int, inp: int) -> torch.Tensor:
        return torch.randn(out, inp, device=device, dtype=torch.float16) / inp**0.5

    return {
        "norm1": torch.ones(dim, device=device), "norm2": torch.ones(dim, device=device),
        "w_qkv": linear(qkv, dim), "w_o": linear(dim, heads * head_dim),
        "w_up": linear(hidden, dim), "b_up": torch.randn(hidden, device=device,
                                                        dtype=torch.float16) / 4,
        "w_down": linear(dim, hidden),
    }  # fmt: skip


def split_heads(qkv: torch.Tensor, batch: int, seq: int, heads: int, kv_heads: int) -> tuple:
    """[B*S, (H + 2 H_kv) D] -> q [B, H, S, D], k and v [B, H_kv, S, D]."""
    head_dim = qkv.shape[-1] // (heads + 2 * kv_heads)
    parts = qkv.view(batch, seq, heads + 2 * kv_heads, head_dim).transpose(1, 2)
    return parts[:, :heads], parts[:, heads : heads + kv_heads], parts[:, heads + kv_heads :]


def tawa_block(x: torch.Tensor, w: dict, heads: int, kv_heads: int) -> torch.Tensor:
    """The block on torch.ops.tawa (matmul, attention)."""
    batch, seq, dim = x.shape
    rows = x.reshape(batch * seq, dim)
    qkv = ops.matmul(rms_norm(rows, w["norm1"]), w["w_qkv"].t())
    q, k, v = split_heads(qkv, batch, seq, heads, kv_heads)
    o = ops.attention(q, k, v, causal=True).transpose(1, 2).reshape(batch * seq, dim)
    rows = rows + ops.matmul(o, w["w_o"].t())
    up = ops.matmul(rms_norm(rows, w["norm2"]), w["w_up"].t(), bias=w["b_up"], activation="gelu")
    rows = rows + ops.matmul(up, w["w_down"].t())
    return rows.reshape(batch, seq, dim)


def torch_block(x: torch.Tensor, w: dict, heads: int, kv_heads: int) -> torch.Tensor:
    """The same block on F.linear and F.scaled_dot_product_attention."""
    batch, seq, dim = x.shape
    rows = x.reshape(batch * seq, dim)
    q, k, v = split_heads(F.linear(rms_norm(rows, w["norm1"]), w["w_qkv"]), batch, seq, heads,
                          kv_heads)  # fmt: skip
    group = heads // kv_heads
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    rows = rows + F.linear(o.transpose(1, 2).reshape(batch * seq, dim), w["w_o"])
    up = F.gelu(F.linear(rms_norm(rows, w["norm2"]), w["w_up"], w["b_up"]), approximate="tanh")
    rows = rows + F.linear(up, w["w_down"])
    return rows.reshape(batch, seq, dim)


def gpu_ms(run, reps: int = 10) -> float:
    """Median milliseconds per call, CUDA events."""
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int)
    parser.add_argument("--seq", type=int)
    parser.add_argument("--dim", type=int)
    parser.add_argument("--heads", type=int)
    parser.add_argument("--kv-heads", type=int)
    args = parser.parse_args(argv)
    if torch is None:
        print(ops.MISSING_TORCH, file=sys.stderr)
        return 2
    on_gpu = torch.cuda.is_available()
    # GPU: a Llama-style layer; CPU: as small as the kernels' 128-row blocks allow
    default = (4, 2048, 2048, 16, 4) if on_gpu else (1, 128, 128, 2, 1)
    batch, seq, dim, heads, kv_heads = (
        given if given is not None else fallback
        for given, fallback in zip(
            (args.batch, args.seq, args.dim, args.heads, args.kv_heads), default, strict=True
        )
    )
    device = "cuda" if on_gpu else "cpu"
    torch.manual_seed(0)
    weights = make_weights(dim, heads, kv_heads, 4 * dim, device)
    x = torch.randn(batch, seq, dim, device=device, dtype=torch.float16)
    backend = "inductor" if on_gpu else "aot_eager"
    compiled = torch.compile(tawa_block, fullgraph=True, backend=backend)
    with torch.no_grad():
        out = compiled(x, weights, heads, kv_heads)
        ref = torch_block(x, weights, heads, kv_heads) if on_gpu else torch_block(
            x.float(), {k: v.float() for k, v in weights.items()}, heads, kv_heads
        )  # fmt: skip
    error = (out.float() - ref.float()).abs().max().item()
    where = torch.cuda.get_device_name() if on_gpu else "tile interpreter (CPU)"
    print(f"block [B={batch}, S={seq}, E={dim}, H={heads}, H_kv={kv_heads}] on {where}, "
          f"torch.compile(fullgraph=True, backend={backend!r}): "
          f"max |tawa - torch| = {error:.4f}")  # fmt: skip
    if not error < 0.05 * max(1.0, ref.float().abs().max().item()):
        print("FAILED: the tawa block does not match eager PyTorch", file=sys.stderr)
        return 1
    if on_gpu:
        with torch.no_grad():
            tawa_ms = gpu_ms(lambda: compiled(x, weights, heads, kv_heads))
            torch_ms = gpu_ms(lambda: torch_block(x, weights, heads, kv_heads))
        print(f"tawa (torch.ops.tawa under torch.compile): {tawa_ms:.3f} ms per forward")
        print(f"torch (cuBLAS F.linear + SDPA, eager):      {torch_ms:.3f} ms per forward "
              f"(tawa / torch = {tawa_ms / torch_ms:.2f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
