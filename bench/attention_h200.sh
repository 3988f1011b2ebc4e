#!/usr/bin/env bash
# The attention forward on the lent H200 in one call (model: bench/h200.sh): the attention GPU
# tests first, then bench/attention.py (ours vs SDPA flash/cuDNN vs Triton), then a d = 128
# subset with 2- and 4-deep K/V rings (the default is 3).
# Usage (repository root, wheels in carry/wheels): bench/attention_h200.sh OUT
set -uo pipefail
out="${1:?usage: bench/attention_h200.sh OUT_DIR}"
STEP_TAIL=30
source bench/device_env.sh
step gpu_tests 150 python3 -m pytest -q -m gpu tests/gpu/test_attention_gpu.py -rf
step attention_bench 120 python3 bench/attention.py --out "$out/attention_f16.json"
for depth in 2 4; do  # the default ring depth is 3; its neighbours on a d = 128 subset
    step "attention_stages$depth" 50 python3 bench/attention.py --dims 128 --seqs 2048,16384 \
        --stages "$depth" --out "$out/attention_f16_stages$depth.json"
done
