# Stop 22, call E (about 1 minute; carry [".dB"]): ncu of the decode kernel with patch 0033
# (build "n", unpacked again if the machine is fresh) at 64k cells, one launch: instructions,
# issue rate, warp states, occupancy.
OUT_RET=$OUT
S=scripts/device-cuda.sh
export PATH=$PATH:$(dirname $(find / -name ncu -type f 2>/dev/null | head -1))
export CUDA_BUILD_DIR=/tmp/n SRC_TAR=.dB/gguf-py.tar.xz OUT=/tmp/res
mkdir -p $OUT
BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/nb.tar.zst timeout 90 bash $S build >/dev/null || exit 1
P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=65536,nb=1,.*type_K=oscar2,type_V=oscar2"
timeout 120 ncu --clock-control none -k regex:oscar2_fa_partial --launch-skip 3 --launch-count 1 \
  --section SpeedOfLight --section InstructionStats --section WarpStateStats --section Occupancy --section LaunchStats \
  bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" > $OUT_RET/ncu-fa64k-n.txt 2>&1
grep -E "Duration|Executed Instructions |Issued Instructions |Issue Slots Busy|Executed Ipc A|Achieved Active Warps|Registers Per|Grid Size|Memory Throughput|DRAM Throughput|Stall|Warp Cycles Per Issued|Theoretical Occ" $OUT_RET/ncu-fa64k-n.txt | head -40
