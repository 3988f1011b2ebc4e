#!/usr/bin/env bash
# One call on the lent H200 after a printer change: the attention timed against the PTX of
# the tree before the change in one process, with cuDNN (bench/attention.py --before), first,
# while nothing else runs; then every GPU test (the corpus and the rest, two pytest processes
# side by side: correctness only) for at most TEST_SECONDS. BEFORE holds
# bench/attention_ptx.py's output of that tree.
# Usage (repository root, xdsl wheels in carry/wheels): bench/ab_h200.sh OUT BEFORE
set -uo pipefail
out="${1:?usage: bench/ab_h200.sh OUT_DIR BEFORE_PTX_DIR}"
before="${2:?usage: bench/ab_h200.sh OUT_DIR BEFORE_PTX_DIR}"
tests="${TEST_SECONDS:-300}"
STEP_TAIL=${STEP_TAIL:-12}
source bench/device_env.sh
step attention_ab 150 python3 bench/attention.py --dims 128,64 --seqs 2048,16384 \
    --peers cudnn --schedules ours,ours_single --before "$before" --out "$out/attention_ab.json"
step gpu_corpus "$tests" python3 -m pytest -q -p no:cacheprovider -m gpu -rfs \
    tests/gpu/test_corpus_gpu.py tests/gpu/test_corpus_forms_gpu.py tests/gpu/test_corpus_more_gpu.py &
step gpu_tests "$tests" python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu -rfs \
    --ignore tests/gpu/test_corpus_gpu.py --ignore tests/gpu/test_corpus_forms_gpu.py \
    --ignore tests/gpu/test_corpus_more_gpu.py \
    --deselect tests/gpu/test_torch_gpu.py::test_the_torch_block_example_on_the_gpu
wait
