# Next stop (prepared in stop 24, not run; about 7 minutes; the device tool, carry [".dC"]): the
# V codes as f16 subnormals (next/subnormal-codes.diff): exponent field 0, so that a code at bits
# 2k, 2k + 1 is the half c * 2^(2k - 24), exact, with no offset in the tensor cores' sums; the
# m-tiles sum in units of 2^(2k - 24), brought to plain units around the 16-bit pool rows' mma
# and at the end. Stop 24 found the error the decode kernel has left growing with the cells
# (each mma step's f32 sum cut against the 1024 offsets of bit pair 0); the emulator gives
# 7e-8 / 1.6e-7 (heads 64 / 128, 8 tiles) against 1.2e-6 / 6.9e-7 today, and per tile about 36
# fewer instructions (no sums of P', no offsets). Unknown until it runs: whether the H200's
# tensor cores keep f16 subnormal inputs (if they flush them, every oscar2/oscar2 decode case fails).
#   a  .dC/k38.tar.zst  the 36 patches as committed in stop 24
#   s  .dC/k40.tar.zst  the same with next/subnormal-codes.diff (built in stop 24, sm_90), which
#                       also adds an oscar2 attention case over 64k cells to the test set
# First each build's errors at 4k / 16k / 64k cells through s's test program (ERR_TEST: a's
# kernels under it too), with the grid's chunks and 2048 cells per block; then the whole test
# step on s, the op, decode at depth 0 / 64k and 8 x 64k, alternating twice.
STEPS=err,test,perf,decode,batch ERR_TEST=s ERR_CHUNKS="0 2048" \
ERR_P="kv=(4096|16384|65536),nb=1.*type_K=oscar2,type_V=oscar2" \
PERF="(hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|16384|65536),nb=1,.*type_K=oscar2,type_V=oscar2|hs=128,nh=8,gqa=4,kv=65536,nb=1,ns=1,n_sink=64,n_recent=256,type_K=oscar2,type_V=oscar2)" \
SRC_TAR=.dC/gguf-py.tar.xz BIN_TAR=.dC/bin.tar.xz bash scripts/device-ab.sh a=.dC/k38.tar.zst s=.dC/k40.tar.zst
