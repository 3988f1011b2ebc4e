#!/usr/bin/env bash
# One batched run on the lent H200 (see README "Running on a GPU"): install the carried
# wheels, run the examples on the GPU, the GPU tests, and the benchmarks against the peers.
# Usage (from the repository root, with the wheels in carry/wheels): bench/h200.sh OUT_DIR
set -uo pipefail
out="${1:?usage: bench/h200.sh OUT_DIR}"
source bench/device_env.sh
step examples_gemm 60 python3 examples/gemm.py --m 1000 --n 520 --k 1000
step examples_attention 90 python3 examples/attention.py --seq 1000 --heads 3
step gpu_tests 200 python3 -m pytest -q -m gpu tests/gpu -rf
step attention_bench 120 python3 bench/attention.py --out "$out/attention_f16.json"
step gemm_bench 100 python3 bench/gemm.py --dtypes bf16 --out "$out/gemm_bf16.json"
step fuzz_gpu $(( ${FUZZ_MINUTES:-2} * 60 + 90 )) python3 -m tawa_xdsl.tools.tawa fuzz --gpu \
    --minutes "${FUZZ_MINUTES:-2}" --out "$out/fuzz"
