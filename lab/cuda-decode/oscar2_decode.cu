// Standalone prototype: oscar2 decode attention (batch 1, head 128, GQA 4, 8 KV heads),
// K and V both oscar2 blocks in llama.cpp's cache layout (a cell's rows of all KV heads
// together: one head's 40-byte row every 320 bytes). Split over cells, merged by log-sum-exp.
//
// Layout of the work (see README.md for the reasoning and the instruction budget):
// - a block of 8 warps walks one chunk of cells; warp w takes KV head w, so the block's
//   32-cell tile is 2 x 10240 contiguous bytes, staged by cp.async into padded shared rows;
// - K dot on mma m16n8k16 f16: cells in M, the N columns are (query head, K block): columns
//   0-3 hold the 4 query heads over block 0's dims, 4-7 over block 1's (Q zero elsewhere), so
//   each thread's accumulator carries one block and d/m are applied once per (cell, block);
// - codes become f16 subnormals by one LOP3 per pair: plane k of a byte lies at bits 2k,
//   i.e. the value q*4^k*2^-24; the 4^k is folded into Q (times 4^(3-k)), the 2^-24 into d;
// - the dims are permuted in Q so that a thread's 32-bit code word is its A fragment;
// - P goes from the score accumulator to the P.V B fragment by movmatrix.trans; threads of
//   columns 0-3 scale P by V's block-0 step, those of 4-7 by block 1's, so one B fragment
//   serves both V blocks (block-0 m-tiles use output columns 0-3, block-1 tiles 4-7);
// - the V minima are summed in f32 beside the row sum; the running maximum moves only when a
//   tile's maximum passes it by more than TAU (warp-uniform), else no rescale.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <random>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1); } } while (0)

constexpr int D      = 128;          // head size
constexpr int HKV    = 8;            // KV heads
constexpr int GQA    = 4;            // query heads per KV head
constexpr int NQ     = HKV * GQA;    // query heads
constexpr int ROW    = 40;           // bytes of one head's row: 2 blocks of 20
constexpr int CELL   = HKV * ROW;    // 320: cell stride in the cache
constexpr int TILE   = 32;           // cells per tile
constexpr int SROW   = CELL + 16;    // padded shared row (84 words: conflict-free fragments)
constexpr int STILE  = TILE * SROW;  // 10752
constexpr int STAGE  = 2 * STILE;    // K and V: 21504 bytes
constexpr int NTHR   = HKV * 32;     // 256
constexpr float TAU  = 8.0f;         // log2 slack before the running maximum moves

#ifndef NSTAGES
#define NSTAGES 4
#endif
#ifndef KSPLIT          // 1: the K dot's two blocks in separate accumulators (4 mma chains of 4, +8 FADD)
#define KSPLIT 0
#endif

struct block_oscar2 { __half d; __half m; uint8_t qs[16]; };
static_assert(sizeof(block_oscar2) == 20, "block size");

