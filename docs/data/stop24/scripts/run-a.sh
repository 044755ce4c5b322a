# Next stop (prepared in stop 23, not run; about 7 minutes; the device tool, carry [".dB"]).
# Three builds, made here in stop 23 (build-cuda-local, incremental) as zstd patches of
# .dB/bin.tar.xz:
#   a  .dB/k35.tar.zst  the 35 patches (0035: GGML_CUDA_OSCAR2_CHUNK, never run on a GPU);
#   f  .dB/kp2.tar.zst  patch 0034 with tried/k-tile-ahead.diff (stop 23's call F form: the next
#                       tile's K dot for every chunk; lost 6 % at 4k, where warps have one tile);
#   b  .dB/ka.tar.zst   the 35 patches with next/ahead.diff: the same schedule only for chunks of
#                       two tiles per warp or more (a template instance the host picks by chunk
#                       size), today's below; GGML_CUDA_OSCAR2_CHUNK reaches it in the tests.
# scripts/device-ab.sh: the whole test step on "b" (with the chunks fixed at 1024 and 160 cells:
# the multi-tile path, the one the tests never reached before 0035), each attention case's error;
# the op at 4k / 16k / 64k (plain, and the two cases with windows 64 / 256 at 64k), decode at
# depth 0 / 64k, 8 sequences of 64k, the three builds alternating, twice; then the test step on
# "a". If .dB lacks them: build each from the series (scripts/build-cuda-nogpu.sh's directory,
# the diff applied to llama.cpp/) and pack as in docs/data/stop22/scripts/run-a.sh's header.
PERF="(hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|16384|65536),nb=1,.*type_K=oscar2,type_V=oscar2|hs=128,nh=8,gqa=4,kv=65536,nb=1,ns=1,n_sink=64,n_recent=256,type_K=oscar2,type_V=oscar2)" \
    bash scripts/device-ab.sh a=.dB/k35.tar.zst f=.dB/kp2.tar.zst b=.dB/ka.tar.zst
CUDA_BUILD_DIR=/tmp/ab-a-k35 OUT=/tmp/ab-res-a SRC_TAR=.dB/gguf-py.tar.xz bash scripts/device-cuda.sh test 2>&1 | sed 's/^/a: /' | tee -a $OUT/ab-printed.txt
# prefill at depth 0, f16 and oscar2 alternating, 5 reps each (stop 23's one-rep figure, 0.73x
# f16, fell below the 0.8x target where other calls gave 0.86-1.14x): pp512 tok/s, mean and sd
for r in 1 2; do for kv in f16 oscar2; do
  echo "pp512 d0 $kv: $(CUDA_BUILD_DIR=/tmp/ab-a-k35 SRC_TAR=.dB/gguf-py.tar.xz timeout 90 bash scripts/device-cuda.sh run llama-bench \
      -m /tmp/qwen3-8b-geometry-q4_0-oscar.gguf -ngl 99 -fa 1 -ctk $kv -ctv $kv -p 512 -n 0 -r 5 -o csv 2>/dev/null \
      | tail -n +2 | awk -F, '{printf "%s %s ", $(NF-1), $NF}' | tr -d '"')"
done; done 2>&1 | tee -a $OUT/ab-printed.txt
