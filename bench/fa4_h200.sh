# Sourced on the lent H200: FlashAttention-4 from wheels carried in three calls (ANCHORS.md:
# the cu13 wheel alone is over what one call may carry, so it travels split in parts).
#   source bench/fa4_h200.sh stash DIR   keep DIR's files (wheel parts, wheels) in /tmp/fa4parts
#   source bench/fa4_h200.sh install     join the parts, unzip every wheel into /tmp/fa4 once,
#                                        and put FA4 on PYTHONPATH (what bench/attention.py needs)
# The parts are named cu13.part.*; joined in name order they are the
# nvidia-cutlass-dsl-libs-cu13 wheel.
fa4_what="${1:?usage: source bench/fa4_h200.sh stash DIR | install}"
mkdir -p /tmp/fa4parts
if [ "$fa4_what" = stash ]; then
    cp "${2:?usage: source bench/fa4_h200.sh stash DIR}"/* /tmp/fa4parts/
    echo "stashed: $(ls /tmp/fa4parts | tr '\n' ' ')"
else
    if [ ! -e /tmp/fa4/.unzipped ]; then
        cat /tmp/fa4parts/cu13.part.* > /tmp/fa4parts/cutlass_dsl_libs_cu13.whl
        python3 -c "import zipfile, glob; [zipfile.ZipFile(w).extractall('/tmp/fa4') for w in glob.glob('/tmp/fa4parts/*.whl')]"
        touch /tmp/fa4/.unzipped
    fi
    export PYTHONPATH="${PYTHONPATH:-}:/tmp/fa4:/tmp/fa4/nvidia_cutlass_dsl/dsl_packages"
    python3 -c "from flash_attn.cute import flash_attn_func; print('FA4 imports')" 2>&1 | tail -n 1
fi
