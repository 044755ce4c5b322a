# Stop 25, call D (the device tool, carry [".dC"], about 4 minutes): where a decoded token's time
# goes with the 37 patches (.dC/k40.tar.zst), for the 2x bound in RESULTS.
# 1. ncu kernel tables of decoded tokens at depth 0, f16 and oscar2 (graphs off, clocks free,
#    caches not flushed; scripts/ncu-kernel-table.py), synthetic Qwen3-8B, q4_0 weights, R_V stored;
# 2. ncu of the decode kernel alone at 64k cells with windows (the op test): instruction counts,
#    warp states and the SASS by opcode (no -lineinfo build: the SASS view only). Its pattern
#    matched no case (the windows cases' names carry hot_K, hot_V before shuffled): ncu profiled
#    nothing, and call E (run-e.sh) ran this part again.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dC/gguf-py.tar.xz CUDA_BUILD_DIR=/tmp/final
export PATH=$PATH:$(dirname $(find / -name ncu -type f 2>/dev/null | head -1))
mkdir -p $OUT
{
date +%T
BIN_TAR=.dC/bin.tar.xz BIN_PATCH=.dC/k40.tar.zst timeout 90 bash $S build >/dev/null || exit 1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
timeout 60 bash $S synth > /dev/null || exit 1
for kv in f16 oscar2; do
  GGML_CUDA_DISABLE_GRAPHS=1 timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv --log-file $RET/k-d0-$kv.csv bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk $kv -ctv $kv -p 0 -n 2 -r 1 > $OUT/k-d0-$kv.log 2>&1
  echo "$kv rc=$?"
  python3 scripts/ncu-kernel-table.py $RET/k-d0-$kv.csv | head -30
done
P="hs=128,nh=8,gqa=4,kv=65536,nb=1,ns=1,n_sink=64,n_recent=256,type_K=oscar2,type_V=oscar2,shuffled=0"
timeout 150 ncu --clock-control none --cache-control none -k regex:oscar2_fa_partial -c 1 --import-source no \
    --section SourceCounters --section WarpStateStats --section SchedulerStats --section LaunchStats --section InstructionStats \
    -o /tmp/fa64k bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" > $OUT/ncu-run.log 2>&1
tail -3 $OUT/ncu-run.log
ncu -i /tmp/fa64k.ncu-rep --page details > $RET/ncu-fa64k-details.txt 2>&1
ncu -i /tmp/fa64k.ncu-rep --page source --csv --print-source sass > /tmp/src-sass.csv 2>&1
xz -T4 -c /tmp/src-sass.csv > $RET/src-sass.csv.xz
grep -E "Issued Warp Per Scheduler|Active Warps Per Scheduler|Warp Cycles Per Issued|Executed Instructions  |Registers Per|Duration" $RET/ncu-fa64k-details.txt | head -12
date +%T
} 2>&1 | tee $RET/d-printed.txt
xz -T4 $RET/k-d0-*.csv
