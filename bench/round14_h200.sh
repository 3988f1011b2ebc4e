#!/usr/bin/env bash
# Round 14 on the lent H200 (session 13): exp2 partly on the FMA units (emulate-exp2; the `ab`
# call ran while it chose 2 of 8 at d = 64 and for fp8, measured slower, and the choice became
# none before `peers` and `gemm`) and the power-of-two ring printer (shift and mask) timed.
# Calls of one warm machine, each right after the last (it goes back after 30 idle seconds;
# carry at most 64 MiB with the tree: wheels and one FA4 part, or a part alone once extracted):
#   bench/round14_h200.sh tests OUT  every GPU test (8 shards); FA4's first part stashed
#                                     (carry carry/wheels carry/ptx carry/fa4a)
#   bench/round14_h200.sh ab OUT     FA4's second part (carry carry/fa4b); ours only: d = 64
#                                     with 3- against 4-deep rings, the exp2 share 0..3 at
#                                     d = 64 and d = 128 (`ours` is the chosen share), fp8
#                                     chosen against no emulation
#   bench/round14_h200.sh peers OUT  FA4's last part and install (carry carry/fa4c); the
#                                     library against FA4 and Triton TMA, f16 and bf16, with the
#                                     source launched with no options and no emulation beside
#   bench/round14_h200.sh gemm OUT   GEMM bf16 and fp8 against cuBLAS and Triton's persistent
#                                     TMA matmul (the 4-deep configuration's division is gone)
set -uo pipefail
what="${1:?usage: bench/round14_h200.sh tests|ab|peers|gemm OUT_DIR}"
out="${2:?usage: bench/round14_h200.sh tests|ab|peers|gemm OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
if [ "$what" = tests ]; then
    source bench/fa4_h200.sh stash carry/fa4a
    all_gpu_tests "${TEST_SECONDS_R14:-420}"
elif [ "$what" = ab ]; then
    source bench/fa4_h200.sh stash carry/fa4b
    for depth in 3 4; do
        step "attention_d64_stages$depth" 100 python3 bench/attention.py --dtypes f16,bf16 \
            --dims 64 --seqs 2048,16384 --no-peers --stages "$depth" \
            --schedules ours --out "$out/attention_d64_stages$depth.json"
    done
    step attention_exp2 230 python3 bench/attention.py --dtypes f16,bf16 \
        --seqs 1024,2048,4096,16384 --no-peers \
        --schedules ours,ours_exp2_0,ours_exp2_1,ours_exp2_3 --out "$out/attention_exp2.json"
    step attention_fp8_exp2 100 python3 bench/attention_fp8.py --dims 128 --peers none \
        --variants exp2_0 --out "$out/attention_fp8_exp2.json"
elif [ "$what" = peers ]; then
    source bench/fa4_h200.sh stash carry/fa4c
    source bench/fa4_h200.sh install
    step attention_peers 500 python3 bench/attention.py --dtypes f16,bf16 \
        --seqs 1024,2048,4096,16384 --peers fa4,triton \
        --schedules ours,ours_launch_defaults --out "$out/attention_peers.json"
else
    step gemm 400 python3 bench/gemm.py --dtypes bf16,fp8 --out "$out/gemm.json"
fi
