"""Reproducer files: one failing case, replayable with `tawa repro FILE`.

A reproducer is JSON (`FORMAT`):

    {"format": "tawa-fuzz-repro/1",
     "level": "aref",                       # where it failed
     "message": "...",                      # what the fuzzer saw
     "description": "gemm f16->f16 tile 128x128x64 ...",
     "case": {"program": {...}, "shape": {...}, "seed": 7, "values": "special",
              "scalars": [...], "options": {"stages": 3, ...},
              "aref_schedule": [0, 1, ...], "mbarrier_schedule": "round-robin",
              "levels": ["tile", "compile", "verify", "aref", "mbarrier"]},
     "tile_ir": "// fuzz: gemm ...\nbuiltin.module { func.func @fuzz_gemm(...) {...} }"}

`tile_ir` is the program the compiler saw, as the frontend wrote it from the description's
language kernel (an artifact: it may differ from what `case.program` builds now, after a
frontend change, or for a mutated program); the numpy reference always follows
`case.program`. Inputs are regenerated from `seed` and `values`, so a file stays small.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tawa_xdsl.fuzz.check import LEVELS, Case, FuzzFailure, Outcome, check_case

FORMAT = "tawa-fuzz-repro/1"
# Levels that run on the warp-specialized program, which the `compile` level builds.
COMPILED_LEVELS = ("compile", "verify", "aref", "mbarrier")


class LevelError(ValueError):
    """A `--level` list naming a level that does not exist."""


def levels_to_run(text: str) -> tuple[str, ...]:
    """`"aref"` -> ("tile", "compile", "aref"): the named levels with the ones they need (the
    tile level is the reference of every other; verify, aref and mbarrier run on what
    compile builds), in the order `check_case` runs them."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in LEVELS]
    if unknown or not names:
        what = f"unknown level {', '.join(map(repr, unknown))}" if unknown else "no level given"
        raise LevelError(f"--level: {what} (levels: {', '.join(LEVELS)})")
    wanted = {"tile", *names}
    if wanted & set(COMPILED_LEVELS):
        wanted.add("compile")
    return tuple(level for level in LEVELS if level in wanted)


def reproducer(failure: FuzzFailure) -> dict[str, Any]:
    """The JSON object for `failure`."""
    case = failure.case
    return {
        "format": FORMAT,
        "level": failure.level,
        "message": failure.message,
        "description": case.program.describe(),
        "case": case.to_json(),
        "tile_ir": case.ir(),
    }


def write_reproducer(failure: FuzzFailure, directory: Path | str) -> Path:
    """Write `failure` under `directory` as `repro-<level>-<hash>.json`; returns the path."""
    data = reproducer(failure)
    text = json.dumps(data, indent=1, sort_keys=False) + "\n"
    digest = hashlib.sha256(json.dumps(data["case"], sort_keys=True).encode()).hexdigest()[:10]
    path = Path(directory) / f"repro-{failure.level}-{digest}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def load_reproducer(path: Path | str) -> tuple[Case, dict[str, Any]]:
    """The case stored in `path` (with its tile IR) and the raw JSON."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a tawa fuzz reproducer (format {data.get('format')!r})")
    return Case.from_json(data["case"], tile_ir=data.get("tile_ir")), data


@dataclass
class Replay:
    """What replaying a reproducer did: `failure` is None when the case passes now."""

    case: Case
    recorded_level: str
    failure: FuzzFailure | None
    outcome: Outcome


def replay(path: Path | str, levels: tuple[str, ...] | None = None) -> Replay:
    """Run the case of `path` again (optionally at other `levels`)."""
    case, data = load_reproducer(path)
    return replay_case(case, data, levels)


def replay_case(case: Case, data: dict[str, Any], levels: tuple[str, ...] | None = None) -> Replay:
    """Run a loaded reproducer's case again (optionally at other `levels`)."""
    if levels is not None:
        case = Case(**{**case.__dict__, "levels": levels})
    outcome = Outcome()
    try:
        check_case(case, outcome)
    except FuzzFailure as failure:
        return Replay(case, data.get("level", "?"), failure, outcome)
    return Replay(case, data.get("level", "?"), None, outcome)
