"""tawa-verify on the compiler's own output: every GEMM pipeline option is proved, quickly;
a planted bug gives exit 1 and a trace; --json."""

import itertools
import json
import time
from pathlib import Path

import pytest
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr, i32
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import aref, make_context
from tawa_xdsl.tools.tawa_verify import main
from tawa_xdsl.transforms.lower_aref import lower_arefs
from tawa_xdsl.verify.check import verify_module
from tawa_xdsl.verify.extract import ExtractionError, extract
from tests.samples import gemm_aref, shrink_rings

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.parametrize(
    "stages,mma_depth,consumers,persistent",
    [
        (s, p, c, pe)
        for s, p, c, pe in itertools.product([1, 2, 3], [1, 2], [1, 2], [False, True])
        if p <= s
    ],
)
def test_gemm_pipeline_is_proved(stages, mma_depth, consumers, persistent):
    from tawa_xdsl.transforms.warp_specialize import warp_specialize

    module = parse_module(make_context(), (EXAMPLES / "gemm.mlir").read_text())
    module = warp_specialize(
        module, stages=stages, mma_depth=mma_depth, consumers=consumers, persistent=persistent
    )
    lower_arefs(module)
    start = time.perf_counter()
    verdicts = verify_module(module)
    assert verdicts and all(v.proved for v in verdicts), [v.message for v in verdicts]
    assert time.perf_counter() - start < 10


def test_shallow_ring_deadlock_is_reported(tmp_path, capsys):
    """A consumer holding 2 uses of a 1-slot ring: the aref dialect refuses the lag, and the
    same protocol planted below it (the ring shrunk before lower-aref) is a proved deadlock."""
    path = tmp_path / "k.mlir"
    path.write_text(gemm_aref(depth=1, mma_depth=2))
    assert main([str(path), "-p", "lower-aref"]) == 2
    assert "lag must be in 0..0 (below the ring depth 1)" in capsys.readouterr().err
    module = parse_module(make_context(), gemm_aref(depth=2, mma_depth=2))
    shrink_rings(module, 1)
    lower_arefs(module)
    path.write_text(str(module))
    assert main([str(path)]) == 1
    out = capsys.readouterr().out
    assert "FAILED: ring a_b_ring: DEADLOCK" in out and "blocked at" in out


def test_json_and_proved_lines(tmp_path, capsys):
    path = tmp_path / "k.mlir"
    module = parse_module(make_context(), gemm_aref(depth=2, mma_depth=2, consumers=2))
    lower_arefs(module)
    path.write_text(str(module))
    assert main([str(path)]) == 0
    assert capsys.readouterr().out.startswith("proved: ring a_b_ring:")
    assert main([str(path), "--json"]) == 0
    (verdict,) = json.loads(capsys.readouterr().out)
    assert verdict["proved"] and verdict["method"] == "certificate"


@pytest.mark.parametrize("example", ["attention", "attention_causal"])
@pytest.mark.parametrize(
    "stages,mma_depth,consumers,persistent", [(1, 1, 1, False), (2, 2, 2, True)]
)
def test_attention_pipeline_is_proved(example, stages, mma_depth, consumers, persistent):
    from tawa_xdsl.transforms.warp_specialize import warp_specialize

    module = parse_module(make_context(), (EXAMPLES / f"{example}.mlir").read_text())
    module = warp_specialize(
        module, stages=stages, mma_depth=mma_depth, consumers=consumers, persistent=persistent
    )
    lower_arefs(module)
    verdicts = verify_module(module)
    assert [v.ring for v in verdicts] == [
        "q3_ring",
        "k3_ring",
        "v3_ring",
        "q3_ring, k3_ring, v3_ring",
    ]
    assert all(v.proved for v in verdicts), [v.summary() for v in verdicts]
    assert [v.method for v in verdicts] == ["certificate"] * 3 + ["composition"]


def _attention_rings(stages: int = 1, mma_depth: int = 1):
    from tawa_xdsl.transforms.warp_specialize import warp_specialize
    from tawa_xdsl.verify.extract import extract

    module = parse_module(make_context(), (EXAMPLES / "attention.mlir").read_text())
    # the key loop as written: one loop over the three rings (not split at its masks)
    module = warp_specialize(
        module, stages=stages, mma_depth=mma_depth, consumers=1, split_loops=False
    )
    lower_arefs(module)
    return extract(module)


