#!/usr/bin/env bash
# Issue 18 on the lent H200, in two calls of one warm machine (model: bench/h200.sh).
#   bench/restructure_h200.sh tests OUT   every GPU test, the two examples
#   bench/restructure_h200.sh bench OUT   bench/restructure_check.py: the PTX of the tree
#                                          before the restructuring (carry/old_ptx) against
#                                          this tree's, beside cuBLAS and cuDNN, one process
set -uo pipefail
what="${1:?usage: bench/restructure_h200.sh tests|bench OUT_DIR}"
out="${2:?usage: bench/restructure_h200.sh tests|bench OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
export TAWA_REFERENCE_PTX_DIR="$PWD/carry/ptx"
if [ "$what" = tests ]; then
    step gpu_tests 420 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu -rfs
    step examples_gemm 60 python3 examples/gemm.py --m 1000 --n 520 --k 1000
    step examples_attention 90 python3 examples/attention.py --seq 1000 --heads 3
else
    step restructure 560 python3 bench/restructure_check.py --old-ptx carry/old_ptx \
        --out "$out/restructure.json"
fi
