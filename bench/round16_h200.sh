#!/usr/bin/env bash
# Round 16 on the lent H200 (session 16): where ours and FA4's Hopper path spend their cycles
# (ncu `--set full`, stall sampling per SASS instruction) at d = 128 and d = 64, 2K keys, f16.
# Also the row reductions folded in four chains (ROW_REDUCE_CHAINS) against one, timed against
# the PTX of the tree before (bench/attention_ptx.py of that tree into carry/before).
# Calls of one warm machine, each right after the last (it goes back after 30 idle seconds):
#   bench/round16_h200.sh ab OUT     FA4's first part stashed (carry carry/wheels carry/ptx
#                                    carry/fa4a carry/before); the A/B of the reductions,
#                                    f16, d = 64 and 128, causal and not, 2K and 16K keys;
#                                    at d = 128 FA4's other choices on ours: 2-deep rings, one
#                                    program per row block, ping-pong around the issue
#   bench/round16_h200.sh ours OUT   FA4's second part (carry carry/fa4b); ncu of ours at
#                                    d = 128 and d = 64
#   bench/round16_h200.sh fa4 OUT    FA4's last part and install (carry carry/fa4c); ncu of FA4
#                                    at d = 128 and d = 64
# After the census (the session's second half):
#   bench/round16_h200.sh check OUT  FA4's first part (carry carry/wheels carry/ptx carry/fa4a
#                                    carry/before); ours against the PTX before the session,
#                                    then every GPU test (8 shards)
#   bench/round16_h200.sh census OUT FA4's second part (carry carry/fa4b); ncu of ours again
#   bench/round16_h200.sh peers OUT  FA4's last part and install (carry carry/fa4c); ours and
#                                    the source launched with no options against FA4 and
#                                    Triton TMA, f16 and bf16, d = 64 and 128, 1K-16K keys
#   bench/round16_h200.sh hint OUT   (carry carry/wheels carry/nohint carry/prodhint) ours with
#                                    the try_wait hint against the same PTX without it, and
#                                    with it on the producer's waits only
#   bench/round16_h200.sh fence OUT  (carry carry/wheels carry/fence) ours against the same PTX
#                                    with a fence.acq_rel.cta in front of the rotated loop's
#                                    wait for P V(j) (ptxas hoists that wait above the softmax
#                                    otherwise; the fence keeps it where it was placed)
#   bench/round16_h200.sh gemm OUT   (carry carry/wheels) GEMM bf16 and fp8 against cuBLAS and
#                                    Triton's persistent TMA matmul (the try_wait hint is in
#                                    every GEMM's waits too)
# Each profile leaves OUT/NAME.log (ncu's details page: speed of light, warp states,
# instruction mix) and OUT/NAME_source.csv (the source page: samples per SASS instruction).
set -uo pipefail
what="${1:?usage: bench/round16_h200.sh ab|ours|fa4|check|census|peers|hint|fence|gemm OUT_DIR}"
out="${2:?usage: bench/round16_h200.sh ab|ours|fa4|check|census|peers|hint|fence|gemm OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
ab() {  # ab NAME DIMS [DIR]: ours against the PTX of DIR (carry/before), f16, 2K and 16K keys
    step "$1" 300 python3 bench/attention.py --dtypes f16 --dims "$2" --seqs 2048,16384 \
        --no-peers --schedules ours --before "${3:-carry/before}" --out "$out/$1.json"
}

if [ "$what" = ab ]; then
    source bench/fa4_h200.sh stash carry/fa4a
    ab chains_ab 64,128
    step fa4_choices 200 python3 bench/attention.py --dtypes f16 --dims 128 --seqs 2048,16384 \
        --no-peers --stages 2 --schedules ours,ours_per_tile,ours_pingpong \
        --out "$out/fa4_choices.json"
elif [ "$what" = ours ]; then
    source bench/fa4_h200.sh stash carry/fa4b
    ab chains_ab_d64 64
    profile ours_d128 --kernel ours --d 128 --seq 2048
    profile ours_d64 --kernel ours --d 64 --seq 2048
elif [ "$what" = fa4 ]; then
    source bench/fa4_h200.sh stash carry/fa4c
    source bench/fa4_h200.sh install
    profile fa4_d128 --kernel fa4 --d 128 --seq 2048
    profile fa4_d64 --kernel fa4 --d 64 --seq 2048
elif [ "$what" = check ]; then
    source bench/fa4_h200.sh stash carry/fa4a
    ab census_ab 64,128
    all_gpu_tests "${TEST_SECONDS_R16:-420}"
elif [ "$what" = census ]; then
    source bench/fa4_h200.sh stash carry/fa4b
    profile after_d128 --kernel ours --d 128 --seq 2048
    profile after_d64 --kernel ours --d 64 --seq 2048
elif [ "$what" = gemm ]; then
    step gemm "${GEMM_SECONDS:-420}" python3 bench/gemm.py --dtypes bf16,fp8 --out "$out/gemm.json"
elif [ "$what" = fence ]; then
    ab fence_ab 64,128 carry/fence
elif [ "$what" = hint ]; then
    ab hint_ab 64,128 carry/nohint
    ab producer_hint_ab 64,128 carry/prodhint
else
    source bench/fa4_h200.sh stash carry/fa4c
    source bench/fa4_h200.sh install
    step attention_peers 540 python3 bench/attention.py --dtypes f16,bf16 \
        --seqs 1024,2048,4096,16384 --peers fa4,triton \
        --schedules ours,ours_launch_defaults --out "$out/attention_peers.json"
fi
