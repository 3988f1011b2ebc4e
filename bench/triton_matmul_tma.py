"""A persistent Triton matmul reading A and B and writing C through host TMA descriptors: the
GEMM peer of ANCHORS.md ("Triton 3.6 persistent matmul with TMA descriptors, best of a few
configs") that bench/gemm.py times beside cuBLAS and ours as `triton`.

C = A @ B^T with A [M, K], B [N, K] (both K-major, as ours and cuBLAS read them) and C [M, N].
One program per SM walks the output tiles in grouped order (GROUP_M tile rows per group, so the
programs running together share A and B tiles through L2), each tile a K loop of
`tl.dot` on TMA loads and one TMA store. `best(...)` times every config of `CONFIGS` (tile,
ring depth, warps, whether Triton warp-specializes the tile loop) and returns the fastest; a
config that does not compile or run is skipped with its error kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _tile_origin(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """Row and column tile of the tile-th output tile in grouped order."""
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    within = tile % per_group
    return first_m + within % rows, within // rows


@triton.jit
def _matmul_persistent(
    a_desc, b_desc, c_desc, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
):  # fmt: skip
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    steps = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(
        tl.program_id(0), tiles_m * tiles_n, NUM_SMS, flatten=True,
        warp_specialize=WARP_SPECIALIZE,
    ):  # fmt: skip
        pid_m, pid_n = _tile_origin(tile, tiles_m, tiles_n, GROUP_M)
        off_m, off_n = pid_m * BLOCK_M, pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for step in range(steps):
            a = a_desc.load([off_m, step * BLOCK_K])
            b = b_desc.load([off_n, step * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


class MatmulConfig(NamedTuple):
    block_m: int
    block_n: int
    block_k: int
    group_m: int
    stages: int
    warps: int
    warp_specialize: bool


CONFIGS = [  # Hopper shapes Triton's persistent matmul is usually run with
    MatmulConfig(128, 256, 64, 8, 3, 8, False),
    MatmulConfig(128, 256, 64, 8, 4, 8, False),
    MatmulConfig(128, 128, 64, 8, 4, 8, False),
    MatmulConfig(128, 128, 128, 8, 3, 8, False),
    MatmulConfig(128, 256, 64, 8, 3, 8, True),
    MatmulConfig(128, 128, 64, 8, 4, 8, True),
]
FP8_CONFIGS = [  # the same tiles with twice the K per step (one byte per element)
    MatmulConfig(c.block_m, c.block_n, 2 * c.block_k, c.group_m, c.stages, c.warps,
                 c.warp_specialize)
    for c in CONFIGS
]  # fmt: skip


def launcher(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, config: MatmulConfig) -> Callable:
    """A closure that runs C = A @ B^T with `config` (descriptors built once)."""
    m, k = a.shape
    n = b.shape[0]
    a_desc = TensorDescriptor.from_tensor(a, [config.block_m, config.block_k])
    b_desc = TensorDescriptor.from_tensor(b, [config.block_n, config.block_k])
    c_desc = TensorDescriptor.from_tensor(c, [config.block_m, config.block_n])
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    tiles = triton.cdiv(m, config.block_m) * triton.cdiv(n, config.block_n)
    programs = (min(sms, tiles),)

    def run() -> None:
        _matmul_persistent[programs](
            a_desc, b_desc, c_desc, m, n, k,
            BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
            GROUP_M=config.group_m, NUM_SMS=programs[0],
            WARP_SPECIALIZE=config.warp_specialize,
            num_stages=config.stages, num_warps=config.warps,
        )  # fmt: skip

    return run


def best(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, timer: Callable[[Callable], float]
) -> tuple[float | None, MatmulConfig | None, dict[str, str]]:
    """(milliseconds, config) of the fastest config that runs and matches torch, and the
    one-line error of each config that does not."""
    configs = FP8_CONFIGS if a.dtype == torch.float8_e4m3fn else CONFIGS
    reference = a.float() @ b.float().T
    fastest: tuple[float | None, MatmulConfig | None] = (None, None)
    failed: dict[str, str] = {}
    for config in configs:
        try:
            run = launcher(a, b, c, config)
            c.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            err = ((c.float() - reference).norm() / reference.norm()).item()
            if not err < 2e-2:
                raise ValueError(f"relative error {err}")
            ms = timer(run)
        except Exception as exc:  # noqa: BLE001 (a config this Triton cannot build or run)
            failed[str(tuple(config))] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            continue
        if fastest[0] is None or ms < fastest[0]:
            fastest = (ms, config)
    return fastest[0], fastest[1], failed
