"""emit-ptx: print a legalized nvgpu-level kernel (nvgpu + arith/scf on scalars) as PTX text.

The printer is split by hardware unit: `kernel` (params, smem placement, registers, control
flow, the handler registry), `mbarrier`, `tma`, `wgmma`, `threads`, `fragment` and `reshape`
(register moves of split and joined fragments). Each family module registers its handlers
(op class -> function); `HANDLERS` is their union, and an op no family knows is refused with
an error naming it. Run `legalize-nvgpu` first (the `ptx` target does): it writes into the IR
what the printer would otherwise have to decide -- smem placement and slot strides, wgmma
descriptor bits, steps and row terms, TMA boxes, mask branches, the store plans of st.global /
st.shared, the address plans (row and slab pitch, swizzle, and a st.shared's uniform phase) of
st.shared / ld.shared and the partials plans (row pitch, column terms, staging rows, rows
combined) of a reduction along the rows -- and an op without its plan is refused. Where a value
sits, which registers one wgmma block holds, which threads store a replicated vector and which
lanes a reduction combines are questions to the fragment's layout object
(`dialects/nvgpu/layout.py`). The printer computes no layout or swizzle fact: it allocates
registers and prints the arithmetic the plans state.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp

from tawa_xdsl.backend.emit_ptx import fragment, mbarrier, reshape, threads, tma, wgmma
from tawa_xdsl.backend.emit_ptx.kernel import (
    CONTROL,
    EmitError,
    Handlers,
    KernelParam,
    KernelPrinter,
    SmemPlan,
    kernel_params,
)
from tawa_xdsl.dialects.nvgpu import cta_smem_limit, ctas_per_sm, smem_allowance

HANDLERS = CONTROL.merged(
    mbarrier.HANDLERS,
    tma.HANDLERS,
    wgmma.HANDLERS,
    threads.HANDLERS,
    fragment.HANDLERS,
    reshape.HANDLERS,
)

__all__ = [
    "HANDLERS",
    "EmitError",
    "Handlers",
    "KernelParam",
    "KernelPrinter",
    "SmemPlan",
    "emit_ptx",
    "kernel_params",
]


def emit_ptx(module: ModuleOp) -> str:
    """The PTX text of every kernel of `module` (normally one)."""
    kernels = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if not kernels:
        raise EmitError("emit-ptx: the module has no func.func kernel")
    for kernel in kernels:
        need, ctas = SmemPlan.of(kernel).bytes, ctas_per_sm(kernel)
        if need > cta_smem_limit(ctas):
            raise EmitError(
                f"emit-ptx: @{kernel.sym_name.data} needs {need} bytes of shared memory; "
                f"{smem_allowance(ctas)}"
            )
    texts = [KernelPrinter(kernel, HANDLERS).print() for kernel in kernels]
    header_end = texts[0].index(".visible")
    return texts[0] + "".join(t[header_end:] for t in texts[1:])
