"""`tawa-verify`: prove the barrier protocol of a lowered kernel, or print a counterexample.

    tawa-verify k.mlir [-p 'tawa-warp-specialize{...},lower-aref'] [--json] [--explicit]
    tawa-opt k.mlir -p '...,lower-aref' | tawa-verify -

Reads lowered IR from a file or stdin (`-`, or no file), or runs the given passes first: the
mbarrier level (after lower-aref) or the nvgpu level (after lower-to-nvgpu and legalize-nvgpu,
the IR emit-ptx prints, where wgmma's asynchronous reads and one-thread arrives are checked too).
Each ring is proved by the compiler's inductive certificate (Z3, 1-induction: every trip count,
every number of persistent tiles); when that fails, an explicit search finds a shortest
counterexample. Lints (elected-thread publication, proxy fences, CTA-wide barriers in a
warp-group region, group barriers with the wrong thread count; `verify/lints.py`) print as
`file:line:col: warning|error: ...`.

Exit 0 with one `proved: ...` line per ring (with the time taken) and, for several rings, one
for the rings together (no cross-ring deadlock, `verify/compose.py`); exit 1 with a step-by-step
trace when a ring's protocol can go wrong (or a lint error); exit 2 when the input cannot be
read, `-p` names a bad pass or option, the rings need more shared memory than an sm_90 block
has (refused before any proof), or the IR is not in a shape the verifier models; exit 3 on an
internal error of the certificate (the explicit search found no counterexample, yet the
certificate did not hold).
"""

from __future__ import annotations

import argparse
import json
import sys

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

from tawa_xdsl.diagnostics import (
    TawaError,
    decode_source,
    first_line,
    parse_module,
    parse_pass_pipeline,
    read_source,
    verify_module,
)
from tawa_xdsl.dialects import make_context
from tawa_xdsl.transforms.smem_budget import check_shared_memory
from tawa_xdsl.verify.check import verify_module as prove_module
from tawa_xdsl.verify.extract import ExtractionError
from tawa_xdsl.verify.lints import lint_module


def _apply(module: ModuleOp, pipeline: str) -> None:
    """Run the `-p` passes; a bad pipeline or a failing pass is a one-line error."""
    from tawa_xdsl.transforms import get_all_passes

    ctx = make_context()
    for p in parse_pass_pipeline(get_all_passes(), pipeline):
        try:
            p.apply(ctx, module)
        except TawaError:
            raise
        except (DiagnosticException, ValueError) as error:
            message = first_line(error)
            message = message if message.startswith(p.name) else f"{p.name}: {message}"
            raise TawaError(f"-p: error: {message}") from error
        verify_module(module)


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
            text = decode_source(sys.stdin.buffer.read(), name)
        else:
            text = read_source(args.file)
        module = parse_module(make_context(), text, name)
        if args.passes:
            _apply(module, args.passes)
        check_shared_memory(module)  # a ring too deep to run is refused before its proof
        lints = lint_module(module)
        verdicts = prove_module(module, "explicit" if args.explicit else "certificate")
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
