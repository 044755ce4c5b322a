// Runs ggml's Metal flash-attention vec kernel (fa_vec_common.metal) and, when the KV is split
// over several workgroups, its reduce kernel (fa_aux.metal) in the emulator, dispatched as
// ggml-metal-ops.cpp dispatches them.
//
//   fa_vec k=f16 v=f16 dk=128 dv=128 ne=1 q=1 nq=2 nh=8 nkvh=2 nkv=256 nsg=2 nwg=1
//          mask=1 sinks=0 scale=0.088 softcap=0 order=0 seed=0 dir=DIR
//
// reads DIR/q.bin (f32 [dk, nq, nh]), DIR/k.bin, DIR/v.bin (rows of nkv cells per KV head, in
// the K/V type), DIR/mask.bin (f16 [nkv, nq]), DIR/sinks.bin (f32 [nh]); writes DIR/out.bin
// (f32 [dv, nh, nq], ggml's dst layout) and prints the dispatch counters.
#include "common.h"
#include "dequantize.h"
#include "fa_vec_common.metal"
#include "fa_aux.metal"
#ifdef MSL_EMU_OSCAR2
#include "oscar2.h"
#endif

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
        if (def == -1) { std::fprintf(stderr, "fa_vec: missing argument %s=\n", k); std::exit(2); }
        return def;
    }
    return std::atol(it->second.c_str());
}
double getf(const char * k, double def) { auto it = A.find(k); return it == A.end() ? def : std::atof(it->second.c_str()); }
std::string gets(const char * k) {
    auto it = A.find(k);
    if (it == A.end()) { std::fprintf(stderr, "fa_vec: missing argument %s=\n", k); std::exit(2); }
    return it->second;
}

std::vector<char> slurp(const std::string & path) {
    FILE * f = std::fopen(path.c_str(), "rb");
    if (!f) { std::fprintf(stderr, "fa_vec: cannot read %s\n", path.c_str()); std::exit(2); }
    std::fseek(f, 0, SEEK_END);
    const long n = std::ftell(f);
    std::fseek(f, 0, SEEK_SET);
    std::vector<char> b(n + 64, 0);
    if (std::fread(b.data(), 1, n, f) != (size_t) n) { std::exit(2); }
    std::fclose(f);
    return b;
}

// bytes per row of DK values of a type
size_t row_bytes(const std::string & t, int d) {
    if (t == "f16")    return 2*d;
    if (t == "f32")    return 4*d;
    if (t == "q8_0")   return d/32*sizeof(block_q8_0);
    if (t == "q4_0")   return d/32*sizeof(block_q4_0);
    if (t == "q4_1")   return d/32*sizeof(block_q4_1);
#ifdef MSL_EMU_OSCAR2
    if (t == "oscar2") return d/64*sizeof(block_oscar2);
#endif
    std::fprintf(stderr, "fa_vec: unknown type %s\n", t.c_str());
    std::exit(2);
}
size_t elem_bytes(const std::string & t) {
    if (t == "f16") return 2;
    if (t == "f32") return 4;
    if (t == "q8_0") return sizeof(block_q8_0);
    if (t == "q4_0") return sizeof(block_q4_0);
    if (t == "q4_1") return sizeof(block_q4_1);
#ifdef MSL_EMU_OSCAR2
    if (t == "oscar2") return sizeof(block_oscar2);
#endif
    return 0;
}

typedef void (*vec_kernel_t)(const ggml_metal_kargs_flash_attn_ext_vec &, const char *, const char *, const char *,
                             const char *, const char *, const char *, char *, const char *, half *, uint3, ushort, ushort);

struct variant {
    const char * k; const char * v; int dk; int dv; int ne; int q; vec_kernel_t fn;
};

