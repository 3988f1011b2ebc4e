"""`tawa-warp-specialize`: the whole tile -> aref pipeline as one pass.

Python API (stable; the aref-interpreter tests call it):

    from tawa_xdsl.transforms.warp_specialize import warp_specialize
    ws_module = warp_specialize(module, stages=3, mma_depth=2, consumers=2, persistent=False)

`warp_specialize` clones `module` (the input is left untouched), runs, in order,
`split-masked-loops` (unless split_loops=False), `fold-grid` (only when fold=True),
`persistent` (only when persistent=True), `partition`, `insert-aref`,
`ring-depth{stages=..}`, `distribute`, `cooperative-consumers{consumers=..}`,
`software-pipeline` (only when attention=True), `mma-lag{mma-depth=..}` and `place-releases`,
verifies the IR after each and returns the result. The same as a pass: `tawa-opt k.mlir -p
'tawa-warp-specialize{stages=3 mma-depth=2 consumers=2 persistent=true}'`, or
`WarpSpecializePass(...).apply(ctx, module)`.

Launching the result: the kernel keeps its signature and grid, except with fold=True, where
one trailing i32 argument, the grid's x extent, is appended and the kernel is launched over
half of it (`fold_launch(grid)`), and with persistent=True, where three trailing i32
arguments are appended, the logical grid (g0, g1, g2) the non-persistent kernel would have
been launched with (after folding), and the kernel is launched with grid = (number of SMs,
1, 1) (any positive count is correct). `persistent_launch(grid, sms)` returns (launch_grid,
extra_args); `CompiledKernel.grid` applies both.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32
from xdsl.passes import ModulePass

from tawa_xdsl.diagnostics import verify_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.dialects.nvgpu import CTAS_PER_SM_ATTR, MAX_CTAS_PER_SM
from tawa_xdsl.transforms.cooperative_consumers import CooperativeConsumersPass
from tawa_xdsl.transforms.distribute import DistributePass
from tawa_xdsl.transforms.fold_grid import FoldGridPass
from tawa_xdsl.transforms.insert_aref import InsertArefPass
from tawa_xdsl.transforms.mma_lag import MmaLagPass
from tawa_xdsl.transforms.partition import PartitionPass
from tawa_xdsl.transforms.persistent import PersistentPass, persistent_launch
from tawa_xdsl.transforms.place_releases import PlaceReleasesPass
from tawa_xdsl.transforms.ring_depth import RingDepthPass
from tawa_xdsl.transforms.smem_budget import check_shared_memory
from tawa_xdsl.transforms.software_pipeline import SoftwarePipelinePass
from tawa_xdsl.transforms.split_masked_loops import SplitMaskedLoopsPass
from tawa_xdsl.transforms.ws_utils import error, find_kernel

__all__ = ["WarpSpecializePass", "persistent_launch", "warp_specialize"]


@dataclass(frozen=True)
class WarpSpecializePass(ModulePass):
    """The tile -> aref pipeline: [split-masked-loops,] [fold-grid,] [persistent,] partition,
    insert-aref,
    ring-depth, distribute, cooperative-consumers, [software-pipeline,] mma-lag,
    place-releases.

    Options:
      stages: int | None = 3    ring depth D (how far the producer may run ahead; None:
                                the deepest that fits shared memory, see ring-depth).
      mma_depth: int | None = 2  MMA depth P: uses a consumer holds before releasing the
                                 oldest (None: chosen per loop, see mma-lag).
      consumers: int | None = 1  consumer warpgroups cooperating on one tile (1, 2 or 3; None:
                                 chosen from the tile rows, see cooperative-consumers).
      fold: bool = False         each program runs its body for itself and its mirror along x
                                 (fold-grid: the grid's x halved, an even deal where the work
                                 grows along x).
      persistent: bool = False   loop each program over output tiles (grid = #SMs).
      tile_order: str = "xyz"    the persistent walk's axes, the fastest first (persistent).
      attention: bool = True     software-pipeline the attention consumer (QK^T of j+1 before
                                 softmax of j); other kernels are left alone.
      rotate: bool = False       software-pipeline's rotation (the softmax of j+1 under
                                 P V(j), FA3's two-stage pipeline).
      epilogue: str = "global"   lower-to-nvgpu's epilogue (its staging buffers count
                                 against the shared memory the rings may take).
      pingpong: bool = False     lower-to-nvgpu's ping-pong turns (ring-depth: D >= 2).
      split_loops: bool = True   split loops where their masks stop holding (the iterations
                                 before without the selects, see split-masked-loops).
      ctas_per_sm: int = 1       CTAs sharing each SM (1..4), written on the kernel as
                                 `tawa.ctas_per_sm`: ring-depth, cooperative-consumers and
                                 set-registers fit one CTA's share of shared memory and
                                 registers, the printer asks ptxas for that occupancy.
      peel: bool = False         with rotate: software-pipeline's peeled last iteration (the
                                 loop to ub - step; refused with pingpong, whose turns
                                 take the guarded rotation).
    """

    name = "tawa-warp-specialize"

    stages: int | None = 3
    mma_depth: int | None = 2
    consumers: int | None = 1
    persistent: bool = False
    attention: bool = True
    epilogue: str = "global"
    rotate: bool = False
    pingpong: bool = False
    split_loops: bool = True
    tile_order: str = "xyz"
    ctas_per_sm: int = 1
    peel: bool = False
    fold: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        kernel = find_kernel(op, self.name)
        if not 1 <= self.ctas_per_sm <= MAX_CTAS_PER_SM:
            raise error(
                kernel,
                self.name,
                f"ctas-per-sm must be 1..{MAX_CTAS_PER_SM}, got {self.ctas_per_sm}",
            )
        if self.peel and self.pingpong:
            raise error(
                kernel,
                self.name,
                "peel and pingpong together: the ping-pong turns take the guarded rotation "
                "(the named-barrier proof does not model a loop to ub - step); set peel=False",
            )
        if self.ctas_per_sm > 1:
            kernel.attributes[CTAS_PER_SM_ATTR] = IntegerAttr(self.ctas_per_sm, i32)
        passes: list[ModulePass] = [SplitMaskedLoopsPass()] if self.split_loops else []
        passes += [FoldGridPass()] if self.fold else []
        passes += [PersistentPass(order=self.tile_order)] if self.persistent else []
        passes += [
            PartitionPass(),
            InsertArefPass(),
            RingDepthPass(stages=self.stages, epilogue=self.epilogue, pingpong=self.pingpong),
            DistributePass(),
            CooperativeConsumersPass(consumers=self.consumers),
        ]
        if self.attention:
            passes.append(SoftwarePipelinePass(rotate=self.rotate, peel=self.peel))
        passes += [MmaLagPass(mma_depth=self.mma_depth), PlaceReleasesPass()]
        for p in passes:
            p.apply(ctx, op)
            verify_module(op)
        # the ring depth is known: refuse before any proof or lowering
        check_shared_memory(op, epilogue=self.epilogue)


def warp_specialize(
    module: ModuleOp,
    stages: int | None = 3,
    mma_depth: int | None = 2,
    consumers: int | None = 1,
    persistent: bool = False,
    attention: bool = True,
    epilogue: str = "global",
    split_loops: bool = True,
    rotate: bool = False,
    tile_order: str = "xyz",
    fold: bool = False,
) -> ModuleOp:
    """A warp-specialized copy of `module` (see the module docstring)."""
    result = module.clone()
    WarpSpecializePass(
        stages, mma_depth, consumers, persistent, attention, epilogue, rotate,
        split_loops=split_loops, tile_order=tile_order, fold=fold,
    ).apply(make_context(), result)  # fmt: skip
    return result
