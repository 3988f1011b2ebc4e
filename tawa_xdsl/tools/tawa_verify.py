"""`tawa-verify`: prove the barrier protocol of a lowered kernel, or print a counterexample.

    tawa-verify k.mlir [-p 'tawa-warp-specialize{...},lower-aref'] [--json] [--explicit]
    tawa-opt k.mlir -p '...,lower-aref' | tawa-verify -

Reads mbarrier-level IR from a file or stdin (`-`, or no file), or runs the given passes first.
Each ring is proved by the compiler's inductive certificate (Z3, 1-induction: every trip count,
every number of persistent tiles); when that fails, an explicit search finds a shortest
counterexample. Lints (elected-thread publication, proxy fences, CTA-wide barriers in a
warp-group region, group barriers with the wrong thread count; `verify/lints.py`) print as
`file:line:col: warning|error: ...`.

Exit 0 with one `proved: ...` line per ring (with the time taken) and, for several rings, one
for the rings together (no cross-ring deadlock, `verify/compose.py`); exit 1 with a step-by-step
trace when a ring's protocol can go wrong (or a lint error); exit 2 when the IR is not in a
shape the verifier models; exit 3 on an internal error of the certificate (the explicit search
found no counterexample, yet the certificate did not hold).
"""

from __future__ import annotations

import argparse
import json
import sys

from tawa_xdsl.diagnostics import TawaError, parse_module
from tawa_xdsl.dialects import make_context
from tawa_xdsl.verify.check import verify_module
from tawa_xdsl.verify.extract import ExtractionError
from tawa_xdsl.verify.lints import lint_module


def _apply(module, pipeline: str) -> None:
    from xdsl.passes import PassPipeline

    from tawa_xdsl.transforms import get_all_passes

    passes = get_all_passes()
    PassPipeline.parse_spec(passes, pipeline).apply(make_context(), module)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tawa-verify", description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default="-", help="lowered IR (default: stdin)")
    parser.add_argument("-p", "--passes", default="", help="passes to run before verifying")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    parser.add_argument(
        "--explicit", action="store_true", help="prove by the explicit search alone (no Z3)"
    )
    args = parser.parse_args(argv)
    name = "<stdin>" if args.file == "-" else args.file
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file) as f:
                text = f.read()
        module = parse_module(make_context(), text, name)
        if args.passes:
            _apply(module, args.passes)
        lints = lint_module(module)
        verdicts = verify_module(module, "explicit" if args.explicit else "certificate")
    except OSError as error:
        print(f"tawa-verify: {name}: error: cannot read: {error.strerror}", file=sys.stderr)
        return 2
    except TawaError as error:  # already `file:line:col: error: ...`
        print(f"tawa-verify: {error}", file=sys.stderr)
        return 2
    except ExtractionError as error:
        print(f"tawa-verify: error: {error}", file=sys.stderr)
        return 2
    if not verdicts:
        print(
            f"tawa-verify: {name}: error: no rings to verify: give the IR after lower-aref, e.g. "
            f"tawa-opt K.mlir -p 'tawa-warp-specialize,lower-aref' | tawa-verify -",
            file=sys.stderr,
        )
        return 2
    if args.json:
        out = [v.to_json() for v in verdicts]
        out += [{"lint": x.name, "severity": x.severity, "loc": x.loc, "message": x.message}
                for x in lints]  # fmt: skip
        print(json.dumps(out, indent=2))
    else:
        for x in lints:
            print(x)
        for v in verdicts:
            print(v.summary())
            for line in v.trace:
                print(line)
    if any(v.internal_error for v in verdicts):
        return 3
    errors = any(x.severity == "error" for x in lints)
    return 0 if all(v.proved for v in verdicts) and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
