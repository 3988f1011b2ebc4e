"""Triton's host-side conventions, on the CPU: Config(num_warps=, pre_hook=), autotune's
prune_configs_by / reset_to_zero / restore_value, a pre-hook setting desc.block_shape,
tawa_xdsl.cdiv / next_power_of_2, compiled[grid](...), TRITON_INTERPRET, None arguments as
constexpr None, and a compiled kernel's `.asm` (stage IR, ptx, cubin) and `.metadata`."""

from __future__ import annotations

import numpy as np
import pytest

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.autotune import Autotuner, Config, NoTimerError
from tawa_xdsl.backend.ptxas import find_ptxas
from tawa_xdsl.frontend.signature import DescriptorArg, ScalarArg
from tawa_xdsl.kernels.gemm import gemm

D = tawa_xdsl.TensorDescriptor.from_tensor


@tawa_xdsl.jit(interpret=True)
def accumulate(x_desc, y_desc, BLOCK: tl.constexpr):
    """y += 2 x, block by block (so a launch that does not start from zero shows)."""
    pid = tl.program_id(0)
    y = y_desc.load([pid * BLOCK])
    y_desc.store([pid * BLOCK], y + 2.0 * x_desc.load([pid * BLOCK]))


def take_each(times: list[float]):
    """A timer reading `times` in the order configs are timed (one round: `rounds=1`)."""
    calls = []

    def timer(run) -> float:
        run()
        calls.append(1)
        return times[len(calls) - 1]

    return timer, calls


def set_blocks(nargs: dict) -> None:
    """A Triton-style pre-hook: the descriptors take the config's block size."""
    for name in ("x_desc", "y_desc"):
        nargs[name].block_shape = [nargs["BLOCK"]]