__device__ __forceinline__ void cp16(uint32_t dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

__device__ __forceinline__ uint32_t lds32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
__device__ __forceinline__ uint32_t lds16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

__device__ __forceinline__ void mma16816(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t movtrans(uint32_t x) {
    uint32_t y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}
__device__ __forceinline__ float ex2(float x) {  // 2^x, flushing tiny results (P far under the maximum)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ uint32_t h2u(__half2 h) { return *reinterpret_cast<uint32_t*>(&h); }
__device__ __forceinline__ __half2 u2h(uint32_t u) { return *reinterpret_cast<__half2*>(&u); }

// Partials: pO[chunk][NQ][D] (unnormalised, relative to m), pML[chunk][NQ] = (m, l), log2 units.
__global__ void __launch_bounds__(NTHR, 2)
oscar2_decode(const uint8_t* __restrict__ K, const uint8_t* __restrict__ V, const float* __restrict__ Q,
              float* __restrict__ pO, float2* __restrict__ pML, int n_tiles, int tiles_per_chunk, float scale_log2) {
    extern __shared__ __align__(16) uint8_t smem[];
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int h = warp;
    const int chunk = blockIdx.x;
    const int tile0 = chunk * tiles_per_chunk;
    const int ntiles = min(tiles_per_chunk, n_tiles - tile0);

    // Q as the K dot's B fragments: k-step s = (block b = s/4, plane k = s%4); column g is query
    // head g&3 over block g>>2's dims. Column 2t of a fragment: dims 64b+16k+4t+{0,2}; 2t+8: +{1,3}.
    uint32_t qb[8][2];
    {
        const float* q = Q + (h * GQA + (g & 3)) * D;
        #pragma unroll
        for (int s = 0; s < 8; ++s) {
            const int b = s >> 2, k = s & 3;
            if (b == (g >> 2)) {
                const float f = scale_log2 * (float)(1 << (2 * (3 - k)));
                const int d0 = 64 * b + 16 * k + 4 * t;
                qb[s][0] = h2u(__floats2half2_rn(q[d0] * f, q[d0 + 2] * f));
                qb[s][1] = h2u(__floats2half2_rn(q[d0 + 1] * f, q[d0 + 3] * f));
            } else {
                qb[s][0] = 0u; qb[s][1] = 0u;
            }
        }
    }
    // This thread's score columns: block bt = t>>1, query heads 2(t&1)+j.
    const int bt = t >> 1;
    float qsum[2];
    #pragma unroll
    for (int j = 0; j < 2; ++j) {
        const float* q = Q + (h * GQA + 2 * (t & 1) + j) * D + 64 * bt;
        float a = 0.f;
        for (int i = 0; i < 64; ++i) a += q[i];
        qsum[j] = a * scale_log2;
    }

    // Copies: the tile's K (and V) rows are 640 chunks of 16 bytes; thread tid takes chunks
    // tid, tid+256 and (tid < 128) tid+512 of each, into rows padded to 336 bytes.
    const uint32_t sbase = (uint32_t)__cvta_generic_to_shared(smem);
    uint32_t dofs[3];
    #pragma unroll
    for (int j = 0; j < 3; ++j) { const int r = tid + 256 * j; dofs[j] = 16 * (r + r / 20); }
    const bool has3 = tid < 128;
    const uint8_t* gK = K + (size_t)tile0 * TILE * CELL + 16 * tid;
    const uint8_t* gV = V + (size_t)tile0 * TILE * CELL + 16 * tid;

    auto issue = [&](int tl, int st) {
        const size_t off = (size_t)tl * (TILE * CELL);
        const uint32_t sk = sbase + st * STAGE, sv = sk + STILE;
        cp16(sk + dofs[0], gK + off);        cp16(sv + dofs[0], gV + off);
        cp16(sk + dofs[1], gK + off + 4096); cp16(sv + dofs[1], gV + off + 4096);
        if (has3) { cp16(sk + dofs[2], gK + off + 8192); cp16(sv + dofs[2], gV + off + 8192); }
    };

    #pragma unroll
    for (int s = 0; s < NSTAGES - 1; ++s) { if (s < ntiles) issue(s, s); cp_commit(); }

    float O[8][4];
    #pragma unroll
    for (int i = 0; i < 8; ++i) { O[i][0] = O[i][1] = O[i][2] = O[i][3] = 0.f; }
    float mrun[2] = {-1e30f, -1e30f}, lsum[2] = {0.f, 0.f}, macc[2] = {0.f, 0.f};

    const uint8_t* sKh = smem + h * ROW;
    int st_rd = 0, st_wr = NSTAGES - 1;
    for (int it = 0; it < ntiles; ++it) {
        cp_wait<NSTAGES - 2>();
        __syncthreads();
        if (it + NSTAGES - 1 < ntiles) issue(it + NSTAGES - 1, st_wr);
        cp_commit();
        st_wr = st_wr == NSTAGES - 1 ? 0 : st_wr + 1;
        const uint8_t* sK = sKh + st_rd * STAGE;
        st_rd = st_rd == NSTAGES - 1 ? 0 : st_rd + 1;
        const uint8_t* sV = sK + STILE;

        // ---- K dot: 2 m-tiles of 16 cells x 8 k-steps
        float c[2][4];
#if KSPLIT
        float c1[2][4];
#endif
        #pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
            c[mt][0] = c[mt][1] = c[mt][2] = c[mt][3] = 0.f;
#if KSPLIT
            c1[mt][0] = c1[mt][1] = c1[mt][2] = c1[mt][3] = 0.f;
#endif
            uint32_t w[2][2];
            #pragma unroll
            for (int r = 0; r < 2; ++r)
                #pragma unroll
                for (int b = 0; b < 2; ++b)
                    w[r][b] = lds32(sK + (16 * mt + 8 * r + g) * SROW + 4 + 20 * b + 4 * t);
            #pragma unroll
            for (int b = 0; b < 2; ++b) {
                const uint32_t w0o = w[0][b] >> 8, w1o = w[1][b] >> 8;
                #pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const uint32_t msk = 0x00030003u << (2 * k);
#if KSPLIT
                    mma16816(b ? c1[mt] : c[mt], w[0][b] & msk, w[1][b] & msk, w0o & msk, w1o & msk, qb[4 * b + k][0], qb[4 * b + k][1]);
#else
                    mma16816(c[mt], w[0][b] & msk, w[1][b] & msk, w0o & msk, w1o & msk, qb[4 * b + k][0], qb[4 * b + k][1]);
#endif
                }
            }
#if KSPLIT
            #pragma unroll
            for (int i = 0; i < 4; ++i) c[mt][i] += c1[mt][i];
#endif
        }
        // ---- scores: d and m once per (cell, block); the partner column t^2 holds the other block
        float s[2][4];
        __half2 dv[2][2];  // V step of block bt for this thread's cells, as (d, d)
        float mv[2][2];
        #pragma unroll
        for (int mt = 0; mt < 2; ++mt)
            #pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int cell = 16 * mt + 8 * r + g;
                const __half2 dmk = u2h(lds32(sK + cell * SROW + 20 * bt));
                const __half2 dmv = u2h(lds32(sV + cell * SROW + 20 * bt));
                const float dk = __low2float(dmk) * 262144.0f;   // 2^24 / 4^3
                const float mk = __high2float(dmk);
                s[mt][2 * r + 0] = fmaf(c[mt][2 * r + 0], dk, mk * qsum[0]);
                s[mt][2 * r + 1] = fmaf(c[mt][2 * r + 1], dk, mk * qsum[1]);
                dv[mt][r] = __low2half2(dmv);
                mv[mt][r] = __high2float(dmv);
            }
        #pragma unroll
        for (int mt = 0; mt < 2; ++mt)
            #pragma unroll
            for (int i = 0; i < 4; ++i) s[mt][i] += __shfl_xor_sync(0xffffffffu, s[mt][i], 2);

        // ---- softmax
        float tmax[2];
        #pragma unroll
        for (int j = 0; j < 2; ++j) {
            float x = fmaxf(fmaxf(s[0][j], s[0][2 + j]), fmaxf(s[1][j], s[1][2 + j]));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
            x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
            tmax[j] = x;
        }
        if (__any_sync(0xffffffffu, tmax[0] > mrun[0] + TAU || tmax[1] > mrun[1] + TAU)) {
            #pragma unroll
            for (int j = 0; j < 2; ++j) {
                const float mn = fmaxf(mrun[j], tmax[j]);
                const float al = ex2(mrun[j] - mn);
                mrun[j] = mn; lsum[j] *= al; macc[j] *= al;
                #pragma unroll
                for (int i = 0; i < 8; ++i) { O[i][j] *= al; O[i][2 + j] *= al; }
            }
        }
        uint32_t pb[2][2];
        #pragma unroll
        for (int mt = 0; mt < 2; ++mt)
            #pragma unroll
            for (int r = 0; r < 2; ++r) {
                const float p0 = ex2(s[mt][2 * r + 0] - mrun[0]);
                const float p1 = ex2(s[mt][2 * r + 1] - mrun[1]);
                lsum[0] += p0; lsum[1] += p1;
                macc[0] = fmaf(p0, mv[mt][r], macc[0]);
                macc[1] = fmaf(p1, mv[mt][r], macc[1]);
                pb[mt][r] = movtrans(h2u(__hmul2(__floats2half2_rn(p0, p1), dv[mt][r])));
            }

        // ---- P.V: 8 m-tiles (block b, plane k) of 16 dims x 2 k-steps of 16 cells
        #pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
            #pragma unroll
            for (int b = 0; b < 2; ++b) {
                uint32_t e[2], o[2];
                #pragma unroll
                for (int hi = 0; hi < 2; ++hi) {
                    const int x = 16 * ks + 8 * hi + 2 * t;
                    const uint32_t hA = lds16(sV + x * SROW + 4 + 20 * b + 2 * g);
                    const uint32_t hB = lds16(sV + (x + 1) * SROW + 4 + 20 * b + 2 * g);
                    e[hi] = __byte_perm(hA, hB, 0x0400);
                    o[hi] = __byte_perm(hA, hB, 0x0501);
                }
                #pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const uint32_t msk = 0x00030003u << (2 * k);
                    mma16816(O[4 * b + k], e[0] & msk, o[0] & msk, e[1] & msk, o[1] & msk, pb[ks][0], pb[ks][1]);
                }
            }
        }
    }

    // ---- this chunk's partial
    #pragma unroll
    for (int j = 0; j < 2; ++j)
        #pragma unroll
        for (int m = 4; m < 32; m <<= 1) {
            lsum[j] += __shfl_xor_sync(0xffffffffu, lsum[j], m);
            macc[j] += __shfl_xor_sync(0xffffffffu, macc[j], m);
        }
    #pragma unroll
    for (int j = 0; j < 2; ++j) {
        const int qh = h * GQA + 2 * (t & 1) + j;
        float* po = pO + ((size_t)chunk * NQ + qh) * D;
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            const float f = 16777216.0f / (float)(1 << (2 * k));
            const int dim = 64 * bt + 16 * k + 2 * g;
            const float o0 = bt ? O[4 + k][j] : O[k][j], o1 = bt ? O[4 + k][2 + j] : O[k][2 + j];
            po[dim]     = fmaf(o0, f, macc[j]);
            po[dim + 1] = fmaf(o1, f, macc[j]);
        }
        if (g == 0 && bt == 0) pML[(size_t)chunk * NQ + qh] = make_float2(mrun[j], lsum[j]);
    }
}

