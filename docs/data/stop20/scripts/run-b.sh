# Stop 20, call B (about 8 minutes): the same .dP1 as call A (run-a.sh's header).
# Device tool, carry [".dP1"]: bash docs/data/stop20/scripts/run-b.sh
# The series built with -lineinfo; ncu's source view of the decode kernel at 64k cells
# (executed instructions and stall samples per CUDA line and per SASS instruction);
# llama-batched-bench with 64k-token contexts per sequence, 1 / 2 / 4 / 8 sequences.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res CUDA_BUILD_DIR=/tmp/b WEIGHTS=q4_0 SYNTH_OSCAR=1 CUDA_LINEINFO=1
mkdir -p $OUT
{
date +%T
SRC_TAR=.dP1/llama-src.tar.xz timeout 330 bash $S build || { tail -30 $OUT/build.log; exit 1; }
P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=65536,nb=1,.*type_K=oscar2,type_V=oscar2"
timeout 120 ncu --clock-control none --cache-control none -k regex:oscar2_fa_partial -c 1 --import-source yes \
    --section SourceCounters --section WarpStateStats --section SchedulerStats --section LaunchStats \
    -o /tmp/fa64k bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" > $OUT/ncu-run.log 2>&1
tail -3 $OUT/ncu-run.log
ncu -i /tmp/fa64k.ncu-rep --page details > $RET/ncu-fa64k-details.txt 2>&1
ncu -i /tmp/fa64k.ncu-rep --page source --csv --print-source cuda,sass > $OUT/src-cuda-sass.csv 2>&1
ncu -i /tmp/fa64k.ncu-rep --page source --csv --print-source sass > $OUT/src-sass.csv 2>&1
ls -la $OUT/*.csv /tmp/fa64k.ncu-rep
xz -9 -k $OUT/src-cuda-sass.csv $OUT/src-sass.csv && cp $OUT/src-*.csv.xz $RET/
timeout 30 bash $S synth | grep -v Writing
TYPES="oscar2 f16" BATCH_NPP=65536 BATCH_NPL=1,2,4,8 BATCH_PPS=1 timeout 300 bash $S batched
date +%T
} 2>&1 | tee $RET/b-printed.txt
cp $OUT/batched-*.log $RET/ 2>/dev/null
