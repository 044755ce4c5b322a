#!/usr/bin/env bash
# Export the commits of llama.cpp/ on top of the `upstream` tag into ggml-patches/: one
# patch per commit (its message as the header), the series file, and the table of the
# series in ggml-patches/README.md (between its "series table" markers), and there the fork's
# footprint from scripts/fork-footprint.sh (between its "footprint table" markers).
#   scripts/export-patches.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=$ROOT/llama.cpp
PATCHES=$ROOT/ggml-patches
die() { echo "export-patches: error: $*" >&2; exit 1; }
[ -d "$DEST/.git" ] || die "llama.cpp/ is not a git repo; run scripts/fetch-llama.sh first"
[ -z "$(git -C "$DEST" status --porcelain)" ] || die "llama.cpp/ has uncommitted edits; commit them there first"
git -C "$DEST" rev-parse -q --verify upstream >/dev/null || die "llama.cpp/ has no 'upstream' tag; rebuild it with scripts/fetch-llama.sh --force"
if git -C "$DEST" log --format=%s upstream..HEAD | grep -qE '^(fixup|squash|amend)! '; then
    die "llama.cpp/ has fixup!/squash! commits; fold them first: git -C llama.cpp rebase -i --autosquash upstream"
fi

rm -f "$PATCHES"/*.patch
git -C "$DEST" format-patch -q --zero-commit --no-signature --no-stat -N \
    -o "$PATCHES" upstream..HEAD
{
    echo "# OSCAR patch series on llama.cpp (llama-cpp-python 0.3.36 vendored tree), applied in order"
    (cd "$PATCHES" && ls *.patch)
} > "$PATCHES/series"

# the table of the series: patch, concern (its subject), files, lines added / removed
table=$(mktemp)
{
    echo "| patch | concern | files | lines |"
    echo "| --- | --- | --- | --- |"
    n=0
    for c in $(git -C "$DEST" rev-list --reverse upstream..HEAD); do
        n=$((n + 1))
        subj=$(git -C "$DEST" log -1 --format=%s "$c" | sed 's/|/\\|/g')
        files=$(git -C "$DEST" diff-tree --no-commit-id --name-only -r "$c" | sed 's#^ggml/src/##; s#^ggml/include/##; s#^src/##' | sort | paste -sd' ' | sed 's/ /, /g')
        lines=$(git -C "$DEST" diff-tree --no-commit-id --numstat -r "$c" | awk '{a+=$1; d+=$2} END {printf "+%d -%d", a, d}')
        printf '| %04d | %s | %s | %s |\n' "$n" "$subj" "$files" "$lines"
    done
} > "$table"

# replace_between NAME TABLE: the text between README.md's "<!-- NAME -->" and
# "<!-- end of NAME -->" markers becomes the file TABLE; false where the markers are missing
readme=$PATCHES/README.md
replace_between() {
    [ -f "$readme" ] && grep -q "<!-- $1 -->" "$readme" && grep -q "<!-- end of $1 -->" "$readme" || return 1
    python3 - "$readme" "$1" "$2" <<'PY'
import sys
path, name, table = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
s = open(path).read()
a = s.index(f'<!-- {name} -->') + len(f'<!-- {name} -->')
b = s.index(f'<!-- end of {name} -->')
open(path, 'w').write(s[:a] + '\n' + table + s[b:])
PY
}
replace_between "series table" "$table" ||
    echo "export-patches: warning: $readme has no series table markers; the table was not written" >&2

# the fork's footprint (lines added inside upstream files, per file), between its markers
"$ROOT/scripts/fork-footprint.sh" > "$table"
replace_between "footprint table" "$table" || true
rm -f "$table"

# the tree now matches the series: mark it so fetch-llama.sh does not rebuild it
(cd "$PATCHES" && cat series $(grep -v '^#' series | grep -v '^$')) | sha256sum | cut -d' ' -f1 > "$DEST/.oscar-series"
echo "export-patches: wrote $(grep -vc '^#' "$PATCHES/series") patches to ggml-patches/"
