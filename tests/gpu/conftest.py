"""GPU tests: everything under tests/gpu is marked `gpu` and skipped, with the reason, when
there is no sm_90 GPU, driver or cuda-python (`tawa_xdsl.runtime.require_gpu` says which).

Run them on an H100/H200 with `pytest tests/gpu -v` (the package's `gpu` extra installed).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

GPU_DIR = Path(__file__).resolve().parent
# The modules here import their sibling ws_gemm_reference; with --import-mode=importlib pytest
# does not put this folder on sys.path itself.
if str(GPU_DIR) not in sys.path:
    sys.path.insert(0, str(GPU_DIR))


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """None when an sm_90 GPU is usable, else the runtime's one-line reason."""
    from tawa_xdsl.runtime import CudaError, NoGPUError, UnsupportedGPUError, require_gpu

    try:
        require_gpu()
    except (NoGPUError, UnsupportedGPUError, CudaError) as exc:
        return f"needs an sm_90 GPU: {exc}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if GPU_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.gpu)
        if "gpu" in item.keywords:
            reason = gpu_unavailable_reason()
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def device():
    from tawa_xdsl.runtime import require_gpu

    return require_gpu()


@pytest.fixture(scope="session")
def torch():
    return pytest.importorskip("torch", reason="GPU tests compare against torch")
