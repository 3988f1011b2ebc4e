#!/usr/bin/env bash
# One call on the lent H200 after a printer change (under 9 minutes): every GPU test (the
# corpus and the rest, two pytest processes side by side: correctness only), then the
# attention timed against the PTX of the tree before the change in one process, with cuDNN
# (bench/attention.py --before). BEFORE holds bench/attention_ptx.py's output of that tree.
# Usage (repository root, xdsl wheels in carry/wheels): bench/ab_h200.sh OUT BEFORE
set -uo pipefail
out="${1:?usage: bench/ab_h200.sh OUT_DIR BEFORE_PTX_DIR}"
before="${2:?usage: bench/ab_h200.sh OUT_DIR BEFORE_PTX_DIR}"
STEP_TAIL=${STEP_TAIL:-4}
source bench/device_env.sh
export TAWA_CACHE_DIR=/tmp/tawa-cache
bench/session_h200.sh corpus "$out" > "$out/corpus_step.txt" 2>&1 &
bench/session_h200.sh tests "$out" > "$out/tests_step.txt" 2>&1
wait
cat "$out/corpus_step.txt" "$out/tests_step.txt"
step attention_ab 200 python3 bench/attention.py --dims 128,64 --seqs 2048,16384 \
    --peers cudnn --schedules ours,ours_single --before "$before" --out "$out/attention_ab.json"
cat "$out/attention_ab.log"
