"""Every reproducer the fuzzer found (a compiler bug since fixed) passes now.

Each `repro-*.json` here was written by `tawa fuzz` (or by hand in its format) for a bug;
replaying it (as `tawa repro FILE` does) must run every recorded level without a failure.

* repro-aref-e37511652c.json, repro-aref-eb2fe21109.json: insert-aref put attention's Q
  (loaded before the key loop and held across it) and the loop's K tiles in one ring when
  BLOCK_N == BLOCK_M gave them the same type: consumed out of order, or a deadlock with D = 1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tawa_xdsl.fuzz.repro import replay

REPRODUCERS = sorted(Path(__file__).parent.glob("repro-*.json"))


@pytest.mark.parametrize("path", REPRODUCERS, ids=lambda p: p.stem)
def test_reproducer_passes_now(path: Path) -> None:
    result = replay(path)
    assert result.failure is None, str(result.failure)
    assert {"tile", "compile", "aref", "mbarrier"} <= set(result.outcome.ran)
