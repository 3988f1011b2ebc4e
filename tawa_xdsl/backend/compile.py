"""Tile IR -> PTX, plus everything the runtime needs to launch the result.

    from tawa_xdsl.backend.compile import CompileOptions, compile_to_ptx
    kernel = compile_to_ptx(tile_module, CompileOptions(stages=4, mma_depth=2, consumers=2))
    kernel.ptx                     # the PTX text (.version 8.0, .target sm_90a)
    kernel.ir["nvgpu"]             # the IR of every stage: "aref", "mbarrier", "nvgpu", "ptx"
    kernel.launch(grid, a, b, c, M, N, K)          # on the GPU (tawa_xdsl.runtime)

The pipeline is the one `tawa-opt` runs: `tawa-warp-specialize{...}`, `lower-aref`,
`lower-to-nvgpu`, then the `ptx` target.

Kernel parameters (`CompiledKernel.params`, from `emit_ptx.kernel_params`): a scalar argument
is one `.param`; a `!tile.desc` argument is five for rank 2 -- the CUtensorMap by value, the
global pointer, the extent of each dim (outermost first) and the row stride in elements.
`launch` builds them from a device tensor (torch, `__cuda_array_interface__`, DeviceArray) or
a `tawa_xdsl.TensorDescriptor` over a numpy array (copied in, and back out after the launch).
Tensor maps use the block shape of the descriptor type as their box, and the 128-byte swizzle
when the kernel's TMA copies land in 128B-swizzled slots (`tensor_maps`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32

from tawa_xdsl.backend.emit_ptx import THREADS_ATTR, KernelParam, SmemPlan, emit_ptx, kernel_params
from tawa_xdsl.diagnostics import TawaError
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.dialects.tile import DescType

Grid = tuple[int, int, int]

# The most dynamic shared memory one block may use on sm_90 (227 KiB, the opt-in limit).
SM90_MAX_SMEM_BYTES = 232448


@dataclass(frozen=True)
class CompileOptions:
    """The warp-specialization options (see `tawa-warp-specialize`)."""

    stages: int = 4  # ring depth D
    mma_depth: int = 2  # MMA depth P
    consumers: int = 2  # consumer warpgroups cooperating on one tile
    persistent: bool = False  # one program per SM looping over tiles
    epilogue: str = "global"  # "global" (st.global) or "tma" (st.shared + TMA store)
    verify: bool = True  # prove every ring's barrier protocol after lower-aref (tawa_xdsl.verify)
    # setmaxnreg per thread, (producer, consumer); None keeps the groups' defaults (40, 232).
    # One producer and `consumers` consumer warpgroups must fit 64K: (p + c * n) * 128 <= 65536.
    registers: tuple[int, int] | None = None
    # attention: the two consumer warpgroups take turns issuing their MMAs (named barriers)
    pingpong: bool = False


@dataclass(frozen=True)
class TensorMapInfo:
    """How to encode the tensor map of one descriptor argument."""

    arg: int
    box: tuple[int, ...]  # numpy order (outermost first): the descriptor's block shape
    swizzle: int  # bytes: 0 or 128


@dataclass
class CompiledKernel:
    """A kernel ready to launch: PTX text, entry name, params, smem and grid rules."""

    ptx: str
    name: str
    params: list[KernelParam]
    tensor_maps: dict[int, TensorMapInfo]
    smem_bytes: int
    threads: int
    persistent: bool
    arg_count: int  # user-visible arguments (persistent kernels take 3 more, appended here)
    ir: dict[str, str] = field(default_factory=dict)

    def grid(self, grid: Sequence[int] | int, sms: int = 132) -> tuple[Grid, list[int]]:
        """The launch grid for the logical `grid`, and the extra trailing arguments."""
        dims = [grid] if isinstance(grid, int) else list(grid)
        dims = (dims + [1, 1])[:3]
        if self.persistent:
            from tawa_xdsl.transforms.persistent import persistent_launch

            return persistent_launch(dims, sms)
        return (dims[0], dims[1], dims[2]), []

    def launch_args(self, args: Sequence[Any]) -> list[Any]:
        """One runtime value per `.param`, from the kernel's arguments in signature order."""
        from tawa_xdsl import runtime as rt

        values: list[Any] = []
        for p in self.params:
            arg = args[p.arg]
            if p.field == "value":
                values.append(arg)
                continue
            view = rt.describe(arg, p.name)
            if p.field == "tensormap":
                info = self.tensor_maps[p.arg]
                values.append(
                    rt.tensor_map(arg, info.box, swizzle=info.swizzle or None, name=p.name)
                )
            elif p.field == "ptr":
                values.append(view.pointer)
            elif p.field.startswith("dim"):
                values.append(int(view.shape[int(p.field[3:])]))
            else:
                values.append(int(view.strides[int(p.field[6:])]))
        return values

    def prepare(self, grid: Sequence[int] | int, *args: Any, stream: Any = 0) -> Callable[[], None]:
        """A launcher with tensor maps and the parameter buffers built once (for timing);
        descriptor arguments must be device tensors here."""
        from tawa_xdsl import runtime as rt

        device = rt.require_gpu()
        launch_grid, extra = self.grid(grid, device_sms(device))
        kernel = rt.load_kernel(self.ptx, self.name)
        config = rt.LaunchConfig.make(launch_grid, self.threads, self.smem_bytes, 1, stream)
        return rt.prepare_launch(kernel, config, *self.launch_args([*args, *extra]))

    def launch(self, grid: Sequence[int] | int, *args: Any, stream: Any = 0) -> None:
        """Launch on the current GPU. Descriptor arguments are device tensors, or
        `TensorDescriptor`s over numpy arrays (copied to the GPU and back)."""
        from tawa_xdsl import runtime as rt

        device = rt.require_gpu()
        launch_grid, extra = self.grid(grid, device_sms(device))
        if 0 in launch_grid:
            return  # no program instances: nothing to run (a zero grid is a driver error)
        staged, host = [], []
        for a in args:
            base = getattr(a, "base", None)
            if base is not None and hasattr(a, "block_shape") and hasattr(base, "ctypes"):
                dev = rt.to_device(base if base.size else empty_tensor_stand_in(base))
                staged.append(dev)
                if base.size:
                    host.append((base, dev))
            else:
                staged.append(a)
        kernel = rt.load_kernel(self.ptx, self.name)
        rt.launch(
            kernel,
            launch_grid,
            self.threads,
            *self.launch_args([*staged, *extra]),
            shared_bytes=self.smem_bytes,
            stream=stream,
        )
        for base, dev in host:
            rt.to_host(dev, out=base)


