#!/usr/bin/env bash
# Figures of calibrated rotations + clipping on SmolLM2-135M through llama.cpp,
# into results/calib/: WikiText-2 test, ctx 4096, CHUNKS chunks, KLD against the f16 cache
# of the same (converted) model. Rotations from the zoo (searched clipping) and the same
# rotations with the published fixed ratios 0.96/0.92.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
TEXT=${TEXT:-../shared/data/wikitext-2-raw/wiki.test.raw}
CHUNKS=${CHUNKS:-4}
OUT=results/calib
mkdir -p $OUT models
scripts/fetch-models.sh smollm2 >/dev/null
.venv/bin/oscar-convert smollm2-135m --rotations zoo -o models/smollm2-oscar-zoo.gguf --force -q
.venv/bin/python - <<'PY'
import numpy as np
z = np.load("zoo/smollm2-135m.npz", allow_pickle=False)
d = {k: z[k] for k in z.files}
d["clip_k"] = np.full(d["clip_k"].shape, 0.96, np.float32)
d["clip_v"] = np.full(d["clip_v"].shape, 0.92, np.float32)
np.savez("results/calib/smollm2-fixedclip.npz", **d)
PY
.venv/bin/oscar-convert models/SmolLM2-135M-Instruct.Q4_1.gguf --rotations results/calib/smollm2-fixedclip.npz \
    -o models/smollm2-oscar-fixedclip.gguf --force -q
[ -n "${ONLY_CONVERT:-}" ] && exit 0
.venv/bin/oscar-eval models/smollm2-oscar-zoo.gguf --text "$TEXT" --ctx 4096 --chunks $CHUNKS \
    --kv "oscar2,oscar2:sink=0,recent=0" --markdown $OUT/zoo.md --json $OUT/zoo.json
.venv/bin/oscar-eval models/smollm2-oscar-fixedclip.gguf --text "$TEXT" --ctx 4096 --chunks $CHUNKS \
    --kv "oscar2" --markdown $OUT/fixedclip.md --json $OUT/fixedclip.json
echo "results-calib: wrote $OUT/{zoo,fixedclip}.md (commit $(git rev-parse --short HEAD))"
