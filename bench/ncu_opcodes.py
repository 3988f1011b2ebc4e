"""Executed SASS instructions and stall samples by opcode, from ncu's source page
(`ncu -i R.ncu-rep --page source --csv --print-source sass`, plain or gzipped), one census
per file, so that two kernels' instruction mixes can be set side by side.

    python bench/ncu_opcodes.py OURS_source.csv[.gz] FA4_source.csv[.gz] [--top 28]
"""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import re
from pathlib import Path


def rows(path: Path) -> list[dict[str, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        lines = list(csv.reader(f))
    header = lines[1]  # line 0 names the kernel
    return [dict(zip(header, r, strict=True)) for r in lines[2:] if len(r) == len(header)]


def opcode(source: str) -> str:
    """`@!P0 FFMA.FTZ R1, ...` -> `FFMA`."""
    text = re.sub(r"^@!?U?P\w+\s+", "", source.strip())
    return text.split()[0].split(".")[0] if text else "?"


def census(path: Path, top: int) -> str:
    executed: collections.Counter[str] = collections.Counter()
    samples: collections.Counter[str] = collections.Counter()
    stalls: collections.Counter[str] = collections.Counter()
    for row in rows(path):
        op = opcode(row["Source"])
        executed[op] += int(row["Instructions Executed"] or 0)
        samples[op] += int(row["Warp Stall Sampling (All Samples)"] or 0)
        for key, value in row.items():
            if key.startswith("stall_") and "Not Issued" not in key:
                stalls[key[6:]] += int(value or 0)
    total, sampled = sum(executed.values()), max(sum(samples.values()), 1)
    lines = [f"== {path.name}: {total / 1e6:.1f}M instructions, {sampled} samples"]
    for op, n in executed.most_common(top):
        share = 100 * samples[op] / sampled
        lines.append(f"  {op:12s} {n / 1e6:7.2f}M {100 * n / total:5.1f}%  samples {share:5.1f}%")
    worst = ", ".join(f"{k} {100 * v / sampled:.1f}%" for k, v in stalls.most_common(8))
    lines.append(f"  stalls: {worst}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=28)
    args = parser.parse_args()
    for path in args.files:
        print(census(path, args.top))


if __name__ == "__main__":
    main()
