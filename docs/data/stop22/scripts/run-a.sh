# Stop 22, call A (about 8 minutes; the device tool, carry [".dB"]). Prepared here: the 32
# patches (with stop 21's review mend of patch 0032, never run on a GPU) as built in
# build-cuda-local, packed as a zstd patch of the 30-patch binaries:
#   xz -dc .dB/bin.tar.xz > /tmp/base.tar; tar -C build-cuda-local/bin -cf /tmp/cur.tar .
#   zstd -19 --long=28 --patch-from=/tmp/base.tar /tmp/cur.tar -o .dB/cur.tar.zst
# Steps: the tests on the 32 patches; batch decode with 8 sequences: 512 and 64k tokens each
# (the first says what a step costs outside the attention), f16 and oscar2; then ncu kernel
# tables of the decode steps of 8 sequences of 64k, oscar2 and f16 (the prompt's kernels
# are skipped by the table's rule: whole tokens after the first decoded one).
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz CUDA_BUILD_DIR=/tmp/c
mkdir -p $OUT
export PATH=$PATH:$(dirname $(find / -name ncu -type f 2>/dev/null | head -1))
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
{
date +%T
BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/cur.tar.zst timeout 90 bash $S build || exit 1
timeout 180 bash $S test
timeout 40 bash $S synth | grep -v Writing
date +%T
for kv in f16 oscar2; do
  timeout 120 bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk $kv -ctv $kv -c $((8*66048)) -b 2048 -ub 2048 \
    -npp 512,65536 -ntg 16 -npl 1,8 -pps > $OUT/bb8-$kv.log 2>&1
  echo "$kv rc=$?"; grep -E "^\|" $OUT/bb8-$kv.log
done
date +%T
for kv in oscar2 f16; do
  GGML_CUDA_DISABLE_GRAPHS=1 timeout 170 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv --log-file $OUT/k-b8-$kv.csv bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk $kv -ctv $kv \
    -c $((8*66048)) -b 2048 -ub 2048 -npp 65536 -ntg 3 -npl 8 -pps > $OUT/nb8-$kv.log 2>&1
  echo "ncu $kv rc=$?"
  python3 scripts/ncu-kernel-table.py --skip-first-token $OUT/k-b8-$kv.csv | head -24
  date +%T
done
} 2>&1 | tee $RET/a-printed.txt
cp $OUT/test-*.log $OUT/bb8-*.log $OUT/nb8-*.log $RET/ 2>/dev/null
xz -T4 -c $OUT/k-b8-oscar2.csv > $RET/k-b8-oscar2.csv.xz 2>/dev/null
xz -T4 -c $OUT/k-b8-f16.csv > $RET/k-b8-f16.csv.xz 2>/dev/null
