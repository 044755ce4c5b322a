# Next stop (prepared in stop 23, not run; about 5 minutes; the device tool, carry [".dB"]):
# why the next tile's K dot (docs/data/stop23/tried/k-tile-ahead.diff) loses at 4k cells.
# Three builds, made here in stop 23 (build-cuda-local, incremental) as zstd patches of
# .dB/bin.tar.xz: "a" .dB/km.tar.zst (the 34 patches), "b" .dB/kp2.tar.zst (k-tile-ahead.diff:
# five stages for heads up to 128), "c" .dB/kp4.tar.zst (next/kp4.diff: the same with four
# stages). scripts/device-ab.sh: the tests on "c"; the op at 4k / 16k / 64k cells (plain, and
# the two cases with windows 64 / 256 at 64k), the three builds twice, alternating; decode at
# depth 0 / 64k; 8 sequences of 64k. If .dB lacks them: build each from the series
# (scripts/build-cuda-nogpu.sh's directory, the diff applied to llama.cpp/) and pack as in
# docs/data/stop22/scripts/run-a.sh's header.
PERF="(hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|16384|65536),nb=1,.*type_K=oscar2,type_V=oscar2|hs=128,nh=8,gqa=4,kv=65536,nb=1,ns=1,n_sink=64,n_recent=256,type_K=oscar2,type_V=oscar2)" \
    bash scripts/device-ab.sh a=.dB/km.tar.zst b=.dB/kp2.tar.zst c=.dB/kp4.tar.zst
