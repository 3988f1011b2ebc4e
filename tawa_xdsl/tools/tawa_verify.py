"""`tawa-verify`: prove the barrier protocol of a lowered kernel, or print a counterexample.

    tawa-verify k.mlir [-p 'tawa-warp-specialize{...},lower-aref'] [--json]

Reads mbarrier-level IR (or runs the given passes first). Exit 0 with one `proved: ...` line
per ring; exit 1 with a step-by-step trace when a ring's protocol can go wrong; exit 2 when
the IR is not in a shape the verifier models.
"""

from __future__ import annotations

import argparse
import json
import sys

from tawa_xdsl.diagnostics import TawaError, parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.verify.check import verify_module
from tawa_xdsl.verify.extract import ExtractionError


def _apply(module, pipeline: str) -> None:
    from xdsl.passes import PassPipeline

    from tawa_xdsl.transforms import get_all_passes

    passes = get_all_passes()
    PassPipeline.parse_spec(passes, pipeline).apply(make_context(), module)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tawa-verify", description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("-p", "--passes", default="", help="passes to run before verifying")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    args = parser.parse_args(argv)
    try:
        with open(args.file) as f:
            module = parse_module(make_context(), f.read(), args.file)
        if args.passes:
            _apply(module, args.passes)
        verdicts = verify_module(module)
    except (TawaError, ExtractionError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([v.to_json() for v in verdicts], indent=2))
    else:
        for v in verdicts:
            print(v.summary())
            for line in v.trace:
                print(line)
    return 0 if all(v.proved for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