#define FA_TYPES half4, half4, half4, float, float, float4, float4
#define V_F16(DK, DV, NE, Q) {"f16", "f16", DK, DV, NE, Q, kernel_flash_attn_ext_vec<FA_TYPES, half4, 1, dequantize_f16_t4, half4, 1, dequantize_f16_t4, DK, DV, NE, Q>}
#define V_Q(T, NL, DK, DV, NE, Q) {#T, #T, DK, DV, NE, Q, kernel_flash_attn_ext_vec<FA_TYPES, block_##T, NL, dequantize_##T##_t4, block_##T, NL, dequantize_##T##_t4, DK, DV, NE, Q>}

const variant VARIANTS[] = {
    V_F16( 64,  64, 2, 1), V_F16( 64,  64, 4, 2),
    V_F16(128, 128, 1, 1), V_F16(128, 128, 4, 2), V_F16(128, 128, 2, 4),
    V_F16(256, 256, 1, 1),
    V_Q(q8_0, 8,  64,  64, 2, 1), V_Q(q8_0, 8, 128, 128, 1, 1), V_Q(q8_0, 8, 256, 256, 1, 1),
    V_Q(q4_1, 8, 128, 128, 1, 1), V_Q(q4_1, 8,  64,  64, 2, 1),
    V_Q(q4_0, 8, 128, 128, 1, 1),
#ifdef MSL_EMU_OSCAR2
    MSL_EMU_OSCAR2_VARIANTS
#endif
};

} // namespace

