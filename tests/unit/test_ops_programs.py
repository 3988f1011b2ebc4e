"""The programs `tawa_xdsl.ops` launches are the library kernels' own: the attention op
compiles the module and options `kernels.attention.compile_attention` compiles by default (the
rotated software pipeline among them) in the rows and form `default_form` picks. Needs no
torch."""

from __future__ import annotations

import pytest

import tawa_xdsl.ops as ops
from tawa_xdsl.kernels import attention


@pytest.mark.parametrize(
    ("head_dim", "dtype", "causal", "return_lse", "group"),
    [(128, "bfloat16", True, False, 1), (64, "float16", False, True, 4)],
)
def test_the_attention_op_compiles_what_compile_attention_compiles(
    monkeypatch: pytest.MonkeyPatch, head_dim, dtype, causal, return_lse, group
) -> None:
    compiled = []
    monkeypatch.setattr(attention, "compile_to_ptx", lambda *program: compiled.append(program))
    short = {"float16": "f16", "bfloat16": "bf16"}[dtype]
    block_m, persistent = attention.default_form(head_dim, causal)
    attention.compile_attention.__wrapped__(  # past its cache: the call records its program
        head_dim, short, causal, return_lse=return_lse, group=group, block_m=block_m,
        persistent=persistent,
    )  # fmt: skip
    ((library_module, library_options),) = compiled
    module, options = ops.attention_module(head_dim, dtype, causal, return_lse, group)
    assert options == library_options and options.rotate
    assert str(module) == str(library_module)


@pytest.mark.parametrize(
    ("head_dim", "causal", "seq", "rows", "persistent"),
    [
        (128, False, 16384, 128, True),
        (128, True, 1000, 128, True),
        (128, True, 2048, 128, True),
        (128, True, 4096, 128, False),
        (64, False, 1024, 128, True),
        (64, False, 2048, 192, False),
        (64, True, 2048, 128, True),
        (64, True, 4096, 192, False),
    ],
)
def test_the_attention_op_takes_the_form_the_length_calls_for(
    head_dim: int, causal: bool, seq: int, rows: int, persistent: bool
) -> None:
    """Causal attention is persistent up to `CAUSAL_PERSISTENT_SEQ` keys at 128 rows, one
    program per row block beyond; without a mask 128 rows are persistent; at d = 64, 192 rows
    one program per row block past 1K keys (2K causal); never persistent with ping-pong: the
    op's program for that length is compiled in that form."""
    form = attention.default_form(head_dim, causal, seq)
    assert form == (rows, persistent)
    assert attention.default_form(head_dim, causal, seq, pingpong=True) == (128, False)
    module, options = ops.attention_module(head_dim, "float16", causal, False, 1, form)
    assert options.persistent is persistent and options.consumers == rows // 64
    blocks = ops.descriptor_blocks(module)
    assert blocks[0] == (1, rows, head_dim) and blocks[3] == (1, rows, head_dim)
    assert ops.attention_program(head_dim, "float16", causal, False, 1, form).options == options
