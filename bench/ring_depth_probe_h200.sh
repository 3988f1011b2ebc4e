#!/usr/bin/env bash
# ncu counters of the d = 64 library attention with 3- and 4-deep K/V rings (round 13:
# 4-deep was 3-7% slower). Usage on the lent H200: bench/ring_depth_probe_h200.sh (OUT set).
out=$OUT; source bench/device_env.sh
which ncu nsys 2>&1 | tee $out/which.txt
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
for depth in 3 4; do
  if [ -n "$NCU" ]; then
    timeout 150 $NCU --kernel-name regex:attn --launch-skip 2 --launch-count 1 --metrics gpu__time_duration.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct python3 bench/ring_depth_probe.py $depth > $out/ncu_depth$depth.txt 2>&1
    grep -E "duration|hit_rate|bytes_read|throughput|inst_executed|conflicts|stalled" $out/ncu_depth$depth.txt
  else
    python3 bench/ring_depth_probe.py $depth
  fi
done
