#!/usr/bin/env bash
# Round 17 on the lent H200 (session 17): the rotated loop with its last iteration peeled
# (no lookahead guard in the loop body, so no undefined S for the printer to zero).
#   bench/round17_h200.sh peel OUT   (carry carry/wheels carry/peel) the tree's kernel against
#                                    the PTX of the peeled schedule (attention_ptx.py of that
#                                    tree into carry/peel), f16, d = 64 and 128, 2K and 16K keys
set -uo pipefail
what="${1:?usage: bench/round17_h200.sh peel OUT_DIR}"
out="${2:?usage: bench/round17_h200.sh peel OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh

ab() {  # ab NAME DIMS DIR: ours against the PTX of DIR, f16, 2K and 16K keys
    step "$1" 300 python3 bench/attention.py --dtypes f16 --dims "$2" --seqs 2048,16384 \
        --no-peers --schedules ours --before "$3" --out "$out/$1.json"
}

if [ "$what" = peel ]; then
    ab peel_ab 64,128 carry/peel
fi
