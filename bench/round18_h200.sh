#!/usr/bin/env bash
# Round 18 on the lent H200 (session 18): the peeled rotated loop is the proved default.
# Calls of one warm machine, each right after the last (it goes back after 30 idle seconds):
#   bench/round18_h200.sh check OUT  (carry carry/wheels carry/ptx carry/fa4a) FA4's first part
#                                    stashed; every GPU test (8 shards) on the new default
#   bench/round18_h200.sh fa4b OUT   (carry carry/fa4b) FA4's second part stashed
#   bench/round18_h200.sh peers OUT  (carry carry/fa4c) FA4 installed; ours (the library
#                                    kernel and the source launched with no options) against
#                                    FA4 and Triton TMA, f16 and bf16, d = 64 and 128, 1K-16K
#   bench/round18_h200.sh gqa OUT    (no carry) GQA, 32/8 and 32/4 heads at d = 128, against
#                                    FA4 with fewer K/V heads and cuDNN
#   bench/round18_h200.sh defer OUT  (carry carry/wheels carry/before) ours (defer-row-sums) against
#                                    the PTX of the tree before it (bench/attention_ptx.py into
#                                    carry/before), f16, d = 64 and 128, 2K and 16K keys, A B A;
#                                    then every GPU test
#   bench/round18_h200.sh rings OUT  (carry carry/wheels carry/s2) ours (3-deep K/V rings) against
#                                    the same tree's PTX with 2-deep rings (FA4's depth;
#                                    bench/attention_ptx.py with stages=2 into carry/s2), A B A
#   bench/round18_h200.sh pp64 OUT   (carry carry/wheels) d = 64 at 128 rows (two consumer
#                                    warpgroups) with and without ping-pong, beside the library's
#                                    192 rows: do turns pay where the MUFU and tensor work balance?
#   bench/round18_h200.sh fp8 OUT    (carry carry/wheels) fp8 attention (the peeled default)
#                                    against Triton's fp8 attention with TMA descriptors
#   bench/round18_h200.sh exp2 OUT   (carry carry/wheels) d = 64: 1 and 2 of every 8 exp2s on
#                                    the FMA units against none, one process (round 14 again,
#                                    on the peeled loop with the row sums deferred)
#   bench/round18_h200.sh turns3 OUT (carry carry/wheels) the three-way turns (192 rows, d = 64
#                                    and 128) against numpy on the GPU, then timed against the
#                                    library's kernel at d = 64, one process (NOTES round 18)
# The census of the peeled kernel against FA4 (ncu of one warm launch each, f16, 2K keys):
#   bench/round18_h200.sh census_a OUT  (carry carry/wheels carry/fa4a) ours at d = 128
#   bench/round18_h200.sh census_b OUT  (carry carry/fa4b) ours at d = 64
#   bench/round18_h200.sh census_c OUT  (carry carry/fa4c) FA4 at d = 128 and d = 64
set -uo pipefail
what="${1:?usage: bench/round18_h200.sh MODE OUT_DIR (the modes above)}"
out="${2:?usage: bench/round18_h200.sh MODE OUT_DIR (the modes above)}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
modes="check|fa4b|peers|gqa|census_a|census_b|census_c|defer|rings|pp64|fp8|exp2|turns3"

ab_twice() {  # ab_twice NAME DIR: ours against the PTX in DIR, two A B A runs, f16, 2K and 16K
    for run in 1 2; do
        step "${1}_ab_$run" 300 python3 bench/attention.py --dtypes f16 --dims 64,128 \
            --seqs 2048,16384 --no-peers --schedules ours --before "$2" \
            --out "$out/${1}_ab_$run.json"
    done
}

if [ "$what" = check ]; then
    source bench/fa4_h200.sh stash carry/fa4a
    all_gpu_tests "${TEST_SECONDS_R18:-450}"
elif [ "$what" = fa4b ]; then
    source bench/fa4_h200.sh stash carry/fa4b
elif [ "$what" = defer ]; then
    ab_twice defer carry/before
    all_gpu_tests "${TEST_SECONDS_R18:-450}"
elif [ "$what" = rings ]; then
    ab_twice rings carry/s2
elif [ "$what" = pp64 ]; then
    step pp64_plain 200 python3 bench/attention.py --dtypes f16 --dims 64 --seqs 2048,16384 \
        --no-peers --schedules ours,ours_m128 --out "$out/pp64_plain.json"
    step pp64_turns 200 python3 bench/attention.py --dtypes f16 --dims 64 --seqs 2048,16384 \
        --no-peers --schedules ours_m128 --pingpong --out "$out/pp64_turns.json"
elif [ "$what" = fp8 ]; then
    step attention_fp8 240 python3 bench/attention_fp8.py --dims 128 --peers triton \
        --out "$out/attention_fp8.json"
elif [ "$what" = exp2 ]; then
    step exp2_d64 300 python3 bench/attention.py --dtypes f16 --dims 64 --seqs 2048,16384 \
        --no-peers --schedules ours,ours_exp2_1,ours_exp2_2 --out "$out/exp2_d64.json"
elif [ "$what" = turns3 ]; then
    step turns3_gpu 300 python3 -m pytest -p no:cacheprovider -m gpu -rfs \
        tests/gpu/test_attention_gpu.py -k "m192 and pingpong"
    step turns3_time 240 python3 bench/attention.py --dtypes f16 --dims 64 --seqs 2048,16384 \
        --no-peers --schedules ours,ours_m192_pingpong --out "$out/turns3.json"
elif [ "$what" = census_a ]; then
    source bench/fa4_h200.sh stash carry/fa4a
    profile ours_d128 --kernel ours --d 128 --seq 2048
elif [ "$what" = census_b ]; then
    source bench/fa4_h200.sh stash carry/fa4b
    profile ours_d64 --kernel ours --d 64 --seq 2048
elif [ "$what" = census_c ]; then
    source bench/fa4_h200.sh stash carry/fa4c
    source bench/fa4_h200.sh install
    profile fa4_d128 --kernel fa4 --d 128 --seq 2048
    profile fa4_d64 --kernel fa4 --d 64 --seq 2048
elif [ "$what" = gqa ]; then
    source bench/fa4_h200.sh install
    for heads in 32/8 32/4; do
        step "gqa_${heads/\//_}" 270 python3 bench/attention.py --dtypes f16 --dims 128 \
            --seqs 4096 --gqa "$heads" --gqa-seqs 4096,16384 --peers fa4,cudnn --schedules ours \
            --out "$out/gqa_${heads/\//_}.json"
    done
elif [ "$what" = peers ]; then
    source bench/fa4_h200.sh stash carry/fa4c
    source bench/fa4_h200.sh install
    step attention_peers 560 python3 bench/attention.py --dtypes f16,bf16 \
        --seqs 1024,2048,4096,16384 --peers fa4,triton \
        --schedules ours,ours_launch_defaults --out "$out/attention_peers.json"
else
    echo "unknown mode $what (one of $modes)"; exit 2
fi
