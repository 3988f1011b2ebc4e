"""Verify every ring of a lowered module: extract, prove, or find a shortest counterexample.

`verify_module(module)` returns one `RingVerdict` per ring. The proof is the compiler's inductive
certificate checked by 1-induction with Z3 (`certificate.prove`: every trip count N >= 0 and every
number of persistent tiles). When the certificate fails, the explicit search over the finite
lag-relative model (`explicit.search`) looks for a shortest violating schedule, rendered by
`trace.render`. A failed certificate for which the search finds no violation is an internal
error of the certificate generator, reported as such (`internal_error`; the exhaustive search
alone then shows the ring safe). `method="explicit"` skips the certificate (the second oracle).
Named barriers and TMA-store staging get one more verdict (`named_barriers.check_named`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp

from tawa_xdsl.diagnostics import TawaError
from tawa_xdsl.dialects import nvgpu
from tawa_xdsl.verify.certificate import prove
from tawa_xdsl.verify.compose import PremiseError, check_composition
from tawa_xdsl.verify.explicit import search
from tawa_xdsl.verify.extract import ExtractionError, RingProtocolModel, extract
from tawa_xdsl.verify.named_barriers import NamedBarrierViolation, check_named
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
    method: str = "certificate"  # what proved it: "certificate" (1-induction) or "explicit"
    certificate: str = ""  # why the certificate check failed ("" when it held)
    internal_error: bool = False  # the certificate failed, yet no counterexample exists

    def summary(self) -> str:
        if self.method == "named":
            if self.proved:
                return f"proved: {self.ring}: {self.message} ({self.seconds:.2f} s)"
            return f"FAILED: {self.ring}: {self.message}"
        if self.method == "composition":
            if self.proved:
                return (
                    f"proved: rings {self.ring} together: no cross-ring deadlock for every "
                    f"trip count and tile count (decomposition, {self.seconds:.2f} s)"
                )
            return f"FAILED: rings {self.ring} together: {self.message}"
        what = (
            "no deadlock, overwrite, stale/partial read, count or tx mismatch, parity aliasing "
            "for every trip count and tile count"
        )
        if self.internal_error:
            return (
                f"INTERNAL ERROR: ring {self.ring}: the compiler's certificate is wrong "
                f"({self.certificate}); the explicit search found no counterexample "
                f"({self.states} abstract states): {what} holds by exhaustive search, "
                f"{self.seconds:.2f} s"
            )
        if self.proved and self.method == "certificate":
            return (
                f"proved: ring {self.ring}: {what} (certificate, 1-induction, {self.seconds:.2f} s)"
            )
        if self.proved:
            return (
                f"proved: ring {self.ring}: {what} (explicit search, {self.states} abstract "
                f"states, {self.seconds:.2f} s)"
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
            "method": self.method,
            "certificate": self.certificate,
            "internal_error": self.internal_error,
        }


def verify_ring(ring: RingProtocolModel, method: str = "certificate") -> RingVerdict:
    """Prove one ring (module docstring)."""
    start = time.perf_counter()
    failed = ""
    if method == "certificate":
        proof = prove(ring)
        if proof.proved:
            return RingVerdict(ring.name, True, time.perf_counter() - start, 0, model=ring)
        failed = proof.failed
    result = search(ring)
    seconds = time.perf_counter() - start
    if result.violation is None:
        return RingVerdict(
            ring.name,
            True,
            seconds,
            result.states,
            model=ring,
            method="explicit",
            certificate=failed,
            internal_error=method == "certificate",
        )
    return RingVerdict(
        ring.name,
        False,
        seconds,
        result.states,
        result.violation,
        result.message,
        render(ring, result),
        ring,
        method="explicit",
        certificate=failed,
    )


def verify_composition(rings: list[RingProtocolModel]) -> RingVerdict | None:
    """The cross-ring deadlock verdict of a kernel's rings (`compose.py`), None for one ring.

    A kernel outside the premises of the decomposition raises `ExtractionError`."""
    if len(rings) < 2:
        return None
    try:
        result = check_composition(rings)
    except PremiseError as error:
        raise ExtractionError(f"cross-ring deadlock: {error}") from error
    return RingVerdict(
        ", ".join(result.rings),
        result.proved,
        result.seconds,
        0,
        None if result.proved else "DEADLOCK",
        result.message,
        method="composition",
    )


def verify_module(module: ModuleOp, method: str = "certificate") -> list[RingVerdict]:
    """One verdict per ring of `module`, then one for the rings together when there are
    several (extraction errors raise `ExtractionError`)."""
    rings = extract(module)
    verdicts = [verify_ring(ring, method) for ring in rings]
    # The decomposition relies on every ring proved alone (P2 of compose.py).
    together = verify_composition(rings) if all(v.proved for v in verdicts) else None
    return verdicts + ([together] if together else []) + verify_named(module)


def verify_named(module: ModuleOp) -> list[RingVerdict]:
    """The verdict on the named barriers and TMA-store staging (`named_barriers.py`), none
    when the kernel has neither; IR outside that model raises `ExtractionError`."""
    start = time.perf_counter()
    try:
        count = check_named(module)
    except NamedBarrierViolation as error:
        return [RingVerdict("named barriers", False, 0.0, 0, "NAMED", str(error), method="named")]
    if not count and not any(isinstance(op, nvgpu.TmaStoreOp) for op in module.walk()):
        return []
    what = (
        f"{count} named barrier(s) and the TMA-store staging: matched arrivals and thread "
        "counts for every trip count, no turn deadlock, no staging write before its store read"
    )
    return [
        RingVerdict(
            "named barriers", True, time.perf_counter() - start, 0, None, what, method="named"
        )
    ]


class ProtocolError(TawaError):
    """A lowered ring's barrier protocol can go wrong (one line; tawa-verify has the trace)."""


def check_module(module: ModuleOp) -> list[RingVerdict]:
    """Lint, prove every ring, or raise a one-line `ProtocolError` (the compile pipeline's check).

    Proofs are cached by protocol shape (`certificate.prove`), so compiling the same pipeline
    again (autotuning) costs only the extraction. An internal error of the certificate
    does not fail the compile (the explicit search showed the ring safe)."""
    from tawa_xdsl.verify.lints import lint_module

    errors = [x for x in lint_module(module) if x.severity == "error"]
    if errors:
        raise ProtocolError(str(errors[0]))
    verdicts = []
    try:
        rings = extract(module)
    except ExtractionError as error:
        raise ProtocolError(f"{error} (the barrier protocol cannot be verified)") from error
    for ring in rings:
        verdict = verify_ring(ring)
        if not verdict.proved:
            raise ProtocolError(
                f"{ring.loc}: error: barrier protocol of ring {ring.name} can go wrong: "
                f"{verdict.message} (tawa-verify prints the trace)"
            )
        verdicts.append(verdict)
    try:
        together = verify_composition(rings)
    except ExtractionError as error:
        raise ProtocolError(f"{error} (the barrier protocol cannot be verified)") from error
    if together is not None and not together.proved:
        raise ProtocolError(
            f"{rings[0].loc}: error: barrier protocols of rings {together.ring} can deadlock "
            f"each other: {together.message}"
        )
    try:
        named = verify_named(module)
    except ExtractionError as error:
        raise ProtocolError(f"{error} (the barrier protocol cannot be verified)") from error
    if named and not named[0].proved:  # the message starts with the op's place
        raise ProtocolError(named[0].message.replace(": ", ": error: ", 1))
    return verdicts + ([together] if together else []) + named
