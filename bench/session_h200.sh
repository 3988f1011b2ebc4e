#!/usr/bin/env bash
# One session's checks on the lent H200, in calls of one warm machine (model: bench/h200.sh).
#   bench/session_h200.sh corpus OUT  the corpus of Triton-style kernels on the GPU
#   bench/session_h200.sh tests OUT   every other GPU test (the torch path, the library
#                                      kernels, launch options, regressions, fuzz epilogues)
#   bench/session_h200.sh bench OUT   launch and op overhead against the peers, the torch
#                                      block example, then a GPU fuzz run of FUZZ_MINUTES
#                                      (none with FUZZ_MINUTES=0: bench/fuzz_h200.sh runs one
#                                      that outlives the call)
set -uo pipefail
what="${1:?usage: bench/session_h200.sh tests|bench OUT_DIR}"
out="${2:?usage: bench/session_h200.sh tests|bench OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
if [ "$what" = corpus ]; then
    step gpu_corpus 540 python3 -m pytest -q -p no:cacheprovider -m gpu -rfs \
        tests/gpu/test_corpus_gpu.py tests/gpu/test_corpus_forms_gpu.py
elif [ "$what" = tests ]; then
    step gpu_tests 540 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu -rfs \
        --ignore tests/gpu/test_corpus_gpu.py --ignore tests/gpu/test_corpus_forms_gpu.py \
        --deselect tests/gpu/test_torch_gpu.py::test_the_torch_block_example_on_the_gpu
else
    step launch_overhead 90 python3 bench/launch_overhead.py --out "$out/launch_overhead.json"
    step op_overhead 150 python3 bench/op_overhead.py "$out"
    step torch_block 150 python3 examples/torch_block.py
    [ "${FUZZ_MINUTES:-3}" = 0 ] && exit 0
    step fuzz_gpu $(( ${FUZZ_MINUTES:-3} * 60 + 60 )) python3 -m tawa_xdsl.tools.tawa fuzz --gpu \
        --minutes "${FUZZ_MINUTES:-3}" --out "$out/fuzz"
fi