int main(int argc, char ** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string s = argv[i];
        const size_t eq = s.find('=');
        if (eq == std::string::npos) { std::fprintf(stderr, "fa_vec: argument %s is not key=value\n", argv[i]); return 2; }
        A[s.substr(0, eq)] = s.substr(eq + 1);
    }
    const std::string kt = gets("k"), vt = gets("v"), dir = gets("dir");
    const int dk = geti("dk"), dv = geti("dv"), NE = geti("ne", 1), Q = geti("q", 1);
    const int nq = geti("nq"), nh = geti("nh"), nkvh = geti("nkvh"), nkv = geti("nkv");
    const int nsg = geti("nsg", 1), nwg = geti("nwg", 1);
    const bool has_mask = geti("mask", 1), has_sinks = geti("sinks", 0);
    const float scale0 = (float) getf("scale", 1.0/std::sqrt((double) dk));
    const float softcap = (float) getf("softcap", 0.0);

    const variant * var = nullptr;
    for (const variant & x : VARIANTS) {
        if (kt == x.k && vt == x.v && x.dk == dk && x.dv == dv && x.ne == NE && x.q == Q) var = &x;
    }
    if (!var) { std::fprintf(stderr, "fa_vec: no instantiation k=%s v=%s dk=%d dv=%d ne=%d q=%d\n", kt.c_str(), vt.c_str(), dk, dv, NE, Q); return 2; }
    if (nkv % OP_FLASH_ATTN_EXT_VEC_NCPSG != 0) { std::fprintf(stderr, "fa_vec: nkv must be a multiple of %d (the pad path is not wired)\n", OP_FLASH_ATTN_EXT_VEC_NCPSG); return 2; }

    std::vector<char> q = slurp(dir + "/q.bin"), k = slurp(dir + "/k.bin"), v = slurp(dir + "/v.bin");
    std::vector<char> mask = has_mask ? slurp(dir + "/mask.bin") : std::vector<char>(64);
    std::vector<char> sinks = has_sinks ? slurp(dir + "/sinks.bin") : std::vector<char>(64);

    const size_t nbk1 = row_bytes(kt, dk), nbv1 = row_bytes(vt, dv);
    const int64_t nrows = (int64_t) nq*nh;

    ggml_metal_kargs_flash_attn_ext_vec args{};
    args.ne01 = nq; args.ne02 = nh; args.ne03 = 1;
    args.nb01 = 4*dk; args.nb02 = 4*dk*nq; args.nb03 = 4*dk*nq*nh;
    args.ne11 = nkv; args.ne_12_2 = nkvh; args.ne_12_3 = 1;
    args.ns10 = (int32_t) (nbk1/elem_bytes(kt)); args.nb11 = nbk1; args.nb12 = nbk1*nkv; args.nb13 = nbk1*nkv*nkvh;
    args.ns20 = (int32_t) (nbv1/elem_bytes(vt)); args.nb21 = nbv1; args.nb22 = nbv1*nkv; args.nb23 = nbv1*nkv*nkvh;
    args.ne31 = nq; args.ne32 = 1; args.ne33 = 1;
    args.nb31 = 2*nkv; args.nb32 = 2*nkv*nq; args.nb33 = 2*nkv*nq;
    args.ne1 = nh; args.ne2 = nq; args.ne3 = 1;
    args.scale = softcap != 0.0f ? scale0/softcap : scale0;
    args.max_bias = 0.0f; args.m0 = 1.0f; args.m1 = 1.0f; args.n_head_log2 = 1;
    args.logit_softcap = softcap;
    args.n_kv_max_padded = 0;

    FC_flash_attn_ext_vec_has_mask   = has_mask;
    FC_flash_attn_ext_vec_has_sinks  = has_sinks;
    FC_flash_attn_ext_vec_has_bias   = false;
    FC_flash_attn_ext_vec_has_scap   = softcap != 0.0f;
    FC_flash_attn_ext_vec_has_kvpad  = false;
    FC_flash_attn_ext_vec_has_sparse = false;
    FC_flash_attn_ext_vec_ns10 = args.ns10;
    FC_flash_attn_ext_vec_ns20 = args.ns20;
    FC_flash_attn_ext_vec_nsg  = nsg;
    FC_flash_attn_ext_vec_nwg  = nwg;

    const int ncpsg = OP_FLASH_ATTN_EXT_VEC_NCPSG;
    const size_t dk_pad = PAD2(dk, 128), dv_pad = PAD2(dv, 128);
    const size_t smem = PAD2((dk_pad + 4*ncpsg + 2*dv_pad)*Q*nsg*2, 16);

    std::vector<float> dst((size_t) nrows*dv + 16, -12345.0f);
    std::vector<float> tmp((size_t) nrows*dv*nwg + (size_t) nrows*2*nwg + 16, -12345.0f);
    std::vector<char> pad(64), idx(64);

    msl_emu::dispatch_cfg cfg{};
    cfg.threadgroups = uint3((nq + Q - 1)/Q, nh, nwg);
    cfg.threads = uint3(32, nsg, 1);
    cfg.threadgroup_bytes = smem;
    cfg.order = (int) geti("order", 0);
    cfg.seed = (unsigned) geti("seed", 0);

    char * out = nwg == 1 ? (char *) dst.data() : (char *) tmp.data();
    msl_emu::dispatch(cfg, [&](unsigned char * tg) {
        const msl_emu::thread_ids & id = msl_emu::ids();
        var->fn(args, q.data(), k.data(), v.data(), mask.data(), sinks.data(), pad.data(), out, idx.data(),
                (half *) tg, id.threadgroup_position_in_grid, id.thread_index_in_simdgroup, id.simdgroup_index_in_threadgroup);
    });
    const msl_emu::dispatch_stats st = msl_emu::last_stats();

    if (nwg > 1) {
        FC_flash_attn_ext_vec_reduce_DV  = dv;
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

    FILE * f = std::fopen((dir + "/out.bin").c_str(), "wb");
    std::fwrite(dst.data(), sizeof(float), (size_t) nrows*dv, f);
    std::fclose(f);
    std::printf("fa_vec: %s/%s dk=%d dv=%d ne=%d q=%d nsg=%d nwg=%d: %llu threadgroups, %llu simd-group exchanges, %llu barriers\n",
                kt.c_str(), vt.c_str(), dk, dv, NE, Q, nsg, nwg, (unsigned long long) st.threadgroups,
                (unsigned long long) st.simd_exchanges, (unsigned long long) st.barriers);
    return 0;
}
