# Next stop (prepared in stop 23, not run; about 3 minutes; the device tool, carry [".dN"]; only
# if run-next-a.sh leaves the 4k loss of the next tile's K dot unexplained and worth knowing):
# ncu's source view of the decode kernel at 4k and 64k cells for the 34 patches ("a",
# .dN/lkm.tar.zst) and for k-tile-ahead.diff ("b", .dN/lkp2.tar.zst), both with fattn-oscar2.cu
# built with -lineinfo (compiled by hand in build-cuda-local with its compile command plus
# -lineinfo, the library linked again with ninja's link command), zstd patches of
# .dN/bin.tar.xz. Read with scripts/ncu-source-table.py and the matching fattn-oscar2.cu (the
# series', or with the diff applied); compare the stall reasons per line at 4k.
S=scripts/device-cuda.sh
RET=$OUT
export PATH=$PATH:$(dirname $(find / -name ncu -type f 2>/dev/null | head -1))
export SRC_TAR=.dN/gguf-py.tar.xz OUT=/tmp/res
mkdir -p $OUT
for b in a b; do
  f=$(case $b in a) echo lkm;; b) echo lkp2;; esac)
  CUDA_BUILD_DIR=/tmp/l$b BIN_TAR=.dN/bin.tar.xz BIN_PATCH=.dN/$f.tar.zst timeout 90 bash $S build >/dev/null || exit 1
done
for kv in 4096 65536; do for b in a b; do
  P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=$kv,nb=1,.*type_K=oscar2,type_V=oscar2"
  CUDA_BUILD_DIR=/tmp/l$b timeout 150 ncu --clock-control none --cache-control none -k regex:oscar2_fa_partial -c 1 --import-source yes \
      --section SourceCounters --section WarpStateStats --section SchedulerStats --section LaunchStats --section InstructionStats \
      -o /tmp/fa-$b-$kv bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" > $OUT/ncu-run.log 2>&1
  ncu -i /tmp/fa-$b-$kv.ncu-rep --page details > $RET/ncu-$b-$kv-details.txt 2>&1
  ncu -i /tmp/fa-$b-$kv.ncu-rep --page source --csv --print-source cuda,sass 2>&1 | xz -T4 > $RET/src-$b-$kv.csv.xz
  echo "$b $kv: $(grep -E "Duration|Warp Cycles Per Issued|Executed Instructions  " $RET/ncu-$b-$kv-details.txt | tr -s ' ' | tr '\n' ';')"
done; done
