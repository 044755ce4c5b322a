#!/usr/bin/env bash
# CPU decode side by side (docs/RESULTS.md, section 3 "Decode"): an unpatched llama.cpp build
# of the same upstream tree with f16, this fork with f16, and this fork with oscar2 on the
# zoo-converted model (centring and precision plan, as `oscar-convert --rotations zoo` makes it),
# in alternating rounds so that a change in the machine's state hits every row alike.
#   lab/cpu/cpu-decode-ab.sh            (ROUNDS=3, DEPTHS=4096,16384, THREADS=2, N_GEN=32)
# Needs build/ (scripts/build.sh) and models/ (scripts/fetch-models.sh smollm2); builds the
# upstream llama-bench into $UPSTREAM_BUILD (default /tmp/oscar-upstream-build, same compiler
# flags as build/) and converts the zoo model if absent. Check `uptime` first: nothing else
# may run. Writes results/cpu-decode/rounds.jsonl and prints one table row per round.
# Each run also records the round trip of a cache line between CPUs 0 and 1 right before and
# after it (lab/cpu/cpu-pingpong.c; "rt" in ns): on a VM the host moves the two vCPUs between
# cores that share a cache (about 50 ns) and cores that do not (100-360 ns), and a 2-thread
# decode is slower in the second case; compare runs of the same placement
# (lab/cpu/cpu-decode-placement.py groups them, and runs at the end).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
ROUNDS=${ROUNDS:-3}
DEPTHS=${DEPTHS:-4096,16384}
THREADS=${THREADS:-2}
N_GEN=${N_GEN:-32}
BASE=models/SmolLM2-135M-Instruct.Q4_1.gguf
ZOO=models/smollm2-oscar-zoo.gguf
UB=${UPSTREAM_BUILD:-/tmp/oscar-upstream-build}
OUT=results/cpu-decode
[ -x build/bin/llama-bench ] || { echo "cpu-decode-ab: error: build/bin/llama-bench missing (run scripts/build.sh)" >&2; exit 1; }
[ -f "$BASE" ] || { echo "cpu-decode-ab: error: $BASE missing (run scripts/fetch-models.sh smollm2)" >&2; exit 1; }
[ -f "$ZOO" ] || .venv/bin/oscar-convert smollm2-135m --rotations zoo -o "$ZOO"

if [ ! -x "$UB/bin/llama-bench" ]; then
    echo "cpu-decode-ab: building an unpatched llama-bench in $UB (upstream tag of llama.cpp/)"
    src=$UB-src
    rm -rf "$src" && mkdir -p "$src"
    git -C llama.cpp archive upstream | tar -x -C "$src"
    flags=$(sed -n 's/^CMAKE_C_FLAGS:STRING=//p' build/CMakeCache.txt)
    cmake -S "$src" -B "$UB" -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF \
        -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF "-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags" > "$UB.configure.log" 2>&1
    cmake --build "$UB" -j "$(nproc)" --target llama-bench > "$UB.build.log" 2>&1
fi

mkdir -p "$OUT"
PINGPONG=$UB/cpu-pingpong
[ -x "$PINGPONG" ] && [ "$PINGPONG" -nt lab/cpu/cpu-pingpong.c ] || { mkdir -p "$UB" && cc -O2 -pthread lab/cpu/cpu-pingpong.c -o "$PINGPONG"; }
: > "$OUT/rounds.jsonl"
echo "cpu-decode-ab: $(uptime | sed 's/.*load/load/'), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
bench() { # label, binary, model, type, round
    local rt0 rt1 rows
    rt0=$("$PINGPONG")
    rows=$("$2" -m "$3" -fa 1 -t "$THREADS" -p 0 -n "$N_GEN" -d "$DEPTHS" -ctk "$4" -ctv "$4" -r 1 -o jsonl 2>/dev/null)
    rt1=$("$PINGPONG")
    echo "$rows" | python3 -c 'import json,sys
for l in sys.stdin:
    r = json.loads(l); r["label"] = sys.argv[1]; r["round"] = int(sys.argv[2])
    r["rt_ns"] = [int(sys.argv[3]), int(sys.argv[4])]; print(json.dumps(r))' "$1" "$5" "$rt0" "$rt1" \
        >> "$OUT/rounds.jsonl"
}
for r in $(seq 1 "$ROUNDS"); do
    bench "upstream, f16" "$UB/bin/llama-bench" "$BASE" f16 "$r"
    bench "this fork, f16" build/bin/llama-bench "$BASE" f16 "$r"
    bench "this fork, oscar2 (zoo model)" build/bin/llama-bench "$ZOO" oscar2 "$r"
    python3 - "$OUT/rounds.jsonl" "$r" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["round"] == int(sys.argv[2])]
print(f"round {sys.argv[2]}: " + "; ".join(f'{r["label"]} d{r["n_depth"]} {r["avg_ts"]:.2f} (rt {r["rt_ns"][0]}/{r["rt_ns"][1]} ns)' for r in rows), flush=True)
EOF
done
python3 lab/cpu/cpu-decode-placement.py "$OUT/rounds.jsonl" || true
echo "cpu-decode-ab: wrote $OUT/rounds.jsonl ($ROUNDS rounds, depths $DEPTHS, commit $(git rev-parse --short HEAD))"
