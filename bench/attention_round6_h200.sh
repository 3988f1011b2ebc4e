#!/usr/bin/env bash
# Round 6 of the attention work on the lent H200 in one call (under 8 minutes): the attention
# GPU tests (the rotated key loop, now the default, and the straightforward schedule), the
# SASS of both loops, a ping-pong experiment (the barrier without a warpgroup branch), then
# bench/attention.py -- ours (rotated and straightforward) against
# FlashAttention-4's Hopper path, cuDNN and the Triton TMA-descriptor kernel in one process:
# f16 at d = 128 and 64, then bf16 at d = 128 and GQA 32/8 heads. Logs and JSON go to $OUT.
# FA4 comes from FOLDER: unzipped wheels (ANCHORS.md lists them), or the .whl files
# themselves (unzipped here into /tmp/fa4).
# Usage (repository root, xdsl wheels in carry/wheels): bench/attention_round6_h200.sh FOLDER
set -uo pipefail
fa4="${1:?usage: bench/attention_round6_h200.sh FA4_WHEEL_FOLDER}"
out="${OUT:?set OUT to the output folder}"
STEP_TAIL=14
source bench/device_env.sh
if compgen -G "$fa4/*.whl" > /dev/null; then
    python3 -c "import zipfile, glob, sys; [zipfile.ZipFile(w).extractall('/tmp/fa4') for w in glob.glob(sys.argv[1] + '/*.whl')]" "$fa4"
    fa4=/tmp/fa4
fi
export PYTHONPATH="$PYTHONPATH:$fa4:$fa4/nvidia_cutlass_dsl/dsl_packages"
python3 -c "from flash_attn.cute import flash_attn_func; print('FA4 imports')" 2>&1 | tail -1 | tee "$out/fa4_import.txt"
step gpu_tests 140 python3 -m pytest -q -m gpu tests/gpu/test_attention_gpu.py -rf -k "not bn64"
step sass 25 python3 - "$out" <<'PY'
import glob, itertools, os, re, subprocess, sys
import triton
from tawa_xdsl.kernels.attention import compile_attention
bins = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
ptxas, cuobjdump = (glob.glob(os.path.join(bins, n))[0] for n in ("ptxas", "cuobjdump"))
env = {**os.environ, "PATH": bins + ":" + os.environ["PATH"]}
for d in (128, 64):
    for tag, kw in (("rotated", {}), ("straightforward", {"rotate": False}), ("rotated_pp", {"pingpong": True})):
        open("/tmp/k.ptx", "w").write(compile_attention(d, "f16", False, **kw).ptx)
        log = subprocess.run([ptxas, "-arch=sm_90a", "-v", "/tmp/k.ptx", "-o", "/tmp/k.cubin"], capture_output=True, text=True, env=env)
        sass = subprocess.run([cuobjdump, "-sass", "/tmp/k.cubin"], capture_output=True, text=True, env=env).stdout
        open(os.path.join(sys.argv[1], f"sass_d{d}_{tag}.log"), "w").write(log.stderr + sass)
        # the order of HGMMAs, wgmma waits and named barriers, runs of one kind counted
        marks = re.findall(r"HGMMA|WARPGROUP\.DEPBAR\.LE gsb0, 0x\d|BAR\.(?:SYNC|ARV)[^;]*", sass)
        runs = [f"{len(list(group))}x {mark}" for mark, group in itertools.groupby(marks)]
        warn = [line for line in log.stderr.splitlines() if "warn" in line.lower()]
        print(f"d={d} {tag}: " + "; ".join(runs), *warn, sep="\n  ")
PY
# Experiment, not a product path: ping-pong with its named barrier picked without a branch on
# the warpgroup index (the PTX edited after printing: bar.sync/bar.arrive with a register id).
# Locally the edit brings the d = 128 loop from 808 SASS instructions back to 744 (rotated:
# 737); this measures whether a register barrier id would make ping-pong pay (NOTES round 6).
step pingpong_nobranch 60 python3 - <<'PY'
import dataclasses, math
import re

SYNC = re.compile(
    r"    setp\.eq\.s32 (%p\d+), (%r\d+), 0;\n    @!\1 bra (\$L_else_\d+);\n"
    r"    bar\.sync 3, 256;\n    bra\.uni (\$L_end_if_\d+);\n\3:\n    bar\.sync 4, 256;\n\4:\n"
)
HANDOVER = re.compile(
    r"    setp\.eq\.s32 (%p\d+), (%r\d+), 0;\n    @!\1 bra (\$L_else_\d+);\n"
    r"    bar\.arrive 4, 256;\n    bra\.uni (\$L_end_if_\d+);\n\3:\n    @!(%p\d+) bra (\$L_end_if_\d+);\n"
    r"    bar\.arrive 3, 256;\n\6:\n\4:\n"
)


def without_branch(ptx: str) -> str:
    ptx, n_sync = SYNC.subn(r"    add.s32 %rbar, \2, 3;\n    bar.sync %rbar, 256;\n", ptx)
    ptx, n_arrive = HANDOVER.subn(
        r"    setp.eq.s32 \1, \2, 0;\n    or.pred %pho, \1, \5;\n    sub.s32 %rarr, 4, \2;\n"
        r"    @%pho bar.arrive %rarr, 256;\n",
        ptx,
    )
    assert n_sync == 1 and n_arrive == 1, (n_sync, n_arrive)
    at = ptx.index(".reg ")
    return ptx[:at] + ".reg .b32 %rbar;\n    .reg .b32 %rarr;\n    .reg .pred %pho;\n    " + ptx[at:]


import torch, triton
from tawa_xdsl.kernels.attention import compile_attention, grid
print(f"{'d':>4} {'causal':>6} | rotated  pingpong  pp-nobranch | max abs err (nobranch)")
for d in (128, 64):
    for causal in (False, True):
        seq, heads = 16384, 2048 // d
        q, k, v = (torch.randn(heads, seq, d, device="cuda", dtype=torch.float16) for _ in "qkv")
        o = torch.empty_like(q)
        scale = 1 / math.sqrt(d)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        pp = compile_attention(d, "f16", causal, pingpong=True)
        kernels = {"rotated": compile_attention(d, "f16", causal), "pingpong": pp,
                   "nobranch": dataclasses.replace(pp, ptx=without_branch(pp.ptx))}
        flop = 4 * heads * seq * seq * d * (0.5 if causal else 1.0)
        row = {}
        for name, kernel in kernels.items():
            run = kernel.prepare(grid(seq, heads), q, k, v, o, seq, scale)
            run(); torch.cuda.synchronize()
            err = (o.float() - ref.float()).abs().max().item()
            row[name] = flop / (triton.testing.do_bench(run, warmup=25, rep=100) * 1e-3) / 1e12
        print(f"{d:>4} {str(causal):>6} | {row['rotated']:7.0f} {row['pingpong']:9.0f} {row['nobranch']:12.0f} | {err:.1e}")
PY
bench=(python3 bench/attention.py --seqs 2048,16384)
step bench_f16 170 "${bench[@]}" --dtypes f16 --dims 128,64 --out "$out/attention_round6_f16.json"
step bench_bf16_gqa 90 "${bench[@]}" --dtypes bf16 --dims 128 --gqa 32/8 \
    --gqa-seqs 4096,8192 --out "$out/attention_round6_bf16_gqa.json"
