"""Write the PTX of our attention with the rotated loop's last iteration peeled
(`software-pipeline{peel=true}`, `rotate_peeled`) in the forms bench/attention_ptx.py writes,
so that bench/attention.py --before DIR times it beside the tree's kernel (an experiment:
tawa-verify does not model the peeled last stage yet, so the proof and the PTX check are
off here, and only here). Needs no GPU and no torch.

    python bench/attention_peel_ptx.py DIR [attention_ptx.py's options]
"""

from __future__ import annotations

import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import attention_ptx  # noqa: E402

from tawa_xdsl import compiler  # noqa: E402
from tawa_xdsl.transforms import software_pipeline, warp_specialize  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    warp_specialize.SoftwarePipelinePass = partial(  # type: ignore[misc]
        software_pipeline.SoftwarePipelinePass, peel=True
    )
    lower = compiler.lower_to_nvgpu_level
    compiler.lower_to_nvgpu_level = lambda m, o, ir=None: lower(m, replace(o, verify=False), ir)
    compiler.validate_ptx = lambda *_: None
    return attention_ptx.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
