#!/usr/bin/env bash
# Compile the CUDA files our patch series adds or changes for every architecture of the
# default CUDA=1 list, on a machine without a GPU: catches code that needs a newer chip
# than an architecture of the list has (for example mma m16n8k16 and cp.async, Ampere-only,
# in an sm_75 build). Uses the compile commands of a configured CUDA build directory
# (scripts/build-cuda-nogpu.sh makes one); writes nothing there.
#   scripts/cuda-arch-check.sh [BUILD_DIR]     (default build-cuda-local; CUDA_ARCH="75;80;86;89;90";
#                                              FILES: default every .cu file of ggml-cuda/ that the
#                                              series in llama.cpp/ changes, from its git history)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BLD=${1:-build-cuda-local}
case "$BLD" in /*) ;; *) BLD=$ROOT/$BLD ;; esac
ARCHS=${CUDA_ARCH:-75;80;86;89;90}
if [ -z "${FILES:-}" ]; then
    FILES=$(git -C "$ROOT/llama.cpp" diff --name-only upstream HEAD -- 'ggml/src/ggml-cuda/*.cu' | xargs -r -n1 basename | tr '\n' ' ')
    [ -n "$FILES" ] || { echo "cuda-arch-check: error: the series in llama.cpp/ changes no ggml-cuda/*.cu file (not fetched? scripts/fetch-llama.sh)" >&2; exit 1; }
fi
[ -f "$BLD/compile_commands.json" ] || { echo "cuda-arch-check: error: $BLD/compile_commands.json not found: configure a CUDA build there first (scripts/build-cuda-nogpu.sh)" >&2; exit 1; }
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
for f in $FILES; do
    cmd=$(python3 - "$BLD/compile_commands.json" "$f" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1])):
    if c['file'].endswith('ggml-cuda/' + sys.argv[2]):
        print(c['command']); break
PY
)
    [ -n "$cmd" ] || { echo "cuda-arch-check: error: no compile command for $f in $BLD" >&2; exit 1; }
    for a in ${ARCHS//;/ }; do
        c=$(echo "$cmd" | sed -E "s#--generate-code=arch=compute_[0-9]+,code=\[[^]]*\]#--generate-code=arch=compute_$a,code=[compute_$a,sm_$a]#; s# -o [^ ]+\$# -o $TMP/$f.$a.o#")
        if (cd "$BLD" && eval "$c") > "$TMP/log" 2>&1; then
            echo "sm_$a $f: ok"
        else
            echo "sm_$a $f: FAILED"; grep -m 5 -E "error" "$TMP/log" | sed 's/^/    /'; fail=1
        fi
    done
done
exit $fail
