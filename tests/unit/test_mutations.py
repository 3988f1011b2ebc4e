"""Plant each classic barrier bug into correct lowered IR; both oracles must reject it: the
verifier (a counterexample trace) and the mbarrier interpreter (an error, a deadlock or a
wrong result under some schedule)."""

import numpy as np
import pytest
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr, i32
from xdsl.rewriter import InsertPoint, Rewriter

from tawa_xdsl.diagnostics import parse_module
from tawa_xdsl.dialects import aref, make_context, nvgpu
from tawa_xdsl.interp.dtypes import InterpreterError
from tawa_xdsl.interp.mbarrier import run_mbarrier_kernel
from tawa_xdsl.transforms.lower_aref import lower_arefs
from tawa_xdsl.verify.check import verify_module
from tawa_xdsl.verify.extract import ExtractionError
from tests.samples import gemm_aref, gemm_args, gemm_reference


def _ops(module, kind, role=None):
    out = []
    for op in module.walk():
        if isinstance(op, kind):
            group = op.parent_op()
            while group is not None and not isinstance(group, aref.GroupOp):
                group = group.parent_op()
            if role is None or (group is not None and str(group.role.data) == role):
                out.append(op)
    return out


def _const(value, before):
    c = arith.ConstantOp(IntegerAttr(value, i32))
    Rewriter.insert_op(c, InsertPoint.before(before))
    return c.result


def _empty_arrives(m):
    return [o for o in _ops(m, nvgpu.MBarrierArriveOp, "consumer") if "empty" in o.bars.name_hint]


def wrong_initial_parity(m):
    wait = _ops(m, nvgpu.MBarrierWaitOp, "producer")[0]
    wait.operands[2] = wait.parity.owner.lhs  # drop the `^ 1`


def count_high(m):
    init = [o for o in _ops(m, nvgpu.MBarrierInitOp) if "empty" in o.bars.name_hint][0]
    init.count = IntegerAttr(init.count.value.data + 1, i32)


def count_low(m):
    init = [o for o in _ops(m, nvgpu.MBarrierInitOp) if "empty" in o.bars.name_hint][0]
    init.count = IntegerAttr(1, i32)


def slot_off_by_one(m):
    for tma in _ops(m, nvgpu.TmaLoadOp, "producer"):
        rem = tma.slot.owner
        one = _const(1, tma)
        plus = arith.AddiOp(rem.lhs, one)
        new = arith.RemUIOp(plus.result, rem.rhs)
        Rewriter.insert_op([plus, new], InsertPoint.before(tma))
        tma.operands[2 + len(tma.offsets)] = new.result  # writes slot i+1, completes on full[i]


def missing_release(m):
    Rewriter.erase_op(_empty_arrives(m)[0])


def early_release(m):
    arrive = _empty_arrives(m)[0]
    wait = [o for o in _ops(m, nvgpu.MBarrierWaitOp, "consumer")][0]
    slot_ops = [arrive.slot.owner.rhs.owner, arrive.slot.owner]
    for op in [*slot_ops, arrive]:
        op.detach()
    Rewriter.insert_op([*slot_ops, arrive], InsertPoint.after(wait))


def depth_mismatch(m):
    for op in _ops(m, arith.ConstantOp, "consumer"):
        if op.result.name_hint and op.result.name_hint.startswith("depth"):
            op.value = IntegerAttr(op.value.value.data - 1, i32)


def tx_high(m):
    arrive = _ops(m, nvgpu.MBarrierArriveExpectTxOp)[0]
    arrive.tx_bytes = IntegerAttr(arrive.tx_bytes.value.data + 512, i32)


def tx_low(m):
    arrive = _ops(m, nvgpu.MBarrierArriveExpectTxOp)[0]
    arrive.tx_bytes = IntegerAttr(arrive.tx_bytes.value.data - 512, i32)


def _consumer_loop(m):
    return [
        f
        for f in _ops(m, scf.ForOp, "consumer")
        if any(isinstance(o, nvgpu.MBarrierWaitOp) for o in f.body.block.ops)
    ][0]


def trips_more(m):
    loop = _consumer_loop(m)
    add = arith.AddiOp(loop.ub, _const(1, loop))
    Rewriter.insert_op(add, InsertPoint.before(loop))
    loop.operands[1] = add.result


def trips_fewer(m):
    loop = _consumer_loop(m)
    sub = arith.SubiOp(loop.ub, _const(1, loop))
    Rewriter.insert_op(sub, InsertPoint.before(loop))
    loop.operands[1] = sub.result


MUTATIONS = {
    # name: (mutation, depth, consumers, expected verdict)
    "wrong_initial_parity": (wrong_initial_parity, 2, 1, "DEADLOCK"),
    "count_high": (count_high, 2, 1, "DEADLOCK"),
    "count_low": (count_low, 2, 2, "WAR"),
    "slot_off_by_one": (slot_off_by_one, 2, 1, "RAW"),
    "missing_release": (missing_release, 2, 1, "DEADLOCK"),
    "early_release": (early_release, 2, 1, "RAW"),
    "depth_mismatch": (depth_mismatch, 3, 1, "REFUSED"),  # slot mod 2 of a 3-deep ring
    "tx_high": (tx_high, 2, 1, "DEADLOCK"),
    "tx_low": (tx_low, 2, 1, {"RAW", "WAR"}),  # the phase completes with bytes in flight
    "trips_more": (trips_more, 2, 1, "DEADLOCK"),
    "trips_fewer": (trips_fewer, 2, 1, "EXIT"),
}


def _mutant(name):
    mutate, depth, consumers, _ = MUTATIONS[name]
    module = parse_module(make_context(), gemm_aref(depth, 1, consumers, False))
    lower_arefs(module)
    mutate(module)
    module.verify()
    return module


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_verifier_rejects_with_trace(name):
    if MUTATIONS[name][3] == "REFUSED":
        with pytest.raises(ExtractionError, match="<input>:"):
            verify_module(_mutant(name))
        return
    (verdict,) = verify_module(_mutant(name))
    assert not verdict.proved, name
    # the certificate check rejected it, and the explicit search found the real trace
    assert verdict.certificate and not verdict.internal_error, verdict.summary()
    expected = MUTATIONS[name][3]
    if expected is not None:
        assert verdict.violation in ({expected} if isinstance(expected, str) else expected), (
            verdict.message
        )
    assert verdict.trace and verdict.trace[-1].startswith("  => ")
    assert "<input>:" in "\n".join(verdict.trace)  # steps name source locations


SCHEDULES = ["producer-first", "consumer-first", "round-robin", *range(12)]


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_interpreter_fails_too(name):
    module = _mutant(name)
    for schedule in SCHEDULES:
        a, b, c, scalars = gemm_args(1, 1, 5)
        try:
            run_mbarrier_kernel(module, 1, [a, b, c, *scalars], schedule=schedule)
        except InterpreterError:
            return
        if not np.allclose(c, gemm_reference(a, b), atol=1e-2):
            return
    pytest.fail(f"{name}: no schedule made the mbarrier interpreter fail")


def test_unmutated_sample_is_proved_and_runs():
    module = parse_module(make_context(), gemm_aref(2, 1, 2, False))
    lower_arefs(module)
    assert all(v.proved for v in verify_module(module))
