# Next stop, call B of two (right after run-a.sh, on the machine it warmed; carry [".dP2"];
# about 7 minutes): the GPU's logits against the CPU's for the converted SmolLM2 with patch
# 0031's decode kernel (llama-perplexity --kl-divergence-base on the CPU, --kl-divergence on the
# GPU; ctx 1024, 16 chunks, 4-token batches, which take the decode kernel: stop 19 had oscar2's
# excess over f16's own GPU/CPU gap at 0.0056 +- 0.0037 in ln PPL); the issue's check at ctx
# 4096 (512-token batches); and an ncu kernel table of one batch-32 decode step (32 sequences of
# 4k), where every cache type spends 9-12 ms per step outside the attention (stop 20).
#   run (device tool, carry [".dP2"]): bash docs/data/stop20/next/run-b.sh
export CUDA_BUILD_DIR=/tmp/b WEIGHTS=q4_0 SYNTH_OSCAR=1
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/kl; mkdir -p $OUT
{
[ -x /tmp/b/bin/llama-perplexity ] || { echo "cold machine: run run-a.sh again first"; exit 1; }
cp .dP2/part.* /tmp/sp/ && scripts/device-split.sh --join /tmp/sp /tmp/sp/model.gguf || exit 1
PPL_MODEL=/tmp/sp/model.gguf PPL_TEXT=.dP2/wiki.test.raw KLD_UB=4 timeout 400 bash $S kld
PPL_MODEL=/tmp/sp/model.gguf PPL_TEXT=.dP2/wiki.test.raw timeout 200 bash $S ppl
timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
for kv in f16 oscar2; do # kernels of the decode steps of 32 sequences of 4k (the prompt's kernels skipped by the table's rule)
  GGML_CUDA_DISABLE_GRAPHS=1 timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
     --csv --log-file $OUT/k-b32-$kv.csv bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk $kv -ctv $kv \
     -c 135168 -b 2048 -ub 512 -npp 4096 -ntg 3 -npl 32 -pps > /dev/null 2>&1
  python3 scripts/ncu-kernel-table.py --skip-first-token $OUT/k-b32-$kv.csv | head -25
done
} 2>&1 | tee $RET/run-b-printed.txt
xz -T4 $OUT/k-b32-*.csv
tar -C $OUT -cJf $RET/logs.tar.xz --exclude='*.kld' .