// Merge the chunks' partials: block (query head, quarter of dims), 8 warps over chunks.
__global__ void __launch_bounds__(256)
oscar2_combine(const float* __restrict__ pO, const float2* __restrict__ pML, float* __restrict__ out, int nchunks) {
    const int qh = blockIdx.x, dim = blockIdx.y * 32 + (threadIdx.x & 31), w = threadIdx.x >> 5;
    float M = -1e30f, L = 0.f, A = 0.f;
    for (int c = w; c < nchunks; c += 8) {
        const float2 ml = pML[(size_t)c * NQ + qh];
        const float o = pO[((size_t)c * NQ + qh) * D + dim];
        const float mn = fmaxf(M, ml.x);
        const float a = exp2f(M - mn), b = exp2f(ml.x - mn);
        A = A * a + o * b; L = L * a + ml.y * b; M = mn;
    }
    __shared__ float sM[8][32], sL[8][32], sA[8][32];
    sM[w][threadIdx.x & 31] = M; sL[w][threadIdx.x & 31] = L; sA[w][threadIdx.x & 31] = A;
    __syncthreads();
    if (w == 0) {
        const int l = threadIdx.x;
        float Mx = -1e30f;
        for (int i = 0; i < 8; ++i) Mx = fmaxf(Mx, sM[i][l]);
        float Lt = 0.f, At = 0.f;
        for (int i = 0; i < 8; ++i) { const float f = exp2f(sM[i][l] - Mx); Lt += sL[i][l] * f; At += sA[i][l] * f; }
        out[qh * D + dim] = At / Lt;
    }
}

