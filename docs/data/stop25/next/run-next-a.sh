# Next stop, first call (prepared in stop 25, not run; about 6 minutes; the device tool, carry
# [".dC"]; .dC/k40.tar.zst = the 37 patches, .dC/k41.tar.zst = the 38 patches, both zstd patches
# of .dC/bin.tar.xz built here; if .dC is gone, rebuild and pack as in
# docs/data/stop22/scripts/run-a.sh's header).
# 1. Patch 0038 in the model (stop 25 timed it in the op only): decode at depth 0 / 64k and 8 x
#    64k, three rounds, alternating (no tests: call F ran the whole test step on k41).
# 2. What the model's cache layout costs (stop 25, call E: the windows test with neither pool nor
#    windows 38.9 us against 34.0 for the plain case at 64k cells): ncu's memory tables of both
#    cases on k41, sectors per request and L1/L2 traffic, for the next list's item 0.
RET=$OUT
{
STEPS=decode,batch ROUNDS=3 SRC_TAR=.dC/gguf-py.tar.xz BIN_TAR=.dC/bin.tar.xz \
    OUT=$RET bash scripts/device-ab.sh a=.dC/k40.tar.zst e=.dC/k41.tar.zst
export PATH=$PATH:$(dirname $(find / -name ncu -type f 2>/dev/null | head -1))
export CUDA_BUILD_DIR=/tmp/ab-e-k41
for c in neither plain; do
    if [ $c = neither ]; then P="hs=128,nh=8,gqa=4,kv=65536,nb=1,ns=1,n_sink=0,n_recent=0,type_K=oscar2,type_V=oscar2,hot_K=0,hot_V=0,shuffled=0"
    else P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=65536,nb=1,.*type_K=oscar2,type_V=oscar2"; fi
    timeout 100 ncu --clock-control none --cache-control none -k regex:oscar2_fa_partial -c 1 \
        --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SpeedOfLight \
        -o /tmp/mem-$c bash scripts/device-cuda.sh run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" > /tmp/mem-$c.log 2>&1
    tail -1 /tmp/mem-$c.log
    ncu -i /tmp/mem-$c.ncu-rep --page details > $RET/ncu-mem-$c.txt 2>&1
    echo "== $c"; grep -E "Duration|Memory Throughput|L1/TEX Hit|L2 Hit|Sectors/Req|DRAM Throughput" $RET/ncu-mem-$c.txt | head -12
done
} 2>&1 | tee $RET/next-a-printed.txt
