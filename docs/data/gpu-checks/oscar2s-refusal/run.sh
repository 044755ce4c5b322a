#!/usr/bin/env bash
# On a GPU machine, after lab/device/device-cuda.sh build (llama-perplexity, test-backend-ops): oscar2s
# refused by CUDA supports_op, and llama.cpp refusing an oscar2s cache on the GPU (asked for, and
# named by a plan), with the -nkvo, -ngl 0 and --kv-plan off fixes run (results under $OUT)
T0=$(date +%s)
B=build-cuda/bin; [ -x $B/llama-perplexity ] || { echo "no llama-perplexity"; exit 1; }
for lib in libcublas.so.13 libcudart.so.13; do
    d=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
    [ -n "$d" ] && export LD_LIBRARY_PATH="$(dirname "$d")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export LD_LIBRARY_PATH=$PWD/$B:$LD_LIBRARY_PATH
echo "== oscar2s ops on CUDA0 (supports_op must refuse them: not supported, never a failure)"
$B/test-backend-ops test -b CUDA0 -p oscar2s > $OUT/test-oscar2s.txt 2>&1; echo "rc $?"
grep -c "not supported" $OUT/test-oscar2s.txt; grep -E "FAIL|tests passed" $OUT/test-oscar2s.txt | head -5
export PYTHONPATH=build-cuda-src/gguf-py:$PWD/py
python3 -m oscar.bench.synthetic smollm2-135m -o /tmp/s.gguf --weights q8_0 --oscar --centre 2>&1 | tail -1
python3 -m oscar.bench.synthetic smollm2-135m -o /tmp/sp.gguf --weights q8_0 --oscar --centre --oscar2s-layers 3,4,5 --k-oscar3-layers 4 2>&1 | tail -1
head -c 60000 ${WIKI:-wiki.test.raw} > /tmp/w.txt
run() { # name, args...
    local n=$1; shift
    timeout 120 $B/llama-perplexity -f /tmp/w.txt -c 256 --chunks 2 -t 8 "$@" > $OUT/ppl-$n.txt 2>&1
    echo "== $n: rc $? $(grep -m1 -E 'error|exception|what\(\)' $OUT/ppl-$n.txt | cut -c1-400)"
    grep -m1 -E "oscar: " $OUT/ppl-$n.txt | cut -c1-300
    grep -m1 "Final estimate" $OUT/ppl-$n.txt
}
run o2s-gpu    -m /tmp/s.gguf  -ngl 99 -ctk oscar2s -ctv oscar2s
run o2s-nkvo   -m /tmp/s.gguf  -ngl 99 -ctk oscar2s -ctv oscar2s -nkvo
run o2s-cpu    -m /tmp/s.gguf  -ngl 0  -ctk oscar2s -ctv oscar2s
run plan-gpu   -m /tmp/sp.gguf -ngl 99 -ctk oscar2 -ctv oscar2
run plan-nkvo  -m /tmp/sp.gguf -ngl 99 -ctk oscar2 -ctv oscar2 -nkvo
run plan-cpu   -m /tmp/sp.gguf -ngl 0  -ctk oscar2 -ctv oscar2
run plan-off   -m /tmp/sp.gguf -ngl 99 -ctk oscar2 -ctv oscar2 --kv-plan off
run o2-gpu     -m /tmp/s.gguf  -ngl 99 -ctk oscar2 -ctv oscar2
run o2-cpu     -m /tmp/s.gguf  -ngl 0  -ctk oscar2 -ctv oscar2
echo "done at $(( $(date +%s) - T0 )) s"
