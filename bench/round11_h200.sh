#!/usr/bin/env bash
# Round 11 on the lent H200 (model: bench/round10_h200.sh).
#   bench/round11_h200.sh ab OUT      every GPU test (8 shards); then causal attention f16 one
#                                      program per row block against the two persistent walks
#                                      (a head's row blocks in turn; row block x of every head
#                                      first), our kernels only, one process
#   bench/round11_h200.sh check OUT   every GPU test again (after the fix of CompileOptions'
#                                      field order); causal attention at 1K-2K keys, the new
#                                      default (persistent) against one program per row block
#   bench/round11_h200.sh stash OUT   FA4's first two parts stashed (a new machine: the wheels
#                                      come in the same call as part a)
#   bench/round11_h200.sh final OUT   FA4's last part; the library attention against FA4 and
#                                      Triton TMA, f16 and bf16; fp8 attention against Triton fp8
set -uo pipefail
what="${1:?usage: bench/round11_h200.sh ab|check|stash|final OUT_DIR}"
out="${2:?usage: bench/round11_h200.sh ab|check|stash|final OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
if [ "$what" = ab ]; then
    all_gpu_tests 400
    step attention_order_ab 170 python3 bench/attention.py --dtypes f16 --seqs 1024,2048,4096,16384 \
        --causal-only --no-peers --schedules ours,ours_persistent,ours_persistent_heads_first \
        --out "$out/attention_order_ab.json"
elif [ "$what" = check ]; then
    all_gpu_tests 300
    step attention_causal_default 100 python3 bench/attention.py --dtypes f16,bf16 \
        --seqs 1024,2048,4096 --causal-only --no-peers --schedules ours,ours_per_tile \
        --out "$out/attention_causal_default.json"
elif [ "$what" = stash ]; then
    [ -d carry/fa4a ] && source bench/fa4_h200.sh stash carry/fa4a
    [ -d carry/fa4b ] && source bench/fa4_h200.sh stash carry/fa4b
else
    source bench/fa4_h200.sh stash carry/fa4c
    source bench/fa4_h200.sh install
    step attention_final 360 python3 bench/attention.py --dtypes f16,bf16 \
        --seqs 1024,2048,4096,16384 --peers fa4,triton \
        --schedules ours,ours_per_tile,ours_persistent,ours_persistent_heads_first \
        --out "$out/attention_final.json"
    step attention_fp8 160 python3 bench/attention_fp8.py --dims 128 --peers triton \
        --variants per_tile,persistent,persistent_heads_first --out "$out/attention_fp8.json"
fi
