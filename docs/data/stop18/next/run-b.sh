# Next stop, call B (right after run-a.sh, on the machine it warmed, whose builds it uses): part 2
# of the model;
# the CPU's logits saved (llama-perplexity --kl-divergence-base) and the GPU's compared with
# them (--kl-divergence: mean ln(PPL(GPU)/PPL(CPU)) with its uncertainty, KLD, same top
# token), f16 and oscar2, batches of 4 (the decode kernel) and 1024 (the f16 expansion); and
# oscar2 against f16 on each backend (the KLD that the 2-bit cache costs, GPU and CPU).
# ctx 1024, 16 chunks of WikiText-2 test (stop 18: oscar2 GPU/CPU +1.28 % with 4-token
# batches, f16 +0.71 %). Then decode at depth 0 / 64k side by side: f16, the series, + pdl.diff,
# + rope-once.diff, + rot-cluster.diff (two rounds), and kernel tables at depth 0 of the last
# two, and of rot-cluster with GGML_CUDA_ROT_CLUSTER=2. About 9 minutes.
#   run (device tool, carry [".dP2"]): bash docs/data/stop18/next/run-b.sh
export CUDA_BUILD_DIR=/tmp/v-series WEIGHTS=q4_0 SYNTH_OSCAR=1
export CUDA_VISIBLE_DEVICES=0 # one GPU, also on nvidia-h200-x2 (stop 19), except where said
N_GPU=$(nvidia-smi -L | grep -c '^GPU')
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/kl; mkdir -p $OUT
{
[ -x /tmp/v-rot-cluster/bin/llama-perplexity ] || { echo "cold machine: run run-a.sh again first"; exit 1; }
cp .dP2/part.* /tmp/sp/ && scripts/device-split.sh --join /tmp/sp /tmp/sp/model.gguf || exit 1
A="-m /tmp/sp/model.gguf -f .dP2/wiki.test.raw -c 1024 --chunks 16 -b 1024 -fa on"
cpu() { CUDA_VISIBLE_DEVICES= timeout 150 bash $S run llama-perplexity $A -ngl 0 -t $(nproc) "$@"; }
gpu() { timeout 100 bash $S run llama-perplexity $A -ngl 99 "$@"; }
show() { # tag log
  printf "%-40s %s | %s | %s | %s\n" "$1" "$(grep -m1 -o 'Mean ln(PPL(Q)/PPL(base)).*' $2 | sed 's/  */ /g')" \
    "$(grep -m1 -o 'Mean    KLD:.*' $2 | sed 's/  */ /g')" "$(grep -m1 -o 'Same top p:.*' $2 | sed 's/  */ /g')" \
    "$(grep -m1 -o 'Mean PPL(Q)  *:.*' $2 | sed 's/  */ /g')"
}
for ub in 4 1024; do
  for kv in f16 oscar2; do
    cpu -ub $ub -ctk $kv -ctv $kv --kl-divergence-base /tmp/cpu-$kv-$ub.kld > $OUT/cpu-$kv-$ub.log 2>&1
    gpu -ub $ub -ctk $kv -ctv $kv --kl-divergence-base /tmp/cpu-$kv-$ub.kld --kl-divergence > $OUT/gpu-vs-cpu-$kv-$ub.log 2>&1
    show "GPU against CPU, $kv, ub $ub" $OUT/gpu-vs-cpu-$kv-$ub.log
    if [ "$N_GPU" -ge 2 ]; then # stop 19: the model split by layer over two GPUs
      CUDA_VISIBLE_DEVICES=0,1 gpu -sm layer -ub $ub -ctk $kv -ctv $kv --kl-divergence-base /tmp/cpu-$kv-$ub.kld --kl-divergence -v \
          > $OUT/gpu2-vs-cpu-$kv-$ub.log 2>&1
      show "2 GPUs (-sm layer) against CPU, $kv, ub $ub" $OUT/gpu2-vs-cpu-$kv-$ub.log
    fi
  done
  gpu -ub $ub -ctk f16 -ctv f16 --kl-divergence-base /tmp/gpu-f16-$ub.kld > /dev/null 2>&1
  gpu -ub $ub -ctk oscar2 -ctv oscar2 --kl-divergence-base /tmp/gpu-f16-$ub.kld --kl-divergence > $OUT/o2-vs-f16-gpu-$ub.log 2>&1
  cpu -ub $ub -ctk oscar2 -ctv oscar2 --kl-divergence-base /tmp/cpu-f16-$ub.kld --kl-divergence > $OUT/o2-vs-f16-cpu-$ub.log 2>&1
  show "oscar2 against f16 on the GPU, ub $ub" $OUT/o2-vs-f16-gpu-$ub.log
  show "oscar2 against f16 on the CPU, ub $ub" $OUT/o2-vs-f16-cpu-$ub.log
  rm -f /tmp/*-$ub.kld
done
timeout 60 bash $S synth | grep -v Writing | tail -1
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
bench() { # build, tag, cache type
  CUDA_BUILD_DIR=/tmp/v-$1 timeout 100 bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk $3 -ctv $3 -d 0,65536 -p 0 -n 32 -r 1 -o csv 2>/dev/null \
    | tail -n +2 | awk -F, -v t=$2 '{printf "%s ", $(NF-1)} END {print "  " t}' | tr -d '"'
}
echo "decode tok/s at depth 0 / 65536 (llama-bench -n 32 -r 1)"
for r in 1 2; do bench series f16 f16; for v in series pdl rope-once rot-cluster; do bench $v $v oscar2; done; done
kt() { # tag, build, environment
  env $3 GGML_CUDA_DISABLE_GRAPHS=1 CUDA_BUILD_DIR=/tmp/v-$2 timeout 60 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
     --csv --log-file $OUT/k-$1.csv bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -p 0 -n 2 -r 1 > /dev/null 2>&1
}
kt rope-once rope-once ""; kt rot-cluster rot-cluster ""; kt cluster-all rot-cluster GGML_CUDA_ROT_CLUSTER=2
python3 scripts/ncu-kernel-table.py $OUT/k-rope-once.csv $OUT/k-rot-cluster.csv $OUT/k-cluster-all.csv
xz $OUT/k-*.csv
tar -C $OUT -cf $RET/logs.tar .
} 2>&1 | tee $RET/run-b-printed.txt
