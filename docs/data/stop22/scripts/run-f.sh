# Stop 22, call F (about 1-2 minutes; carry [".dB"]): the 33 patches with fattn-oscar2.cu built
# with -lineinfo (compiled by hand in build-cuda-local with the compile command plus -lineinfo,
# the library linked again with ninja's link command: .dB/lb.tar.zst); ncu's source view of the
# decode kernel at 64k cells (as stop 20's call B), read with scripts/ncu-source-table.py and
# `git -C llama.cpp show <patch 0033's commit>:ggml/src/ggml-cuda/fattn-oscar2.cu`.
S=scripts/device-cuda.sh
RET=$OUT
export PATH=$PATH:$(dirname $(find / -name ncu -type f 2>/dev/null | head -1))
export CUDA_BUILD_DIR=/tmp/lb SRC_TAR=.dB/gguf-py.tar.xz OUT=/tmp/res
mkdir -p $OUT
BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/lb.tar.zst timeout 90 bash $S build >/dev/null || exit 1
P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=65536,nb=1,.*type_K=oscar2,type_V=oscar2"
timeout 120 ncu --clock-control none --cache-control none -k regex:oscar2_fa_partial -c 1 --import-source yes \
    --section SourceCounters --section WarpStateStats --section SchedulerStats --section LaunchStats \
    -o /tmp/fa64k bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" > $OUT/ncu-run.log 2>&1
tail -2 $OUT/ncu-run.log
ncu -i /tmp/fa64k.ncu-rep --page details > $RET/ncu-fa64k-details.txt 2>&1
ncu -i /tmp/fa64k.ncu-rep --page source --csv --print-source cuda,sass > /tmp/src-cuda-sass.csv 2>&1
ncu -i /tmp/fa64k.ncu-rep --page source --csv --print-source sass > /tmp/src-sass.csv 2>&1
xz -T4 -c /tmp/src-cuda-sass.csv > $RET/src-cuda-sass.csv.xz; xz -T4 -c /tmp/src-sass.csv > $RET/src-sass.csv.xz
ls -la $RET
