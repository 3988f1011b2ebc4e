"""The slot-read barrier before a drain (issue 13/14: the persistent GEMM with row sums of A).

The consumers of `gemm_with_row_sums` (tests/corpus/proved.py) read every A slot into
registers besides the wgmma, so thread 0 may release a slot only after a `bar.sync` of every
consumer thread. In the K loop that barrier sits under the ring's lag guard; the drain after
the loop releases the last lagged slots. Persistent, the next tile's copy refills those
slots, so `lower-to-nvgpu` puts one slot-read barrier right before the drain's loop (not one
per slot); non-persistent, nothing refills them and the drain gets none (its PTX is as before).
Dropping the barrier (`mutations.slot_read_drain_sync_dropped`) is refused by the proof.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp

from tawa_xdsl.compiler import lower_to_nvgpu_level
from tawa_xdsl.dialects import aref, nvgpu
from tawa_xdsl.verify.check import verify_module
from tawa_xdsl.verify.mutations import NotApplicable, slot_read_drain_sync_dropped
from tawa_xdsl.verify.named_barriers import NamedBarrierViolation, check_slot_reads
from tests.corpus import proved

CASES = {case.name: case for case in proved.CASES}


def nvgpu_module(name: str) -> ModuleOp:
    case = CASES[name]
    run = case.launch(np.random.default_rng(0))
    compiled = case.kernel.compile(*run.args, **run.kwargs)
    return lower_to_nvgpu_level(compiled.module, replace(compiled.options, verify=False))


def slot_read_syncs(module: ModuleOp) -> list[nvgpu.NamedBarrierSyncOp]:
    return [
        op
        for op in module.walk()
        if isinstance(op, nvgpu.NamedBarrierSyncOp)
        and op.barrier_id.value.data == nvgpu.SLOT_READ_BARRIER_ID
    ]


def drains(module: ModuleOp) -> list[scf.ForOp]:
    return [
        op for op in module.walk() if isinstance(op, scf.ForOp) and aref.DRAIN_ATTR in op.attributes
    ]


@pytest.fixture(scope="module")
def persistent() -> ModuleOp:
    return nvgpu_module("gemm_with_row_sums_persistent")


def test_persistent_drain_gets_one_barrier_before_its_loop(persistent: ModuleOp) -> None:
    (drain,) = drains(persistent)
    lagged, before_drain = slot_read_syncs(persistent)
    assert before_drain.next_op is drain
    assert before_drain.threads.value.data == 256  # both consumer warpgroups
    assert isinstance(lagged.parent_op(), scf.IfOp)  # the K loop's, under the lag guard
    assert not any(isinstance(op, nvgpu.NamedBarrierSyncOp) for op in drain.body.walk())


def test_drain_that_is_the_rings_last_use_gets_no_barrier() -> None:
    module = nvgpu_module("gemm_with_row_sums")
    (drain,) = drains(module)
    (lagged,) = slot_read_syncs(module)
    assert isinstance(lagged.parent_op(), scf.IfOp)
    assert not isinstance(drain.prev_op, nvgpu.NamedBarrierSyncOp)
    check_slot_reads(module)  # nothing refills the drained slots: no barrier needed


def test_dropping_the_drain_barrier_is_refused(persistent: ModuleOp) -> None:
    """The interpreter cannot show this one: it runs a warpgroup's threads in lockstep, and
    each warpgroup's thread 0 arrives after its own threads' reads (the empty barrier counts
    one arrive per consumer warpgroup), so no thread still reads a slot when the producer
    refills it; on the GPU the other warps of the warpgroup can lag behind thread 0."""
    mutant = persistent.clone()
    slot_read_drain_sync_dropped(mutant)
    assert len(slot_read_syncs(mutant)) == 1
    with pytest.raises(NamedBarrierViolation, match="releases a slot of ring ring that every"):
        check_slot_reads(mutant)
    failed = [v for v in verify_module(mutant) if not v.proved]
    assert failed and "bar.sync of all 256 threads" in failed[0].summary(), failed
    assert all(v.proved for v in verify_module(persistent))


def test_mutation_needs_a_barrier_before_a_drain() -> None:
    with pytest.raises(NotApplicable):
        slot_read_drain_sync_dropped(nvgpu_module("gemm_with_row_sums"))
