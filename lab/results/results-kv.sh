#!/usr/bin/env bash
# KV memory of the oscar2 cache and its 16-bit windows on SmolLM2-135M (docs/RESULTS.md
# section 1), written to results/kv/bytes.md: by type and tier at 4k and 32k context,
# llama.cpp's own numbers. Quality: lab/results/results-quality.py; speed: lab/results/results-speed.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
M=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=results/kv
mkdir -p $OUT
scripts/fetch-models.sh smollm2 >/dev/null

kv_line() { # ctx, then llama flags -> "total_MiB|oscar describe line"
    local ctx=$1; shift
    local log
    log=$(build/bin/llama-completion -m "$M" -fa on -c "$ctx" -n 1 -p x -no-cnv -v "$@" 2>&1 || true)
    local size=$(echo "$log" | grep "llama_kv_cache: size" | head -1 | sed -E 's/.*size = +([0-9.]+) MiB.*/\1/')
    local osc=$(echo "$log" | grep -o "oscar: .*" | grep "bits/value" | head -1)
    echo "$size|$osc"
}
{
  echo "| KV cache | ctx | 2-bit or main tier MiB | 16-bit window tier MiB | total MiB | bytes/token |"
  echo "|---|---|---|---|---|---|"
  for ctx in 4096 32768; do
    for cfg in "f16" "q8_0" "q4_0" "oscar2:0:0" "oscar2:64:256"; do
      IFS=: read -r t s r <<< "$cfg"
      flags=(-ctk $t -ctv $t)
      [ -n "${s:-}" ] && flags+=(--kv-sink $s --kv-recent $r)
      IFS='|' read -r size osc <<< "$(kv_line $ctx "${flags[@]}")"
      hot=$(echo "$osc" | grep -oE "pool of [0-9]+ slots per stream: [0-9.]+ MiB" | grep -oE "[0-9.]+ MiB" | grep -oE "[0-9.]+" || true)
      hot=${hot:-0}
      label=$t; [ -n "${s:-}" ] && label="$t (sink $s, recent $r)"
      python3 -c "
main, hot, ctx = float('$size'), float('$hot'), $ctx
tot = main + hot
print(f'| $label | {ctx} | {main:.2f} | {hot:.2f} | {tot:.2f} | {tot*2**20/ctx:.0f} |')"
    done
  done
} > $OUT/bytes.md
cat $OUT/bytes.md

echo "results-kv: wrote $OUT/bytes.md ($(uname -m), $(nproc) cores, commit $(git rev-parse --short HEAD))"
