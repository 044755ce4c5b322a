#!/usr/bin/env bash
# Stop 18's next calls, packed (docs/cuda-notes.md, "Next (stop 18)"): into .dP1/ the series'
# source tarball, part 1 of the converted SmolLM2 and, for pdl.diff, rope-once.diff, rot-cluster.diff, a tar of
# the files each changes (as they are with it and the one before applied); into .dP2/ part 2 and
# the evaluation text. Then run-a.sh (carry .dP1) and run-b.sh (carry .dP2), back to back.
#   docs/data/stop18/next/prepare.sh         (from the repository root; llama.cpp/ clean;
#                                            models/smollm2-oscar-zoo.gguf from oscar-convert)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "$ROOT"
N=docs/data/stop18/next
M=models/smollm2-oscar-zoo.gguf
[ -z "$(git -C llama.cpp status --short)" ] || { echo "prepare: llama.cpp/ has changes; commit or stash them first" >&2; exit 1; }
[ -f $M ] || { echo "prepare: $M missing: .venv/bin/oscar-convert models/SmolLM2-135M-Instruct.Q4_1.gguf --rotations zoo -o $M" >&2; exit 1; }
PART_MB=47 bash scripts/device-split.sh $M
[ ! -d .dP3 ] || { mv .dP3/part.* .dP2/ && rm -rf .dP3; } # (stop 19: the model is 94.75 MiB, a third part of 0.75)
bash scripts/device-pack.sh llama.cpp .dP1/llama-src.tar.xz
cd llama.cpp
for d in pdl rope-once rot-cluster; do
    git apply "../$N/$d.diff"
    files=$(grep '^+++ b/' "../$N/$d.diff" | sed 's#^+++ b/##')
    tar -cf "../.dP1/$d-files.tar" $files
    echo "prepare: .dP1/$d-files.tar:" $files
done
git checkout -q .
cd ..
cp ../shared/data/wikitext-2-raw/wiki.test.raw .dP2/
cp ../shared/data/wikitext-2-raw/wiki.test.raw .dP1/ # (stop 19: run-a.sh's two-GPU step)
du -sh .dP1 .dP2
