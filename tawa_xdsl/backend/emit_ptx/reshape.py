"""emit-ptx for reshapes of fragments: `nvgpu.fragment_gather` as register moves (`mov.f32`
per value, `mov.b32` per packed pair of 16-bit values), in the order the op's plan gives
(the layout object decides it; nothing is decided here)."""

from __future__ import annotations

from xdsl.ir import Operation

from tawa_xdsl.backend.emit_ptx.kernel import Handlers, KernelPrinter, frag_type, packed
from tawa_xdsl.dialects import nvgpu

HANDLERS = Handlers()


@HANDLERS.on(nvgpu.FragmentGatherOp)
def fragment_gather(p: KernelPrinter, op: Operation) -> None:
    assert isinstance(op, nvgpu.FragmentGatherOp)
    sources = [p.frag(s) for s in op.sources]
    out = p.frag(op.result)
    plan = op.register_plan()
    if packed(frag_type(op.result)):  # the verifier checked that pairs stay whole
        for reg, (source, value) in zip(out, plan[0::2], strict=True):
            p.b.mov("b32", reg, sources[source][value // 2])
        return
    for reg, (source, value) in zip(out, plan, strict=True):
        p.b.mov("f32", reg, sources[source][value])
