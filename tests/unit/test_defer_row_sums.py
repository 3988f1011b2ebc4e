"""defer-row-sums: a loop's running row sum kept as each lane's partial and combined over the
quad after the loops, only where that is the same sum (the scale quad-uniform, the carried
value read by nothing but its update); the nvgpu interpreter computes the tile program's
answer with it."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
from tawa_xdsl.dialects import make_context, nvgpu
from tawa_xdsl.dialects.nvgpu import BinaryKind
from tawa_xdsl.interp.nvgpu import run_nvgpu_kernel
from tawa_xdsl.kernels import attention
from tawa_xdsl.transforms.defer_row_sums import DeferRowSumsPass, quad_partial
from tests.unit.test_attention_schedules import HEAD_DIM, HEADS, SCALE, close, inputs, tile_level

OPTIONS = CompileOptions(stages=3, mma_depth=1, consumers=2, verify=False)


def _shuffles_in_loops(module: ModuleOp) -> int:
    return sum(
        isinstance(op, nvgpu.ShuffleXorOp)
        for loop in module.walk()
        if isinstance(loop, scf.ForOp) and loop.attributes.get("tawa.drain") is None
        for op in loop.body.block.ops
    )


def _sums_in_loops(module: ModuleOp) -> list[nvgpu.FragmentBinaryOp]:
    """The quad-combined row sums computed in a key loop's body."""
    return [op for loop in module.walk() if isinstance(loop, scf.ForOp) for op in _sums_in(loop)]


def _lowered_without_pass(causal: bool) -> ModuleOp:
    from tawa_xdsl.compiler import pipeline

    module = attention.tile_module(HEAD_DIM, "f16", causal)
    ctx = make_context()
    lowered = module.clone()
    for _, step in pipeline(OPTIONS):
        if not isinstance(step, DeferRowSumsPass):
            step.apply(ctx, lowered)
    return lowered


def test_the_key_loops_combine_no_row_sum_and_the_answer_is_the_same() -> None:
    for causal in (False, True):
        module = attention.tile_module(HEAD_DIM, "f16", causal)
        plain = _lowered_without_pass(causal)
        assert _sums_in_loops(plain)  # one per key loop
        deferred = lower_to_nvgpu_level(module, OPTIONS)
        assert not _sums_in_loops(deferred)
        assert _shuffles_in_loops(deferred) == _shuffles_in_loops(plain) // 2  # the max's stay
        for seq in (100, 300):  # one key block; four and a ragged one
            q, k, v = inputs(seq)
            o = np.zeros_like(q)
            run_nvgpu_kernel(deferred, attention.grid(seq, HEADS), [q, k, v, o, seq, SCALE])
            close(o, tile_level(module, seq))


def test_a_row_sum_read_in_its_loop_is_left_combined() -> None:
    """The carried value read by another op of the body: the partial would reach it."""
    lowered = _lowered_without_pass(False)
    loop = next(op for op in lowered.walk() if isinstance(op, scf.ForOp) and _sums_in(op))
    carried = [a for a in loop.body.block.args if _row(a) and _feeds_sum_update(a)]
    extra = nvgpu.FragmentBinaryOp(BinaryKind.ADD, carried[0], carried[0])
    Rewriter.insert_op(extra, InsertPoint.at_start(loop.body.block))
    DeferRowSumsPass().apply(make_context(), lowered)
    assert _sums_in(loop)


def test_a_scale_that_differs_within_a_quad_is_left_combined() -> None:
    """`l * r` with r a lane partial: the quad's partials would not sum to l."""
    lowered = _lowered_without_pass(False)
    for loop in [op for op in lowered.walk() if isinstance(op, scf.ForOp)]:
        for op in list(loop.body.block.ops):
            if isinstance(op, nvgpu.FragmentBinaryOp) and op.kind.data == BinaryKind.MUL:
                if _row(op.lhs) and op.lhs in loop.body.block.args:
                    partial = next(
                        o for o in loop.body.block.ops if isinstance(o, nvgpu.FragmentRowReduceOp)
                    )
                    op.operands[1] = partial.result
    DeferRowSumsPass().apply(make_context(), lowered)
    assert _sums_in_loops(lowered)


def _sums_in(loop: scf.ForOp) -> list[nvgpu.FragmentBinaryOp]:
    return [
        op
        for op in loop.body.block.ops
        if isinstance(op, nvgpu.FragmentBinaryOp) and quad_partial(op.result, BinaryKind.ADD)
    ]


def _row(value) -> bool:
    kind = value.type
    return isinstance(kind, nvgpu.FragmentType) and kind.kind == nvgpu.FragmentLayout.WGMMA_ROW


def _feeds_sum_update(arg) -> bool:
    return any(
        isinstance(u.operation, nvgpu.FragmentBinaryOp) and u.operation.kind.data == BinaryKind.MUL
        for u in arg.uses
    )
