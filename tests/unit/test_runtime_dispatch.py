"""The launch caches on the CPU: the jit dispatch and `runtime.dispatch.LaunchCache`, with the
GPU driver calls replaced by fakes that count what they were asked to do."""

from __future__ import annotations

import numpy as np
import pytest

import tawa_xdsl
import tawa_xdsl.language as tl
from tawa_xdsl.jit import JITFunction
from tawa_xdsl.runtime import dispatch
from tawa_xdsl.runtime.dispatch import LaunchCache, gpu_launch, resolve_stream
from tawa_xdsl.runtime.memory import ArrayView, DeviceArray


class FakeDeviceTensor:
    """Device memory as a `__cuda_array_interface__` object at a made-up address."""

    def __init__(self, pointer: int, shape: tuple[int, ...], typestr: str = "<f2"):
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": typestr, "data": (pointer, False), "version": 3,
        }  # fmt: skip


class FakePrepared:
    def __init__(self, log: list[str], args: list):
        self.log, self.args = log, args

    def __call__(self) -> None:
        self.log.append("launch")

    def release_arguments(self) -> None:
        self.args = []
        self.log.append("release")


class FakePrepare:
    """Stands in for encoding tensor maps and packing parameters (`CompiledKernel.prepare`)."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.log: list[str] = []

    def __call__(self, kernel, grid, args, stream):
        self.calls.append((grid, stream, args))
        return FakePrepared(self.log, args)


def descriptor(pointer: int, shape=(256, 64), block=(128, 64)):
    return tawa_xdsl.TensorDescriptor.from_tensor(FakeDeviceTensor(pointer, shape), block)


def test_a_repeated_launch_reuses_the_prepared_one() -> None:
    prepare = FakePrepare()
    cache = LaunchCache("kernel", prepare)
    a, b = descriptor(0x1000), descriptor(0x2000)
    for _ in range(3):
        cache.launch((2, 1, 1), [a, b, 256], 0)
    assert (cache.misses, cache.hits) == (1, 2)
    assert len(prepare.calls) == 1
    assert prepare.log == ["release", "launch", "launch", "launch"]
    # the prepared launch got the tensors behind the descriptors, not the descriptors
    assert prepare.calls[0][2][0] is a.base


@pytest.mark.parametrize(
    "change",
    ["pointer", "shape", "block", "scalar", "stream", "grid"],
)
def test_what_the_packed_bytes_depend_on_invalidates(change: str) -> None:
    prepare = FakePrepare()
    cache = LaunchCache("kernel", prepare)
    cache.launch((2, 1, 1), [descriptor(0x1000), 256], 0)
    desc, scalar, stream, grid = descriptor(0x1000), 256, 0, (2, 1, 1)
    if change == "pointer":
        desc = descriptor(0x1100)
    elif change == "shape":
        desc = descriptor(0x1000, shape=(384, 64))
    elif change == "block":
        desc.block_shape = (64, 64)  # as an autotune pre-hook does
    elif change == "scalar":
        scalar = 384
    elif change == "stream":
        stream = 7
    else:
        grid = (3, 1, 1)
    cache.launch(grid, [desc, scalar], stream)
    assert cache.misses == 2 and cache.hits == 0
    cache.launch(grid, [desc, scalar], stream)
    assert cache.hits == 1


def test_the_least_recently_used_launch_is_dropped() -> None:
    cache = LaunchCache("kernel", FakePrepare(), capacity=2)
    for n in (1, 2, 1, 3):  # 1 is used again before 3 arrives: 2 goes
        cache.launch((1, 1, 1), [n], 0)
    cache.launch((1, 1, 1), [1], 0)
    assert cache.hits == 2
    cache.launch((1, 1, 1), [2], 0)
    assert cache.misses == 4


class FakeBackendKernel:
    def __init__(self):
        self.copying_launches: list[tuple] = []

    def launch(self, grid, *args, stream=0):
        self.copying_launches.append((grid, args, stream))


class FakeJitKernel:
    def __init__(self, prepare: FakePrepare):
        self.kernel = FakeBackendKernel()
        self.cache = LaunchCache(self.kernel, prepare)

    def gpu_kernel(self):
        return self.kernel

    def launch_cache(self):
        return self.cache


def test_device_descriptors_go_through_the_cache_host_ones_are_copied() -> None:
    prepare = FakePrepare()
    jit_kernel = FakeJitKernel(prepare)
    gpu_launch(jit_kernel, (1, 1, 1), [descriptor(0x1000), 64])
    assert len(prepare.calls) == 1 and not jit_kernel.kernel.copying_launches
    host = tawa_xdsl.TensorDescriptor.from_tensor(np.zeros((8, 64), np.float16), [8, 64])
    gpu_launch(jit_kernel, (1, 1, 1), [descriptor(0x1000), host, 64])
    ((grid, args, _),) = jit_kernel.kernel.copying_launches
    assert args[0].__class__ is FakeDeviceTensor  # the device tensor itself, in place
    assert args[1] is host  # the numpy descriptor, for the copying path


def test_a_grid_without_programs_prepares_nothing() -> None:
    prepare = FakePrepare()
    gpu_launch(FakeJitKernel(prepare), (0, 1, 1), [descriptor(0x1000)])
    assert prepare.calls == []


def test_streams_from_handles_and_stream_objects() -> None:
    class Stream:
        cuda_stream = 1234

    assert resolve_stream(None, [descriptor(0x1000)]) == 0
    assert resolve_stream(99, []) == 99
    assert resolve_stream(Stream(), []) == 1234


@tawa_xdsl.jit(interpret=True)
def double_kernel(x_desc, y_desc, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    y_desc.store([pid * BLOCK], x_desc.load([pid * BLOCK]) * 2.0)


def test_jit_dispatch_binds_once_per_specialization(monkeypatch: pytest.MonkeyPatch) -> None:
    binds = []
    real_bind = JITFunction.bind
    monkeypatch.setattr(
        JITFunction, "bind", lambda self, a, k: binds.append(1) or real_bind(self, a, k)
    )
    kernel = JITFunction(double_kernel.fn, interpret=True)
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    xd = tawa_xdsl.TensorDescriptor.from_tensor(x, [16])
    yd = tawa_xdsl.TensorDescriptor.from_tensor(y, [16])
    for n in (32, 17, 32):  # a run-time scalar's value does not specialize
        kernel[(2,)](xd, yd, n, BLOCK=16)
    assert len(binds) == 1 and len(kernel.dispatch) == 1
    np.testing.assert_array_equal(y, 2 * x)
    kernel[(4,)](xd, yd, 32, BLOCK=8)  # a constexpr does
    xd.block_shape = [8]  # so does a descriptor's block shape (a Triton pre-hook sets it)
    yd.block_shape = [8]
    kernel[(4,)](xd, yd, 32, BLOCK=8)
    assert len(binds) == 3 and len(kernel.cache) == 3
    kernel[lambda meta: (32 // meta["BLOCK"],)](xd, yd, 32, BLOCK=8)  # a grid callable
    assert len(binds) == 3


def test_an_unknown_argument_still_fails_in_one_line() -> None:
    xd = tawa_xdsl.TensorDescriptor.from_tensor(np.zeros(16, np.float32), [16])
    with pytest.raises(TypeError, match="double_kernel: unknown launch option 'BLOK'"):
        double_kernel[(1,)](xd, xd, 16, BLOCK=16, BLOK=16)


def test_the_gpu_backend_is_the_dispatching_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import tawa_xdsl.jit as jit_module

    monkeypatch.setattr(jit_module, "gpu_available", lambda: True)
    assert jit_module.gpu_backend() is dispatch.gpu_launch


def device_descriptor(pointer: int, block: int = 16) -> tawa_xdsl.TensorDescriptor:
    view = ArrayView(pointer, "float32", (32,), (1,))
    return tawa_xdsl.TensorDescriptor.from_tensor(DeviceArray(view), [block])


def test_a_repeated_gpu_launch_is_one_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    """`JITFunction.run_on_gpu`: binds and prepares once per launch key, grid and stream; a
    new address, block shape, scalar or stream prepares again."""
    import tawa_xdsl.jit as jit_module

    monkeypatch.setattr(jit_module, "gpu_available", lambda: True)
    kernel = JITFunction(double_kernel.fn)
    prepare = FakePrepare()
    x, y = device_descriptor(0x1000), device_descriptor(0x2000)
    for block in (16, 8):
        compiled = kernel.compile(device_descriptor(0, block), device_descriptor(0, block), 32,
                                  BLOCK=block)  # fmt: skip
        compiled._gpu_kernel = FakeBackendKernel()
        compiled._launches = LaunchCache(compiled._gpu_kernel, prepare)
    for _ in range(3):
        kernel[(2,)](x, y, 32, BLOCK=16)
    assert (len(prepare.calls), kernel.repeat_hits) == (1, 2)
    assert prepare.log == ["release", "launch", "launch", "launch"]
    kernel[lambda meta: (32 // meta["BLOCK"],)](x, y, 32, BLOCK=16)  # grid (2,) again
    assert (len(prepare.calls), kernel.repeat_hits) == (1, 3)
    kernel[(2,)](x, device_descriptor(0x3000), 32, BLOCK=16)  # a new output address
    kernel[(2,)](x, y, 31, BLOCK=16)  # a scalar's value is packed into the parameters
    kernel[(2,)](x, y, 32, BLOCK=16, stream=7)
    assert [call[1] for call in prepare.calls][-1] == 7
    assert len(prepare.calls) == 4
    x.block_shape = y.block_shape = [8]  # a pre-hook: another specialization
    kernel[(4,)](x, y, 32, BLOCK=8)
    assert len(kernel.cache) == 2 and len(prepare.calls) == 5
    kernel[(4,)](x, y, 32, BLOCK=8)
    assert kernel.repeat_hits == 4
