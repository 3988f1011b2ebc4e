#!/usr/bin/env bash
# Every GPU test of tests/gpu on the lent H200, in SHARDS pytest processes side by side
# (default 6): most of a GPU test's time is compiling and proving on the CPU, so the test ids
# are dealt round-robin to the processes. Correctness only (time nothing while this runs).
# Writes OUT/gpu_ids.txt (what was collected), OUT/gpu_shard_K.log each, and prints the
# summary line of every shard. The reference-PTX runtime tests read carry/ptx.
# Usage (repository root, xdsl wheels in carry/wheels): bench/gpu_tests_h200.sh OUT [SHARDS]
set -uo pipefail
out="${1:?usage: bench/gpu_tests_h200.sh OUT_DIR [SHARDS]}"
shards="${2:-6}"
limit="${TEST_SECONDS:-540}"
source bench/device_env.sh
export TAWA_REFERENCE_PTX_DIR="$PWD/carry/ptx"
# -o addopts="": the project's -q would make this -qq, which lists files instead of ids
python3 -m pytest --collect-only -q -o addopts="" -p no:cacheprovider -m gpu tests/gpu \
    --deselect tests/gpu/test_torch_gpu.py::test_the_torch_block_example_on_the_gpu \
    | grep '::' > "$out/gpu_ids.txt"
echo "collected $(wc -l < "$out/gpu_ids.txt") GPU tests into $shards shards"
rm -f /tmp/gpu_shard_?
awk -v n="$shards" '{ print > ("/tmp/gpu_shard_" (NR % n)) }' "$out/gpu_ids.txt"
# ids go through a file: parametrized ids may hold spaces or brackets
cat > /tmp/gpu_shard.py <<'PY'
import sys
import pytest
ids = open(sys.argv[1]).read().splitlines()
# no -q of its own: the project's addopts has one, and -qq drops the "N passed" line
sys.exit(pytest.main(["-p", "no:cacheprovider", "-m", "gpu", "-rfs", *ids]))
PY
for shard in /tmp/gpu_shard_?; do
    log="$out/gpu_shard_${shard##*_}.log"
    ( timeout "$limit" python3 /tmp/gpu_shard.py "$shard" > "$log" 2>&1; echo "rc=$?" >> "$log" ) &
done
wait
for log in "$out"/gpu_shard_*.log; do
    echo "$(basename "$log"): $(grep -E '(passed|failed|error)' "$log" | tail -n 1) $(tail -n 1 "$log")"
done
