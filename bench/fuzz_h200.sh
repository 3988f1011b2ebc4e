#!/usr/bin/env bash
# A GPU fuzz run longer than one device call allows (10 minutes each, setup included).
#   bench/fuzz_h200.sh start MINUTES SEED   launch `tawa fuzz --gpu` in its own process
#                                           session: it outlives the call that started it
#                                           while the machine stays held (root, setsid)
#   bench/fuzz_h200.sh wait OUT_DIR         block until it ends (or until killed by an outer
#                                           `timeout`), copying its log and reproducers to
#                                           OUT_DIR at every poll
# Expects bench/device_env.sh sourced first (PYTHONPATH with the carried wheels).
set -uo pipefail
run=/tmp/fuzz_run
case "${1:-}" in
start)
    minutes=${2:?minutes} seed=${3:?seed}
    rm -rf "$run" && mkdir -p "$run"
    date -u +%FT%TZ > "$run/started"
    setsid nohup bash -c "python3 -m tawa_xdsl.tools.tawa fuzz --gpu --minutes $minutes \
        --seed $seed --out $run/fuzz > $run/fuzz_gpu.log 2>&1; echo rc=\$? >> $run/fuzz_gpu.log; \
        date -u +%FT%TZ > $run/ended" > /dev/null 2>&1 < /dev/null &
    echo "fuzz started: $minutes min, seed $seed"
    ;;
wait)
    out=${2:?OUT_DIR}
    mkdir -p "$out"
    while true; do
        cp -r "$run"/. "$out"/ 2>/dev/null
        [ -e "$run/ended" ] && break
        sleep 15
    done
    tail -n 30 "$out/fuzz_gpu.log"
    ;;
*)
    echo "usage: bench/fuzz_h200.sh start MINUTES SEED | wait OUT_DIR" >&2
    exit 2
    ;;
esac
