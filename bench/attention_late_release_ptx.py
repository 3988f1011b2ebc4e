"""Write the PTX of our attention with K(j+1)'s release moved from right after the wait for
QK^T(j+1) to right before the wait for P V(j) (the rescale of O), in the forms
bench/attention_ptx.py writes, so that bench/attention.py --before DIR times it beside the
tree's kernel. ptxas hoists `wgmma.wait_group 0` up to the nearest earlier mbarrier arrive
(bench/NOTES.md round 16): with the arrive after the softmax, the softmax of j + 1 runs under
P V(j). The proof and the PTX check stay on. Needs no GPU and no torch.

    python bench/attention_late_release_ptx.py DIR [attention_ptx.py's options]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import attention_ptx  # noqa: E402

from tawa_xdsl.dialects import aref  # noqa: E402
from tawa_xdsl.transforms import software_pipeline  # noqa: E402

placed = software_pipeline._rest_for_next


def _late(*args, **kwargs):  # type: ignore[no-untyped-def]
    ops = placed(*args, **kwargs)
    releases = [op for op in ops if isinstance(op, aref.ConsumedOp)]
    rest = [op for op in ops if op not in releases]
    waits = [op.attributes.get(aref.MMA_WAIT_ATTR) for op in rest]
    at = next(n for n, w in enumerate(waits) if w is not None and w.value.data == 0)
    return [*rest[:at], *releases, *rest[at:]]


def main(argv: list[str] | None = None) -> int:
    software_pipeline._rest_for_next = _late
    return attention_ptx.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
