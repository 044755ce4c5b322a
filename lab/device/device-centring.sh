#!/usr/bin/env bash
# The calibrated default's path on a GPU machine, in one call (docs/RESULTS.md, "Decode of the
# calibrated default"): build (lab/device/device-cuda.sh, source from lab/device/device-pack.sh), the
# rotation tests (with the centring means folded in, also through the synchronised launch), then
# batch-1 decode of four synthetic Qwen3-8B models that differ only in what a calibration adds:
# rotations only (all), + centring means (centre), + a precision plan of the Qwen2.5-Coder-1.5B
# zoo entry's shape scaled to 36 layers (K in q8_0 in 3 and in q4_0 in 3 layers: plan), both
# (both), or centring with the plan's six key layers all in q4_0 (both4), or the present zoo
# entry's shape: centring, key weighting and K in oscar3 in 21 of 36 layers (its 17 of 28 mapped
# onto 36: both3; the same K layers in oscar3 alone: plan3; key weighting alone: kw); then the GPU's logits
# against the CPU's on a centred, planned SmolLM2-geometry model (batches of 4, the fused path).
# Output lines are the figures. STEPS (default "rot tg kld d64k") picks the parts; "tg d64k" with
# MODELS="all both" is the decode table alone, in two rounds (d64k runs every model of MODELS,
# ROUNDS rounds, default 2; tg TG_ROUNDS, default 2). A name with -off (both3-off) runs that model with --kv-plan off.
# "kw": key weighting (queries rotated by R_Q = W^-1 R, keys by W R): the GPU's logits against the
# CPU's on a key-weighted SmolLM2-geometry model (batches of 4 and 512), and batch-1 decode of the
# rotations-only model beside the same with key weighting (kw), two rounds.
D=lab/device/device-cuda.sh
STEPS=${STEPS:-rot tg kld d64k}
MODELS=${MODELS:-all centre plan both}
has() { [[ " $STEPS " == *" $1 "* ]]; }
CUDA_ARCH=90 $D build 2>&1 | tail -1
if has rot; then
  for e in "" GGML_CUDA_ROT_SYNC=1; do
    env $e $D run test-backend-ops test -b CUDA0 -o MUL_MAT_ROTATION > $OUT/rot$e.log 2>&1
    echo "[$e] $(grep 'tests passed' $OUT/rot$e.log)"; grep FAIL $OUT/rot$e.log | head -5
  done
  grep -E 'centre|out_mean' $OUT/rot.log | head -3 | cut -c1-160
fi
export PYTHONPATH=build-cuda-src/gguf-py:py
S="python3 -m oscar.bench.synthetic qwen3-8b --weights q4_0 --oscar"
P="--k-q8_0-layers 8,18,30 --k-q4_0-layers 21,24,35"
# the zoo Qwen2.5-Coder-1.5B entry's 17 oscar3 key layers of 28, mapped onto 36
L3="--k-oscar3-layers 3,6,8,11,16,18,19,21,22,23,25,26,27,28,29,30,31,32,33,34,35"
$S -o /tmp/m-all.gguf 2>/dev/null; $S --centre $P -o /tmp/m-both.gguf 2>/dev/null
[[ " $MODELS " == *" centre "* ]] && $S --centre -o /tmp/m-centre.gguf 2>/dev/null
[[ " $MODELS " == *" plan "* ]] && $S $P -o /tmp/m-plan.gguf 2>/dev/null
[[ " $MODELS " == *" both3"* ]] && $S --centre --key-weighting $L3 -o /tmp/m-both3.gguf 2>/dev/null
[[ " $MODELS " == *" both4 "* ]] && $S --centre --k-q4_0-layers 8,18,21,24,30,35 -o /tmp/m-both4.gguf 2>/dev/null
{ has kw || [[ " $MODELS " == *" kw "* ]]; } && $S --key-weighting -o /tmp/m-kw.gguf 2>/dev/null
[[ " $MODELS " == *" plan3 "* ]] && $S $L3 -o /tmp/m-plan3.gguf 2>/dev/null
# a model name ending in -off is that model's file with --kv-plan off (the plan's cost on one file)
tg() {
  local m=${1%-off} off=; [ "$m" != "$1" ] && off="--kv-plan off"
  $D run llama-bench -m /tmp/m-$m.gguf -ngl 99 -fa 1 -ctk oscar2 -ctv oscar2 -p 0 -n 64 $2 $off -o csv 2>/dev/null | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}'
}
if has tg; then
  for r in $(seq ${TG_ROUNDS:-2}); do for m in $MODELS; do echo "round $r $m d0,16k: $(tg $m '-r 2 -d 0,16384')"; done; done
fi
if has kld; then
  python3 -m oscar.bench.synthetic smollm2-135m --weights f16 --oscar --centre --k-q8_0-layers 3 --k-q4_0-layers 17 -o /tmp/s135.gguf 2>/dev/null
  PPL_MODEL=/tmp/s135.gguf KLD_TYPES=oscar2 KLD_UB=4 $D kld 2>&1 | grep "GPU against CPU"
fi
if has d64k; then
  for r in $(seq ${ROUNDS:-2}); do for m in $MODELS; do echo "round $r $m d64k: $(tg $m '-r 1 -d 65536')"; done; done
fi
if has kw; then
  python3 -m oscar.bench.synthetic smollm2-135m --weights f16 --oscar --centre --key-weighting -o /tmp/s135kw.gguf 2>/dev/null
  for ub in 4 512; do
    PPL_MODEL=/tmp/s135kw.gguf KLD_TYPES=oscar2 KLD_UB=$ub $D kld 2>&1 | grep "GPU against CPU"
  done
  for r in 1 2; do for m in all kw; do echo "round $r $m d0,16k: $(tg $m '-r 2 -d 0,16384')"; done; done
fi
