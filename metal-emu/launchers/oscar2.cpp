// Runs OSCAR's oscar2 and oscar3 Metal kernels in the emulator, dispatched as
// ggml-metal-oscar-ops.cpp dispatches them (ggml_metal_op_flash_attn_ext_oscar2,
// ggml_metal_op_set_rows_oscar2):
//
//   oscar2 mode=fa k=oscar2 v=oscar2 d=128 q=1 nq=2 nh=8 nkvh=2 nkv=700 ns=1 nsg=2 nwg=1
//          mask=1 sinks=0 win=1 khot=1 vhot=1 nslot=80 ninfo=80 nsink=8 nrecent=64 perm=0
//          scale=0.088 softcap=0 order=0 seed=0 dir=DIR
//      reads DIR/q.bin (f32 [ns][nh][nq][d]), DIR/k.bin, DIR/v.bin (the K/V type; perm=0: rows
//      [ns][nkvh][nkv], perm=1: [ns][nkv][nkvh] as llama.cpp's cache views), DIR/mask.bin (f16
//      [ns][nq][nkv]), DIR/sinks.bin (f32 [nh]), DIR/khot.bin, DIR/vhot.bin (f16, rows as K/V
//      with nslot cells), DIR/kvinfo.bin (i32 [ns][4][ninfo]), DIR/qpos.bin (i32 [ns][nq]);
//      writes DIR/out.bin (f32 [ns][nq][nh][d], ggml's dst layout)
//
//   oscar2 mode=set_rows type=oscar2 ne00=256 ne01=9 ne02=1 ne03=2 ne1=12 ne11=1 ne12=2 idx=i64 nseg=64 clipk=57
//      reads DIR/src.bin (f32 [ne03][ne02][ne01][ne00]), DIR/idx.bin ([ne12][ne11][ne01]),
//      DIR/dst.bin (oscar2 or oscar3 [ne03][ne02][ne1] rows, the destination before the write);
//      writes DIR/out.bin (the destination after it). type=oscar3: kernel_set_rows_oscar3 (nseg=0)
#include "oscar2.metal"   // the oscar2 library: fa_vec_oscar2.metal and the cache write
#include "fa_aux.metal"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#undef thread
#undef device
#undef constant
#undef kernel
#undef threadgroup

