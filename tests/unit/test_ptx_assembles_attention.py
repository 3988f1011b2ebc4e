"""The attention forward compiles to PTX that ptxas accepts cleanly, for every configuration.

`examples/attention.py`'s kernel (through `examples/attention_compile.py`) and the
hand-written `examples/attention*.mlir` -> tawa-warp-specialize (two consumer warpgroups,
attention pipelining) -> lower-aref -> lower-to-nvgpu -> emit-ptx -> `ptxas -arch=sm_90a -v`,
for head dim 64 and 128, causal and not, f16 and bf16, and ring depths 2 and 3. A test fails
when ptxas rejects the PTX, warns that it serialized wgmma (C7517/C7519/C7520) or ignored
setmaxnreg (C7508), or spills. Skipped only when ptxas is absent.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from xdsl.parser import Parser

from tawa_xdsl.backend.compile import CompileOptions, compile_to_ptx
from tawa_xdsl.backend.ptxas import assemble, find_ptxas
from tawa_xdsl.dialects import make_context

EXAMPLES = Path(__file__).parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
from attention_compile import compile_attention  # noqa: E402

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not on PATH")


def check(ptx: str) -> None:
    result = assemble(ptx)
    assert result.returncode == 0, result.log[-3000:]
    assert not result.forbidden(), result.forbidden()
    assert "0 bytes spill stores" in result.log, result.log


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_language_kernel_assembles(head_dim: int, causal: bool, dtype: str, stages: int) -> None:
    kernel = compile_attention(head_dim, dtype, causal, stages=stages)
    check(kernel.ptx)
    assert kernel.threads == 384  # producer + two consumer warpgroups
    assert "wgmma.mma_async.sync.aligned.m64n" in kernel.ptx
    assert f".{dtype}.{dtype} " in kernel.ptx
    assert "ex2.approx.ftz.f32" in kernel.ptx and "shfl.sync.bfly.b32" in kernel.ptx


@pytest.mark.parametrize("name", ["attention.mlir", "attention_causal.mlir"])
def test_handwritten_examples_assemble(name: str) -> None:
    module = Parser(make_context(), (EXAMPLES / name).read_text()).parse_module()
    check(compile_to_ptx(module, CompileOptions(stages=2, mma_depth=2, consumers=2)).ptx)


def test_register_a_operand_feeds_pv() -> None:
    """P V reads P from registers: the RS form (four .b32 A registers, tB = 1 for V)."""
    ptx = compile_attention(64, "f16", False).ptx
    rs = [line for line in ptx.splitlines() if "wgmma.mma_async" in line and "{%" in line]
    assert any(line.count("{") == 2 and line.rstrip(";").endswith("1, 1, 1, 1") for line in rs)
