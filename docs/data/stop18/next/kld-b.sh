# Next stop, call B (right after kld-a.sh, on the machine it warmed): part 2 of the model;
# the CPU's logits saved (llama-perplexity --kl-divergence-base) and the GPU's compared with
# them (--kl-divergence: mean ln(PPL(GPU)/PPL(CPU)) with its uncertainty, KLD, same top
# token), f16 and oscar2, batches of 4 (the decode kernel) and 1024 (the f16 expansion); and
# oscar2 against f16 on each backend (the KLD that the 2-bit cache costs, GPU and CPU).
# ctx 1024, 16 chunks of WikiText-2 test (stop 18: oscar2 GPU/CPU +1.28 % with 4-token
# batches, f16 +0.71 %).
#   run (device tool, carry [".dP2"]): bash docs/data/stop18/next/kld-b.sh
export CUDA_BUILD_DIR=/tmp/bb
S=scripts/device-cuda.sh
{
[ -x /tmp/bb/bin/llama-perplexity ] || { echo "cold machine: run kld-a.sh again first"; exit 1; }
cp .dP2/part.* /tmp/sp/ && scripts/device-split.sh --join /tmp/sp /tmp/sp/model.gguf || exit 1
A="-m /tmp/sp/model.gguf -f .dP2/wiki.test.raw -c 1024 --chunks 16 -b 1024 -fa on"
cpu() { CUDA_VISIBLE_DEVICES= timeout 150 bash $S run llama-perplexity $A -ngl 0 -t $(nproc) "$@"; }
gpu() { timeout 100 bash $S run llama-perplexity $A -ngl 99 "$@"; }
show() { # tag log
  printf "%-34s %s | %s | %s | %s\n" "$1" "$(grep -m1 -o 'Mean    ln(PPL(Q)/PPL(base)).*' $2 | sed 's/  */ /g')" \
    "$(grep -m1 -o 'Mean    KLD:.*' $2 | sed 's/  */ /g')" "$(grep -m1 -o 'Same top p:.*' $2 | sed 's/  */ /g')" \
    "$(grep -m1 -o 'Mean PPL(Q)  *:.*' $2 | sed 's/  */ /g')"
}
for ub in 4 1024; do
  for kv in f16 oscar2; do
    cpu -ub $ub -ctk $kv -ctv $kv --kl-divergence-base /tmp/cpu-$kv-$ub.kld > $OUT/cpu-$kv-$ub.log 2>&1
    gpu -ub $ub -ctk $kv -ctv $kv --kl-divergence-base /tmp/cpu-$kv-$ub.kld --kl-divergence > $OUT/gpu-vs-cpu-$kv-$ub.log 2>&1
    show "GPU against CPU, $kv, ub $ub" $OUT/gpu-vs-cpu-$kv-$ub.log
  done
  gpu -ub $ub -ctk f16 -ctv f16 --kl-divergence-base /tmp/gpu-f16-$ub.kld > /dev/null 2>&1
  gpu -ub $ub -ctk oscar2 -ctv oscar2 --kl-divergence-base /tmp/gpu-f16-$ub.kld --kl-divergence > $OUT/o2-vs-f16-gpu-$ub.log 2>&1
  cpu -ub $ub -ctk oscar2 -ctv oscar2 --kl-divergence-base /tmp/cpu-f16-$ub.kld --kl-divergence > $OUT/o2-vs-f16-cpu-$ub.log 2>&1
  show "oscar2 against f16 on the GPU, ub $ub" $OUT/o2-vs-f16-gpu-$ub.log
  show "oscar2 against f16 on the CPU, ub $ub" $OUT/o2-vs-f16-cpu-$ub.log
  rm -f /tmp/*-$ub.kld
done
} 2>&1 | tee $OUT/kld-b-printed.txt
