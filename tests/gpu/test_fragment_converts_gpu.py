"""Every conversion between two of f32, f16, bf16, e4m3 and e5m2, on tiles, row vectors and
column vectors (tests/unit/test_fragment_converts.py), launched on the H200 as its user
launches it: bit-exact against numpy's single rounding (fp8 saturating)."""

from __future__ import annotations

import pytest

from tests.unit.test_fragment_converts import CONVERSIONS, IDS, conversion

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(("kind", "source", "result"), CONVERSIONS, ids=IDS)
def test_every_float_conversion_matches_numpy_on_the_gpu(
    kind: str, source: str, result: str
) -> None:
    run = conversion(kind, source, result)
    run.kernel[(1,)](*run.args, **run.constants, interpret=False)
    run.check()
