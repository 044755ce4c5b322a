#!/bin/bash
# GPU prefill at depth 0 and 16k: f16 against oscar2, in 512-token and 2048-token ubatches, two
# rounds; oscar2's decode at the same depths (docs/RESULTS.md, "Batch 1"). Beside it the GPU's
# logits against the CPU's on a centred, planned SmolLM2-geometry model in batches of 512 (prompt
# batches that read their own rows beside the 16-bit pool) and of 4 (the decode kernel).
# Run on the GPU machine from the repository root (lab/device/device-pack.sh first); $OUT receives the logs.
cd "$(dirname "$0")/../.."
START=$(date +%s)
CUDA_ARCH=90 lab/device/device-cuda.sh build > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "build $(( $(date +%s) - START )) s"
export PYTHONPATH=build-cuda-src/gguf-py:py
python3 -m oscar.bench.synthetic smollm2-135m --weights f16 --oscar --centre --k-q4_0-layers 3,17 -o /tmp/s135.gguf > $OUT/synth-s.log 2>&1 || tail $OUT/synth-s.log
for ub in 512 4; do
  PPL_MODEL=/tmp/s135.gguf KLD_TYPES=oscar2 KLD_UB=$ub lab/device/device-cuda.sh kld > $OUT/kld-$ub.txt 2>&1
  grep "GPU against CPU" $OUT/kld-$ub.txt
done
SYNTH=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
python3 -m oscar.bench.synthetic qwen3-8b -o $SYNTH --weights q4_0 --oscar > $OUT/synth.log 2>&1 || { tail $OUT/synth.log; exit 1; }
B=build-cuda/bin
export LD_LIBRARY_PATH=$B:${LD_LIBRARY_PATH:-}
run() { echo "== $*"; "$B/llama-bench" -m $SYNTH -ngl 99 -fa 1 -n 0 -r 3 "$@" -o md 2>/dev/null | grep -E "pp[0-9]"; }
for r in 1 2; do
  run -p 512 -ctk f16 -ctv f16 -d 0,16384
  run -p 512 -ctk oscar2 -ctv oscar2 -d 0,16384
  run -p 2048 -ub 2048 -ctk f16 -ctv f16 -d 0,16384
  run -p 2048 -ub 2048 -ctk oscar2 -ctv oscar2 -d 0,16384
  echo "round $r $(( $(date +%s) - START )) s"
done
"$B/llama-bench" -m $SYNTH -ngl 99 -fa 1 -p 0 -n 64 -r 2 -d 0,16384 -ctk oscar2 -ctv oscar2 -o md 2>/dev/null | grep tg
