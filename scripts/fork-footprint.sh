#!/usr/bin/env bash
# The fork's footprint: lines that llama.cpp/ adds (upstream..HEAD) inside files that exist
# upstream, per file, against the lines in files of its own. Every line inside an upstream file
# is a place where a newer llama.cpp may conflict; OSCAR's code belongs in files of its own,
# with thin hooks in upstream's. Prints a markdown table (export-patches.sh puts it in
# ggml-patches/README.md).
#   scripts/fork-footprint.sh [REV]      REV: the tip to measure (default HEAD)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/llama.cpp
REV=${1:-HEAD}
die() { echo "fork-footprint: error: $*" >&2; exit 1; }
git -C "$DEST" rev-parse -q --verify upstream >/dev/null || die "llama.cpp/ has no 'upstream' tag"
upstream_files=$(mktemp)
trap 'rm -f "$upstream_files"' EXIT
git -C "$DEST" ls-tree -r --name-only upstream > "$upstream_files"
git -C "$DEST" diff --numstat upstream.."$REV" | awk -v list="$upstream_files" '
    BEGIN { while ((getline f < list) > 0) up[f] = 1 }
    $1 == "-" { next }
    { if ($3 in up) { n++; file[n] = $3; add[n] = $1; del[n] = $2; ua += $1; ud += $2 } else { oa += $1; of++ } }
    END {
        # largest first
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (add[j] + 0 > add[i] + 0) {
            t = add[i]; add[i] = add[j]; add[j] = t; t = del[i]; del[i] = del[j]; del[j] = t
            t = file[i]; file[i] = file[j]; file[j] = t }
        printf "| file (upstream) | lines added | lines removed |\n| --- | ---: | ---: |\n"
        for (i = 1; i <= n; i++) printf "| %s | %d | %d |\n", file[i], add[i], del[i]
        printf "| **%d upstream files** | **%d** | **%d** |\n", n, ua, ud
        printf "| %d files of our own | %d | |\n", of, oa
    }'
