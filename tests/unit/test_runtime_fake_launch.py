"""The whole GPU launch path of `@jit` on the CPU, under `runtime.fake_driver` (the driver's
calls succeed at once; everything above them is the runtime's own code): a repeated launch is
the prepared one, tensor maps are encoded once per address and layout and again when either
changes, and the packed parameters carry what the tensors say."""

from __future__ import annotations

import importlib

import pytest

import tawa_xdsl
from tawa_xdsl.jit import JITFunction, launch_key
from tawa_xdsl.kernels.gemm import gemm
from tawa_xdsl.runtime import fake_driver
from tawa_xdsl.runtime.errors import CudaError, LaunchError
from tawa_xdsl.runtime.memory import ArrayView, DeviceArray

launch_module = importlib.import_module("tawa_xdsl.runtime.launch")
BLOCKS = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}
D = tawa_xdsl.TensorDescriptor.from_tensor


def device_matrix(pointer: int, rows: int, cols: int = 64) -> DeviceArray:
    return DeviceArray(ArrayView(pointer, "float16", (rows, cols), (cols, 1)))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> fake_driver.FakeDriver:
    return fake_driver.install(monkeypatch.setattr)


@pytest.fixture
def kernel() -> JITFunction:
    return JITFunction(gemm.fn)  # a JITFunction of its own: its launch caches die with the test


def arguments(a: int = 0x10000, b: int = 0x20000, c: int = 0x30000, m: int = 256):
    return [D(device_matrix(a, m), [128, 64]), D(device_matrix(b, 256), [128, 64]),
            D(device_matrix(c, m, 256), [128, 128]), m, 256, 64]  # fmt: skip


def test_a_repeat_is_the_prepared_launch_and_encodes_nothing(fake, kernel) -> None:
    args = arguments()
    kernel[(4,)](*args, **BLOCKS)
    assert [e.address for e in fake.encodings] == [0x10000, 0x20000, 0x30000]
    assert fake.encodings[0].dims == (64, 256) and fake.encodings[2].box == (128, 128)
    for _ in range(3):
        kernel[(4,)](*args, **BLOCKS)
    assert kernel.repeat_hits == 3 and len(fake.encodings) == 3
    (repeat,) = kernel.launches.values()
    (prepared,) = repeat.prepared.values()
    assert prepared.args == ()  # the cache keeps no tensor alive


@pytest.mark.parametrize("change", ["address", "shape"])
def test_a_moved_or_reshaped_tensor_gets_a_new_map(fake, kernel, change: str) -> None:
    kernel[(4,)](*arguments(), **BLOCKS)
    changed = arguments(c=0x40000) if change == "address" else arguments(m=384)
    kernel[(6,)](*changed, **BLOCKS)
    new = fake.encodings[3:]
    if change == "address":  # only C's map is new: A's and B's are reused
        assert [(e.address, e.dims) for e in new] == [(0x40000, (256, 256))]
    else:  # A and C have 384 rows now
        assert [(e.address, e.dims) for e in new] == [(0x10000, (64, 384)),
                                                     (0x30000, (256, 384))]  # fmt: skip
    assert kernel.repeat_hits == 0 and len(kernel.launches) == 2
    prepared = next(iter(kernel.launches[launch_key(changed, BLOCKS)].prepared.values()))
    params = [p.name for p in prepared.kernel.params]
    m = prepared.params.param_bytes(params.index("m"))
    assert int.from_bytes(m, "little") == (256 if change == "address" else 384)


def test_the_grid_and_the_stream_pick_their_own_prepared_launch(fake, kernel) -> None:
    args = arguments()
    kernel[(4,)](*args, **BLOCKS)
    kernel[lambda meta: (4,)](*args, **BLOCKS)  # the same grid through a callable
    kernel[(4,)](*args, stream=7, **BLOCKS)
    (repeat,) = kernel.launches.values()
    assert kernel.repeat_hits == 1 and set(repeat.prepared) == {((4,), 0), ((4,), 7)}
    assert next(iter(repeat.prepared.values())).native.hStream is None  # stream 0
    assert repeat.prepared[(4,), 7].native.hStream == 7


def test_a_failed_launch_names_the_call(fake) -> None:
    with pytest.raises(CudaError, match="^cuLaunchKernelEx failed with CUresult 700"):
        launch_module.raise_for_result(700, "cuLaunchKernelEx")


def test_the_launch_key_tells_values_apart() -> None:
    desc = D(device_matrix(0x10000, 256), [128, 64])
    keys = {launch_key(values, {}) for values in ([1], [True], [1.0], ["1"], [None], [desc])}
    assert None not in keys and len(keys) == 6
    assert launch_key([desc], {}) == launch_key([D(device_matrix(0x10000, 256), [128, 64])], {})
    assert launch_key([desc, 1], {}) != launch_key([desc], {"x": 1})


def test_a_new_output_each_launch_encodes_only_its_map(fake, kernel) -> None:
    """The miss path (every launch a new launch key): the kernel is loaded and its launch plan
    made once; each launch encodes C's map alone and packs C's new address."""
    kernel[(4,)](*arguments(), **BLOCKS)
    compiled = next(iter(kernel.cache.values()))
    plan = compiled.launch_cache().plan
    for turn in range(1, 5):
        c = 0x30000 + turn * 0x100000
        kernel[(4,)](*arguments(c=c), **BLOCKS)
        assert len(fake.encodings) == 3 + turn and fake.encodings[-1].address == c
        prepared = kernel.launches[launch_key(arguments(c=c), BLOCKS)].prepared[(4,), 0]
        params = [p.name for p in prepared.kernel.params]
        pointer = prepared.params.param_bytes(params.index("c_desc_ptr"))
        assert int.from_bytes(pointer, "little") == c
    assert fake.modules == 1 and compiled.launch_cache().plan is plan
    assert kernel.repeat_hits == 0 and compiled.launch_cache().misses == 5


def test_a_planned_launch_packs_what_the_checked_pack_packs(fake, kernel) -> None:
    args = arguments()
    program = kernel.warmup(*args, **BLOCKS).gpu_kernel()
    tensors = [a.base if hasattr(a, "base") else a for a in args]
    planned = launch_module.LaunchPlan(program).prepare((4,), tensors, 0)
    values = launch_module.kernel_arguments(program, tensors)
    checked = launch_module.pack_parameters(planned.kernel, values)
    for index in range(len(planned.kernel.params)):
        assert planned.params.param_bytes(index) == checked.param_bytes(index)
    with pytest.raises(LaunchError, match=r"parameter m \(\.u32 m\): expected an int, got float"):
        launch_module.LaunchPlan(program).prepare((4,), [*tensors[:3], 2.5, 256, 64], 0)
