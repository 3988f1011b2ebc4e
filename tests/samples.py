"""Aref-level GEMMs for the barrier tests, the verifier and the mutation suite.

`gemm_aref(depth, mma_depth, consumers, persistent)` is the library GEMM
(`tawa_xdsl.kernels.gemm`, C = A @ B^T with A: M x K, B: N x K in f16 and C in f32) on
BM x BN x BK tiles, lowered by the compile pipeline to the aref level with those options: one
producer warpgroup putting (A, B) tiles into a ring of `depth` slots, `consumers` consumer
warpgroups splitting each tile's rows, the release of use i lagged by mma_depth - 1 uses
(drained after the loop) and, when `persistent`, a loop over output tiles (programs stride by
the grid) whose use counters continue across tiles. A `depth` below `mma_depth` (a lag the
aref dialect refuses) is the `mma_depth`-deep kernel with its rings shrunk (`shrink_rings`).
Launch with `gemm_args`.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.rewriter import Rewriter

import tawa_xdsl.language as tl
from tawa_xdsl.compiler import CompileOptions, pipeline
from tawa_xdsl.dialects import aref, make_context
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg
from tawa_xdsl.kernels.gemm import gemm
from tawa_xdsl.transforms.persistent import persistent_launch

# 128 rows split into one 64-row part per consumer warpgroup, for 1 or 2 consumers.
BM, BN, BK = 128, 16, 16


def gemm_aref(
    depth: int = 2, mma_depth: int = 1, consumers: int = 1, persistent: bool = False
) -> str:
    """The aref-level text of the library GEMM for these pipeline options."""
    kernel = gemm.compile(
        DescriptorArg(tl.float16, (BM, BK)),
        DescriptorArg(tl.float16, (BN, BK)),
        DescriptorArg(tl.float32, (BM, BN)),
        ScalarArg(tl.int32),
        ScalarArg(tl.int32),
        ScalarArg(tl.int32),
        BLOCK_M=BM,
        BLOCK_N=BN,
        BLOCK_K=BK,
        GROUP_M=1,
    )
    module = kernel.module.clone()
    options = CompileOptions(
        stages=max(depth, mma_depth),
        mma_depth=mma_depth,
        consumers=consumers,
        persistent=persistent,
    )
    ctx = make_context()
    for level, step in pipeline(options):
        if level == "aref":
            step.apply(ctx, module)
    if depth < mma_depth:
        shrink_rings(module, depth)
    return str(module)


def gemm_args(m_tiles: int, n_tiles: int, k_tiles: int, seed: int = 0, persistent: bool = False):
    """(a, b, c, scalars) for `gemm_aref`: scalars are (M, N, K), and for a persistent kernel
    the logical grid it walks; C's reference is a @ b.T in f32."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m_tiles * BM, k_tiles * BK)).astype(np.float16)
    b = rng.standard_normal((n_tiles * BN, k_tiles * BK)).astype(np.float16)
    c = np.zeros((m_tiles * BM, n_tiles * BN), np.float32)
    scalars = [m_tiles * BM, n_tiles * BN, k_tiles * BK]
    if persistent:
        scalars += persistent_launch(m_tiles * n_tiles, 1)[1]
    return a, b, c, scalars


def gemm_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) @ b.astype(np.float32).T


def shrink_rings(module: ModuleOp, depth: int) -> None:
    """Give every ring of `module` `depth` slots, unverified: a lag the aref dialect refuses
    (lag >= depth) planted for the levels below it (lower-aref, the interpreters, the proof)."""
    for create in [op for op in module.walk() if isinstance(op, aref.CreateOp)]:
        ring = create.ring.type
        assert isinstance(ring, aref.RingType)
        Rewriter.replace_value_with_new_type(
            create.ring, aref.RingType(ring.payload_types(), depth)
        )
