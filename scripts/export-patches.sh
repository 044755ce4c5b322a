#!/usr/bin/env bash
# Export the commits made in llama.cpp/ on top of the `upstream` tag back into
# ggml-patches/ as an ordered series (one patch per commit, its message as header).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/llama.cpp
PATCHES=$ROOT/ggml-patches
[ -d "$DEST/.git" ] || { echo "export-patches: error: llama.cpp/ is not a git repo; run scripts/fetch-llama.sh first" >&2; exit 1; }
if [ -n "$(git -C "$DEST" status --porcelain)" ]; then
    echo "export-patches: error: llama.cpp/ has uncommitted edits; commit them there first" >&2; exit 1
fi
rm -f "$PATCHES"/*.patch
git -C "$DEST" format-patch -q --zero-commit --no-signature --no-stat -N \
    -o "$PATCHES" upstream..HEAD
{
    echo "# OSCAR patch series on llama.cpp (llama-cpp-python 0.3.36 vendored tree), applied in order"
    (cd "$PATCHES" && ls *.patch)
} > "$PATCHES/series"
# the tree now matches the series: mark it so fetch-llama.sh does not rebuild it
(cd "$PATCHES" && cat series $(grep -v '^#' series | grep -v '^$')) | sha256sum | cut -d' ' -f1 > "$DEST/.oscar-series"
echo "export-patches: wrote $(grep -vc '^#' "$PATCHES/series") patches to ggml-patches/"