namespace {

std::map<std::string, std::string> A;

long geti(const char * k, long def = -1) {
    auto it = A.find(k);
    if (it == A.end()) {
        if (def == -1) { std::fprintf(stderr, "oscar2: missing argument %s=\n", k); std::exit(2); }
        return def;
    }
    return std::atol(it->second.c_str());
}
double getf(const char * k, double def) { auto it = A.find(k); return it == A.end() ? def : std::atof(it->second.c_str()); }
std::string gets(const char * k, const char * def = nullptr) {
    auto it = A.find(k);
    if (it == A.end()) {
        if (def) return def;
        std::fprintf(stderr, "oscar2: missing argument %s=\n", k); std::exit(2);
    }
    return it->second;
}

std::vector<char> slurp(const std::string & path) {
    FILE * f = std::fopen(path.c_str(), "rb");
    if (!f) { std::fprintf(stderr, "oscar2: cannot read %s\n", path.c_str()); std::exit(2); }
    std::fseek(f, 0, SEEK_END);
    const long n = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    std::vector<char> b(n + 64, 0);
    if (std::fread(b.data(), 1, n, f) != (size_t) n) { std::exit(2); }
    std::fclose(f);
    return b;
}

void spit(const std::string & path, const void * p, size_t n) {
    FILE * f = std::fopen(path.c_str(), "wb");
    std::fwrite(p, 1, n, f);
    std::fclose(f);
}

size_t row_bytes(const std::string & t, int d) {
    if (t == "f16")    return 2*d;
    if (t == "q8_0")   return d/32*sizeof(block_q8_0);
    if (t == "q4_0")   return d/32*sizeof(block_q4_0);
    if (t == "oscar2") return d/64*sizeof(block_oscar2);
    if (t == "oscar3") return d/64*sizeof(block_oscar3);
    std::fprintf(stderr, "oscar2: unknown type %s\n", t.c_str());
    std::exit(2);
}

typedef void (*fa_kernel_t)(const ggml_metal_kargs_flash_attn_ext_vec_oscar2 &, const char *, const char *, const char *,
                            const char *, const char *, const char *, const char *, const char *, const char *, char *,
                            half *, uint3, ushort, ushort);

struct variant { const char * k; const char * v; int d; int q; fa_kernel_t fn; };

#define KV_oscar2 block_oscar2, 16, dequantize_oscar2_t4
#define KV_f16    half4, 1, dequantize_f16_t4
#define KV_q8_0   block_q8_0, 8, dequantize_q8_0_t4
#define KV_q4_0   block_q4_0, 8, dequantize_q4_0_oscar2_t4
#define KV_oscar3 block_oscar3, 16, dequantize_oscar3_t4
#define VAR(KT, VT, D, NE, Q) {#KT, #VT, D, Q, kernel_flash_attn_ext_vec_oscar2<KV_##KT, KV_##VT, D, D, NE, Q>}
#define VARS(KT, VT) VAR(KT, VT, 64, 2, 1), VAR(KT, VT, 64, 2, 4), VAR(KT, VT, 128, 1, 1), VAR(KT, VT, 128, 1, 4), \
                     VAR(KT, VT, 256, 1, 1), VAR(KT, VT, 256, 1, 4)

// -DOSCAR2_EMU_VARIANTS="VAR(oscar2,oscar2,128,1,1),..." builds a subset (each variant costs seconds
// of compile time); without it, all 54 instantiations of fa_vec_oscar2.metal
const variant VARIANTS[] = {
#ifdef OSCAR2_EMU_VARIANTS
    OSCAR2_EMU_VARIANTS
#else
    VARS(oscar2, oscar2), VARS(oscar2, f16), VARS(f16, oscar2), VARS(oscar2, q8_0), VARS(q8_0, oscar2),
    VARS(oscar2, q4_0), VARS(q4_0, oscar2), VARS(oscar3, oscar2), VARS(oscar3, f16),
#endif
};

int run_fa() {
    const std::string kt = gets("k"), vt = gets("v"), dir = gets("dir");
    const int d = geti("d"), Q = geti("q", 1);
    const int nq = geti("nq"), nh = geti("nh"), nkvh = geti("nkvh"), nkv = geti("nkv"), ns = geti("ns", 1);
    const int nsg = geti("nsg", 1), nwg = geti("nwg", 1);
    const bool has_mask = geti("mask", 1), has_sinks = geti("sinks", 0), perm = geti("perm", 0);
    const bool has_win = geti("win", 0), has_khot = has_win && geti("khot", 0), has_vhot = has_win && geti("vhot", 0);
    const int nslot = geti("nslot", 1), ninfo = geti("ninfo", 1);
    const float scale0 = (float) getf("scale", 1.0/std::sqrt((double) d));
    const float softcap = (float) getf("softcap", 0.0);

    const variant * var = nullptr;
    for (const variant & x : VARIANTS) {
        if (kt == x.k && vt == x.v && x.d == d && x.q == Q) var = &x;
    }
    if (!var) { std::fprintf(stderr, "oscar2: no instantiation k=%s v=%s d=%d q=%d\n", kt.c_str(), vt.c_str(), d, Q); return 2; }

    std::vector<char> q = slurp(dir + "/q.bin"), k = slurp(dir + "/k.bin"), v = slurp(dir + "/v.bin");
    std::vector<char> mask  = has_mask  ? slurp(dir + "/mask.bin")  : std::vector<char>(64);
    std::vector<char> sinks = has_sinks ? slurp(dir + "/sinks.bin") : std::vector<char>(64);
    std::vector<char> khot  = has_khot  ? slurp(dir + "/khot.bin")  : std::vector<char>(64);
    std::vector<char> vhot  = has_vhot  ? slurp(dir + "/vhot.bin")  : std::vector<char>(64);
    std::vector<char> info  = has_win   ? slurp(dir + "/kvinfo.bin") : std::vector<char>(64);
    std::vector<char> qpos  = has_win   ? slurp(dir + "/qpos.bin")   : std::vector<char>(64);

    const size_t rk = row_bytes(kt, d), rv = row_bytes(vt, d), rh = 2*d;

    ggml_metal_kargs_flash_attn_ext_vec_oscar2 a{};
    a.ne01 = nq; a.ne02 = nh; a.ne03 = ns;
    a.nb01 = 4*d; a.nb02 = 4*d*nq; a.nb03 = 4*d*nq*nh;
    a.ne11 = nkv; a.ne_12_2 = nkvh; a.ne_12_3 = ns;
    // perm: the cells of a head nkvh rows apart (a permuted view of the [d*nkvh, cells] cache)
    a.nb11 = perm ? rk*nkvh : rk; a.nb12 = perm ? rk : rk*nkv; a.nb13 = rk*nkv*nkvh;
    a.nb21 = perm ? rv*nkvh : rv; a.nb22 = perm ? rv : rv*nkv; a.nb23 = rv*nkv*nkvh;
    a.nb_kh1 = perm ? rh*nkvh : rh; a.nb_kh2 = perm ? rh : rh*nslot; a.nb_kh3 = rh*nslot*nkvh;
    a.nb_vh1 = a.nb_kh1; a.nb_vh2 = a.nb_kh2; a.nb_vh3 = a.nb_kh3;
    a.nb_wi1 = 4*ninfo; a.nb_wi3 = 16*ninfo;
    a.nb_qp3 = 4*nq;
    a.ne31 = nq; a.ne32 = 1; a.ne33 = ns;
    a.nb31 = 2*nkv; a.nb32 = 2*nkv*nq; a.nb33 = 2*nkv*nq;
    a.ne1 = nh; a.ne2 = nq; a.ne3 = ns;
    a.scale = softcap != 0.0f ? scale0/softcap : scale0;
    a.max_bias = 0.0f; a.m0 = 1.0f; a.m1 = 1.0f; a.n_head_log2 = 1;
    a.logit_softcap = softcap;
    a.n_sink = geti("nsink", 0); a.n_recent = geti("nrecent", 0);

    FC_fa_oscar2_has_mask  = has_mask;
    FC_fa_oscar2_has_sinks = has_sinks;
    FC_fa_oscar2_has_bias  = false;
    FC_fa_oscar2_has_scap  = softcap != 0.0f;
    FC_fa_oscar2_has_win   = has_win;
    FC_fa_oscar2_has_khot  = has_khot;
    FC_fa_oscar2_has_vhot  = has_vhot;
    FC_fa_oscar2_nsg = nsg;
    FC_fa_oscar2_nwg = nwg;

    const int C = OP_FLASH_ATTN_EXT_VEC_NCPSG;
    const size_t pad = PAD2(d, 128);
    const size_t smem = PAD2((Q*pad + 4*Q*C + 4*C + 2*Q*pad)*nsg*2, 16);

    const int64_t nrows = (int64_t) nq*nh*ns;
    std::vector<float> dst((size_t) nrows*d + 16, -12345.0f);
    std::vector<float> tmp((size_t) nrows*d*nwg + (size_t) nrows*2*nwg + 16, -12345.0f);

    msl_emu::dispatch_cfg cfg{};
    cfg.threadgroups = uint3((nq + Q - 1)/Q, nh, ns*nwg);
    cfg.threads = uint3(32, nsg, 1);
    cfg.threadgroup_bytes = smem;
    cfg.order = (int) geti("order", 0);
    cfg.seed = (unsigned) geti("seed", 0);

    char * out = nwg == 1 ? (char *) dst.data() : (char *) tmp.data();
    msl_emu::dispatch(cfg, [&](unsigned char * tg) {
        const msl_emu::thread_ids & id = msl_emu::ids();
        var->fn(a, q.data(), k.data(), v.data(), mask.data(), sinks.data(), khot.data(), vhot.data(), info.data(), qpos.data(),
                out, (half *) tg, id.threadgroup_position_in_grid, id.thread_index_in_simdgroup, id.simdgroup_index_in_threadgroup);
    });
    const msl_emu::dispatch_stats st = msl_emu::last_stats();

    if (nwg > 1) {
        FC_flash_attn_ext_vec_reduce_DV  = d;
        FC_flash_attn_ext_vec_reduce_NWG = nwg;
        ggml_metal_kargs_flash_attn_ext_vec_reduce rargs{};
        rargs.nrows = (int32_t) nrows;
        msl_emu::dispatch_cfg rc{};
        rc.threadgroups = uint3((unsigned) nrows, 1, 1);
        rc.threads = uint3(32*nwg, 1, 1);
        rc.order = cfg.order;
        rc.seed = cfg.seed;
        msl_emu::dispatch(rc, [&](unsigned char *) {
            const msl_emu::thread_ids & id = msl_emu::ids();
            kernel_flash_attn_ext_vec_reduce(rargs, (const char *) tmp.data(), (char *) dst.data(),
                                             id.threadgroup_position_in_grid.x, id.thread_index_in_simdgroup,
                                             id.simdgroup_index_in_threadgroup);
        });
    }

    spit(dir + "/out.bin", dst.data(), sizeof(float)*(size_t) nrows*d);
    std::printf("oscar2 fa: %s/%s d=%d q=%d nsg=%d nwg=%d win=%d: %llu threadgroups, %llu simd-group exchanges, %llu barriers\n",
                kt.c_str(), vt.c_str(), d, Q, nsg, nwg, (int) has_win, (unsigned long long) st.threadgroups,
                (unsigned long long) st.simd_exchanges, (unsigned long long) st.barriers);
    return 0;
}

int run_set_rows() {
    const std::string dir = gets("dir"), it = gets("idx", "i64"), type = gets("type", "oscar2");
    const int ne00 = geti("ne00"), ne01 = geti("ne01"), ne02 = geti("ne02", 1), ne03 = geti("ne03", 1);
    const int ne1 = geti("ne1"), ne11 = geti("ne11", 1), ne12 = geti("ne12", 1);
    const int nseg = geti("nseg", 0), clipk = geti("clipk", 0);

    std::vector<char> src = slurp(dir + "/src.bin"), idx = slurp(dir + "/idx.bin"), dst = slurp(dir + "/dst.bin");
    const size_t isz = it == "i64" ? 8 : 4;
    const size_t rb = row_bytes(type, ne00);
    if (type != "oscar2" && (type != "oscar3" || nseg != 0)) {
        std::fprintf(stderr, "oscar2: no set_rows kernel for type=%s nseg=%d\n", type.c_str(), nseg);
        return 2;
    }

    ggml_metal_kargs_set_rows_oscar2 a{};
    a.nk0 = ne00/64; a.ne01 = ne01;
    a.nb01 = 4*ne00; a.nb02 = 4*ne00*ne01; a.nb03 = 4*ne00*ne01*ne02;
    a.ne11 = ne11; a.ne12 = ne12;
    a.nb10 = isz; a.nb11 = isz*ne01; a.nb12 = isz*ne01*ne11;
    a.nb1 = rb; a.nb2 = rb*ne1; a.nb3 = rb*ne1*ne02;
    a.n_seg = nseg; a.clip_k = clipk;

    msl_emu::dispatch_cfg cfg{};
    cfg.threadgroups = uint3(ne01, ne02, ne03);
    cfg.threads = uint3(32, 1, 1);
    cfg.threadgroup_bytes = 0;
    cfg.order = (int) geti("order", 0);
    cfg.seed = (unsigned) geti("seed", 0);

    msl_emu::dispatch(cfg, [&](unsigned char *) {
        const msl_emu::thread_ids & id = msl_emu::ids();
        if (type == "oscar3") {
            if (isz == 8) {
                kernel_set_rows_oscar3<int64_t>(a, src.data(), idx.data(), (float *) dst.data(), id.threadgroup_position_in_grid, id.thread_index_in_simdgroup);
            } else {
                kernel_set_rows_oscar3<int32_t>(a, src.data(), idx.data(), (float *) dst.data(), id.threadgroup_position_in_grid, id.thread_index_in_simdgroup);
            }
        } else if (isz == 8) {
            kernel_set_rows_oscar2<int64_t>(a, src.data(), idx.data(), (float *) dst.data(), id.threadgroup_position_in_grid, id.thread_index_in_simdgroup);
        } else {
            kernel_set_rows_oscar2<int32_t>(a, src.data(), idx.data(), (float *) dst.data(), id.threadgroup_position_in_grid, id.thread_index_in_simdgroup);
        }
    });
    spit(dir + "/out.bin", dst.data(), rb*(size_t) ne1*ne02*ne03);
    std::printf("%s set_rows: %d rows of %d, n_seg=%d k=%d\n", type.c_str(), ne01*ne02*ne03, ne00, nseg, clipk);
    return 0;
}

} // namespace

int main(int argc, char ** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string s = argv[i];
        const size_t eq = s.find('=');
        if (eq == std::string::npos) { std::fprintf(stderr, "oscar2: argument %s is not key=value\n", argv[i]); return 2; }
        A[s.substr(0, eq)] = s.substr(eq + 1);
    }
    const std::string mode = gets("mode");
    if (mode == "fa") return run_fa();
    if (mode == "set_rows") return run_set_rows();
    std::fprintf(stderr, "oscar2: unknown mode %s\n", mode.c_str());
    return 2;
}