def empty_tensor_stand_in(array: Any) -> Any:
    """What to describe in place of an array with no elements, which a TMA map cannot: zeros of
    one element per dim but the last (16 bytes long, the TMA stride unit). Every element of the
    empty array is out of bounds, so its loads read zeros; the stand-in's in-bounds elements are
    zeros too, and what stores write into it is thrown away."""
    import numpy as np

    shape = (1,) * (array.ndim - 1) + (max(1, 16 // array.itemsize),)
    return np.zeros(shape, array.dtype)


def device_sms(device: Any) -> int:
    """The SM count of `device` (132 when it cannot be asked)."""
    for name in ("multiprocessors", "sm_count", "num_sms"):
        value = getattr(device, name, None)
        if value is not None:
            return int(value() if callable(value) else value)
    return 132


def tensor_map_info(kernel: func.FuncOp) -> dict[int, TensorMapInfo]:
    """Box and swizzle of every descriptor argument (128B when its TMA slots are swizzled)."""
    swizzle: dict[int, int] = {}
    for op in kernel.walk():
        if isinstance(op, nvgpu.TmaLoadOp | nvgpu.TmaStoreOp):
            buf = op.buf.type
            assert isinstance(buf, nvgpu.SmemType)
            index = kernel.body.block.args.index(op.desc)  # type: ignore[arg-type]
            swizzle[index] = buf.swizzle_bytes
    infos = {}
    for arg in kernel.body.block.args:
        if isinstance(arg.type, DescType):
            box, span = arg.type.get_block_shape(), swizzle.get(arg.index, 0)
            if span:  # rows wider than the span are copied one 128-byte column slab per box
                inner = span // nvgpu.element_bytes(arg.type.element_type)
                box = (*box[:-1], min(box[-1], inner))
            infos[arg.index] = TensorMapInfo(arg.index, box, span)
    return infos


def _run(passes: Sequence[Any], module: ModuleOp) -> ModuleOp:
    from tawa_xdsl.dialects import make_context

    ctx = make_context()
    for p in passes:
        p.apply(ctx, module)
    module.verify()
    return module


def set_registers(module: ModuleOp, producer: int, consumer: int) -> None:
    """Give every `aref.group` of `module` its role's setmaxnreg budget (see CompileOptions)."""
    from tawa_xdsl.dialects import aref

    for op in module.walk():
        if isinstance(op, aref.WarpSpecializeOp):
            groups = list(op.groups())
            total = sum(
                (producer if g.role.data == aref.Role.PRODUCER else consumer) * g.num_warpgroups
                for g in groups
            )
            if total * 128 > 65536:
                raise ValueError(
                    f"registers ({producer}, {consumer}) over {len(groups)} groups need "
                    f"{total * 128} > 65536 per SM"
                )
            for g in groups:
                count = producer if g.role.data == aref.Role.PRODUCER else consumer
                g.registers = IntegerAttr(count, i32)


def compile_to_ptx(
    module: ModuleOp,
    options: CompileOptions | None = None,
    on_stage: Callable[[str, str], None] | None = None,
) -> CompiledKernel:
    """Compile a tile-level module holding one kernel; the input module is not modified."""
    opts = options or CompileOptions()
    ir: dict[str, str] = {"tile": str(module)}
    kernels = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(kernels) != 1:
        raise ValueError(f"compile_to_ptx needs a module with one kernel, got {len(kernels)}")
    arg_count = len(kernels[0].body.block.args)
    ws = lower_to_nvgpu_level(module, opts, ir)
    ptx = emit_ptx(ws)
    ir["ptx"] = ptx
    if on_stage is not None:
        for stage, text in ir.items():
            on_stage(stage, text)
    kernel = next(op for op in ws.ops if isinstance(op, func.FuncOp))
    threads = kernel.attributes[THREADS_ATTR]
    smem_bytes = SmemPlan.of(kernel).bytes
    if smem_bytes > SM90_MAX_SMEM_BYTES:
        raise TawaError(
            f"@{kernel.sym_name.data}: error: needs {smem_bytes} bytes "
            f"of shared memory with {opts.stages}-deep rings; an sm_90 block may use at most "
            f"{SM90_MAX_SMEM_BYTES}: use fewer stages or smaller blocks"
        )
    return CompiledKernel(
        ptx=ptx,
        name=kernel.sym_name.data,
        params=kernel_params(kernel),
        tensor_maps=tensor_map_info(kernel),
        smem_bytes=smem_bytes,
        threads=threads.value.data,  # type: ignore[attr-defined]
        persistent=opts.persistent,
        arg_count=arg_count,
        ir=ir,
    )


def lower_to_nvgpu_level(
    module: ModuleOp, opts: CompileOptions, ir: dict[str, str] | None = None
) -> ModuleOp:
    """The pipeline of `compile_to_ptx` up to the nvgpu level (a new module); the IR of each
    stage ("aref", "mbarrier", "nvgpu") goes into `ir` when given."""
    from tawa_xdsl.transforms.lower_aref import LowerArefPass
    from tawa_xdsl.transforms.lower_to_nvgpu import LowerToNvgpuPass
    from tawa_xdsl.transforms.warp_specialize import warp_specialize

    stages = ir if ir is not None else {}
    ws = warp_specialize(
        module,
        stages=opts.stages,
        mma_depth=opts.mma_depth,
        consumers=opts.consumers,
        persistent=opts.persistent,
    )
    if opts.registers is not None:
        set_registers(ws, *opts.registers)
    stages["aref"] = str(ws)
    _run([LowerArefPass()], ws)
    stages["mbarrier"] = str(ws)
    if opts.verify:
        from tawa_xdsl.verify.check import check_module

        check_module(ws)  # raises a one-line ProtocolError when a ring can go wrong
    _run([LowerToNvgpuPass(epilogue=opts.epilogue, pingpong=opts.pingpong)], ws)
    stages["nvgpu"] = str(ws)
    return ws


def shared_memory_need(module: ModuleOp, options: CompileOptions) -> int:
    """The dynamic shared memory (bytes) `compile_to_ptx(module, options)` gives the kernel,
    which it refuses above `SM90_MAX_SMEM_BYTES`; compiled to the nvgpu level only."""
    ws = lower_to_nvgpu_level(module, replace(options, verify=False))
    kernel = next(op for op in ws.ops if isinstance(op, func.FuncOp))
    return SmemPlan.of(kernel).bytes


def options_from_launch(options: dict[str, Any]) -> CompileOptions:
    """CompileOptions from Triton-style launch options (`num_stages` -> D,
    `num_consumer_groups` -> consumers) and tawa's own (`mma_depth`, `persistent`,
    `epilogue`)."""
    default = CompileOptions()
    return CompileOptions(
        stages=int(options.get("num_stages") or default.stages),
        mma_depth=int(options.get("mma_depth") or default.mma_depth),
        consumers=int(options.get("num_consumer_groups") or default.consumers),
        persistent=bool(options.get("persistent", default.persistent)),
        epilogue=str(options.get("epilogue") or default.epilogue),
    )
