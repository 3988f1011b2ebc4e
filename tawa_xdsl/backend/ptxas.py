"""Assemble PTX with `ptxas -arch=sm_90a` and flag the warnings that mean a slow kernel.

DESIGN §7: a PTX that ptxas rejects, or that makes it say it serialized wgmma (any of its
reasons, C7509-C7520: an accumulator read or written between a wgmma and its wait, a wait
it cannot match, ...) or ignored setmaxnreg (C7508), is a compiler bug.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

FORBIDDEN_WARNINGS = ("C7508", "wgmma.mma_async instructions are serialized")
_REGISTERS = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


@dataclass(frozen=True)
class PtxasResult:
    """What `ptxas -v` said about one module."""

    returncode: int
    log: str
    cubin: bytes = b""  # the assembled module (empty when ptxas failed)

    @property
    def ok(self) -> bool:
        """Assembled, and none of the forbidden warnings."""
        return self.returncode == 0 and not self.forbidden()

    def forbidden(self) -> list[str]:
        """The log lines carrying a forbidden warning code."""
        return [
            line for line in self.log.splitlines() if any(c in line for c in FORBIDDEN_WARNINGS)
        ]

    @property
    def registers(self) -> int | None:
        match = _REGISTERS.search(self.log)
        return int(match.group(1)) if match else None

    @property
    def spill_bytes(self) -> int:
        """Bytes of spill stores plus spill loads, over every function in the log."""
        return sum(int(stores) + int(loads) for stores, loads in _SPILLS.findall(self.log))


def find_ptxas() -> str | None:
    """The ptxas on PATH (or in /usr/local/cuda/bin), else None."""
    found = shutil.which("ptxas")
    if found:
        return found
    candidate = Path("/usr/local/cuda/bin/ptxas")
    return str(candidate) if candidate.exists() else None


def assemble(ptx: str, arch: str = "sm_90a", ptxas: str | None = None) -> PtxasResult:
    """Run `ptxas -arch=<arch> -v` on `ptx`; raise FileNotFoundError without ptxas."""
    tool = ptxas or find_ptxas()
    if tool is None:
        raise FileNotFoundError("ptxas not found on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        src.write_text(ptx, encoding="ascii")
        proc = subprocess.run(
            [tool, f"-arch={arch}", "-v", str(src), "-o", str(out)],
            capture_output=True,
            text=True,
            check=False,
        )
        cubin = out.read_bytes() if proc.returncode == 0 and out.exists() else b""
    return PtxasResult(proc.returncode, proc.stdout + proc.stderr, cubin)