// Roofline: read the same bytes (K and V), 16 bytes per thread per step.
__global__ void read_bw(const uint4* __restrict__ a, const uint4* __restrict__ b, size_t n16, uint32_t* sink) {
    uint32_t x = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n16; i += (size_t)gridDim.x * blockDim.x) {
        const uint4 u = __ldcs(a + i), v = __ldcs(b + i);
        x ^= u.x ^ u.y ^ u.z ^ u.w ^ v.x ^ v.y ^ v.z ^ v.w;
    }
    if (x == 0x9e3779b9u) sink[0] = x;
}

// ---------------------------------------------------------------- host
static float h2f(__half h) { return __half2float(h); }

// Quantise one block of 64 with the reference rule x ~= m + q*d, q in 0..3.
static void quant_block(const float* x, block_oscar2* blk) {
    float mn = x[0], mx = x[0];
    for (int i = 1; i < 64; ++i) { mn = std::min(mn, x[i]); mx = std::max(mx, x[i]); }
    const __half dh = __float2half((mx - mn) / 3.0f), mh = __float2half(mn);
    blk->d = dh; blk->m = mh;
    const float d = h2f(dh), m = h2f(mh);
    memset(blk->qs, 0, 16);
    for (int i = 0; i < 64; ++i) {
        int q = d > 0 ? (int)lrintf((x[i] - m) / d) : 0;
        q = std::min(3, std::max(0, q));
        blk->qs[i & 15] |= (uint8_t)(q << (2 * (i >> 4)));
    }
}
static void dequant_row(const uint8_t* row, double* y) {  // 128 values of one head
    for (int b = 0; b < 2; ++b) {
        const block_oscar2* blk = reinterpret_cast<const block_oscar2*>(row + 20 * b);
        const double d = h2f(blk->d), m = h2f(blk->m);
        for (int i = 0; i < 64; ++i) y[64 * b + i] = m + d * ((blk->qs[i & 15] >> (2 * (i >> 4))) & 3);
    }
}

