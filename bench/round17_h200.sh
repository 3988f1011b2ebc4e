#!/usr/bin/env bash
# Round 17 on the lent H200 (session 17): the rotated loop with its last iteration peeled
# (no lookahead guard in the loop body, so no undefined S for the printer to zero).
# carry/peel was written by bench/attention_peel_ptx.py, removed in session 18 when the peeled
# loop became the proved default (`git show 93af043:bench/attention_peel_ptx.py`); today the
# tree's own kernel is the peeled one.
#   bench/round17_h200.sh peel OUT   (carry carry/wheels carry/peel) the tree's kernel against
#                                    the PTX of the peeled schedule (attention_ptx.py of that
#                                    tree into carry/peel), f16, d = 64 and 128, 2K and 16K keys
# Then, calls of one warm machine right after each other (FA4 in three parts, ANCHORS.md):
#   bench/round17_h200.sh fa4a OUT   (carry carry/wheels carry/fa4a) FA4's first part stashed
#   bench/round17_h200.sh fa4b OUT   (carry carry/fa4b) its second part
#   bench/round17_h200.sh peers OUT  (carry carry/fa4c carry/peel) FA4 installed; the tree's
#                                    kernel and the peeled PTX against FA4 and Triton TMA,
#                                    f16, d = 64 and 128, 1K-16K keys
set -uo pipefail
what="${1:?usage: bench/round17_h200.sh peel|fa4a|fa4b|peers OUT_DIR}"
out="${2:?usage: bench/round17_h200.sh peel|fa4a|fa4b|peers OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh

ab() {  # ab NAME DIMS DIR: ours against the PTX of DIR, f16, 2K and 16K keys
    step "$1" 300 python3 bench/attention.py --dtypes f16 --dims "$2" --seqs 2048,16384 \
        --no-peers --schedules ours --before "$3" --out "$out/$1.json"
}

if [ "$what" = peel ]; then
    ab peel_ab 64,128 carry/peel
elif [ "$what" = fa4a ]; then
    source bench/fa4_h200.sh stash carry/fa4a
elif [ "$what" = fa4b ]; then
    source bench/fa4_h200.sh stash carry/fa4b
else
    source bench/fa4_h200.sh stash carry/fa4c
    source bench/fa4_h200.sh install
    step peel_peers 540 python3 bench/attention.py --dtypes f16 --seqs 1024,2048,4096,16384 \
        --peers fa4,triton --schedules ours --before carry/peel --out "$out/peel_peers.json"
fi
