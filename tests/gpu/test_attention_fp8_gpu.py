"""The fp8 (e4m3) attention forward on the GPU against float32 attention over the same inputs.

`compile_attention(d, "e4m3", causal)`: Q, K and `fp8_v(v)` (V^T [heads, d, keys], the keys of
each 32 in `fp8_key_order`'s order) in e4m3, S = Q K^T by fp8 wgmma, P rounded to e4m3 and
packed into wgmma's fp8 A layout from each thread's own values (`nvgpu.fragment_convert` into
`wgmma_operand_a8` with `columns`), P V by the fp8 register-A wgmma, O in bf16
(NaN-poisoned before the launch). P in e4m3 carries 3 mantissa bits, so the bound is on the
relative error of the whole output (a misplaced P column moves it far more) and on the worst
element.
"""

from __future__ import annotations

import math

import pytest

from tawa_xdsl.kernels.attention import compile_attention, fp8_v, grid

torch = pytest.importorskip("torch")


@pytest.mark.gpu
@pytest.mark.parametrize("seq", [128, 200, 1000])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_fp8_attention_matches_float32(head_dim: int, causal: bool, seq: int) -> None:
    torch.manual_seed(seq + head_dim)
    heads = 3
    q, k, v = (
        torch.randn(heads, seq, head_dim, device="cuda").to(torch.float8_e4m3fn) for _ in "qkv"
    )
    vt = fp8_v(v)  # V^T, keys padded to 32 and in fp8_key_order's order
    o = torch.full((heads, seq, head_dim), float("nan"), device="cuda", dtype=torch.bfloat16)
    sm_scale = 1.0 / math.sqrt(head_dim)
    kernel = compile_attention(head_dim, "e4m3", causal)
    kernel.launch(grid(seq, heads), q, k, vt, o, seq, sm_scale)
    torch.cuda.synchronize()
    expected = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=causal, scale=sm_scale
    )
    assert int(torch.isnan(o).sum()) == 0, "outputs left unwritten (or NaN)"
    diff = o.float() - expected
    relative = (diff.norm() / expected.norm()).item()
    assert relative < 0.05, f"relative error {relative}"
    assert diff.abs().max().item() < 0.25, f"max abs error {diff.abs().max().item()}"
