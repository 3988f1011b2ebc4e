"""Runs the lit/filecheck suite under pytest, so one command runs every test."""

import subprocess
import sys
from pathlib import Path


def test_lit_suite() -> None:
    suite = Path(__file__).parent / "filecheck"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lit"), "-v", str(suite)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
