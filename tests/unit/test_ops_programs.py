"""The programs `tawa_xdsl.ops` launches are the library kernels' own: the attention op
compiles the module and options `kernels.attention.compile_attention` compiles by default (the
rotated software pipeline among them). Needs no torch."""

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
    attention.compile_attention.__wrapped__(  # past its cache: the call records its program
        head_dim, short, causal, return_lse=return_lse, group=group
    )
    ((library_module, library_options),) = compiled
    module, options = ops.attention_module(head_dim, dtype, causal, return_lse, group)
    assert options == library_options and options.rotate
    assert str(module) == str(library_module)


@pytest.mark.parametrize(
    ("causal", "seq", "persistent"),
    [(False, 16384, True), (True, 1000, True), (True, 2048, True), (True, 4096, False)],
)
def test_the_attention_op_takes_the_persistent_form_the_length_calls_for(
    causal: bool, seq: int, persistent: bool
) -> None:
    """Causal attention is persistent up to `CAUSAL_PERSISTENT_SEQ` keys, one program per row
    block beyond; without a mask always (never with ping-pong): the op's program for that
    length is compiled in that form."""
    chosen = attention.persistent_default(causal, seq=seq)
    assert chosen is persistent
    assert attention.persistent_default(causal, pingpong=True, seq=seq) is False
    _, options = ops.attention_module(64, "float16", causal, False, 1, chosen)
    assert options.persistent is persistent
    assert ops.attention_program(64, "float16", causal, False, 1, chosen).options == options
