#!/usr/bin/env bash
# Round 15 on the lent H200 (session 14): two CTAs per SM (`ctas_per_sm`) for the GEMM, one
# consumer warpgroup each on 128 x 128 tiles, so that one CTA's epilogue runs under the
# other's MMAs. Calls of one warm machine (carry carry/wheels carry/ptx):
#   bench/round15_h200.sh gemm OUT   the GEMM GPU tests (the 2-CTA options among them, and the
#                                    occupancy check), then GEMM bf16 and fp8 against cuBLAS
#                                    and Triton's persistent TMA matmul, every config timed
#   bench/round15_h200.sh smallk OUT GEMM bf16 at K = 64..512 (time per tile against K), and
#                                    ncu of the 128 x 256 tile at K = 256 (stall sampling per
#                                    SASS instruction: where the consumers wait)
#   bench/round15_h200.sh epilogue OUT  the 128 x 256 configs with one staging barrier per
#                                    consumer warpgroup edited into the PTX, timed beside the
#                                    printed PTX (an experiment: bench/gemm_epilogue_ab.py)
#   bench/round15_h200.sh tests OUT  every GPU test (8 shards)
set -uo pipefail
what="${1:?usage: bench/round15_h200.sh gemm|tests OUT_DIR}"
out="${2:?usage: bench/round15_h200.sh gemm|tests OUT_DIR}"
STEP_TAIL=${STEP_TAIL:-6}
source bench/device_env.sh
if [ "$what" = gemm ]; then
    step gemm_tests 200 python3 -m pytest -p no:cacheprovider -m gpu -x -q tests/gpu/test_gemm_gpu.py
    step gemm 400 python3 bench/gemm.py --dtypes bf16,fp8 --out "$out/gemm.json"
elif [ "$what" = epilogue ]; then
    step gemm_epilogue_ab 300 python3 bench/gemm_epilogue_ab.py --out "$out/gemm_epilogue_ab.json"
elif [ "$what" = smallk ]; then
    step gemm_smallk 200 python3 bench/gemm.py --dtypes bf16 --no-triton \
        --ks 64,128,192,256,320,384,448,512 --out "$out/gemm_smallk.json"
    ncu=/usr/local/cuda/bin/ncu
    step ncu_k256 200 "$ncu" --set full --import-source yes --kernel-name regex:gemm \
        --launch-skip 1 --launch-count 1 -f -o "$out/gemm_k256" \
        python3 bench/gemm_probe.py --config 2 --k 256
    step ncu_k256_source 100 "$ncu" -i "$out/gemm_k256.ncu-rep" --page source --csv \
        --print-source sass
    step ncu_k256_details 100 "$ncu" -i "$out/gemm_k256.ncu-rep" --page details
else
    all_gpu_tests "${TEST_SECONDS_R15:-480}"
fi