static void reference(const std::vector<uint8_t>& K, const std::vector<uint8_t>& V, const std::vector<float>& Q,
                      int n, std::vector<double>& out, std::vector<double>& vmean) {
    out.assign((size_t)NQ * D, 0.0);
    vmean.assign((size_t)HKV * D, 0.0);
    const double sc = 1.0 / std::sqrt((double)D);
    #pragma omp parallel for schedule(dynamic)
    for (int h = 0; h < HKV; ++h) {
        std::vector<double> s((size_t)GQA * n), kv(D);
        for (int c = 0; c < n; ++c) {
            dequant_row(K.data() + (size_t)c * CELL + h * ROW, kv.data());
            for (int j = 0; j < GQA; ++j) {
                const float* q = Q.data() + (h * GQA + j) * D;
                double a = 0; for (int i = 0; i < D; ++i) a += q[i] * kv[i];
                s[(size_t)j * n + c] = a * sc;
            }
        }
        double mx[GQA], l[GQA];
        for (int j = 0; j < GQA; ++j) {
            mx[j] = -1e300; for (int c = 0; c < n; ++c) mx[j] = std::max(mx[j], s[(size_t)j * n + c]);
            l[j] = 0; for (int c = 0; c < n; ++c) { s[(size_t)j * n + c] = std::exp(s[(size_t)j * n + c] - mx[j]); l[j] += s[(size_t)j * n + c]; }
        }
        std::vector<double> acc((size_t)GQA * D, 0.0);
        for (int c = 0; c < n; ++c) {
            dequant_row(V.data() + (size_t)c * CELL + h * ROW, kv.data());
            for (int j = 0; j < GQA; ++j) { const double p = s[(size_t)j * n + c]; for (int i = 0; i < D; ++i) acc[j * D + i] += p * kv[i]; }
            for (int i = 0; i < D; ++i) vmean[(size_t)h * D + i] += kv[i] / n;
        }
        for (int j = 0; j < GQA; ++j) for (int i = 0; i < D; ++i) out[(size_t)(h * GQA + j) * D + i] = acc[j * D + i] / l[j];
    }
}

// Fast per-cell random numbers (approximately normal: sum of 4 uniforms), so that the
// host's data generation runs in parallel and stays short at 128k cells.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E5ull) { next(); next(); }
    uint64_t next() { s ^= s >> 12; s ^= s << 25; s ^= s >> 27; return s * 0x2545F4914F6CDD1Dull; }
    float normal() {
        float a = 0.f;
        for (int i = 0; i < 4; ++i) a += (float)(next() >> 40) * (1.0f / 16777216.0f);
        return (a - 2.0f) * 1.7320508f;
    }
};

