#!/usr/bin/env bash
# Round 20 on the lent H200 (session 20): fp8 attention with P kept in its threads
# (fp8_key_order / fp8_v: the convert into the fp8 A operand packs each thread's own values).
#   bench/round20_h200.sh fp8 OUT   (carry carry/wheels carry/before_fp8) the GPU tests that
#                                   run fp8 attention or fp8 converts, then ours against
#                                   Triton's fp8 attention and the tree before (its PTX in
#                                   carry/before_fp8, bench/attention_ptx.py --dtypes e4m3),
#                                   and, causal, the same kernel not folded
#   bench/round20_h200.sh fp8v OUT  (carry carry/wheels on a fresh machine) fp8 schedules
#                                   in one lineup: ping-pong, 1 or 2 of 8 exp2s on the FMA
#                                   units, 2-deep rings (2K, 4K and 16K keys)
# Each call logs the GPU's clocks and power every second (OUT/dmon.log).
set -uo pipefail
what="${1:?usage: bench/round20_h200.sh fp8|fp8v OUT_DIR}"
out="${2:?usage: bench/round20_h200.sh fp8|fp8v OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
log_clocks

if [ "$what" = fp8 ]; then
    step fp8_gpu 240 python3 -m pytest -p no:cacheprovider -m gpu -q -rfs \
        tests/gpu/test_attention_fp8_gpu.py tests/gpu/test_fragment_converts_gpu.py \
        tests/gpu/test_fuzz_gpu.py
    STEP_TAIL=12 step attention_fp8 300 python3 bench/attention_fp8.py --dims 128 \
        --peers triton --before carry/before_fp8 --variants unfolded \
        --out "$out/attention_fp8.json"
elif [ "$what" = fp8v ]; then
    STEP_TAIL=8 step attention_fp8_variants 300 python3 bench/attention_fp8.py --dims 128 \
        --seqs 2048,4096,16384 --peers none --variants pingpong,exp2_1,exp2_2,s2 \
        --out "$out/attention_fp8_variants.json"
else
    echo "unknown mode $what"; exit 2
fi
