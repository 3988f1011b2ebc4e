"""The compile driver: tile IR -> PTX, from `CompileOptions`, the only source of options.

    from tawa_xdsl.compiler import CompileOptions, compile_to_ptx
    kernel = compile_to_ptx(tile_module, CompileOptions(stages=4, mma_depth=2, consumers=2))
    kernel.ptx                     # the PTX text (.version 8.0, .target sm_90a)
    kernel.ir["nvgpu"]             # the IR of every level: tile, aref, mbarrier, nvgpu, ptx
    kernel.launch(grid, a, b, c, M, N, K)          # on the GPU (tawa_xdsl.runtime.launch)

`pipeline(options)` is the one list of passes from the tile level to the nvgpu level, each with
the level its output is at; `emit_ptx` then prints the nvgpu module. `pipeline_text(options)`
spells the same list for `tawa-opt -p`, so `tawa-opt k.mlir -p "<pipeline_text>" -t ptx` runs
exactly what `compile_to_ptx` runs. With `options.verify` the barrier protocol of every ring is
proved on the nvgpu level, the IR `emit_ptx` prints (`verify.check.check_module`).

Options arrive in three spellings, all mapped here: `CompileOptions` fields; launch keywords of
`@jit` kernels and `autotune.Config`s (`LAUNCH_OPTIONS`: Triton's `num_stages` and
`num_consumer_groups`, the field name otherwise), read by `options_from_launch`; and the pass
options of `pipeline_text`. An unknown option is refused in one line naming it.

The compile result `CompiledKernel` is data for the runtime (PTX, entry name, the host value
of every `.param`, tensor-map boxes, shared memory, threads, the grid rule); launching it is
the runtime's (`tawa_xdsl.runtime.launch.launch_compiled`). `compile_cached` is
`compile_to_ptx` through the disk cache (`tawa_xdsl.runtime.cache`): the compile of every
launch path (`@jit`, `torch.ops.tawa`), so a kernel compiles and is proved once per machine.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from itertools import groupby
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tawa_xdsl.backend.emit_ptx import KernelParam, SmemPlan, emit_ptx, kernel_params
from tawa_xdsl.diagnostics import TawaError, verify_module
from tawa_xdsl.dialects import make_context, nvgpu
from tawa_xdsl.dialects.nvgpu import THREADS_ATTR, cta_smem_limit, smem_allowance
from tawa_xdsl.dialects.tile import DescType
from tawa_xdsl.runtime.cache import KernelCache, cache_key
from tawa_xdsl.runtime.launch import (
    Dim3,
    PreparedLaunch,
    TensorMapInfo,
    launch_compiled,
    prepare_compiled,
)
from tawa_xdsl.transforms.defer_row_sums import DeferRowSumsPass
from tawa_xdsl.transforms.emulate_exp2 import EmulateExp2Pass
from tawa_xdsl.transforms.fold_grid import fold_launch
from tawa_xdsl.transforms.legalize_nvgpu import LegalizeNvgpuPass
from tawa_xdsl.transforms.lower_aref import LowerArefPass
from tawa_xdsl.transforms.lower_to_nvgpu import LowerToNvgpuPass
from tawa_xdsl.transforms.persistent import persistent_launch
from tawa_xdsl.transforms.set_registers import SetRegistersPass
from tawa_xdsl.transforms.smem_budget import SharedMemoryError
from tawa_xdsl.transforms.warp_specialize import WarpSpecializePass
from tawa_xdsl.verify.check import check_module
from tawa_xdsl.verify.ptx_skeleton import validate_ptx


@dataclass(frozen=True)
class CompileOptions:
    """Every option of the compile pipeline (see `pipeline`)."""

    # ring depth D; None: the deepest up to 4 that fits shared memory (ring-depth)
    stages: int | None = None
    # MMA depth P; None: 2 where a loop's accumulators are its MMAs' alone, else 1 (mma-lag)
    mma_depth: int | None = None
    # consumer warpgroups cooperating on one tile (1, 2 or 3); None: 3 for tiles of 192 rows,
    # 2 for 128 or 256, 1 for 64 (chosen by cooperative-consumers and written into the IR)
    consumers: int | None = None
    persistent: bool = False  # one program per SM looping over tiles
    epilogue: str = "global"  # "global" (st.global) or "tma" (st.shared + TMA store)
    verify: bool = True  # prove every ring's barrier protocol after lower-aref (tawa_xdsl.verify)
    # setmaxnreg per thread, (producer, consumer); None: chosen by set-registers (the groups'
    # defaults, 40, 232 and 24, 160 over three consumer warpgroups, unless the consumers'
    # tiles need more: then 24 and the rest).
    # One producer and `consumers` consumer warpgroups must fit 64K: (p + c * n) * 128 <= 65536.
    registers: tuple[int, int] | None = None
    # attention: the consumer warpgroups take turns issuing their MMAs (named barriers; two,
    # or three in a rotated loop; refused for a group of any other count)
    pingpong: bool = False
    # rotate a loop of two chained MMAs (software-pipeline; attention's key loop): QK^T(j+1)
    # and P V(j) issued back to back, the softmax of j+1 under P V(j) (FlashAttention-3's
    # two-stage pipeline); loops of another shape are left as they are
    rotate: bool = True
    # with rotate: the rotated loop runs to ub - step with no branch in its body, and the last
    # iteration's P V follows it under lb < ub (software-pipeline's peeled form); None: peeled
    # unless pingpong (whose turns take the guarded rotation)
    peel: bool | None = None
    # split each loop where its masks stop holding for every lane (split-masked-loops): the
    # iterations before run a body without the selects (attention's unmasked key blocks)
    split_loops: bool = True
    # the persistent walk's grid axes, the fastest first ("yxz": every y of one x first)
    tile_order: str = "xyz"
    # eighths of an exp2's values computed by a polynomial on the FMA units instead of the
    # MUFU unit; None: chosen per loop by emulate-exp2 (only where its exp2s keep the MUFU
    # unit busier than its dots keep the tensor cores; none of the library's kernels)
    exp2_emulation: int | None = None
    # CTAs sharing each SM: each fits 1/N of the registers and shared memory, and a persistent
    # launch starts N programs per SM (two 128 x 128 GEMM CTAs overlap one's epilogue with the
    # other's MMAs)
    ctas_per_sm: int = 1
    # each program runs the body for itself and its mirror along x (fold-grid; the grid's x
    # halved): where the work grows along x (causal attention's row blocks), every program the
    # same work
    fold: bool = False

    def __post_init__(self) -> None:
        for option in fields(self):
            value = getattr(self, option.name)
            check, what = OPTION_TYPES[option.name]
            if not check(value):  # ranges are the passes' to check
                raise TypeError(f"compile option {option.name}: expected {what}, got {value!r}")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def is_str(value: Any) -> bool:
    return isinstance(value, str)


def is_axis_order(value: Any) -> bool:
    return isinstance(value, str) and sorted(value) == ["x", "y", "z"]


def is_registers(value: Any) -> bool:
    return value is None or (
        isinstance(value, tuple) and len(value) == 2 and all(map(is_int, value))
    )


def is_bool_or_none(value: Any) -> bool:
    return value is None or is_bool(value)


def is_int_or_none(value: Any) -> bool:
    return value is None or is_int(value)


INT, BOOL = (is_int, "an int"), (is_bool, "a bool")
CHOSEN = (is_int_or_none, "an int")  # None: chosen by the compiler
OPTION_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "stages": CHOSEN,
    "mma_depth": CHOSEN,
    "consumers": CHOSEN,
    "fold": BOOL,
    "persistent": BOOL,
    "ctas_per_sm": INT,
    "tile_order": (is_axis_order, 'a permutation of "xyz"'),
    "epilogue": (is_str, '"global" or "tma"'),
    "verify": BOOL,
    "registers": (is_registers, "None or (producer, consumer) ints"),
    "pingpong": BOOL,
    "rotate": BOOL,
    "peel": (is_bool_or_none, "a bool or None"),
    "split_loops": BOOL,
    "exp2_emulation": CHOSEN,
}

# Launch keyword -> CompileOptions field: Triton's name where Triton has the option.
LAUNCH_NAMES = {"stages": "num_stages", "consumers": "num_consumer_groups"}
LAUNCH_OPTIONS: dict[str, str] = {
    LAUNCH_NAMES.get(f.name, f.name): f.name for f in fields(CompileOptions)
}
# Triton launch options that tawa kernels do not take, and what decides the same thing here.
NOT_TAWA_OPTIONS = {
    "num_warps": "the warps follow from num_consumer_groups (one producer warpgroup and "
    "1 or 2 consumer warpgroups)",
    "num_ctas": "kernels run one CTA per program (no clusters yet)",
    "maxnreg": "use registers=(producer, consumer)",
}


def unknown_option(name: str) -> str:
    """The one line refusing launch option `name`."""
    if name in NOT_TAWA_OPTIONS:
        return f"launch option '{name}' is Triton's, not tawa's: {NOT_TAWA_OPTIONS[name]}"
    return f"unknown launch option '{name}'; launch options: {', '.join(LAUNCH_OPTIONS)}"


def options_from_launch(options: Mapping[str, Any]) -> CompileOptions:
    """CompileOptions from launch keywords (`LAUNCH_OPTIONS`); an option set to None takes
    its default. TypeError naming the first unknown or ill-typed option."""
    values = {}
    for name, value in options.items():
        if name not in LAUNCH_OPTIONS:
            raise TypeError(unknown_option(name))
        if value is None:
            continue
        if isinstance(value, list):  # JSON (autotune's disk cache) has no tuples
            value = tuple(value)
        check, what = OPTION_TYPES[LAUNCH_OPTIONS[name]]
        if not check(value):
            raise TypeError(f"launch option {name}: expected {what}, got {value!r}")
        values[LAUNCH_OPTIONS[name]] = value
    return CompileOptions(**values)


# ---------------------------------------------------------------------------- the pipeline


def pipeline(options: CompileOptions) -> list[tuple[str, ModulePass]]:
    """The passes from the tile level to the nvgpu level, in order, each with the level
    (a key of `CompiledKernel.ir`) its output is at."""
    return [
        (
            "aref",
            WarpSpecializePass(
                stages=options.stages,
                mma_depth=options.mma_depth,
                consumers=options.consumers,
                persistent=options.persistent,
                fold=options.fold,
                ctas_per_sm=options.ctas_per_sm,
                epilogue=options.epilogue,
                rotate=options.rotate,
                pingpong=options.pingpong,
                split_loops=options.split_loops,
                tile_order=options.tile_order,
                peel=not options.pingpong if options.peel is None else options.peel,
            ),
        ),
        ("aref", SetRegistersPass(*(options.registers or (None, None)))),
        ("aref", EmulateExp2Pass(share=options.exp2_emulation)),
        ("mbarrier", LowerArefPass()),
        ("nvgpu", LowerToNvgpuPass(epilogue=options.epilogue, pingpong=options.pingpong)),
        ("nvgpu", DeferRowSumsPass()),
        ("nvgpu", LegalizeNvgpuPass()),
    ]


def pipeline_text(options: CompileOptions) -> str:
    """`pipeline(options)` as a `tawa-opt -p` pipeline."""
    return ",".join(str(p.pipeline_pass_spec(include_default=True)) for _, p in pipeline(options))


def lower_to_nvgpu_level(
    module: ModuleOp, options: CompileOptions, ir: dict[str, str] | None = None
) -> ModuleOp:
    """`pipeline(options)` on a copy of `module` (returned); the IR of each level ("aref",
    "mbarrier", "nvgpu") goes into `ir` when given. With `options.verify` the rings are
    proved on the nvgpu level (a one-line `ProtocolError` otherwise)."""
    levels = ir if ir is not None else {}
    ctx = make_context()
    lowered = module.clone()
    for level, steps in groupby(pipeline(options), key=lambda step: step[0]):
        for _, step in steps:
            step.apply(ctx, lowered)
            verify_module(lowered)  # a broken op is named by its place, in one line
        levels[level] = str(lowered)
    if options.verify:
        check_module(lowered)  # the IR emit-ptx prints
    return lowered


# --------------------------------------------------------------------------- the result


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
    # user-visible arguments (a folded kernel takes 1 more, a persistent one 3, appended here)
    arg_count: int
    ir: dict[str, str] = field(default_factory=dict)
    ctas_per_sm: int = 1  # CTAs sharing an SM: a persistent launch starts that many per SM
    fold: bool = False  # launched over half the grid's x (fold-grid), its x extent appended

    def grid(self, grid: Sequence[int] | int, sms: int = 132) -> tuple[Dim3, list[int]]:
        """The launch grid for the logical `grid`, and the extra trailing arguments."""
        dims = [grid] if isinstance(grid, int) else list(grid)
        dims = (dims + [1, 1])[:3]
        extra: list[int] = []
        if self.fold:
            dims, extra = fold_launch(dims)
        if self.persistent:
            launch, walk = persistent_launch(dims, sms * self.ctas_per_sm)
            return launch, extra + walk
        return (dims[0], dims[1], dims[2]), extra

    def prepare(self, grid: Sequence[int] | int, *args: Any, stream: Any = 0) -> PreparedLaunch:
        """`runtime.launch.prepare_compiled`: a launcher with everything packed once."""
        return prepare_compiled(self, grid, *args, stream=stream)

    def launch(self, grid: Sequence[int] | int, *args: Any, stream: Any = 0) -> None:
        """`runtime.launch.launch_compiled`: launch on the current GPU."""
        launch_compiled(self, grid, *args, stream=stream)


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
    lowered = lower_to_nvgpu_level(module, opts, ir)
    kernel = next(op for op in lowered.ops if isinstance(op, func.FuncOp))
    smem_bytes = SmemPlan.of(kernel).bytes
    if smem_bytes > cta_smem_limit(opts.ctas_per_sm):  # refused before any PTX is printed
        depth = "rings fitted" if opts.stages is None else f"{opts.stages}-deep rings"
        raise TawaError(
            f"@{kernel.sym_name.data}: error: needs {smem_bytes} bytes of shared memory with "
            f"{depth}; {smem_allowance(opts.ctas_per_sm)}: use fewer stages or smaller blocks"
        )
    ptx = emit_ptx(lowered)
    validate_ptx(lowered, ptx)  # the printed protocol is the proved one (verify.ptx_skeleton)
    ir["ptx"] = ptx
    if on_stage is not None:
        for stage, text in ir.items():
            on_stage(stage, text)
    threads = kernel.attributes[THREADS_ATTR]
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
        ctas_per_sm=opts.ctas_per_sm,
        fold=opts.fold,
    )


def compile_cached(
    module: ModuleOp, options: CompileOptions | None = None, cache: KernelCache | None = None
) -> CompiledKernel:
    """`compile_to_ptx(module, options)`, read from the disk cache when it holds the kernel.

    The key is the module's text, the options, the compiler version and the target; the entry
    holds the PTX, the IR of every stage and the launch metadata, so a hit runs no pass and
    no proof (the entry exists only because the proof of the same IR succeeded)."""
    opts = options or CompileOptions()
    key = cache_key(str(module), dataclasses.asdict(opts))

    def build() -> tuple[bytes, Mapping[str, Any]]:
        kernel = compile_to_ptx(module, opts)
        return kernel_to_json(kernel).encode(), {"kernel": kernel.name}

    entry = (cache or KernelCache()).get_or_build(key, build)
    return kernel_from_json(entry.payload.decode())


def kernel_to_json(kernel: CompiledKernel) -> str:
    """A `CompiledKernel` as JSON (every field; tensor maps by argument index)."""
    record = dataclasses.asdict(kernel)
    record["tensor_maps"] = list(record["tensor_maps"].values())
    return json.dumps(record)


def kernel_from_json(text: str) -> CompiledKernel:
    """The `CompiledKernel` that `kernel_to_json` wrote."""
    record = json.loads(text)
    maps = [TensorMapInfo(m["arg"], tuple(m["box"]), m["swizzle"]) for m in record["tensor_maps"]]
    record["params"] = [KernelParam(**p) for p in record["params"]]
    record["tensor_maps"] = {m.arg: m for m in maps}
    return CompiledKernel(**record)


def shared_memory_need(module: ModuleOp, options: CompileOptions) -> int:
    """The dynamic shared memory (bytes) `compile_to_ptx(module, options)` gives the kernel,
    which it refuses above `cta_smem_limit(options.ctas_per_sm)`; compiled to the nvgpu level
    only (rings already too deep are refused at the aref level, which says how much they
    need)."""
    try:
        lowered = lower_to_nvgpu_level(module, replace(options, verify=False))
    except SharedMemoryError as error:
        return error.need
    kernel = next(op for op in lowered.ops if isinstance(op, func.FuncOp))
    return SmemPlan.of(kernel).bytes
