"""Render a counterexample schedule as a step-by-step trace with iterations, source locations
and barrier phases."""

from __future__ import annotations

from tawa_xdsl.verify.explicit import Event, SearchResult
from tawa_xdsl.verify.extract import RingProtocolModel


def _barriers(state: tuple, slot: int) -> str:
    if slot < 0:
        return ""
    fb, fp, ftx = state[3][slot]
    eb, ep = state[4][slot]
    return f"full[{slot}] bit {fb} pend {fp} tx {ftx}; empty[{slot}] bit {eb} pend {ep}"


def render(ring: RingProtocolModel, result: SearchResult) -> list[str]:
    """One line per step: `actor it=N  op-text  (effect)  @ file:line:col  [barriers]`."""
    iteration: dict[str, int] = {}
    lines = [
        f"counterexample for ring {ring.name} (depth {ring.depth}, full count "
        f"{ring.full_count}, empty count {ring.empty_count}); {len(result.trace)} steps:"
    ]
    for n, (event, state) in enumerate(result.trace):
        lines.append(f"  {n + 1:3d}. " + _line(event, state, iteration))
    lines.append(f"  => {result.message}")
    return lines


def _line(event: Event, state: tuple, iteration: dict[str, int]) -> str:
    actor = event.actor
    it = iteration.get(actor, 0)
    if event.what in ("end", "end (last use)", "tile-end"):
        iteration[actor] = it + 1
    if event.step is None:
        what = {
            "end": "finishes iteration",
            "end (last use)": "finishes its last iteration (N reached)",
            "tile-end": "finishes iteration and its persistent tile",
            "loop-end": "leaves the loop, drains held uses",
            "land": f"copy lands: {event.detail}",
            "violation": "is about to act",
        }.get(event.what, event.what)
        where = ""
    else:
        effect = {"pass": f"-> passes ({event.detail})", "skip": "(guarded off)"}.get(
            event.what, ""
        )
        what = f"{event.step.text} {effect}".rstrip()
        where = f"  @ {event.step.loc}"
    label = f"{actor:<13} it={it:<3}" if actor != "TMA" else f"{actor:<13} {'':<6}"
    slot = event.slot if event.slot >= 0 and event.slot < len(state[3]) else -1
    phases = _barriers(state, slot)
    return f"{label} {what}{where}" + (f"  [{phases}]" if phases else "")
