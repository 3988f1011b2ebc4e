"""Without cuda-python or a driver, the runtime imports and fails in one clear line."""

import subprocess
import sys
import types

import numpy as np
import pytest

from tawa_xdsl import runtime
from tawa_xdsl.runtime import driver
from tawa_xdsl.runtime.errors import NoGPUError, UnsupportedGPUError


@pytest.fixture(autouse=True)
def fresh_driver_caches():
    driver.cuda_driver.cache_clear()
    driver.open_device.cache_clear()
    yield
    driver.cuda_driver.cache_clear()
    driver.open_device.cache_clear()


def test_import_loads_no_cuda_module() -> None:
    code = "import sys, tawa_xdsl.runtime; print(any(m.startswith('cuda') for m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_missing_cuda_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    with pytest.raises(NoGPUError, match=r"cuda-python is not installed \(install the GPU extra"):
        runtime.require_gpu()
    assert not runtime.gpu_available()


class Result:
    """An enum-like CUresult."""

    def __init__(self, name: str, value: int):
        self.name, self.value = name, value

    def __int__(self) -> int:
        return self.value


def fake_driver(**overrides: object) -> types.SimpleNamespace:
    """A stand-in for cuda.bindings.driver whose cuInit fails the way it is told to."""
    namespace = types.SimpleNamespace(
        cuInit=lambda flags: (Result("CUDA_SUCCESS", 0),),
        cuGetErrorString=lambda err: (0, b"stand-in description"),
    )
    namespace.__dict__.update(overrides)
    return namespace


def test_missing_driver_library(monkeypatch: pytest.MonkeyPatch) -> None:
    def cu_init(flags: int) -> tuple[Result]:
        raise RuntimeError("Failed to dlopen libcuda.so.1")

    monkeypatch.setattr(driver, "cuda_driver", lambda: fake_driver(cuInit=cu_init))
    with pytest.raises(NoGPUError) as info:
        runtime.require_gpu()
    assert str(info.value) == "no GPU driver: Failed to dlopen libcuda.so.1"


def test_no_device(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_driver(cuInit=lambda flags: (Result("CUDA_ERROR_NO_DEVICE", 100),))
    monkeypatch.setattr(driver, "cuda_driver", lambda: fake)
    with pytest.raises(NoGPUError, match="no usable GPU: cuInit returned CUDA_ERROR_NO_DEVICE"):
        runtime.require_gpu()


def test_wrong_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    ampere = driver.Device(0, "NVIDIA A100", (8, 0), 108, 166912, handle=0, context=None)
    monkeypatch.setattr(driver, "open_device", lambda ordinal=0: ampere)
    with pytest.raises(UnsupportedGPUError) as info:
        runtime.require_gpu()
    assert str(info.value) == (
        "GPU 0 (NVIDIA A100) is sm_80; tawa-xdsl kernels need an sm_90 (Hopper: H100/H200) GPU"
    )


def test_to_device_without_gpu_raises_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    with pytest.raises(NoGPUError):
        runtime.to_device(np.zeros(4, np.float32))
