#!/usr/bin/env bash
# Round 6 of the attention work on the lent H200 in one call (under 8 minutes): the attention
# GPU tests (the rotated key loop, now the default, and the straightforward schedule), the
# SASS of both loops, then bench/attention.py -- ours (rotated and straightforward) against
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
step gpu_tests 150 python3 -m pytest -q -m gpu tests/gpu/test_attention_gpu.py -rf -k "not bn64"
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
bench=(python3 bench/attention.py --seqs 2048,16384)
step bench_f16 200 "${bench[@]}" --dtypes f16 --dims 128,64 --out "$out/attention_round6_f16.json"
step bench_bf16_gqa 100 "${bench[@]}" --dtypes bf16 --dims 128 --gqa 32/8 \
    --gqa-seqs 4096,8192 --out "$out/attention_round6_bf16_gqa.json"
