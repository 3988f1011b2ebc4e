#!/usr/bin/env bash
# One batched run on the lent H200 (see README "Running on a GPU"): install the carried
# wheels, run the examples on the GPU, the GPU tests, and the benchmarks against the peers.
# Usage (from the repository root, with the wheels in carry/wheels): bench/h200.sh OUT_DIR
set -uo pipefail
out="${1:?usage: bench/h200.sh OUT_DIR}"
mkdir -p "$out" /tmp/site
python3 -c "import zipfile, glob; [zipfile.ZipFile(w).extractall('/tmp/site') for w in glob.glob('carry/wheels/*.whl')]"
export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to OUT/NAME.log
    local name=$1 limit=$2; shift 2
    echo "== $name"; timeout "$limit" "$@" > "$out/$name.log" 2>&1; echo "rc=$?" >> "$out/$name.log"
    tail -n 4 "$out/$name.log"
}
step examples_gemm 60 python3 examples/gemm.py --m 1000 --n 520 --k 1000
step examples_attention 90 python3 examples/attention.py --seq 1000 --heads 3
step gpu_tests 200 python3 -m pytest -q -m gpu tests/gpu -rf
step attention_bench 120 python3 bench/attention.py --out "$out/attention_f16.json"
step gemm_bench 100 python3 bench/gemm.py --dtypes bf16 --out "$out/gemm_bf16.json"
