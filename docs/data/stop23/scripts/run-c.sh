# Stop 23, call C (about 6 minutes; the device tool, carry [".dB"]): patch 0034 (the K dot on
# integer tensor cores) measured in the model and profiled.
# - "b": the 34 patches, .dB/km.tar.zst (call B's build);
# - "lb": the same with fattn-oscar2.cu built with -lineinfo (compiled by hand in
#   build-cuda-local with its compile command plus -lineinfo, the library linked again with
#   ninja's link command), .dB/lb2.tar.zst; both zstd patches of .dB/bin.tar.xz.
# Steps: ncu's source view of the decode kernel at 64k cells on "lb" (read with
# scripts/ncu-source-table.py and fattn-oscar2.cu of patch 0034); the model table (oscar-bench:
# f16, q4_0, oscar2 at depths 0 / 16k / 64k / 128k, one rep) on "b". Leaves "b" in /tmp/b for
# calls D1 and D2.
S=scripts/device-cuda.sh
RET=$OUT
export PATH=$PATH:$(dirname $(find / -name ncu -type f 2>/dev/null | head -1))
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz
mkdir -p $OUT
{
date +%T
CUDA_BUILD_DIR=/tmp/b  BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/km.tar.zst  timeout 90 bash $S build >/dev/null || exit 1
CUDA_BUILD_DIR=/tmp/lb BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/lb2.tar.zst timeout 90 bash $S build >/dev/null || exit 1
P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=65536,nb=1,.*type_K=oscar2,type_V=oscar2"
CUDA_BUILD_DIR=/tmp/lb timeout 150 ncu --clock-control none --cache-control none -k regex:oscar2_fa_partial -c 1 --import-source yes \
    --section SourceCounters --section WarpStateStats --section SchedulerStats --section LaunchStats --section InstructionStats \
    -o /tmp/fa64k bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" > $OUT/ncu-run.log 2>&1
tail -2 $OUT/ncu-run.log
ncu -i /tmp/fa64k.ncu-rep --page details > $RET/ncu-fa64k-details.txt 2>&1
ncu -i /tmp/fa64k.ncu-rep --page source --csv --print-source cuda,sass > /tmp/src-cuda-sass.csv 2>&1
xz -T4 -c /tmp/src-cuda-sass.csv > $RET/src-cuda-sass.csv.xz
grep -E "Issued Warp Per Scheduler|Active Warps Per Scheduler|Warp Cycles Per Issued|Executed Instructions  " $RET/ncu-fa64k-details.txt | head
date +%T
CUDA_BUILD_DIR=/tmp/b TYPES="f16 q4_0 oscar2" REPS=1 timeout 240 bash $S bench
date +%T
} 2>&1 | tee $RET/c-printed.txt
tar -C $OUT -cJf $RET/bench.tar.xz --exclude='*.gguf' --exclude='test-*' --exclude='batched-*' .
