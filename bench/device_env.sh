# Sourced by the bench/*_h200.sh scripts: installs the carried wheels (xdsl and its small
# dependencies, z3) on the lent GPU machine, records the GPU, and defines `step`,
# `all_gpu_tests`, `log_clocks` and `profile`.
# Expects `out` (the output folder); the wheels come from $WHEELS (default carry/wheels).
wheels="${WHEELS:-carry/wheels}"
mkdir -p "$out" /tmp/site
# Extract once per machine: a later call must not rewrite libz3.so under a process that has it
# mapped (a GPU fuzz run started by an earlier call): that process dies of SIGBUS or SIGSEGV.
# A call that carries no wheels leaves no mark, so the next one that does still extracts them.
if [ ! -e /tmp/site/.extracted ] && ls "$wheels"/*.whl > /dev/null 2>&1; then
    python3 -c "import zipfile, glob, sys; [zipfile.ZipFile(w).extractall('/tmp/site') for w in glob.glob(sys.argv[1] + '/*.whl')]" "$wheels"
    touch /tmp/site/.extracted
fi
export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"

step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to OUT/NAME.log
    local name=$1 limit=$2; shift 2
    echo "== $name"; timeout "$limit" "$@" > "$out/$name.log" 2>&1; echo "rc=$?" >> "$out/$name.log"
    tail -n "${STEP_TAIL:-4}" "$out/$name.log"
}

log_clocks() {  # the GPU's clocks and power every second into OUT/dmon.log, until the call ends
    nvidia-smi dmon -s pc -d 1 > "$out/dmon.log" 2>&1 &
    dmon=$!
    trap 'kill $dmon 2> /dev/null' EXIT
}

all_gpu_tests() {  # all_gpu_tests SECONDS: every GPU test in 8 shards, their logs as one file
    TEST_SECONDS=$1 bench/gpu_tests_h200.sh "$out" 8 > "$out/gpu_tests_summary.log" 2>&1
    cat "$out"/gpu_shard_*.log > "$out/gpu_shards_all.log" && rm "$out"/gpu_shard_*.log
    cat "$out/gpu_tests_summary.log"
    grep -E "^(FAILED|ERROR)" "$out/gpu_shards_all.log" | head -20
}

NCU=/usr/local/cuda/bin/ncu
profile() {  # profile NAME PROBE_ARGS...: ncu of one warm launch of bench/attention_probe.py
    local name=$1; shift
    mkdir -p /tmp/ncu
    timeout 240 "$NCU" --set full --import-source yes --kernel-name regex:'attn_fwd|flash|Flash' \
        --launch-skip 1 --launch-count 1 -f -o "/tmp/ncu/$name" \
        python3 bench/attention_probe.py "$@" > "$out/$name.log" 2>&1
    echo "rc=$?" >> "$out/$name.log"
    "$NCU" -i "/tmp/ncu/$name.ncu-rep" --page details >> "$out/$name.log" 2>&1
    "$NCU" -i "/tmp/ncu/$name.ncu-rep" --page source --csv --print-source sass \
        > "$out/${name}_source.csv" 2>&1
    grep -E "^rc=|Duration|Registers Per|Executed Ipc A|Issue Slots Busy|Tensor" "$out/$name.log" | head -12
}

