#!/bin/bash
# Build, check and time the prototype on the GPU machine; results under $OUT (or /tmp/out).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.total --format=csv | tee "$OUT/gpu.txt"
for S in ${VARIANTS:-3 4 5 4k}; do
  F="-DNSTAGES=${S%k}"; [ "${S%k}" != "$S" ] && F="$F -DKSPLIT=1"
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a $F -Xcompiler -fopenmp \
       -o /tmp/o2d_s$S oscar2_decode.cu 2>&1 | tee -a "$OUT/build.txt" &
done
wait
for S in ${VARIANTS:-3 4 5 4k}; do
  echo "=== NSTAGES=$S" | tee -a "$OUT/run.txt"
  /tmp/o2d_s$S 200 2>&1 | tee -a "$OUT/run.txt"
done
if [ "${NCU:-1}" = 1 ] && command -v ncu >/dev/null; then
  ncu --kernel-name oscar2_decode --launch-skip 20 --launch-count 1 \
      --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,smsp__inst_executed.sum,sm__warps_active.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio \
      /tmp/o2d_s4 20 65536 > "$OUT/ncu.txt" 2>&1
  tail -30 "$OUT/ncu.txt"
fi
