# Next stop, a later call (prepared in stop 24, not run; about 5 minutes; carry [".dC"]): the
# decode grid counting the combine's launch (next/grid-combine.diff), which changes one case:
# a cache of 256 cells (decode at depth 0) takes one chunk of two tiles per warp instead of two
# chunks of one and the combine (stop 19's ncu: the combine 2.7 us per layer at depth 0, about
# 0.1 ms per token). Expected: depth 0 +1-2 %, nothing else (the chunk sizes of every other
# cache are unchanged; checked with a copy of the function in Python, stop 24).
#   a  .dC/k38.tar.zst  the 36 patches as committed in stop 24
#   g  .dC/k39.tar.zst  the same with next/grid-combine.diff (built in stop 24, sm_90; if .dC is
#                       gone: apply the diff to llama.cpp/, cmake --build build-cuda-local, pack
#                       with zstd --patch-from the uncompressed .dC/bin.tar.xz)
# The whole test step on g (its 256-cell cases then take the single-chunk path), the op at 4k
# and with windows at 512 cells, decode at depth 0 / 64k three rounds each.
ROUNDS=3 BATCH=0 STEPS=test,perf,decode \
PERF="(hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=4096,nb=1,.*type_K=oscar2,type_V=oscar2|hs=128,nh=8,gqa=4,kv=512,nb=1,ns=1,n_sink=64,n_recent=256,type_K=oscar2,type_V=oscar2)" \
    BIN_TAR=.dC/bin.tar.xz bash scripts/device-ab.sh a=.dC/k38.tar.zst g=.dC/k39.tar.zst
