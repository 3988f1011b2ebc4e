#!/usr/bin/env bash
# Round 13 on the lent H200 (session 12): the compiler's own choices. Two calls:
#   bench/round13_h200.sh check OUT  after the fixes of the first run (three warpgroups chosen
#                               for 192 rows; 128 rows up to 1K keys at d = 64): every GPU test
#                               and attention d = 64, the library against the source with no
#                               options and the 128-row form, ours only
#   bench/round13_h200.sh stages OUT the library at d = 64 with 4-deep K/V rings (what the
#                               compiler's ring-depth picks there) against its 3, ours only
#   bench/round13_h200.sh shifts OUT every GPU test, then the same A/B, after the printer's
#                               shift and mask for a power-of-two ring depth
#   bench/round13_h200.sh run OUT    every GPU test (8 shards) on the tree where the options default
#                               to chosen (rotation where a loop has the shape, the MMA depth
#                               per loop, setmaxnreg from the consumers' tiles) and d = 64
#                               attention launches 192 rows; then attention f16 and bf16, ours
#                               only, one process: the library (`ours`), the source at the
#                               library's block sizes with no options (`ours_launch_defaults`),
#                               the old 128-row d = 64 form (`ours_m128`) and the unrotated
#                               schedule; fp8 attention at the chosen 40/232 against the old
#                               24/240; then 2 minutes of GPU fuzzing.
# FA4 is not installed: the FA4 ratios of these kernels are round 12's (bench/NOTES.md).
set -uo pipefail
what="${1:?usage: bench/round13_h200.sh run|check|stages|shifts OUT_DIR}"
out="${2:?usage: bench/round13_h200.sh run|check|stages|shifts OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
if [ "$what" = shifts ]; then
    # after the printer's shift and mask for power-of-two rings: every GPU test, then the A/B
    all_gpu_tests "${TEST_SECONDS_SHIFTS:-240}"
    what=stages
fi
if [ "$what" = stages ]; then
    for depth in 3 4; do
        step "attention_d64_stages$depth" 100 python3 bench/attention.py --dtypes f16,bf16 \
            --dims 64 --seqs 2048,4096,16384 --no-peers --stages "$depth" \
            --schedules ours --out "$out/attention_d64_stages$depth.json"
    done
    exit 0
fi
all_gpu_tests 330
if [ "$what" = check ]; then
    step attention_defaults_d64 150 python3 bench/attention.py --dtypes f16,bf16 --dims 64 \
        --seqs 1024,2048,4096,16384 --no-peers --schedules ours,ours_launch_defaults,ours_m128 \
        --out "$out/attention_defaults_d64.json"
    exit 0
fi
step attention_defaults 200 python3 bench/attention.py --dtypes f16,bf16 \
    --seqs 1024,2048,4096,16384 --no-peers \
    --schedules ours,ours_launch_defaults,ours_m128,ours_straightforward \
    --out "$out/attention_defaults.json"
step attention_fp8 120 python3 bench/attention_fp8.py --dims 128 --peers none \
    --variants r240 --out "$out/attention_fp8.json"
step fuzz_gpu 180 python3 -m tawa_xdsl.tools.tawa fuzz --gpu --minutes 2 --seed 13 \
    --out "$out/fuzz"
