# Stop 25, call E (the device tool, right after call D on the machine it warmed, /tmp/final holding
# .dC/k40's binaries): ncu of the decode kernel alone, the op at 64k cells with windows in order
# ("win") and the plain 64k case ("plain"), the 37 patches. This is the command line that ran,
# laid out as a script. Two short calls came before it on the same machine: E0 ran call D's
# pattern again (0 matching cases), E1 listed the windows cases' names (test-backend-ops perf -p
# "n_sink=64.*kv=65536"), which showed the op with the pool and no windows (40.7 us) and with
# neither (38.9 us) beside the plain case (34.0 us).
export PATH=$PATH:$(dirname $(find / -name ncu -type f 2>/dev/null | head -1))
S=scripts/device-cuda.sh
export CUDA_BUILD_DIR=/tmp/final
for c in win plain; do
if [ $c = win ]; then P="hs=128,nh=8,gqa=4,kv=65536,nb=1,ns=1,n_sink=64,n_recent=256,type_K=oscar2,type_V=oscar2,hot_K=1,hot_V=1,shuffled=0"; else P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=65536,nb=1,.*type_K=oscar2,type_V=oscar2"; fi
timeout 100 ncu --clock-control none --cache-control none -k regex:oscar2_fa_partial -c 1 --import-source no --section SourceCounters --section WarpStateStats --section SchedulerStats --section LaunchStats --section InstructionStats --section Occupancy --section MemoryWorkloadAnalysis -o /tmp/fa-$c bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" > /tmp/ncu-$c.log 2>&1; tail -1 /tmp/ncu-$c.log
ncu -i /tmp/fa-$c.ncu-rep --page details > $OUT/ncu-$c-details.txt 2>&1
ncu -i /tmp/fa-$c.ncu-rep --page source --csv --print-source sass 2>/dev/null | xz -T4 > $OUT/src-sass-$c.csv.xz
echo "== $c"; grep -E "Issued Warp Per Scheduler|Active Warps Per Scheduler|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Duration|Grid Size|Block Size|Memory Throughput|L2 Hit" $OUT/ncu-$c-details.txt | head -14
done
