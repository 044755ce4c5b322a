# Stop 18, call B (right after s18a.sh, on the machine it warmed; rebuilds if it finds none):
# part 2 of the model, joined; perplexity GPU against CPU (same binary) for f16 and oscar2 with
# prompt batches of 512 (rotations through cuBLAS) and, for oscar2, with batches of 4 tokens
# (the decode path: RoPE inside the rotations' launch, the grouped cache writes, the decode
# kernel); then decode at depth 0 / 64k / 128k for f16, q4_0 and oscar2 on the synthetic
# Qwen3-8B geometry with OSCAR rotations (q4_0 weights), in two rounds.
#   run (device tool, carry [".dP2"]): bash docs/data/stop18/scripts/s18b.sh
export WEIGHTS=q4_0 SYNTH_OSCAR=1 CUDA_BUILD_DIR=/tmp/bb
S=scripts/device-cuda.sh
{
[ -x /tmp/bb/bin/llama-perplexity ] || { echo "cold machine: building again"; SRC_TAR=.dP2/llama-src.tar.xz timeout 330 bash $S build | tail -2; }
mkdir -p /tmp/sp && cp .dP2/part.* .dP2/sha256 /tmp/sp/
scripts/device-split.sh --join /tmp/sp /tmp/sp/model.gguf || exit 1
PPL_MODEL=/tmp/sp/model.gguf PPL_TEXT=.dP2/wiki.test.raw PPL_TYPES="f16 oscar2" timeout 200 bash $S ppl
echo "ppl, oscar2, batches of 4 tokens (ctx 1024, 2 chunks)"
for dev in gpu cpu; do
  if [ $dev = gpu ]; then a="-ngl 99"; e=""; else a="-ngl 0 -t $(nproc)"; e="CUDA_VISIBLE_DEVICES="; fi
  env $e timeout 150 bash $S run llama-perplexity -m /tmp/sp/model.gguf -f .dP2/wiki.test.raw -c 1024 --chunks 2 -b 1024 -ub 4 \
      -ctk oscar2 -ctv oscar2 -fa on $a > $OUT/ppl-ub4-$dev.log 2>&1
  printf "  %s %s\n" $dev "$(grep -o 'Final estimate: PPL = [0-9.]* +/- [0-9.]*' $OUT/ppl-ub4-$dev.log)"
done
timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
echo "decode tok/s (llama-bench -n 32 -r 1), round 1 at depth 0 / 65536 / 131072, round 2 at 0 / 65536"
for d in 0,65536,131072 0,65536; do for kv in f16 q4_0 oscar2; do
  printf "  %-7s %s\n" $kv "$(timeout 150 bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk $kv -ctv $kv -d $d -p 0 -n 32 -r 1 -o csv 2>/dev/null \
      | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')"
done; done
} 2>&1 | tee $OUT/s18b-printed.txt