def test_triton_options_and_a_pre_hook_setting_block_shape(tmp_path) -> None:
    configs = [
        Config({"BLOCK": 8}, num_warps=4, num_ctas=1, maxnreg=232, pre_hook=set_blocks),
        Config({"BLOCK": 16}, num_warps=8, num_stages=3, pre_hook=set_blocks),
    ]
    # Triton's hints are kept on the config but are not launch options (they choose nothing)
    assert configs[0].hints == {"num_warps": 4, "num_ctas": 1, "maxnreg": 232}
    assert configs[0].options() == {} and configs[1].options() == {"num_stages": 3}
    timer, _ = take_each([2.0, 1.0])
    tuned = tawa_xdsl.autotune(configs, key=["x_desc"], timer=timer, cache_dir=tmp_path,
                               reset_to_zero=["y_desc"], rounds=1)(accumulate)  # fmt: skip
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    x_desc, y_desc = D(x, [1]), D(y, [1])  # the pre-hook sets the real block shapes
    tuned[lambda meta: (32 // meta["BLOCK"],)](x_desc, y_desc)
    best = next(iter(tuned.best.values()))
    assert best == configs[1] and list(x_desc.block_shape) == [16]
    # each timed launch started from zero; the final launch added once more
    np.testing.assert_array_equal(y, 4 * x)
    compiled = list(accumulate.cache.values())
    assert any(c.options.stages == 3 for c in compiled)  # the winner's options reached it


def test_restore_value_undoes_the_timed_launches(tmp_path) -> None:
    timer, calls = take_each([1.0, 2.0])
    configs = [Config({"BLOCK": 16}), Config({"BLOCK": 16}, num_stages=2)]
    tuned = Autotuner(accumulate, configs, ["x_desc"], timer=timer, use_disk=False,
                      restore_value=["y_desc"], rounds=1)  # fmt: skip
    x = np.ones(32, np.float32)
    y = np.full(32, 5.0, np.float32)
    tuned[(2,)](D(x, [16]), D(y, [16]))
    assert len(calls) == 2
    np.testing.assert_array_equal(y, 7.0)  # only the final launch's y += 2


def test_prune_configs_by_early_prune_and_perf_model() -> None:
    configs = [Config({"BLOCK": b}, num_stages=s) for b in (8, 16) for s in (2, 3, 4)]
    seen = []

    def early(configs, nargs):
        seen.append(sorted(nargs))
        return [c for c in configs if c.num_stages != 4]

    def model(**meta):
        return meta["num_stages"] * 10 - meta["BLOCK"]  # lower is faster

    timer, calls = take_each([3.0, 1.0])
    tuner = Autotuner(accumulate, configs, ["x_desc"], timer=timer, use_disk=False, rounds=1,
                      prune_configs_by={"early_config_prune": early, "perf_model": model,
                                        "top_k": 2})  # fmt: skip
    x, y = np.ones(16, np.float32), np.zeros(16, np.float32)

    tuner[lambda meta: (16 // meta["BLOCK"],)](D(x, [8]), D(y, [8]))
    assert seen == [["x_desc", "y_desc"]] and len(calls) == 2
    # model order after pruning stages=4: (16, 2), (8, 2), ... -> the two timed, second won
    assert next(iter(tuner.best.values())) == Config({"BLOCK": 8}, num_stages=2)
    with pytest.raises(ValueError, match="prune_configs_by takes"):
        Autotuner(accumulate, configs, [], prune_configs_by={"topk": 1})


def test_timing_without_a_gpu_is_refused_in_one_line() -> None:
    tuner = Autotuner(accumulate, [Config({"BLOCK": 16})], ["x_desc"], use_disk=False)
    x = np.ones(16, np.float32)
    with pytest.raises(NoTimerError, match="needs a usable GPU"):
        tuner[(1,)](D(x, [16]), D(x.copy(), [16]))


def test_cdiv_and_next_power_of_2() -> None:
    assert [tawa_xdsl.cdiv(n, 128) for n in (0, 1, 128, 129, 1000)] == [0, 1, 1, 2, 8]
    assert [tawa_xdsl.next_power_of_2(n) for n in (0, 1, 2, 3, 64, 65, 1000)] == [
        1, 1, 2, 4, 64, 128, 1024,
    ]  # fmt: skip


def test_compiled_kernels_launch_with_a_grid() -> None:
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    compiled = accumulate.warmup(D(x, [16]), D(y, [16]), BLOCK=16, grid=(2,))
    compiled[(2,)](D(x, [16]), D(y, [16]))
    compiled[lambda meta: (32 // meta["BLOCK"],)](y_desc=D(y, [16]), x_desc=D(x, [16]), BLOCK=16)
    np.testing.assert_array_equal(y, 4 * x)
    with pytest.raises(TypeError, match="compiled with BLOCK=16, called with BLOCK=8"):
        compiled[(2,)](D(x, [16]), D(y, [16]), BLOCK=8)
    with pytest.raises(TypeError, match="missing run-time arguments: y_desc"):
        compiled[(2,)](D(x, [16]))


@pytest.mark.parametrize("variable", ["TAWA_INTERPRET", "TRITON_INTERPRET"])
def test_interpret_variables(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    from tawa_xdsl.jit import interpret_launch, select_backend

    monkeypatch.delenv("TAWA_INTERPRET", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv(variable, "1")
    assert select_backend(None) is interpret_launch


@tawa_xdsl.jit(interpret=True)
def scale_maybe(x_desc, y_desc, s_desc, BLOCK: tl.constexpr):
    """y = x (* s where s_desc is given): a None argument is a constexpr None."""
    pid = tl.program_id(0)
    x = x_desc.load([pid * BLOCK])
    if s_desc is not None:
        x = x * s_desc.load([pid * BLOCK])
    y_desc.store([pid * BLOCK], x)


def test_none_arguments_specialize_as_in_triton() -> None:
    x, s = np.arange(16, dtype=np.float32), np.full(16, 3.0, np.float32)
    y = np.zeros(16, np.float32)
    compiled = scale_maybe[(2,)](D(x, [8]), D(y, [8]), None, BLOCK=8)
    np.testing.assert_array_equal(y, x)
    assert compiled.constexprs["s_desc"] is None
    assert [name for name, _ in compiled.signature] == ["x_desc", "y_desc"]  # not a parameter
    with_scale = scale_maybe[(2,)](D(x, [8]), D(y, [8]), D(s, [8]), BLOCK=8)
    np.testing.assert_array_equal(y, 3 * x)
    assert with_scale is not compiled and len(scale_maybe.cache) == 2
    assert scale_maybe[(2,)](D(x, [8]), D(y, [8]), None, BLOCK=8) is compiled


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found on PATH")
def test_asm_and_metadata_of_a_compiled_kernel() -> None:
    import dataclasses

    compiled = gemm.warmup(
        DescriptorArg(tl.float16, (128, 64)), DescriptorArg(tl.float16, (128, 64)),
        DescriptorArg(tl.float16, (128, 128)), ScalarArg(tl.int32), ScalarArg(tl.int32),
        ScalarArg(tl.int32), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
    )  # fmt: skip
    compiled = dataclasses.replace(compiled, options=dataclasses.replace(compiled.options,
                                   verify=False))  # fmt: skip
    assert list(compiled.asm) == ["tile", "aref", "mbarrier", "nvgpu", "ptx", "cubin"]
    assert ".target sm_90a" in compiled.asm["ptx"] and compiled.asm["ptx"] == compiled.ir["ptx"]
    cubin = compiled.asm["cubin"]
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF"
    meta = compiled.metadata
    assert meta.name == compiled.gpu_kernel().name and meta.threads == 384
    assert meta.num_warps == 12 and meta.spills == 0
    assert 100 <= meta.registers <= 255 and meta.shared == compiled.gpu_kernel().smem_bytes


def test_cubin_without_ptxas_says_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    import tawa_xdsl.jit as jit_module

    def no_ptxas(ptx: str):
        raise FileNotFoundError("ptxas not found on PATH")

    monkeypatch.setattr(jit_module, "assemble", no_ptxas)
    compiled = accumulate.warmup(DescriptorArg(tl.float32, (8,)), DescriptorArg(tl.float32, (8,)),
                                 BLOCK=8)  # fmt: skip
    compiled._gpu_kernel = type("Stub", (), {"ptx": ""})()
    with pytest.raises(RuntimeError, match=r"\.asm\['cubin'\] and \.metadata run ptxas, which "):
        compiled.asm["cubin"]
