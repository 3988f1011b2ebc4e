"""Refuse to run, in one line, under a Python that lacks the package's dependencies (a bare
`pytest` outside the virtual environment would otherwise fail every module's collection with
an ImportError)."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

import pytest

REQUIRED = ("xdsl", "numpy", "ml_dtypes", "z3", "hypothesis")


def pytest_configure(config: pytest.Config) -> None:
    missing = [name for name in REQUIRED if importlib.util.find_spec(name) is None]
    if missing:
        pytest.exit(
            f"tawa-xdsl tests: {sys.executable} lacks {', '.join(missing)}; install with "
            "`python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'`, "
            "then run `.venv/bin/pytest -n auto`",
            returncode=4,
        )


# Compiled kernels go to a cache of this run's own, not the user's ~/.cache/tawa-xdsl (set
# TAWA_CACHE_DIR to share one); tests of the cache itself pass their directory explicitly.
os.environ.setdefault("TAWA_CACHE_DIR", tempfile.mkdtemp(prefix="tawa-test-cache-"))
