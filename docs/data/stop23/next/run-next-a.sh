# Next stop (prepared in stop 23, not run; about 6 minutes; the device tool, carry [".dB"]).
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
