"""Every code block of the README runs as written, unless the README marks it illustrative.

A block is illustrative when the line before its fence is `<!-- illustrative -->` (installs,
the test suite itself, GPU-only or abridged code, sample output). Python blocks are executed
from the repository root; bash blocks run command by command (backslash continuations joined,
`#` comments dropped) in a scratch directory that sees the repository's `examples/`, with this
interpreter's tools first on PATH, and must exit 0.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARK = "<!-- illustrative -->"


@dataclass(frozen=True)
class Block:
    language: str
    line: int  # of the opening fence
    text: str
    illustrative: bool


def blocks() -> list[Block]:
    lines = README.read_text().splitlines()
    found, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            previous = next((x for x in reversed(lines[:i]) if x.strip()), "")
            body = "\n".join(lines[i + 1 : end]) + "\n"
            found.append(Block(lines[i][3:].strip(), i + 1, body, previous.strip() == MARK))
            i = end + 1
        else:
            i += 1
    return found


RUNNABLE = [b for b in blocks() if not b.illustrative]


def commands(text: str) -> list[str]:
    joined = text.replace("\\\n", " ")
    lines = [line.split("  #")[0].strip() for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_every_block_runs_or_is_marked() -> None:
    for block in blocks():
        assert block.illustrative or block.language in ("python", "bash"), (
            f"README.md:{block.line}: a ```{block.language} block must be marked {MARK}"
        )
    assert len(RUNNABLE) >= 5


@pytest.mark.parametrize("block", RUNNABLE, ids=[f"line{b.line}" for b in RUNNABLE])
def test_block_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if block.language == "python":
        script = tmp_path / f"readme_line{block.line}.py"
        script.write_text(block.text)
        monkeypatch.chdir(ROOT)
        runpy.run_path(str(script), run_name="__main__")
        return
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for command in commands(block.text):
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, f"README.md:{block.line}: {command}\n{result.stderr}"
