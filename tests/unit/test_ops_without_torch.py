"""`tawa_xdsl.ops` imports without torch and says what is missing when an op is called (run in
a subprocess where `import torch` fails, so it holds whether or not torch is installed)."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import sys
sys.modules["torch"] = None  # `import torch` now raises ModuleNotFoundError
import tawa_xdsl.ops as ops
try:
    ops.attention(None, None, None)
except ModuleNotFoundError as error:
    print(error)
"""


def test_ops_import_without_torch_and_name_the_missing_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "tawa_xdsl.ops needs PyTorch: pip install 'tawa-xdsl[torch]'"
