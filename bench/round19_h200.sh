#!/usr/bin/env bash
# Round 19 on the lent H200 (session 19): every kernel of a configuration timed in interleaved
# rounds (bench/timing.py), since timing one after another favoured whichever ran first.
# Calls of one warm machine, each right after the last (it goes back after 30 idle seconds):
#   bench/round19_h200.sh bias OUT   (carry carry/wheels carry/ptx carry/fa4a) FA4's first part
#                                    stashed; the order bias measured (bench/order_bias.py);
#                                    the runtime's reference-PTX GPU tests
#   bench/round19_h200.sh fair OUT   (carry carry/wheels) the schedules earlier rounds rejected
#                                    when timed one after another, again in one interleaved
#                                    lineup per configuration (f16, d = 64 and 128, 2K and 16K)
#   bench/round19_h200.sh fair2 OUT  (carry carry/wheels) the candidates `fair` left, on the
#                                    final method, our kernel twice (f16, 2K, 4K and 16K)
#   bench/round19_h200.sh fold OUT   (carry carry/wheels carry/fa4a: FA4's first part stashed)
#                                    causal row blocks in pairs (fold-grid): their GPU tests and
#                                    the TMA-epilogue variants', then timed against the library
#                                    (f16, causal, 1K-16K, our kernel twice, the final method)
#   bench/round19_h200.sh fa4a OUT   (carry carry/fa4a) FA4's first part stashed
#   bench/round19_h200.sh fa4b OUT   (carry carry/fa4b) FA4's second part stashed
#   bench/round19_h200.sh peers OUT  (carry carry/fa4c) FA4 installed; ours (the library
#                                    kernel and the source launched with no options) against
#                                    FA4 and Triton TMA, f16 and bf16, d = 64 and 128, 1K-16K
#   bench/round19_h200.sh more OUT   (no carry) GQA 32/8 and 32/4 against FA4 and cuDNN; fp8
#                                    attention against Triton's fp8 attention
#   bench/round19_h200.sh triton OUT (carry carry/wheels) the peers that need no FA4: fp8
#                                    attention against Triton's, and f16 attention (ours twice)
#                                    against Triton TMA at 2K and 16K keys
#   bench/round19_h200.sh gemm OUT   (carry carry/wheels carry/fa4a on a fresh machine: FA4's
#                                    first part stashed) GEMM bf16 and fp8 against cuBLAS and
#                                    Triton's persistent TMA matmul
# Each call logs the GPU's clocks and power every second (OUT/dmon.log).
set -uo pipefail
what="${1:?usage: bench/round19_h200.sh bias|fair|fair2|fold|fa4a|fa4b|peers|more|triton|gemm OUT_DIR}"
out="${2:?usage: bench/round19_h200.sh bias|fair|fair2|fold|fa4a|fa4b|peers|more|triton|gemm OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
log_clocks

if [ "$what" = bias ]; then
    source bench/fa4_h200.sh stash carry/fa4a
    step order_bias 120 python3 bench/order_bias.py --out "$out/order_bias.json"
    step reference_ptx 120 python3 -m pytest -p no:cacheprovider -m gpu -q -rfs \
        tests/gpu/test_runtime_gpu.py
elif [ "$what" = fair ]; then
    schedules=ours,ours_guarded,ours_pingpong,ours_s2,ours_persistent,ours_per_tile
    schedules+=,ours_persistent_heads_first,ours_m128,ours_m192_pingpong,ours_exp2_1
    schedules+=,ours_n176,ours_n176_pingpong
    STEP_TAIL=12 step fair 540 python3 bench/attention.py --dtypes f16 --dims 64,128 \
        --seqs 2048,16384 --no-peers --schedules "$schedules" --out "$out/fair.json"
elif [ "$what" = fair2 ]; then
    STEP_TAIL=20 step fair2 540 python3 bench/attention.py --dtypes f16 --dims 64,128 \
        --seqs 2048,4096,16384 --no-peers --twin \
        --schedules ours,ours_persistent,ours_per_tile,ours_guarded,ours_s2,ours_s2_tma_out \
        --out "$out/fair2.json"
elif [ "$what" = fold ]; then
    [ -d carry/fa4a ] && source bench/fa4_h200.sh stash carry/fa4a
    step fold_gpu 200 python3 -m pytest -p no:cacheprovider -m gpu -q -rfs \
        tests/gpu/test_attention_gpu.py -k "folded or tma"
    STEP_TAIL=12 step fold 300 python3 bench/attention.py --dtypes f16 --dims 64,128 \
        --seqs 1024,2048,4096,16384 --causal-only --no-peers --twin \
        --schedules ours,ours_fold,ours_fold_persistent --out "$out/fold.json"
elif [ "$what" = fa4a ]; then
    source bench/fa4_h200.sh stash carry/fa4a
elif [ "$what" = fa4b ]; then
    source bench/fa4_h200.sh stash carry/fa4b
elif [ "$what" = peers ]; then
    source bench/fa4_h200.sh stash carry/fa4c
    source bench/fa4_h200.sh install
    STEP_TAIL=36 step attention_peers 480 python3 bench/attention.py --dtypes f16,bf16 \
        --dims 64,128 --seqs 1024,2048,4096,16384 --peers fa4,triton \
        --schedules ours,ours_launch_defaults --twin --out "$out/attention_peers.json"
elif [ "$what" = more ]; then
    source bench/fa4_h200.sh install
    for gqa in 32/8 32/4; do
        step "gqa_${gqa/\//_}" 200 python3 bench/attention.py --dtypes f16 --dims 128 \
            --seqs 4096 --gqa "$gqa" --gqa-seqs 4096,16384 --peers fa4,cudnn --schedules ours \
            --out "$out/gqa_${gqa/\//_}.json"
    done
    step attention_fp8 240 python3 bench/attention_fp8.py --dims 128 --peers triton \
        --out "$out/attention_fp8.json"
elif [ "$what" = triton ]; then
    step attention_fp8 100 python3 bench/attention_fp8.py --dims 128 --peers triton \
        --out "$out/attention_fp8.json"
    STEP_TAIL=12 step attention_triton 150 python3 bench/attention.py --dtypes f16 \
        --dims 64,128 --seqs 2048,16384 --peers triton --schedules ours --twin \
        --out "$out/attention_triton.json"
elif [ "$what" = gemm ]; then
    [ -d carry/fa4a ] && source bench/fa4_h200.sh stash carry/fa4a
    step gemm 540 python3 bench/gemm.py --dtypes bf16,fp8 --out "$out/gemm.json"
else
    echo "unknown mode $what"; exit 2
fi