def test_cross_ring_deadlock_is_caught_that_no_ring_alone_has():
    """The producer puts V(t) before K(t) (each ring alone is still proved), but the consumer
    waits for K(j+1) before it releases V(j): with 1-deep rings the producer waits for V's
    slot while the consumer waits for K. The decomposition check finds it for some N."""
    from dataclasses import replace

    from tawa_xdsl.verify.certificate import prove
    from tawa_xdsl.verify.check import verify_composition

    q, k, v = _attention_rings()
    assert verify_composition([q, k, v]).proved
    shift = 1 + max(s.pos for s in v.producer.steps)
    k.producer.steps = [replace(s, pos=s.pos + shift) for s in k.producer.steps]
    assert prove(k).proved and prove(v).proved
    verdict = verify_composition([q, k, v])
    assert not verdict.proved and verdict.violation == "DEADLOCK"
    assert "k3_ring_full" in verdict.message and "v3_ring_empty" in verdict.message


def test_attention_releases_stay_where_lower_aref_put_them():
    """The barrier ops of the attention kernel, in program order, are the same at the
    mbarrier level (what the proof checks) and at the nvgpu level (what the PTX runs)."""
    from tawa_xdsl.compiler import CompileOptions, compile_to_ptx
    from tawa_xdsl.dialects import nvgpu
    from tawa_xdsl.kernels.attention import tile_module

    def barrier_ops(text: str) -> list[str]:
        module = parse_module(make_context(), text)
        bars = [o.bars for o in module.walk() if isinstance(o, nvgpu.MBarrierAllocOp)]
        ops = nvgpu.MBarrierWaitOp | nvgpu.MBarrierArriveOp | nvgpu.MBarrierArriveExpectTxOp
        return [f"{o.name} {bars.index(o.bars)}" for o in module.walk() if isinstance(o, ops)]

    for head_dim, mma_depth in ((64, 2), (128, 2), (64, 1)):
        opts = CompileOptions(stages=3, mma_depth=mma_depth, consumers=2)
        kernel = compile_to_ptx(tile_module(head_dim, "f16", False, None), opts)
        mbar, low = barrier_ops(kernel.ir["mbarrier"]), barrier_ops(kernel.ir["nvgpu"])
        assert mbar == low and len(mbar) >= 8


