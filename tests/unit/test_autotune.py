"""`tawa_xdsl.autotune` on the CPU: a fake timer stands in for the GPU.

The decorated kernel runs in the tile interpreter (every config computes the same GEMM);
the timer is a table from config to milliseconds, so the winner is known in advance.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.autotune import Autotuner, Config
from tawa_xdsl.compiler import CompileOptions, options_from_launch


@tawa_xdsl.jit(interpret=True)
def scale_kernel(x_desc, y_desc, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    x = x_desc.load([pid * BLOCK])
    y_desc.store([pid * BLOCK], x + x)


CONFIGS = [  # the descriptors' block is 16: every config computes the same result
    Config({"BLOCK": 16}, num_stages=2),
    Config({"BLOCK": 16}, num_stages=3, mma_depth=1, persistent=False),
    Config({"BLOCK": 16}, num_stages=4, epilogue="tma"),
]


class FakeTimer:
    """Runs each launcher once (the interpreter checks it works) and reads its time from
    `times` in the order configs are tried (one round in list order: `rounds=1`)."""

    def __init__(self, times: list[float]):
        self.times = list(times)
        self.calls = 0

    def __call__(self, run) -> float:
        run()
        self.calls += 1
        return self.times[(self.calls - 1) % len(self.times)]


def _descs(n: int):
    return np.arange(n, dtype=np.float32), np.zeros(n, dtype=np.float32)


def test_winner_is_fastest_and_launch_uses_it(tmp_path):
    timer = FakeTimer([3.0, 1.0, 2.0])
    tuned = tawa_xdsl.autotune(
        configs=CONFIGS, key=["n"], timer=timer, cache_dir=tmp_path, rounds=1
    )(scale_kernel)
    x, y = _descs(64)
    x_desc = tawa_xdsl.TensorDescriptor.from_tensor(x, [16])
    y_desc = tawa_xdsl.TensorDescriptor.from_tensor(y, [16])
    tuned[(4,)](x_desc, y_desc, 64)
    assert timer.calls == 3
    key = tuned.key_of({"x_desc": x_desc, "y_desc": y_desc, "n": 64})
    assert key == (64, ("x_desc", "float32"), ("y_desc", "float32"))
    assert tuned.best[key] == CONFIGS[1]
    np.testing.assert_array_equal(y, 2 * x)
    tuned[(4,)](x_desc, y_desc, 64)  # cached: no more timing
    assert timer.calls == 3


def test_new_key_tunes_again_and_disk_cache_is_reused(tmp_path):
    timer = FakeTimer([1.0, 5.0, 5.0])
    tuner = Autotuner(scale_kernel, CONFIGS, ["n"], timer=timer, cache_dir=tmp_path, rounds=1)
    prepared: list[Config] = []

    def run(config: Config):
        prepared.append(config)
        return lambda: None

    assert tuner.tune((64,), run) == CONFIGS[0]
    assert tuner.tune((128,), run) == CONFIGS[0]
    assert timer.calls == 6
    assert len(list(tmp_path.glob("*.json"))) == 2
    fresh = Autotuner(scale_kernel, CONFIGS, ["n"], timer=FakeTimer([9.0]), cache_dir=tmp_path)
    assert fresh.tune((64,), run) == CONFIGS[0]
    assert fresh.timer.calls == 0  # type: ignore[attr-defined]
    other = Autotuner(scale_kernel, CONFIGS[1:], ["n"], timer=FakeTimer([2.0, 1.0]),
                      cache_dir=tmp_path, rounds=1)  # fmt: skip
    assert other.tune((64,), run) == CONFIGS[2]  # another config list: its own entry


def test_failing_configs_are_skipped(tmp_path):
    def run(config: Config):
        if config.options().get("num_stages") != 4:
            raise RuntimeError("out of shared memory")
        return lambda: None

    tuner = Autotuner(scale_kernel, CONFIGS, ["n"], timer=FakeTimer([1.0]), use_disk=False)
    assert tuner.tune((1,), run) == CONFIGS[2]
    assert tuner.timings[(1,)][CONFIGS[0]] == float("inf")
    with pytest.raises(RuntimeError, match="no config"):
        Autotuner(scale_kernel, CONFIGS[:1], ["n"], timer=FakeTimer([1.0]), use_disk=False).tune(
            (1,), run
        )


def test_rounds_discount_the_first_kernel_after_a_pause():
    base = {CONFIGS[0]: 1.1, CONFIGS[1]: 1.0, CONFIGS[2]: 1.2}
    timed: list[float] = []

    def timer(launch) -> float:  # the first kernel after a pause runs 20% fast
        ms = launch() * (0.8 if not timed else 1.0)
        timed.append(ms)
        return ms

    def run(config: Config):
        return lambda: base[config]

    single = Autotuner(scale_kernel, CONFIGS, ["n"], timer=timer, use_disk=False, rounds=1)
    assert single.tune((1,), run) == CONFIGS[0]  # one pass credits the pause to the first
    timed.clear()
    rounds = Autotuner(scale_kernel, CONFIGS, ["n"], timer=timer, use_disk=False)
    assert rounds.tune((1,), run) == CONFIGS[1]
    assert len(timed) == 9
    assert rounds.timings[(1,)] == base
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        Autotuner(scale_kernel, CONFIGS, ["n"], timer=timer, rounds=0)


def test_config_round_trip_and_options():
    config = Config({"BLOCK_N": 256}, num_stages=3, mma_depth=2, num_consumer_groups=2,
                    persistent=True, epilogue="tma")  # fmt: skip
    assert Config.from_json(config.to_json()) == config
    assert hash(Config.from_json(config.to_json())) == hash(config)
    assert config.all_kwargs() == {
        "BLOCK_N": 256, "num_stages": 3, "mma_depth": 2, "num_consumer_groups": 2,
        "persistent": True, "epilogue": "tma",
    }  # fmt: skip
    assert options_from_launch(config.options()) == CompileOptions(3, 2, 2, True, "tma")
    assert config.compile_options == CompileOptions(3, 2, 2, True, "tma")


def test_config_options_are_the_compilers():
    """Every launch option reaches the config's compile options (registers and pingpong
    too, through JSON); an unknown one is refused when the config is made."""
    config = Config({"BLOCK": 16}, registers=(24, 240), pingpong=True, verify=False)
    expected = CompileOptions(registers=(24, 240), pingpong=True, verify=False)
    assert config.compile_options == expected
    again = Config.from_json(json.loads(json.dumps(config.to_json())))
    assert again == config and again.compile_options == config.compile_options
    with pytest.raises(TypeError, match=r"^unknown launch option 'num_stage'; launch options: "):
        Config({"BLOCK": 16}, num_stage=3)
    hinted = Config({"BLOCK": 16}, num_warps=8, maxnreg=128)  # Triton's: kept, choose nothing
    assert hinted.hints == {"num_warps": 8, "maxnreg": 128}
    assert hinted.options() == {} and hinted.compile_options == CompileOptions()
    assert Config.from_json(json.loads(json.dumps(hinted.to_json()))) == hinted
    assert hinted != Config({"BLOCK": 16})


def test_key_must_name_arguments():
    tuner = Autotuner(scale_kernel, CONFIGS, ["M"], use_disk=False)
    with pytest.raises(TypeError, match="unknown arguments"):
        tuner.key_of({"n": 3})
