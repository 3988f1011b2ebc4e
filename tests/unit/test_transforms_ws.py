"""The warp-specialization passes: structure of their output, their refusals, and the aref
program they produce computing what the tile program computes (in the aref interpreter)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects import scf
from xdsl.dialects.builtin import ModuleOp

from tawa_xdsl.diagnostics import TawaError, parse_file, parse_module
from tawa_xdsl.dialects import aref, make_context, tile
from tawa_xdsl.interp.aref import run_warp_specialized
from tawa_xdsl.interp.tile import run_kernel
from tawa_xdsl.transforms.cooperative_consumers import CooperativeConsumersPass
from tawa_xdsl.transforms.mma_lag import MmaLagPass
from tawa_xdsl.transforms.partition import PartitionPass
from tawa_xdsl.transforms.place_releases import PlaceReleasesPass
from tawa_xdsl.transforms.software_pipeline import SoftwarePipelinePass
from tawa_xdsl.transforms.warp_specialize import persistent_launch, warp_specialize

EXAMPLES = Path(__file__).parents[2] / "examples"
CTX = make_context()


@pytest.fixture(scope="module")
def kernels() -> dict[str, ModuleOp]:
    return {
        name: parse_file(CTX, EXAMPLES / f"{name}.mlir")
        for name in ("gemm", "attention", "attention_causal")
    }


def _groups(module: ModuleOp) -> dict[str, aref.GroupOp]:
    ws = next(op for op in module.walk() if isinstance(op, aref.WarpSpecializeOp))
    return {str(g.role.data): g for g in ws.groups()}


def _ops(group: aref.GroupOp, kind: type) -> list:
    return [op for op in group.body.walk() if isinstance(op, kind)]


# ------------------------------------------------------------------------------ structure


@pytest.mark.parametrize("name", ["gemm", "attention", "attention_causal"])
@pytest.mark.parametrize("consumers", [1, 2])
def test_each_group_keeps_its_own_ops(kernels, name, consumers):
    groups = _groups(warp_specialize(kernels[name], stages=3, mma_depth=2, consumers=consumers))
    producer, consumer = groups["producer"], groups["consumer"]
    assert (producer.num_warpgroups, producer.registers.value.data) == (1, 40)
    assert (consumer.num_warpgroups, consumer.registers.value.data) == (consumers, 232)
    assert _ops(producer, tile.LoadOp) and not _ops(producer, tile.DotOp)
    assert not _ops(producer, tile.StoreOp) and not _ops(producer, aref.GetOp)
    assert _ops(consumer, tile.DotOp) and not _ops(consumer, tile.LoadOp)
    assert not _ops(consumer, aref.PutOp)
    # Every ring the producer puts to, the consumer gets from.
    assert {p.ring for p in _ops(producer, aref.PutOp)} == {
        g.ring for g in _ops(consumer, aref.GetOp)
    }


def test_loops_match_between_groups(kernels):
    groups = _groups(warp_specialize(kernels["gemm"], persistent=True))
    bounds = {
        role: [(len(_nesting(loop)), loop.step.owner.name) for loop in _ops(g, scf.ForOp)]
        for role, g in groups.items()
    }
    # Producer and consumer: tile loop, K loop; the consumer drains its lagged releases
    # (an op: lower-aref makes it a loop).
    assert bounds["producer"] == bounds["consumer"]
    (drain,) = _ops(groups["consumer"], aref.DrainOp)
    assert drain.lag_value == 1 and isinstance(drain.parent_op(), scf.ForOp)


def _nesting(op) -> list:
    chain = []
    while not isinstance(op, aref.GroupOp):
        chain.append(op)
        op = op.parent_op()
    return chain


def test_loads_feeding_one_dot_share_a_tuple_ring(kernels):
    module = warp_specialize(kernels["gemm"])
    creates = [op for op in module.walk() if isinstance(op, aref.CreateOp)]
    assert len(creates) == 1
    assert len(creates[0].ring.type.payload_types()) == 2  # (A, B)
    attention = warp_specialize(kernels["attention"], stages=4)
    depths = sorted(
        op.ring.type.depth.data for op in attention.walk() if isinstance(op, aref.CreateOp)
    )
    assert depths == [1, 4, 4]  # Q once per program; K and V in the loop


def test_partition_tags_every_op(kernels):
    module = kernels["attention"].clone()
    PartitionPass().apply(CTX, module)
    roles = {
        op.name: op.attributes["aref.role"].data
        for op in module.walk()
        if "aref.role" in op.attributes
    }
    assert roles["tile.load"] == "producer"
    assert roles["tile.dot"] == roles["tile.reduce"] == roles["tile.store"] == "consumer"
    assert roles["scf.for"] == roles["tile.program_id"] == "both"


def test_input_is_left_untouched(kernels):
    before = str(kernels["gemm"])
    warp_specialize(kernels["gemm"], consumers=2, persistent=True)
    assert str(kernels["gemm"]) == before


# ------------------------------------------------------------------------------ refusals

_HEADER = (
    "func.func @k(%a_desc: !tile.desc<64x16xf16>, %c_desc: !tile.desc<64x16xf16>, %n: i32) {\n"
)
_LOOP = (
    "  %c0 = arith.constant 0 : i32\n  %c1 = arith.constant 1 : i32\n"
    "  %zero = arith.constant 0.000000e+00 : f16\n"
    "  %init = tile.splat %zero : f16 -> tensor<64x16xf16>\n"
)


def _refusal(body: str, **options) -> str:
    module = parse_module(CTX, _HEADER + _LOOP + body + "  func.return\n}\n", "k.mlir")
    with pytest.raises(TawaError) as info:
        warp_specialize(module, **options)
    message = str(info.value)
    assert "\n" not in message and message.startswith("k.mlir:")
    return message


def test_refuses_a_kernel_without_store():
    message = _refusal(
        "  %a = tile.load %a_desc[%c0, %c0] : !tile.desc<64x16xf16> -> tensor<64x16xf16>\n"
    )
    assert "has no tile.store" in message


def test_refuses_a_loaded_tile_that_escapes_through_a_loop():
    message = _refusal(
        "  %r = scf.for %i = %c0 to %n step %c1 iter_args(%x = %init)"
        " -> (tensor<64x16xf16>) : i32 {\n"
        "    %a = tile.load %a_desc[%i, %c0] : !tile.desc<64x16xf16> -> tensor<64x16xf16>\n"
        "    scf.yield %a : tensor<64x16xf16>\n  }\n"
        "  tile.store %c_desc[%c0, %c0], %r : !tile.desc<64x16xf16>, tensor<64x16xf16>\n"
    )
    assert "escapes through 'scf.yield'" in message and "k.mlir:" in message


def test_a_uniform_if_runs_in_both_groups_with_the_use_counter() -> None:
    """A condition on scalars is computed by both groups; the if around the load yields the
    ring's use counter in each group, and the warp-specialized kernel copies the block
    exactly when the condition holds (aref interpreter against the tile program)."""
    body = (
        "  %t = arith.cmpi slt, %c0, %n : i32\n"
        "  scf.if %t {\n"
        "    %a = tile.load %a_desc[%c0, %c0] : !tile.desc<64x16xf16> -> tensor<64x16xf16>\n"
        "    tile.store %c_desc[%c0, %c0], %a : !tile.desc<64x16xf16>, tensor<64x16xf16>\n  }\n"
    )
    module = parse_module(CTX, _HEADER + _LOOP + body + "  func.return\n}\n", "k.mlir")
    ws = warp_specialize(module)
    for group in _groups(ws).values():
        (branch,) = _ops(group, scf.IfOp)
        assert [str(t) for t in branch.result_types] == ["i32"]  # the use counter
    a = np.arange(64 * 16, dtype=np.float16).reshape(64, 16)
    for n, answer in ((0, np.zeros_like(a)), (1, a)):
        expected, got = np.zeros_like(a), np.zeros_like(a)
        run_kernel(module, (1,), [a, expected, n])
        run_warp_specialized(ws, (1,), [a, got, n])
        np.testing.assert_array_equal(expected, answer)
        np.testing.assert_array_equal(got, answer)


def test_refuses_four_consumers(kernels):
    with pytest.raises(TawaError, match="consumers must be 1, 2 or 3 warpgroups, got 4$") as info:
        warp_specialize(kernels["gemm"], consumers=4)
    assert str(info.value).startswith(str(EXAMPLES / "gemm.mlir"))


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"stages": 0}, "ring-depth: stages must be at least 1"),
        ({"mma_depth": 0}, "mma-lag: mma-depth must be at least 1"),
    ],
)
def test_refuses_bad_depths(kernels, options, expected):
    with pytest.raises(TawaError, match=expected) as info:
        warp_specialize(kernels["gemm"], **options)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "schedule_pass",
    [CooperativeConsumersPass(), SoftwarePipelinePass(), MmaLagPass(), PlaceReleasesPass()],
)
def test_schedule_passes_refuse_tile_level_input(kernels, schedule_pass):
    module = kernels["gemm"].clone()
    PartitionPass().apply(CTX, module)
    with pytest.raises(TawaError, match=f"{schedule_pass.name}: .*run distribute first"):
        schedule_pass.apply(CTX, module)


# --------------------------------------------------------------------- same results


def _gemm_args(rng, m, n, k):
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    grid = (-(-m // 128) * -(-n // 128),)
    return grid, lambda: [a, b, np.zeros((m, n), np.float16), m, n, k], 2


def _attention_args(rng, heads, seq):
    q, k, v = (rng.standard_normal((heads, seq, 64)).astype(np.float16) for _ in range(3))
    grid = (-(-seq // 128), heads)
    return grid, lambda: [q, k, v, np.zeros((heads, seq, 64), np.float16), seq, 0.125], 3


@pytest.mark.parametrize(
    ("name", "shape", "options"),
    [
        ("gemm", (130, 200, 0), {"stages": 1, "mma_depth": 2}),  # zero-trip K loop
        ("gemm", (130, 140, 64), {"stages": 2, "mma_depth": 3}),  # one trip, P > trips
        (
            "gemm",
            (260, 140, 200),
            {"stages": 3, "mma_depth": 2, "consumers": 2, "persistent": True},
        ),
        ("gemm", (200, 130, 130), {"stages": 1, "mma_depth": 1, "consumers": 2}),
        ("attention", (2, 150), {"stages": 2, "mma_depth": 2, "consumers": 2}),
        ("attention", (1, 64), {"stages": 1, "mma_depth": 1, "persistent": True}),
        ("attention_causal", (2, 200), {"stages": 3, "mma_depth": 2, "consumers": 1}),
        (
            "attention_causal",
            (1, 300),
            {"stages": 2, "mma_depth": 3, "consumers": 2, "persistent": True},
        ),
        (  # every head's row block x before x + 1: 3 x 2 tiles over 3 programs
            "attention_causal",
            (2, 300),
            {"stages": 2, "mma_depth": 1, "consumers": 2, "persistent": True, "tile_order": "yxz"},
        ),
        (
            "gemm",
            (260, 400, 130),
            {"stages": 2, "mma_depth": 2, "persistent": True, "tile_order": "yxz"},
        ),
    ],
)
def test_warp_specialized_program_matches_tile_program(kernels, name, shape, options):
    rng = np.random.default_rng(sum(shape))
    grid, make, out = (_gemm_args if name == "gemm" else _attention_args)(rng, *shape)
    expected = make()
    run_kernel(kernels[name], grid, expected)
    module = warp_specialize(kernels[name], **options)
    launch, extra = persistent_launch(grid, 3) if options.get("persistent") else (grid, [])
    for schedule in ("random", "round-robin"):
        got = make()
        run_warp_specialized(module, launch, got + extra, schedule=schedule)
        np.testing.assert_array_equal(got[out], expected[out])
