#!/usr/bin/env bash
# Round 12 on the lent H200, prepared in session 11 (no device time was left to run it): the
# kernels as printed since round 11b (undefined accumulators zeroed in front of their branch).
# Four calls of one warm machine, each right after the last (the machine goes back after 30
# idle seconds):
#   bench/round12_h200.sh tests OUT   every GPU test (8 shards); FA4's first part stashed
#                                      (carry carry/wheels carry/ptx carry/fa4a)
#   bench/round12_h200.sh stash OUT   FA4's second part (carry carry/fa4b)
#   bench/round12_h200.sh bench OUT   FA4's last part and install (carry carry/fa4c); the library
#                                      attention, 192 rows at d = 64 and 176 keys at d = 128,
#                                      against FA4 and Triton TMA, f16 and bf16
#   bench/round12_h200.sh more OUT    GQA 32/8 and 32/4 against FA4 and cuDNN; fp8 attention
# carry/fa4{a,b,c}: the cu13 wheel split 20 MB / 52 MB / rest, the small FA4 wheels with part c
# (ANCHORS.md lists them); carry/ptx: ../shared/reference/ptx.
set -uo pipefail
what="${1:?usage: bench/round12_h200.sh tests|stash|bench|more OUT_DIR}"
out="${2:?usage: bench/round12_h200.sh tests|stash|bench|more OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
if [ "$what" = tests ]; then
    source bench/fa4_h200.sh stash carry/fa4a
    all_gpu_tests 400
elif [ "$what" = stash ]; then
    source bench/fa4_h200.sh stash carry/fa4b
elif [ "$what" = bench ]; then
    source bench/fa4_h200.sh stash carry/fa4c
    source bench/fa4_h200.sh install
    step attention_final 560 python3 bench/attention.py --dtypes f16,bf16 \
        --seqs 1024,2048,4096,16384 --peers fa4,triton \
        --schedules ours,ours_per_tile,ours_straightforward,ours_launch_defaults,ours_m192,ours_m192_persistent,ours_n176,ours_n176_pingpong \
        --out "$out/attention_final.json"
else
    source bench/fa4_h200.sh install
    for gqa in 32/8 32/4; do
        step "attention_gqa${gqa/\//_}" 120 python3 bench/attention.py --dtypes bf16 --dims 128 \
            --gqa "$gqa" --gqa-seqs 4096,8192 --seqs 4096 --peers fa4,cudnn \
            --schedules ours --out "$out/attention_gqa${gqa/\//_}.json"
    done
    step attention_fp8 200 python3 bench/attention_fp8.py --dims 128 --peers triton \
        --variants per_tile,persistent --out "$out/attention_fp8.json"
fi
