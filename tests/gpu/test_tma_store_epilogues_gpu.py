"""Epilogues of every kind end in the TMA store (`epilogue="tma"`) and match numpy on the GPU.

Before the one general lowering, a consumer group with a row vector, a reduction, a `where`
or an exp2 was lowered by a separate attention lowering that only knew st.global: a GEMM with
a bias vector (or a leaky relu, or exp2) and `epilogue="tma"` silently stored with st.global.
Here each such GEMM, and the attention forward itself (its output through the rank-3
descriptor) and a GEMM whose epilogue is a row softmax (`gemm_softmax`: a column mask, row
max and row sum), compiles with `epilogue="tma"`, its PTX holds the TMA store and no st.global of
the output, and the GPU result lies within the numpy bounds of the fuzzer's reference
(`fuzz.programs`: ragged shapes, so the TMA store's clipping is exercised). The CPU side (IR
and ptxas) is tests/unit/test_lower_to_nvgpu.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.compiler import CompileOptions, compile_to_ptx
from tawa_xdsl.descriptor import TensorDescriptor
from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg
from tawa_xdsl.fuzz.programs import AttentionProgram, GemmProgram, Program
from tawa_xdsl.fuzz.strategies import epilogue_chain

pytestmark = pytest.mark.gpu


def gemm(dtype: str, out: str, bm: int, bn: int, bk: int, *kinds: str) -> GemmProgram:
    return GemmProgram(dtype, out, bm, bn, bk, epilogue=epilogue_chain(list(kinds)))


def ragged(bm: int, bn: int, bk: int) -> dict[str, int]:
    """M and K not multiples of the tile, N a multiple of 8 (TMA strides), two tiles wide."""
    return {"m": 2 * bm + 37, "n": 2 * bn + 24, "k": 3 * bk - 8}


# (name, program, shape, scalar arguments, options)
CASES: list[tuple[str, Program, dict[str, int], tuple[float, ...], CompileOptions]] = [
    (
        "bias-f32",
        gemm("f16", "f32", 64, 128, 64, "bias"),
        ragged(64, 128, 64),
        (),
        CompileOptions(2, 1, 1, False, "tma"),
    ),
    (
        "bias-leaky-bf16-coop-persistent",
        gemm("bf16", "bf16", 128, 128, 64, "bias", "leaky", "round_bf16"),
        ragged(128, 128, 64),
        (),
        CompileOptions(3, 2, 2, True, "tma"),
    ),
    (
        "bias-relu-exp2-f16",
        gemm("f16", "f16", 128, 128, 64, "bias", "relu", "exp2"),
        ragged(128, 128, 64),
        (),
        CompileOptions(3, 2, 2, False, "tma"),
    ),
    (
        "scale-leaky-f32",
        gemm("f16", "f32", 128, 64, 32, "scale", "leaky"),
        ragged(128, 64, 32),
        (0.75,),
        CompileOptions(3, 2, 1, False, "tma"),
    ),
    (
        "attention-causal-d64",
        AttentionProgram("f16", 64, 64, causal=True),
        {"heads": 3, "seq": 200},
        (0.125,),
        CompileOptions(2, 1, 2, False, "tma"),
    ),
    (
        "attention-full-d128",
        AttentionProgram("f16", 128, 64, causal=False),
        {"heads": 2, "seq": 190},
        (0.09,),
        CompileOptions(2, 1, 2, False, "tma"),
    ),
]


@pytest.mark.parametrize(
    ("name", "program", "shape", "scalars", "options"), CASES, ids=[c[0] for c in CASES]
)
def test_tma_store_epilogue_matches_numpy(
    name: str,
    program: Program,
    shape: dict[str, int],
    scalars: tuple[float, ...],
    options: CompileOptions,
) -> None:
    module = parse_module(make_context(), program.tile_ir(), f"{name}.mlir")
    kernel = compile_to_ptx(module, options)
    assert "cp.async.bulk.tensor" in kernel.ptx and ".global.shared::cta" in kernel.ptx
    assert "nvgpu.fragment_store_global" not in kernel.ir["nvgpu"]

    args = program.make_inputs(shape, 7, "small", list(scalars))
    out = program.output_index()
    bounds = program.expected(shape, args)
    kernel_op = next(iter(parse_module(make_context(), program.tile_ir(), "k.mlir").ops))
    launch_args = []
    for arg, param in zip(args, kernel_op.body.block.args, strict=True):  # type: ignore[attr-defined]
        block_shape = getattr(param.type, "get_block_shape", None)
        launch_args.append(TensorDescriptor.from_tensor(arg, block_shape()) if block_shape else arg)
    kernel.launch(program.grid(shape), *launch_args)
    bad = bounds.violations(args[out])
    assert not bad.any(), (
        f"{int(bad.sum())} of {bad.size} elements outside the numpy bounds, first at "
        f"{tuple(int(i) for i in next(zip(*bad.nonzero(), strict=True)))}"
    )


@tawa_xdsl.jit
def gemm_softmax(
    a_desc, b_desc, c_desc, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """C = softmax2(A @ B^T) along each row (base 2), for N <= BLOCK_N: one program per row
    block, columns past N masked out."""
    off_m = tl.program_id(0) * BLOCK_M
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([0, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    cols = tl.arange(0, BLOCK_N)
    acc = tl.where(cols[None, :] < N, acc, float("-inf"))
    p = tl.exp2(acc - tl.max(acc, 1)[:, None])
    c_desc.store([off_m, 0], (p / tl.sum(p, 1)[:, None]).to(tl.float16))


def gemm_softmax_module(block_m: int = 128, block_n: int = 128, block_k: int = 64) -> ModuleOp:
    """The tile IR of `gemm_softmax` for f16 operands (a fresh module)."""
    kernel = gemm_softmax.compile(
        DescriptorArg(tl.float16, (block_m, block_k)),
        DescriptorArg(tl.float16, (block_n, block_k)),
        DescriptorArg(tl.float16, (block_m, block_n)),
        ScalarArg(tl.int32),
        ScalarArg(tl.int32),
        ScalarArg(tl.int32),
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
    )
    return parse_module(make_context(), str(kernel.module), "gemm_softmax.mlir")


@pytest.mark.parametrize("epilogue", ["global", "tma"])
def test_gemm_with_a_softmax_epilogue_matches_numpy(epilogue: str) -> None:
    m, n, k = 300, 104, 200
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((m, k)) / 4).astype(np.float16)
    b = (rng.standard_normal((n, k)) / 4).astype(np.float16)
    c = np.zeros((m, n), np.float16)
    kernel = compile_to_ptx(gemm_softmax_module(), CompileOptions(3, 2, 2, False, epilogue))
    assert ("cp.async.bulk.tensor.2d.global" in kernel.ptx) == (epilogue == "tma")
    descs = [
        TensorDescriptor.from_tensor(x, list(shape))
        for x, shape in ((a, (128, 64)), (b, (128, 64)), (c, (128, 128)))
    ]
    kernel.launch((-(-m // 128), 1, 1), *descs, m, n, k)
    s = a.astype(np.float64) @ b.astype(np.float64).T
    p = np.exp2(s - s.max(axis=1, keepdims=True))
    expected = p / p.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(c.astype(np.float64), expected, atol=2e-3, rtol=1e-2)
