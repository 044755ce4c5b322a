# Stop 21, call C (about 7 minutes). Prepared here: patch 0032 (the oscar2 prompt batch's
# scratch reserved with the graph) built into build-cuda-local (scripts/build-cuda-nogpu.sh's
# directory, incremental), then
#   xz -dc .dB/bin.tar.xz > /tmp/base.tar; tar -C build-cuda-local/bin -cf /tmp/scr.tar .
#   zstd -19 --long=28 --patch-from=/tmp/base.tar /tmp/scr.tar -o .dB/scr.tar.zst
# (.dB/bin.tar.xz: the 30 patches; .dB/lean.tar.zst: the 31, from stop 20's call C).
# Then (device tool, carry [".dB"]): bash docs/data/stop21/scripts/run-c.sh
# Two builds: "l" (31 patches) and "s" (32). The oscar2 tests on s; the GPU memory at its peak
# (nvidia-smi every 0.1 s) while llama-bench fills 0 and 64k cells, for each cache type on s
# and oscar2 on l; from s's two oscar2 points, the context at which the memory runs out, and
# llama-batched-bench's context creation a little below and a little above it.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz
mkdir -p $OUT
command -v zstd >/dev/null || export PATH=$PWD/.dB/zbin:$PATH LD_LIBRARY_PATH=$PWD/.dB/zbin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }
peak() { # label, command...: the command's exit status and the GPU memory in use at its peak (MiB)
  local lbl=$1; shift
  local idle; idle=$(used)
  "$@" > /tmp/peak.log 2>&1 & local pid=$!
  local mx=0 m
  while kill -0 $pid 2>/dev/null; do m=$(used); [ "$m" -gt "$mx" ] && mx=$m; sleep 0.1; done
  wait $pid; local rc=$?
  echo "$lbl rc=$rc idle_mib=$idle peak_mib=$mx"
}
{
date +%T
CUDA_BUILD_DIR=/tmp/l BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/lean.tar.zst timeout 90 bash $S build || exit 1
CUDA_BUILD_DIR=/tmp/s BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/scr.tar.zst timeout 90 bash $S build || exit 1
CUDA_BUILD_DIR=/tmp/s timeout 120 bash $S test
cp $OUT/test-*.log /tmp/ 2>/dev/null
CUDA_BUILD_DIR=/tmp/s timeout 30 bash $S synth | grep -v Writing
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader
for b in s l; do
  for T in f16 q8_0 q4_0 oscar2; do
    [ $b = l ] && [ $T != oscar2 ] && continue
    for d in 0 65536; do
      peak "$b $T n_ctx=$((d + 512))" env CUDA_BUILD_DIR=/tmp/$b timeout 60 bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk $T -ctv $T -d $d -p 512 -n 0 -r 1
    done
  done
done | tee /tmp/peaks.txt
# the context at which oscar2 (build s) runs out, from its two points, and a check either side
N=$(python3 - <<'PY'
import re
p = {}
for l in open("/tmp/peaks.txt"):
    m = re.match(r"s oscar2 n_ctx=(\d+) rc=0 idle_mib=(\d+) peak_mib=(\d+)", l)
    if m:
        p[int(m.group(1))] = int(m.group(3))
import subprocess
total = int(subprocess.check_output(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]).split()[0])
(n0, m0), (n1, m1) = sorted(p.items())
slope = (m1 - m0) / (n1 - n0) # MiB per cell
n_max = n0 + (total - m0) / slope
print(f"{int(n_max)} {slope*2**20:.0f}")
PY
)
echo "oscar2 (s): bytes per cell from the two points, and the context at which the card is full: ${N#* } B, ${N% *} cells"
NMAX=${N% *}
for f in 97 103; do
  n=$(( NMAX * f / 100 / 256 * 256 ))
  peak "s oscar2 create n_ctx=$n (${f}% of it)" env CUDA_BUILD_DIR=/tmp/s timeout 150 bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk oscar2 -ctv oscar2 -c $n -npp 16 -ntg 1 -npl 1
  grep -E "KV buffer size|compute buffer size|failed|error|out of memory|oscar:" /tmp/peak.log | cut -c1-200 | head -8
done
date +%T
} 2>&1 | tee $RET/c-printed.txt
cp /tmp/test-*.log $RET/ 2>/dev/null
