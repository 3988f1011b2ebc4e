"""An experiment, not a product path: edit attention PTX written by bench/attention_ptx.py so
that a `fence.acq_rel.cta` stands in front of each `wgmma.wait_group 0` that is the first
after a `wait_group 1` (the rotated key loop's wait for P V(j), placed after the softmax).
ptxas otherwise hoists that wait to just after the K release's arrive, above most of the
softmax (bench/NOTES.md, round 16); the fence is a point it does not move the wait across.
Time the edited PTX beside today's with `bench/attention.py --before DIR`.

    python bench/attention_ptx.py DIR && python bench/attention_fence_ptx.py DIR/*.ptx
"""

from __future__ import annotations

import sys
from pathlib import Path


def fenced(ptx: str) -> tuple[str, int]:
    out, armed, count = [], False, 0
    for line in ptx.split("\n"):
        if "wgmma.wait_group.sync.aligned 1;" in line:
            armed = True
        elif armed and "wgmma.wait_group.sync.aligned 0;" in line:
            out.append("    fence.acq_rel.cta;")
            armed, count = False, count + 1
        out.append(line)
    return "\n".join(out), count


def main() -> None:
    for name in sys.argv[1:]:
        path = Path(name)
        text, count = fenced(path.read_text())
        path.write_text(text)
        print(f"{path}: {count} waits fenced")


if __name__ == "__main__":
    main()
