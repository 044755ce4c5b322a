# Stop 22, call B (about 6 minutes; the device tool, carry [".dB"]). Prepared here: the 32
# patches as .dB/cur.tar.zst (call A) and the same with the P.V fragments taken where the codes
# lie (no shifts, one LOP3 per register; "bits") as .dB/nb.tar.zst, both zstd patches of
# .dB/bin.tar.xz, made as in call A from build-cuda-local/bin.
# Steps: FLASH_ATTN_EXT oscar2 on "n" with each case's error; the op at 4k / 64k cells, c and n
# twice, alternating; decode at depth 0 / 64k (f16 once, oscar2 c / n twice, alternating);
# 8 sequences of 64k, c and n; 8 sequences of 512 with and without one unified KV buffer (-kvu),
# f16 and oscar2; then ncu of the attention kernels alone (a kernel filter) in the decode steps
# of 8 sequences of 64k, oscar2 (n) and f16.
S=scripts/device-cuda.sh
RET=$OUT
export OUT=/tmp/res WEIGHTS=q4_0 SYNTH_OSCAR=1 SRC_TAR=.dB/gguf-py.tar.xz
mkdir -p $OUT
export PATH=$PATH:$(dirname $(find / -name ncu -type f 2>/dev/null | head -1))
P="hsk=128,hsv=128,nh=8,nr23=\[4,1\],kv=(4096|65536),nb=1,.*type_K=oscar2,type_V=oscar2"
SYN=/tmp/qwen3-8b-geometry-q4_0-oscar.gguf
{
date +%T
CUDA_BUILD_DIR=/tmp/c BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/cur.tar.zst timeout 90 bash $S build >/dev/null || exit 1
CUDA_BUILD_DIR=/tmp/n BIN_TAR=.dB/bin.tar.xz BIN_PATCH=.dB/nb.tar.zst timeout 90 bash $S build >/dev/null || exit 1
GGML_TEST_PRINT_ERR=1 CUDA_BUILD_DIR=/tmp/n timeout 120 bash $S run test-backend-ops test -b CUDA0 -o FLASH_ATTN_EXT -p oscar2 > $OUT/fa-err-n.log 2>&1
grep -E "tests passed|FAIL" $OUT/fa-err-n.log | head -5 | sed "s/^/n: /"
python3 docs/data/stop18/next/fa-err-summary.py $OUT/fa-err-n.log
for r in 1 2; do for b in c n; do
  CUDA_BUILD_DIR=/tmp/$b timeout 40 bash $S run test-backend-ops perf -b CUDA0 -o FLASH_ATTN_EXT -p "$P" 2>&1 \
    | grep -E "^ *FLASH_ATTN_EXT" | sed -E 's/\x1b\[[0-9;]*m//g; s/,(mask|sinks|max_bias|logit_softcap|prec|permute|kv_view|v_is_view_of_k|n_kv_max|hsk|hsv|nh|nr23|nb|type_K|type_V)=[^,)]*//g; s/ +/ /g' \
    | cut -c1-120 | sed "s/^/$b: /"
done; done
date +%T
CUDA_BUILD_DIR=/tmp/c timeout 40 bash $S synth | grep -v Writing
echo "decode tok/s at depth 0 / 65536 (llama-bench -n 32 -r 1)"
tg() { # build, cache type, label
  echo "$(CUDA_BUILD_DIR=/tmp/$1 timeout 60 bash $S run llama-bench -m $SYN -ngl 99 -fa 1 -ctk $2 -ctv $2 -d 0,65536 -p 0 -n 32 -r 1 -o csv 2>/dev/null \
     | tail -n +2 | awk -F, '{printf "%s ", $(NF-1)}' | tr -d '"')  $3"
}
tg c f16 f16
for r in 1 2; do tg c oscar2 "oscar2 c"; tg n oscar2 "oscar2 n"; done
date +%T
for b in c n; do
  CUDA_BUILD_DIR=/tmp/$b timeout 90 bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk oscar2 -ctv oscar2 -c $((8*66048)) -b 2048 -ub 2048 \
    -npp 65536 -ntg 16 -npl 8 -pps > $OUT/bb8-$b.log 2>&1
  grep -E "^\| +[0-9]" $OUT/bb8-$b.log | sed "s/^/oscar2 $b: /"
done
for kv in f16 oscar2; do for u in "" -kvu; do
  CUDA_BUILD_DIR=/tmp/c timeout 60 bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk $kv -ctv $kv -c $((8*1024)) -b 2048 -ub 512 \
    -npp 512 -ntg 32 -npl 1,8 -pps $u > $OUT/bbs-$kv$u.log 2>&1
  grep -E "^\| +[0-9]" $OUT/bbs-$kv$u.log | sed "s/^/$kv ${u:-streams}: /"
done; done
date +%T
for kv in oscar2 f16; do
  b=n; [ $kv = f16 ] && b=c
  GGML_CUDA_DISABLE_GRAPHS=1 timeout 100 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
    -k "regex:oscar2_fa_partial|oscar2_fa_combine|flash_attn_ext_vec|flash_attn_combine" --launch-skip 0 --launch-count 400 \
    --csv --log-file $OUT/k-att8-$kv.csv env CUDA_BUILD_DIR=/tmp/$b bash $S run llama-batched-bench -m $SYN -ngl 99 -fa on -ctk $kv -ctv $kv \
    -c $((8*66048)) -b 2048 -ub 2048 -npp 65536 -ntg 4 -npl 8 -pps > $OUT/nat8-$kv.log 2>&1
  echo "ncu $kv rc=$?"
  python3 - $OUT/k-att8-$kv.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: print("  no rows"); sys.exit()
h = rows[0]; ik = h.index("Kernel Name"); iv = h.index("Metric Value"); iu = h.index("Metric Unit")
t = collections.defaultdict(list)
for r in rows[1:]:
    v = float(r[iv].replace(",", "")); v = v / 1000 if r[iu] == "nsecond" else v * 1000 if r[iu] == "msecond" else v
    t[r[ik][:60]].append(v)
for k, v in t.items():
    v2 = v[len(v)//4:]  # past the first steps
    print(f"  {k}: {len(v)} launches, median {sorted(v2)[len(v2)//2]:.1f} us, mean {sum(v2)/len(v2):.1f} us")
PY
done
date +%T
} 2>&1 | tee $RET/b-printed.txt
cp $OUT/bb*.log $RET/ 2>/dev/null
xz -T4 -c $OUT/fa-err-n.log > $RET/fa-err-n.log.xz
for f in $OUT/k-att8-*.csv; do xz -T4 -c $f > $RET/$(basename $f).xz; done
