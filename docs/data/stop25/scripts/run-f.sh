# Stop 25, call F (the device tool, carry [".dC"], about 3 minutes): the decode kernel's first
# tiles' window entries loaded with Q's values (now patch 0038) against the 37
# patches. Call E's ncu put the largest long-scoreboard stalls of the kernel with windows on
# the prologue's entry loads, each waited for where its tile's copies are issued.
#   a  .dC/k40.tar.zst  the 37 patches (stop 24's build of patch 0037's code)
#   e  .dC/k41.tar.zst  the same with patch 0038's change (built here, sm_90)
# The whole test step on e, then the op (64k plain; with windows at 512 and 64k cells,
# shuffled and in order; the pool without windows at 64k) two rounds each, alternating.
STEPS=test,perf ROUNDS=2 BATCH=0 \
PERF="(hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=65536,nb=1,.*type_K=oscar2,type_V=oscar2|hs=128,nh=8,gqa=4,kv=(512|65536),nb=1,ns=1,n_sink=(64|0),n_recent=(256|0),type_K=oscar2,type_V=oscar2)" \
SRC_TAR=.dC/gguf-py.tar.xz BIN_TAR=.dC/bin.tar.xz bash scripts/device-ab.sh a=.dC/k40.tar.zst e=.dC/k41.tar.zst