def test_compile_pipeline_rejects_a_broken_ring(monkeypatch):
    """compile_to_ptx proves the rings after lower-aref; a planted bug is a one-line error."""
    from tawa_xdsl import compiler
    from tawa_xdsl.transforms import lower_aref
    from tawa_xdsl.verify.check import ProtocolError

    module = parse_module(make_context(), (EXAMPLES / "gemm.mlir").read_text())
    real = lower_aref.protocol.empty_init_count
    monkeypatch.setattr(lower_aref.protocol, "empty_init_count", lambda k: real(k) + 1)
    with pytest.raises(ProtocolError) as error:
        compiler.compile_to_ptx(module, compiler.CompileOptions(stages=2, mma_depth=1, consumers=1))
    message = str(error.value)
    assert "\n" not in message and "ring a_b_ring can go wrong: DEADLOCK" in message
    opts = compiler.CompileOptions(stages=2, mma_depth=1, consumers=1, verify=False)
    assert compiler.compile_to_ptx(module, opts).ptx  # the check can be skipped


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("examples/gemm.mlir", "error: no rings to verify: give the IR after lower-aref"),
        ("examples/no-such.mlir", "examples/no-such.mlir: error: cannot read"),
    ],
)
def test_cli_input_it_cannot_verify_is_one_line(
    path: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(__file__).resolve().parents[2]
    assert main([str(root / path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tawa-verify: ") and message in err and err.count("\n") == 1


# ------------------------------------------------------------ the schedule data is checked


def _lowered_lagged():
    module = parse_module(make_context(), gemm_aref(depth=3, mma_depth=2))
    lower_arefs(module)
    return module


def _lagged_arrive(module):
    return next(op for op in module.walk() if aref.LAG_ATTR in op.attributes)


def _drain_loop(module):
    return next(op for op in module.walk() if aref.DRAIN_ATTR in op.attributes)


def _refusal(module) -> str:
    with pytest.raises(ExtractionError) as info:
        extract(module)
    assert "\n" not in str(info.value) and str(info.value).startswith("<input>:")
    return str(info.value)


def test_lagged_release_data_is_read():
    (ring,) = extract(_lowered_lagged())
    (consumer,) = ring.consumers
    assert consumer.lag == 1 and consumer.drain


def test_lag_that_disagrees_with_the_slot_is_refused():
    module = _lowered_lagged()
    _lagged_arrive(module).attributes[aref.LAG_ATTR] = IntegerAttr(2, i32)
    assert "does not release slot `(use - 2) mod D`" in _refusal(module)


def test_lagged_release_without_its_lag_is_refused():
    module = _lowered_lagged()
    del _lagged_arrive(module).attributes[aref.LAG_ATTR]
    assert "ring ops under a guard the verifier does not model" in _refusal(module)


def test_lag_guard_that_disagrees_with_the_lag_is_refused():
    module = _lowered_lagged()
    guard = _lagged_arrive(module).parent_op()
    assert isinstance(guard, scf.IfOp)
    two = arith.ConstantOp(IntegerAttr(2, i32))
    Rewriter.insert_op(two, InsertPoint.before(guard))
    guard.cond.owner.operands = [guard.cond.owner.lhs, two.result]
    assert "a release lagged by 1 is not guarded by `x >= 1`" in _refusal(module)


def test_drain_of_another_lag_is_refused():
    module = _lowered_lagged()
    _drain_loop(module).attributes[aref.DRAIN_ATTR] = IntegerAttr(2, i32)
    assert "drain of lag 2 after a loop whose releases lag by 1" in _refusal(module)


def test_releases_after_the_loop_outside_a_drain_are_refused():
    module = _lowered_lagged()
    del _drain_loop(module).attributes[aref.DRAIN_ATTR]
    assert "is not built on its loop's use counter" in _refusal(module)


def _lowered_attention():
    from tawa_xdsl.transforms.warp_specialize import warp_specialize

    module = parse_module(make_context(), (EXAMPLES / "attention.mlir").read_text())
    module = warp_specialize(module, stages=2, mma_depth=2)
    lower_arefs(module)
    return module


def test_lookahead_without_its_stage_is_refused():
    module = _lowered_attention()
    ahead = next(
        op
        for op in module.walk()
        if aref.stage_of(op) == 0 and not aref.is_peeled(op) and op.results
    )
    del ahead.attributes[aref.STAGE_ATTR]
    assert "ring ops under a guard the verifier does not model" in _refusal(module)


def test_stage_on_a_guard_that_is_not_the_lookahead_is_refused():
    module = _lowered_attention()
    peeled = next(op for op in module.walk() if aref.is_peeled(op))
    del peeled.attributes[aref.PEELED_ATTR]  # now claims to be an in-loop lookahead
    assert "a stage-0 lookahead is not guarded by `iv + step < ub`" in _refusal(module)


# ------------------------------------------------------------------ the nvgpu level


def _nvgpu_ir(kind: str) -> str:
    from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
    from tawa_xdsl.kernels import attention
    from tawa_xdsl.kernels.gemm import gemm_tile_ir

    ir: dict[str, str] = {}
    if kind == "gemm":
        options = CompileOptions(stages=3, mma_depth=2, consumers=2, verify=False)
        lower_to_nvgpu_level(gemm_tile_ir(128, 128, 64), options, ir)
    else:
        options = CompileOptions(stages=2, mma_depth=1, consumers=2, verify=False)
        tile = attention.tile_module(64, causal=kind == "causal", block_n=64, block_m=128)
        lower_to_nvgpu_level(tile, options, ir)
    return ir["nvgpu"]


@pytest.mark.parametrize("kind", ["gemm", "attention", "causal"])
def test_tawa_verify_proves_the_nvgpu_level(kind, tmp_path, capsys):
    """The IR emit-ptx prints: every ring and the rings together are proved."""
    path = tmp_path / "k.mlir"
    path.write_text(_nvgpu_ir(kind))
    assert main([str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rings = 1 if kind == "gemm" else 3
    assert sum(line.startswith("proved: ring ") for line in lines) == rings, lines
    if rings > 1:
        assert any(line.startswith("proved: rings ") for line in lines), lines


def test_a_release_before_the_wgmma_retires_is_refused(tmp_path, capsys):
    """At the nvgpu level a wgmma reads its slots until a wait_group retires it."""
    module = parse_module(make_context(), _nvgpu_ir("gemm"))
    from tawa_xdsl.dialects import nvgpu

    wait = next(op for op in module.walk() if isinstance(op, nvgpu.WgmmaWaitGroupOp))
    wait.pending = IntegerAttr(2, i32)  # releases lag by 1: wait_group 1 retires the slot
    path = tmp_path / "k.mlir"
    path.write_text(str(module))
    assert main([str(path)]) == 2
    assert "releases a slot a wgmma may still read" in capsys.readouterr().err


def test_malformed_lowered_ir_gives_verdicts_or_one_line_refusals():
    """Random op deletions, duplications and operand swaps of lowered IR: `verify_module`
    returns verdicts or raises ExtractionError / TawaError, never another exception."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tawa_xdsl.diagnostics import TawaError

    base = str(_lowered_lagged())

    @settings(
        max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(
        st.lists(
            st.tuples(st.sampled_from(["delete", "clone", "swap"]), st.integers(0, 10**6)),
            min_size=1,
            max_size=3,
        )
    )
    def check(edits):
        module = parse_module(make_context(), base)
        for action, pick in edits:
            ops = [op for op in module.walk() if op.parent_op() is not None and not op.regions]
            op = ops[pick % len(ops)]
            if action == "delete" and not any(r.uses for r in op.results):
                Rewriter.erase_op(op)
            elif action == "clone":
                Rewriter.insert_op(op.clone(), InsertPoint.after(op))
            elif action == "swap" and len(op.operands) >= 2:
                a, b = op.operands[0], op.operands[1]
                if a.type == b.type:
                    op.operands[0], op.operands[1] = b, a
        try:
            module.verify()
        except Exception:
            return  # not valid IR: the parser of tawa-verify refuses it in one line
        try:
            verify_module(module)
        except (ExtractionError, TawaError):
            pass

    check()


@pytest.mark.parametrize("causal", [False, True])
def test_a_peeled_use_retired_in_its_block_may_be_drained_after_the_tile_loop(causal):
    """Found by the GPU fuzzer (bench/results/h200_2026-12-01_session): persistent attention
    with one consumer and MMA depth 2 releases the peeled QK(0)'s K slot in the drain after
    the tile loop, with no wait_group in between; the peeled block's own `wait_group 0` has
    retired that wgmma, so the proof must accept it (it refused the compiler's output)."""
    from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
    from tawa_xdsl.kernels import attention

    module = attention.tile_module(128, "bf16", causal, block_n=64)
    options = CompileOptions(
        stages=3, mma_depth=2, consumers=1, persistent=True, rotate=False, verify=False
    )
    verdicts = verify_module(lower_to_nvgpu_level(module, options))
    assert verdicts and all(v.proved for v in verdicts), [v.summary() for v in verdicts]


def test_a_peeled_use_whose_own_wait_retires_nothing_is_still_refused():
    """The rule above applies only when the read's own block retires it: with the peeled
    block's `wait_group 0` raised to 1, QK(0) is no longer retired there, and the proof,
    which then finds no wait_group between the tile loop's end and the drain releasing the
    slot, refuses it (conservatively: the K loop's final wait inside the tile loop would
    retire it, a fact the model does not use)."""
    from tawa_xdsl.compiler import CompileOptions, lower_to_nvgpu_level
    from tawa_xdsl.dialects import nvgpu
    from tawa_xdsl.kernels import attention

    module = attention.tile_module(128, "bf16", True, block_n=64)
    options = CompileOptions(
        stages=3, mma_depth=2, consumers=1, persistent=True, rotate=False, verify=False
    )
    lowered = lower_to_nvgpu_level(module, options)
    peeled = [
        op for op in lowered.walk() if isinstance(op, scf.IfOp) and "tawa.peeled" in op.attributes
    ]
    waits = [op for p in peeled for op in p.walk() if isinstance(op, nvgpu.WgmmaWaitGroupOp)]
    assert waits
    for wait in waits:
        wait.pending = IntegerAttr(1, i32)
    with pytest.raises(ExtractionError, match="may still read"):
        extract(lowered)
