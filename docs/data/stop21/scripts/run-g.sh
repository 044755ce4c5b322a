# Stop 21, call G (about 3 minutes). Prepared here: the one-kernel rotation for up to 1024 rows
# (GGML_CUDA_ROT_MAX_ROWS 64 -> 1024, so that a decode step of 32 sequences takes it with its
# RoPE inside) built into build-cuda-local, then
#   tar -C build-cuda-local/bin -cf /tmp/rot.tar .
#   zstd -19 --long=28 --patch-from=/tmp/base.tar /tmp/rot.tar -o .dB/rot.tar.zst
# (/tmp/base.tar: .dB/bin.tar.xz unpacked; .dB/scr.tar.zst: the 32 patches, call C).
# Then (device tool, carry [".dB"]): bash docs/data/stop21/scripts/run-g.sh
# Builds "s" (32 patches) and "r" (plus the change). The tests on r; llama-batched-bench, 32
# sequences of 4k (prompt shared, copied to each stream), oscar2 on s and r alternating, f16 once.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz
mkdir -p $OUT
command -v zstd >/dev/null || export PATH=$PWD/.dB/zbin:$PATH LD_LIBRARY_PATH=$PWD/.dB/zbin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{
date +%T
CUDA_BUILD_DIR=/tmp/s BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/scr.tar.zst timeout 90 bash $S build || exit 1
CUDA_BUILD_DIR=/tmp/r BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/rot.tar.zst timeout 90 bash $S build || exit 1
CUDA_BUILD_DIR=/tmp/r timeout 100 bash $S test
cp $OUT/test-MUL_MAT_ROTATION*.log /tmp/ 2>/dev/null
CUDA_BUILD_DIR=/tmp/r timeout 30 bash $S synth | grep -v Writing
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
bb() { # build, cache type
  CUDA_BUILD_DIR=/tmp/$1 timeout 60 bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk $2 -ctv $2 \
    -c 135168 -b 2048 -ub 512 -npp 4096 -ntg 32 -npl 32 -pps 2>/dev/null | grep -E "^\| +4096" | sed "s/^/$1 $2 /"
}
for r in 1 2; do bb s oscar2; bb r oscar2; done
bb r f16
date +%T
} 2>&1 | tee $RET/g-printed.txt
cp /tmp/test-MUL_MAT_ROTATION*.log $RET/ 2>/dev/null
