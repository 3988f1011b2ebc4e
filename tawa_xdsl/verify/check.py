"""Verify every ring of a lowered module: extract, search, explain.

`verify_module(module)` returns one `RingVerdict` per ring: proved (with the time taken and the
number of abstract states, which cover every trip count N >= 0 and every number of persistent
tiles), or a counterexample trace rendered by `trace.render`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp

from tawa_xdsl.verify.explicit import search
from tawa_xdsl.verify.extract import RingProtocolModel, extract
from tawa_xdsl.verify.trace import render


@dataclass
class RingVerdict:
    ring: str
    proved: bool
    seconds: float
    states: int
    violation: str | None = None
    message: str = ""
    trace: list[str] = field(default_factory=list)
    model: RingProtocolModel | None = None

    def summary(self) -> str:
        if self.proved:
            return (
                f"proved: ring {self.ring}: no deadlock, overwrite, stale/partial read, count or "
                f"tx mismatch, parity aliasing for every trip count "
                f"({self.states} abstract states, {self.seconds:.2f} s)"
            )
        return f"FAILED: ring {self.ring}: {self.message}"

    def to_json(self) -> dict:
        return {
            "ring": self.ring,
            "proved": self.proved,
            "seconds": round(self.seconds, 3),
            "states": self.states,
            "violation": self.violation,
            "message": self.message,
            "trace": self.trace,
        }


def verify_ring(ring: RingProtocolModel) -> RingVerdict:
    start = time.perf_counter()
    result = search(ring)
    seconds = time.perf_counter() - start
    if result.violation is None:
        return RingVerdict(ring.name, True, seconds, result.states, model=ring)
    return RingVerdict(
        ring.name,
        False,
        seconds,
        result.states,
        result.violation,
        result.message,
        render(ring, result),
        ring,
    )


def verify_module(module: ModuleOp) -> list[RingVerdict]:
    return [verify_ring(ring) for ring in extract(module)]
