#!/usr/bin/env bash
# Figures of the oscar2 foundation (issue 2) on SmolLM2-135M, into results/foundation/:
#   kv-bytes.md   KV bytes per token by cache type (from llama.cpp's own KV size log)
#   quality.md    WikiText-2 test PPL, KLD vs f16, top-1 agreement, ctx 4096 (CHUNKS chunks)
#   speed.md      llama-bench decode tokens/s at depth 0 and 4096
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
M=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TEXT=${TEXT:-../shared/data/wikitext-2-raw/wiki.test.raw}
CHUNKS=${CHUNKS:-8}
OUT=results/foundation
mkdir -p $OUT
scripts/fetch-models.sh smollm2 >/dev/null

{
  echo "| KV type | bytes/token (llama.cpp log) | bits/element | vs f16 |"
  echo "|---|---|---|---|"
  for t in f16 q8_0 q4_0 oscar2; do
    log=$(build/bin/llama-completion -m "$M" -ctk $t -ctv $t -fa on -c 4096 -n 1 -p x -no-cnv -v 2>&1 || true)
    line=$(echo "$log" | grep "llama_kv_cache: size" | head -1)
    mib=$(echo "$line" | sed -E 's/.*size = +([0-9.]+) MiB \( *([0-9]+) cells.*/\1 \2/')
    set -- $mib
    python3 -c "
mib, cells = float('$1'), int('$2')
b = mib*2**20/cells
print(f'| $t | {b:.0f} | {b*8/(30*3*64*2):.3f} | {23040/b:.2f}x smaller |')"
  done
} > $OUT/kv-bytes.md
cat $OUT/kv-bytes.md

.venv/bin/oscar-eval "$M" --text "$TEXT" --kv q8_0,q4_0,q4_0+norot,oscar2,oscar2+norot --ctx 4096 --chunks $CHUNKS \
    --markdown $OUT/quality.md --json $OUT/quality.json
build/bin/llama-bench -m "$M" -fa 1 -p 0 -n 64 -d 0,4096 -r 3 -ctk f16,q4_0,oscar2 -ctv f16,q4_0,oscar2 -o md 2>/dev/null \
    | grep -E "^\|" > $OUT/speed-all.md
# keep the K = V rows
{ head -2 $OUT/speed-all.md; grep -E "\| (f16 +\| f16|q4_0 +\| q4_0|oscar2 +\| oscar2) " $OUT/speed-all.md; } > $OUT/speed.md
cat $OUT/speed.md
echo "results-foundation: wrote $OUT/{kv-bytes,quality,speed}.md ($(uname -m), $(nproc) cores, commit $(git rev-parse --short HEAD))"
