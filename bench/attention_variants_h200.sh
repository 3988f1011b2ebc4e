#!/usr/bin/env bash
# Attention schedule variants on the lent H200 in one call: their GPU tests, then the
# defaults against SDPA flash/cuDNN and Triton (d = 128 and 64, S = 2048 and 16384, causal
# and not), then ours alone with BLOCK_N = 128 (24/240 registers at d = 128), ping-pong,
# and both; last the SASS of the d = 128 loops (cuobjdump of Triton's bundled toolkit).
# Usage (a tree with the wheels in $WHEELS, default carry/wheels): bench/attention_variants_h200.sh OUT
set -uo pipefail
out="${1:?usage: bench/attention_variants_h200.sh OUT_DIR}"
STEP_TAIL=12
source bench/device_env.sh
step gpu_tests 100 python3 -m pytest -q -m gpu tests/gpu/test_attention_gpu.py -k variants -rf
bench=(python3 bench/attention.py --seqs 2048,16384)
step bench_peers 100 "${bench[@]}" --dims 128,64 --out "$out/peers.json"
step bench_bn128 40 "${bench[@]}" --dims 128 --block-n 128 --no-peers --out "$out/bn128.json"
step bench_pingpong 50 "${bench[@]}" --dims 128,64 --pingpong --no-peers --out "$out/pingpong.json"
step bench_bn128_pingpong 40 "${bench[@]}" --dims 128 --block-n 128 --pingpong --no-peers \
    --out "$out/bn128_pingpong.json"
step sass 40 python3 - "$out" <<'PY'
import glob, os, subprocess, sys
import triton
from tawa_xdsl.kernels.attention import compile_attention
bins = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
ptxas, cuobjdump = (glob.glob(os.path.join(bins, n))[0] for n in ("ptxas", "cuobjdump"))
for tag, kw in (("bn64", {"block_n": 64}), ("bn128", {"block_n": 128}), ("bn128_pp", {"block_n": 128, "pingpong": True})):
    open("/tmp/k.ptx", "w").write(compile_attention(128, "f16", False, **kw).ptx)
    subprocess.run([ptxas, "-arch=sm_90a", "-v", "/tmp/k.ptx", "-o", "/tmp/k.cubin"], check=True)
    sass = subprocess.run([cuobjdump, "-sass", "/tmp/k.cubin"], capture_output=True, text=True).stdout
    open(os.path.join(sys.argv[1], f"sass_d128_{tag}.log"), "w").write(sass)
    print(tag, len(sass.splitlines()), "lines")
PY
