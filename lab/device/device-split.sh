#!/usr/bin/env bash
# Split a file (a converted model) into parts that each fit in one device call beside the
# repository (64 MiB carried in all), for a GPU machine that keeps /tmp while it stays warm:
#   lab/device/device-split.sh models/smollm2-oscar-zoo.gguf     -> .dP1/, .dP2/, ... (git-ignored)
# then one device call per part, back to back (carry .dPN), each running
#   mkdir -p /tmp/sp && cp .dPN/part.* .dPN/sha256 /tmp/sp/
# and the last one, or the call that needs the file, running
#   lab/device/device-split.sh --join /tmp/sp /tmp/sp/model.gguf     (checks the sha256)
# Environment: PART_MB (default 48).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = "--join" ]; then
    [ $# -eq 3 ] || { echo "usage: $0 --join DIR OUT" >&2; exit 2; }
    dir=$2 out=$3
    ls "$dir"/part.* >/dev/null 2>&1 || { echo "device-split: error: no parts in $dir (run the calls that copy them first)" >&2; exit 1; }
    cat $(ls "$dir"/part.* | sort) > "$out"
    want=$(cat "$dir"/sha256)
    got=$(sha256sum "$out" | cut -d' ' -f1)
    [ "$want" = "$got" ] || { echo "device-split: error: $out has sha256 $got, the parts were cut from $want: a part is missing or stale" >&2; exit 1; }
    echo "device-split: joined $out ($(du -h "$out" | cut -f1), sha256 ok)"
    exit 0
fi
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: $0 FILE | --join DIR OUT" >&2; exit 2; }
f=$1
mb=${PART_MB:-48}
cd "$ROOT"
rm -rf .dP[0-9]*
tmp=$(mktemp -d)
split -b "${mb}M" -d -a 2 "$f" "$tmp/part."
sum=$(sha256sum "$f" | cut -d' ' -f1)
n=0
for p in "$tmp"/part.*; do
    n=$((n + 1))
    mkdir -p ".dP$n"
    mv "$p" ".dP$n/"
    echo "$sum" > ".dP$n/sha256"
    grep -qx "/.dP$n/" .git/info/exclude 2>/dev/null || echo "/.dP$n/" >> .git/info/exclude
done
rmdir "$tmp"
echo "device-split: $f -> $n parts of at most $mb MB in .dP1 .. .dP$n (carry one per call)"
