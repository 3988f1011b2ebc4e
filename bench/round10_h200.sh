#!/usr/bin/env bash
# Round 10 on the lent H200, in calls of one warm machine (model: bench/h200.sh).
#   bench/round10_h200.sh tests OUT   every GPU test (8 shards), FA4's first part stashed
#   bench/round10_h200.sh stash OUT   FA4's second part stashed
#   bench/round10_h200.sh bench OUT   FA4 installed; attention f16: the default, the
#                                      persistent kernel and the session's starting PTX
#                                      (carry/before_ptx_s10) against FA4 in one process
#   bench/round10_h200.sh final OUT   (FA4 installed) the library attention against FA4 and
#                                      Triton, f16 and bf16, GQA 32/8 and 32/4 against FA4, cuDNN
#   bench/round10_h200.sh more OUT    fp8 attention against Triton fp8; GEMM bf16 and fp8
#                                      against cuBLAS and Triton's persistent TMA matmul
set -uo pipefail
what="${1:?usage: bench/round10_h200.sh tests|stash|bench OUT_DIR}"
out="${2:?usage: bench/round10_h200.sh tests|stash|bench OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
if [ "$what" = tests ]; then
    source bench/fa4_h200.sh stash carry/fa4a
    all_gpu_tests 500
elif [ "$what" = stash ]; then
    source bench/fa4_h200.sh stash carry/fa4b
elif [ "$what" = bench ]; then
    source bench/fa4_h200.sh stash carry/fa4c
    source bench/fa4_h200.sh install
    step attention_round10 560 python3 bench/attention.py --dtypes f16 \
        --seqs 1024,2048,4096,16384 --peers fa4 --schedules ours,ours_persistent,ours_m192,ours_m192_persistent \
        --before carry/before_ptx_s10 --out "$out/attention_round10.json"
elif [ "$what" = final ]; then  # the library defaults against every peer, f16 and bf16, GQA
    source bench/fa4_h200.sh install
    step attention_final 330 python3 bench/attention.py --dtypes f16,bf16 \
        --seqs 1024,2048,4096,16384 --peers fa4,triton \
        --schedules ours,ours_per_tile,ours_persistent,ours_m192_persistent \
        --out "$out/attention_final.json"
    for gqa in 32/8 32/4; do
        step "attention_gqa${gqa/\//_}" 100 python3 bench/attention.py --dtypes bf16 --dims 128 \
            --gqa "$gqa" --gqa-seqs 4096,8192 --seqs 4096 --peers fa4,cudnn \
            --schedules ours,ours_per_tile --out "$out/attention_gqa${gqa/\//_}.json"
    done
else  # fp8 attention and the GEMMs
    step attention_fp8 200 python3 bench/attention_fp8.py --dims 128 --peers triton \
        --variants per_tile,persistent --out "$out/attention_fp8.json"
    step gemm 340 python3 bench/gemm.py --dtypes bf16,fp8 --ks 256,1024,4096,16384 \
        --out "$out/gemm.json"
fi