static void make_cache(std::vector<uint8_t>& buf, int n, uint64_t salt, float spread) {
    buf.assign((size_t)n * CELL, 0);
    std::vector<float> bias(HKV * D);
    Rng r0(salt);
    for (auto& b : bias) b = spread * r0.normal();
    #pragma omp parallel for schedule(static)
    for (int c = 0; c < n; ++c) {
        Rng rng(salt * 1000003ull + (uint64_t)c + 1);
        float x[64];
        for (int h = 0; h < HKV; ++h)
            for (int b = 0; b < 2; ++b) {
                for (int i = 0; i < 64; ++i) x[i] = bias[h * D + 64 * b + i] + rng.normal();
                quant_block(x, reinterpret_cast<block_oscar2*>(buf.data() + (size_t)c * CELL + h * ROW + 20 * b));
            }
    }
}

int main(int argc, char** argv) {
    int dev = 0; CK(cudaSetDevice(dev));
    cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s, %d SMs, L2 %d MB, smem/SM %zu KB\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize >> 20, prop.sharedMemPerMultiprocessor >> 10);
    const size_t smem = (size_t)NSTAGES * STAGE;
    CK(cudaFuncSetAttribute(oscar2_decode, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int bpsm = 0; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bpsm, oscar2_decode, NTHR, smem));
    cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, oscar2_decode));
    printf("oscar2_decode: %d regs, %d stages (%zu B smem), KSPLIT %d, %d blocks/SM\n", fa.numRegs, NSTAGES, smem, KSPLIT, bpsm);

    std::vector<int> sizes = {16384, 65536, 131072};
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    if (argc > 2) sizes = {atoi(argv[2])};
    uint64_t salt = 1234;
    printf("\n%-7s %-9s %-6s %-10s %-10s | %-9s %-8s %-9s %-8s %-9s %-8s %-9s %-8s | %-9s\n", "cells", "MB", "chunks", "NMSE", "NMSE_c",
           "cold_us", "TB/s", "main_us", "TB/s", "warm_us", "TB/s", "read_us", "TB/s", "best tpc");
    for (int n : sizes) {
        std::vector<uint8_t> hK, hV; std::vector<float> hQ(NQ * D);
        make_cache(hK, n, ++salt, 0.5f); make_cache(hV, n, ++salt, 0.3f);
        Rng rq(++salt);
        for (auto& q : hQ) q = 1.5f * rq.normal();
        const size_t bytes = (size_t)n * CELL;  // each of K, V
        // several copies so that the timed loop reads past L2 (rotating inputs)
        const int nsets = std::max(2, (int)((200u << 20) / (2 * bytes)) + 1);
        std::vector<uint8_t*> dK(nsets), dV(nsets);
        for (int i = 0; i < nsets; ++i) {
            CK(cudaMalloc(&dK[i], bytes)); CK(cudaMalloc(&dV[i], bytes));
            CK(cudaMemcpy(dK[i], hK.data(), bytes, cudaMemcpyHostToDevice));
            CK(cudaMemcpy(dV[i], hV.data(), bytes, cudaMemcpyHostToDevice));
        }
        float* dQ; CK(cudaMalloc(&dQ, hQ.size() * 4)); CK(cudaMemcpy(dQ, hQ.data(), hQ.size() * 4, cudaMemcpyHostToDevice));
        const int n_tiles = n / TILE;
        const int slots = bpsm * prop.multiProcessorCount;
        const int tpc_auto = (n_tiles + slots - 1) / slots;
        const int max_chunks = n_tiles;  // tpc >= 1
        float* dPO; float2* dML; float* dOut; uint32_t* dSink;
        CK(cudaMalloc(&dPO, (size_t)max_chunks * NQ * D * 4)); CK(cudaMalloc(&dML, (size_t)max_chunks * NQ * 8));
        CK(cudaMalloc(&dOut, NQ * D * 4)); CK(cudaMalloc(&dSink, 4));
        const float sl2 = (float)(1.4426950408889634 / std::sqrt((double)D));

        auto launch = [&](int set, int tpc, bool comb) {
            const int nch = (n_tiles + tpc - 1) / tpc;
            oscar2_decode<<<nch, NTHR, smem>>>(dK[set], dV[set], dQ, dPO, dML, n_tiles, tpc, sl2);
            if (comb) oscar2_combine<<<dim3(NQ, D / 32), 256>>>(dPO, dML, dOut, nch);
        };
        // correctness: every chunking tried, output poisoned first
        std::vector<double> ref, vmean; reference(hK, hV, hQ, n, ref, vmean);
        double worst = 0, worst_c = 0;
        int tpcs[3] = {tpc_auto, std::max(1, tpc_auto / 2), tpc_auto * 2};
        for (int tpc : tpcs) {
            CK(cudaMemset(dOut, 0xff, NQ * D * 4));
            launch(0, tpc, true); CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
            std::vector<float> o(NQ * D); CK(cudaMemcpy(o.data(), dOut, o.size() * 4, cudaMemcpyDeviceToHost));
            double num = 0, den = 0, den_c = 0; bool bad = false;
            for (size_t i = 0; i < o.size(); ++i) {
                if (!std::isfinite(o[i])) bad = true;
                const double mu = vmean[(i / (GQA * D)) * D + i % D];
                num += (o[i] - ref[i]) * (o[i] - ref[i]); den += ref[i] * ref[i]; den_c += (ref[i] - mu) * (ref[i] - mu);
            }
            const double nmse = bad ? INFINITY : num / den, nmse_c = bad ? INFINITY : num / den_c;
            worst = std::max(worst, nmse); worst_c = std::max(worst_c, nmse_c);
            fprintf(stderr, "n=%d tpc=%d nmse=%.3e nmse_centred=%.3e%s\n", n, tpc, nmse, nmse_c, bad ? " NONFINITE" : "");
        }
        cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
        auto timeit = [&](auto fn) {
            for (int i = 0; i < 10; ++i) fn(i);
            CK(cudaDeviceSynchronize());
            std::vector<float> v;
            for (int rep = 0; rep < 5; ++rep) {
                CK(cudaEventRecord(e0));
                for (int i = 0; i < iters; ++i) fn(i);
                CK(cudaEventRecord(e1)); CK(cudaEventSynchronize(e1)); CK(cudaGetLastError());
                float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); v.push_back(ms * 1000.f / iters);
            }
            std::sort(v.begin(), v.end());
            return v[v.size() / 2];
        };
        float best = 1e30f; int best_tpc = tpc_auto;
        for (int tpc : tpcs) {
            const float us = timeit([&](int i) { launch(i % nsets, tpc, true); });
            fprintf(stderr, "n=%d tpc=%d chunks=%d cold(main+combine) %.2f us\n", n, tpc, (n_tiles + tpc - 1) / tpc, us);
            if (us < best) { best = us; best_tpc = tpc; }
        }
        const float main_us = timeit([&](int i) { launch(i % nsets, best_tpc, false); });
        const float warm_us = timeit([&](int) { launch(0, best_tpc, true); });
        const size_t n16 = bytes / 16;
        const float read_us = timeit([&](int i) {
            read_bw<<<prop.multiProcessorCount * 8, 512>>>((const uint4*)dK[i % nsets], (const uint4*)dV[i % nsets], n16, dSink); });
        const double mb = 2.0 * bytes / 1e6;
        printf("%-7d %-9.2f %-6d %-10.2e %-10.2e | %-9.2f %-8.2f %-9.2f %-8.2f %-9.2f %-8.2f %-9.2f %-8.2f | %d\n", n, mb,
               (n_tiles + best_tpc - 1) / best_tpc, worst, worst_c, best, mb / best, main_us,
               mb / main_us, warm_us, mb / warm_us, read_us, mb / read_us, best_tpc);
        for (int i = 0; i < nsets; ++i) { CK(cudaFree(dK[i])); CK(cudaFree(dV[i])); }
        CK(cudaFree(dQ)); CK(cudaFree(dPO)); CK(cudaFree(dML)); CK(cudaFree(dOut)); CK(cudaFree(dSink));
    }
    printf("(TB/s = MB of K+V read / us; cold = main+merge over input sets rotated past L2, main = main kernel only, warm = one input set; "
           "NMSE_c = error over the output's spread about the plain mean of V)\n");
    return 0;
}
