#!/usr/bin/env bash
# Stop 20's next calls, packed (docs/cuda-notes.md, "Next (stop 20)"): into .dP1/ the series'
# source tarball, part 1 of the converted SmolLM2 and the evaluation text; into .dP2/ parts 2
# and 3 of the model and the text. Then run-a.sh (carry .dP1) and run-b.sh (carry .dP2), back
# to back (run-b.sh uses run-a.sh's build in /tmp).
#   docs/data/stop20/next/prepare.sh     (from the repository root; llama.cpp/ clean;
#                                        models/smollm2-oscar-zoo.gguf from oscar-convert)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$ROOT"
M=models/smollm2-oscar-zoo.gguf
[ -z "$(git -C llama.cpp status --short)" ] || { echo "prepare: llama.cpp/ has changes; commit or stash them first" >&2; exit 1; }
[ -f $M ] || { echo "prepare: $M missing: .venv/bin/oscar-convert models/SmolLM2-135M-Instruct.Q4_1.gguf --rotations zoo -o $M" >&2; exit 1; }
rm -rf .dP1 .dP2 .dP3
PART_MB=47 bash scripts/device-split.sh $M
[ ! -d .dP3 ] || { mv .dP3/part.* .dP2/ && rm -rf .dP3; } # (94.75 MiB: a third part of 0.75 MiB rides with part 2)
bash scripts/device-pack.sh llama.cpp .dP1/llama-src.tar.xz
cp ../shared/data/wikitext-2-raw/wiki.test.raw .dP1/
cp ../shared/data/wikitext-2-raw/wiki.test.raw .dP2/
du -sh .dP1 .dP2
