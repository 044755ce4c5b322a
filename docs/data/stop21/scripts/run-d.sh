# Stop 21, call D (the device tool, no carry, right after call C on the machine it warmed, whose
# /tmp held call C's build "s" and the synthetic model): ncu kernel tables of the decode steps of
# 32 sequences of 4k, f16 and oscar2 (the prompt's kernels skipped by the table's rule). This is
# the command line that ran, laid out as a script. f16's table needs
#   scripts/ncu-kernel-table.py --skip-first-token --decode-attn 'flash_attn_ext_f16<128, 128, 2,' k-b32-f16.csv.xz
# (at batch, f16 decodes with upstream's tensor-core kernel, not the vector one the script looked for).
S=scripts/device-cuda.sh
export CUDA_BUILD_DIR=/tmp/s
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
[ -f $SYN ] || { echo cold; exit 1; }
export PATH=$PATH:$(dirname $(find / -name ncu -type f 2>/dev/null | head -1))
{
for kv in f16 oscar2; do
  GGML_CUDA_DISABLE_GRAPHS=1 timeout 150 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    --csv --log-file $OUT/k-b32-$kv.csv bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk $kv -ctv $kv \
    -c 135168 -b 2048 -ub 512 -npp 4096 -ntg 3 -npl 32 -pps > $OUT/b32-$kv.log 2>&1
  echo "$kv rc=$?"
  python3 scripts/ncu-kernel-table.py --skip-first-token $OUT/k-b32-$kv.csv | head -25
done
} 2>&1 | tee $OUT/d-printed.txt
xz -T4 $OUT/k-b32-*.csv
