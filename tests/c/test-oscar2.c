// Tests of the oscar2 and oscar3 KV-cache types in the patched ggml, against references
// written here from the documented block layout (not from ggml's code).
//
//   test-oscar2 quant IN.f32 OUT.bin [oscar2|oscar3]
//                                      quantise the float32 values in IN.f32 with
//                                      ggml's reference quantiser; write the blocks,
//                                      then the dequantised float32 values, to OUT.bin
//                                      (py/oscar/core/quant.py checks them bit for bit)
//   test-oscar2 dot                    this CPU's vec_dot (SIMD) against the scalar formula (oscar2, oscar3)
//   test-oscar2 mad                    this CPU's fused V accumulation against dequantise + axpy
//   test-oscar2 dots                   this CPU's scores of a group of rows against several Q rows
//                                      (oscar2, oscar3, q8_0, q4_0)
//   test-oscar2 mads                   this CPU's V sum of a group of rows into several accumulators
//   test-oscar2 fa                     flash attention over oscar2 K/V against float64 attention
//   test-oscar2 fa-windows             two-tier flash attention (16-bit windows beside oscar2)
//   test-oscar2 all                    every command but quant
//
// Exit status 0 only if every check passed; the last line is "N passed, M failed".

#include "ggml.h"
#include "ggml-cpu.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QK 64            // elements per oscar2 block
#define BLOCK_BYTES 20   // f16 d, f16 m, 16 bytes of codes
#define QK8 32           // elements per q8_0 block
#define Q8_BYTES 34      // f16 d, 32 int8

static int n_pass = 0;
static int n_fail = 0;

static void check(int ok, const char * what) {
    if (ok) {
        n_pass++;
    } else {
        n_fail++;
        printf("FAIL: %s\n", what);
    }
}

// --- deterministic random numbers --------------------------------------------

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double rand_uniform(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static float rand_normal(void) {
    const double u1 = rand_uniform() + 1e-300;
    const double u2 = rand_uniform();
    return (float)(sqrt(-2.0*log(u1))*cos(6.283185307179586*u2));
}

// --- the block layout, decoded independently ---------------------------------

static float half_to_float(const uint8_t * p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return ggml_fp16_to_fp32(h);
}

static int oscar2_code(const uint8_t * block, int e) {
    return (block[4 + e % 16] >> (2*(e / 16))) & 3;
}

static double oscar2_value(const uint8_t * block, int e) {
    return (double) half_to_float(block + 2) + (double) half_to_float(block) * oscar2_code(block, e);
}

// oscar3 (28 bytes): oscar2's first 20 bytes hold the low two bits, bit e of the 8 bytes after
// them the third
#define OSCAR3_BYTES 28

static int oscar3_code(const uint8_t * block, int e) {
    return oscar2_code(block, e) | (((block[20 + e / 8] >> (e % 8)) & 1) << 2);
}

static double oscar3_value(const uint8_t * block, int e) {
    return (double) half_to_float(block + 2) + (double) half_to_float(block) * oscar3_code(block, e);
}

// oscar2s (18 bytes): an f16 step and oscar2's code bytes, no minimum; levels d*(code - 3/2)
#define OSCAR2S_BYTES 18

static double oscar2s_value(const uint8_t * block, int e) {
    const int code = (block[2 + e % 16] >> (2*(e / 16))) & 3;
    return (double) half_to_float(block) * (code - 1.5);
}

// element e's value of a row of type oscar2, oscar2s or oscar3, decoded here
static double row_value(enum ggml_type type, const uint8_t * row, int e) {
    switch (type) {
        case GGML_TYPE_OSCAR3:  return oscar3_value(row + (e / QK)*OSCAR3_BYTES, e % QK);
        case GGML_TYPE_OSCAR2S: return oscar2s_value(row + (e / QK)*OSCAR2S_BYTES, e % QK);
        default:                return oscar2_value(row + (e / QK)*BLOCK_BYTES, e % QK);
    }
}

// --- quant: bit-exactness data for the numpy reference ------------------------

static int cmd_quant(const char * in_path, const char * out_path, enum ggml_type type) {
    FILE * f = fopen(in_path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", in_path); return 2; }
    fseek(f, 0, SEEK_END);
    const long nbytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    const int64_t n = nbytes / 4;
    if (n % QK != 0) { fprintf(stderr, "%s: %lld values, not a multiple of %d\n", in_path, (long long) n, QK); return 2; }
    float * x = malloc(n*sizeof(float));
    if (fread(x, sizeof(float), n, f) != (size_t) n) { fprintf(stderr, "short read\n"); return 2; }
    fclose(f);

    const size_t qbytes = ggml_row_size(type, n);
    uint8_t * q    = malloc(qbytes);
    uint8_t * qcpu = malloc(qbytes);
    float   * y    = malloc(n*sizeof(float));
    ggml_get_type_traits(type)->from_float_ref(x, q, n);
    ggml_get_type_traits_cpu(type)->from_float(x, qcpu, n);
    ggml_get_type_traits(type)->to_float(q, y, n);
    if (memcmp(q, qcpu, qbytes) != 0) {
        fprintf(stderr, "the CPU backend's quantiser differs from the reference quantiser\n");
        return 1;
    }

    FILE * g = fopen(out_path, "wb");
    if (!g) { fprintf(stderr, "cannot open %s\n", out_path); return 2; }
    fwrite(q, 1, qbytes, g);
    fwrite(y, sizeof(float), n, g);
    fclose(g);
    free(x); free(q); free(qcpu); free(y);
    return 0;
}

// --- dot: vec_dot of this build (SIMD where compiled) against the formula ----

static void quantize_oscar2_row(const float * x, void * q, int64_t n) {
    ggml_get_type_traits(GGML_TYPE_OSCAR2)->from_float_ref(x, q, n);
}

static double dot_scalar(enum ggml_type type, const uint8_t * xq, const uint8_t * yq, int n) {
    // sum over elements of (m + c*d) * (d8*q), evaluated in double from the decoded values
    double sum = 0.0;
    for (int e = 0; e < n; e++) {
        const uint8_t * yb = yq + (e / QK8)*Q8_BYTES;
        const double yv = (double) half_to_float(yb) * (int8_t) yb[2 + e % QK8];
        sum += row_value(type, xq, e)*yv;
    }
    return sum;
}

static void cmd_dot(void) {
  const enum ggml_type types[] = { GGML_TYPE_OSCAR2, GGML_TYPE_OSCAR3, GGML_TYPE_OSCAR2S };
  for (size_t ti = 0; ti < sizeof(types)/sizeof(types[0]); ti++) {
    const enum ggml_type type = types[ti];
    const struct ggml_type_traits_cpu * tr = ggml_get_type_traits_cpu(type);
    check(tr->vec_dot_type == GGML_TYPE_Q8_0, "oscar2/oscar3/oscar2s vec_dot_type is q8_0");
    const int sizes[] = { 64, 128, 256, 512, 4096 };
    for (size_t si = 0; si < sizeof(sizes)/sizeof(sizes[0]); si++) {
        const int n = sizes[si];
        for (int trial = 0; trial < 50; trial++) {
            float * x = malloc(n*sizeof(float));
            float * y = malloc(n*sizeof(float));
            const float off = trial % 3 == 0 ? 5.0f*rand_normal() : 0.0f; // blocks far from zero
            for (int i = 0; i < n; i++) {
                x[i] = off + (trial % 5 == 4 ? 100.0f : 1.0f)*rand_normal();
                y[i] = rand_normal();
            }
            if (trial == 1) { for (int i = 0; i < n; i++) x[i] = 0.25f; } // constant blocks
            uint8_t * xq = malloc(ggml_row_size(type, n));
            uint8_t * yq = malloc(ggml_row_size(GGML_TYPE_Q8_0, n));
            ggml_get_type_traits(type)->from_float_ref(x, xq, n);
            ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(y, yq, n);
            float s = 0.0f;
            tr->vec_dot(n, &s, 0, xq, 0, yq, 0, 1);
            const double ref = dot_scalar(type, xq, yq, n);
            double scale = 0.0; // sum of |terms|: the size float32 rounding is relative to
            for (int e = 0; e < n; e++) {
                const uint8_t * yb = yq + (e / QK8)*Q8_BYTES;
                scale += fabs(row_value(type, xq, e)*half_to_float(yb)*(int8_t) yb[2 + e % QK8]);
            }
            char what[128];
            snprintf(what, sizeof(what), "vec_dot %s n=%d trial %d: %.9g vs %.9g", ggml_type_name(type), n, trial, s, ref);
            check(fabs(s - ref) <= 1e-5*scale + 1e-6, what);
            free(x); free(y); free(xq); free(yq);
        }
    }
  }
}

// --- mad: fused V accumulation against dequantise + axpy ---------------------

void ggml_vec_mad_oscar2(int n, float * y, const void * vx, float v); // ggml-cpu internal (quants.h)

static void cmd_mad(void) {
    const int sizes[] = { 64, 128, 256 };
    for (size_t si = 0; si < 3; si++) {
        const int n = sizes[si];
        for (int trial = 0; trial < 50; trial++) {
            float * x  = malloc(n*sizeof(float));
            float * y  = malloc(n*sizeof(float));
            double * r = malloc(n*sizeof(double));
            for (int i = 0; i < n; i++) { x[i] = 3.0f*rand_normal() - 1.0f; y[i] = rand_normal(); r[i] = y[i]; }
            uint8_t * xq = malloc(ggml_row_size(GGML_TYPE_OSCAR2, n));
            quantize_oscar2_row(x, xq, n);
            const float v = (float) rand_uniform();
            ggml_vec_mad_oscar2(n, y, xq, v);
            double err = 0.0;
            for (int i = 0; i < n; i++) {
                r[i] += v*oscar2_value(xq + (i / QK)*BLOCK_BYTES, i % QK);
                err = fmax(err, fabs(y[i] - r[i]));
            }
            char what[128];
            snprintf(what, sizeof(what), "vec_mad n=%d trial %d: max error %.3g", n, trial, err);
            check(err < 1e-5, what);
            free(x); free(y); free(r); free(xq);
        }
    }
}

// --- dequant: rows of oscar2 at a byte stride into F32 rows -------------------

void ggml_vec_dequant_oscar2(int n, int nr, float * y, const void * vx, size_t bx); // ggml-cpu internal (quants.h)

static void cmd_dequant(void) {
    const int sizes[] = { 64, 128, 256 };
    for (size_t si = 0; si < 3; si++) {
        const int n = sizes[si];
        for (int nr = 1; nr <= 33; nr += 8) {
            // rows of n values inside rows of 3n (a head among three), the middle third read
            const size_t row_bytes = ggml_row_size(GGML_TYPE_OSCAR2, 3*n);
            float   * x  = malloc((size_t) 3*n*nr*sizeof(float));
            uint8_t * xq = malloc(row_bytes*nr);
            float   * y  = malloc((size_t) n*nr*sizeof(float) + sizeof(float));
            for (int i = 0; i < 3*n*nr; i++) x[i] = 3.0f*rand_normal() + (i % 7 == 0 ? 4.0f : 0.0f);
            for (int r = 0; r < nr; r++) quantize_oscar2_row(x + (size_t) 3*n*r, xq + row_bytes*r, 3*n);
            y[n*nr] = 12345.0f; // sentinel: nothing written past the last row
            const size_t head_off = ggml_row_size(GGML_TYPE_OSCAR2, n);
            ggml_vec_dequant_oscar2(n, nr, y, xq + head_off, row_bytes);
            double err = 0.0;
            for (int r = 0; r < nr; r++) {
                for (int i = 0; i < n; i++) {
                    const uint8_t * xr = xq + row_bytes*r + head_off;
                    err = fmax(err, fabs(y[(size_t) r*n + i] - oscar2_value(xr + (i / QK)*BLOCK_BYTES, i % QK)));
                }
            }
            char what[128];
            snprintf(what, sizeof(what), "dequant n=%d rows=%d: max error %.3g", n, nr, err);
            check(err < 1e-5 && y[n*nr] == 12345.0f, what);
            free(x); free(xq); free(y);
        }
    }
}

// --- dots: a group of K rows against several q8_0 rows in one call -------------

void ggml_vec_dots_q8_0(enum ggml_type type, int n, int nr, int nq, float * s, size_t bs, const void * vx, size_t bx, const void * vy); // ggml-cpu internal (quants.h)

// x . y in double from both rows dequantised by ggml-base's reference to_float, and the sum of
// |terms| that float32 rounding is relative to
static double dot_dequantised(enum ggml_type type, const void * x, const void * y, int n, double * scale) {
    float * xf = malloc(n*sizeof(float));
    float * yf = malloc(n*sizeof(float));
    ggml_get_type_traits(type)->to_float(x, xf, n);
    ggml_get_type_traits(GGML_TYPE_Q8_0)->to_float(y, yf, n);
    double sum = 0.0;
    *scale = 0.0;
    for (int e = 0; e < n; e++) {
        sum    += (double) xf[e]*yf[e];
        *scale += fabs((double) xf[e]*yf[e]);
    }
    free(xf); free(yf);
    return sum;
}

static void cmd_dots(void) {
    const enum ggml_type types[] = { GGML_TYPE_OSCAR2, GGML_TYPE_OSCAR3, GGML_TYPE_OSCAR2S, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0 };
    const int sizes[] = { 64, 128, 256 };
    const int nqs[]   = { 1, 3, 8 };
    for (size_t ti = 0; ti < sizeof(types)/sizeof(types[0]); ti++) {
        const enum ggml_type type = types[ti];
        for (size_t si = 0; si < 3; si++) {
            const int n = sizes[si];
            for (int nr = 1; nr <= 40; nr += (nr < 17 ? 15 : 7)) {      // 1, 16, 31, 38: whole SIMD groups and tails
                for (size_t qi = 0; qi < 3; qi++) {
                    const int nq = nqs[qi];
                    // rows of n values inside rows of 3n (a KV head among three), the middle
                    // third read; blocks with offsets so that oscar2's minima matter
                    const size_t row_bytes = ggml_row_size(type, 3*n);
                    const size_t head_off  = ggml_row_size(type, n);
                    const size_t q_bytes   = ggml_row_size(GGML_TYPE_Q8_0, n);
                    float   * x  = malloc((size_t) 3*n*nr*sizeof(float));
                    float   * y  = malloc((size_t) n*nq*sizeof(float));
                    uint8_t * xq = malloc(row_bytes*nr);
                    uint8_t * yq = malloc(q_bytes*nq);
                    const size_t bs = (size_t) nr + 3; // scores of one y row, then a gap
                    float   * s  = malloc(bs*nq*sizeof(float));
                    for (int i = 0; i < 3*n*nr; i++) x[i] = 2.0f*rand_normal() + (i % 64 < 16 ? 6.0f : -3.0f);
                    for (int i = 0; i < n*nq; i++) y[i] = rand_normal() + (i % 7 == 0 ? 1.5f : 0.0f);
                    for (int r = 0; r < nr; r++) ggml_get_type_traits(type)->from_float_ref(x + (size_t) 3*n*r, xq + row_bytes*r, 3*n);
                    ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(y, yq, (int64_t) n*nq);
                    for (size_t i = 0; i < bs*nq; i++) s[i] = 12345.0f;
                    ggml_vec_dots_q8_0(type, n, nr, nq, s, bs, xq + head_off, row_bytes, yq);
                    double worst = 0.0; // error over the float32 rounding bound
                    int gaps_kept = 1;
                    for (int h = 0; h < nq; h++) {
                        for (int r = 0; r < nr; r++) {
                            double scale;
                            const double ref = dot_dequantised(type, xq + row_bytes*r + head_off, yq + q_bytes*h, n, &scale);
                            worst = fmax(worst, fabs(s[h*bs + r] - ref)/(1e-5*scale + 1e-6));
                        }
                        for (size_t r = nr; r < bs; r++) gaps_kept &= s[h*bs + r] == 12345.0f;
                    }
                    char what[160];
                    snprintf(what, sizeof(what), "dots %s n=%d rows=%d q rows=%d: worst error / float32 bound %.3g", ggml_type_name(type), n, nr, nq, worst);
                    check(worst <= 1.0 && gaps_kept, what);
                    free(x); free(y); free(xq); free(yq); free(s);
                }
            }
        }
    }
}

// --- mads: a group of V rows weighed into several accumulators in one call ----------

void ggml_vec_mads_oscar2(int n, int nr, int nq, float * y, size_t by, const float * w, size_t bw, const void * vx, size_t bx); // ggml-cpu internal (quants.h)

static void cmd_mads(void) {
    const int sizes[] = { 64, 128, 256 };
    const int nrs[]   = { 1, 2, 17, 32, 33, 40 }; // odd rows, one and two batches of 32
    const int nqs[]   = { 1, 3, 4, 6, 9 };        // y rows in fours and the rest
    for (size_t si = 0; si < 3; si++) {
        const int n = sizes[si];
        for (size_t ri = 0; ri < 6; ri++) {
            const int nr = nrs[ri];
            for (size_t qi = 0; qi < 5; qi++) {
                const int nq = nqs[qi];
                // rows of n values inside rows of 3n (a KV head among three), the middle third
                // read; every fifth row weighed by no y row and filled with garbage (NaN steps)
                const size_t row_bytes = ggml_row_size(GGML_TYPE_OSCAR2, 3*n);
                const size_t head_off  = ggml_row_size(GGML_TYPE_OSCAR2, n);
                const size_t by = (size_t) n + 5;  // a y row, then a gap
                const size_t bw = (size_t) nr + 2;
                float   * x  = malloc((size_t) 3*n*nr*sizeof(float));
                uint8_t * xq = malloc(row_bytes*nr);
                float   * y  = malloc(by*nq*sizeof(float));
                float   * w  = malloc(bw*nq*sizeof(float));
                double  * yr = malloc((size_t) n*nq*sizeof(double));
                for (int i = 0; i < 3*n*nr; i++) x[i] = 2.0f*rand_normal() + (i % 64 < 16 ? 6.0f : -3.0f);
                for (int r = 0; r < nr; r++) quantize_oscar2_row(x + (size_t) 3*n*r, xq + row_bytes*r, 3*n);
                for (size_t i = 0; i < by*nq; i++) y[i] = 12345.0f;
                for (int h = 0; h < nq; h++) {
                    for (int j = 0; j < n; j++) { y[h*by + j] = rand_normal(); yr[(size_t) h*n + j] = y[h*by + j]; }
                    for (int r = 0; r < nr; r++) {
                        const double u = rand_uniform();
                        w[h*bw + r] = r % 5 == 3 ? 0.0f : (float) (u < 0.2 ? 0.0 : u*u*u); // weights of a softmax's spread
                    }
                }
                double wd_max = 0.0; // the largest weight times a block's step
                for (int h = 0; h < nq; h++) {
                    for (int r = 0; r < nr; r++) {
                        const uint8_t * xr = xq + row_bytes*r + head_off;
                        if (w[h*bw + r] == 0.0f) continue;
                        for (int j = 0; j < n; j++) {
                            const uint8_t * blk = xr + (j / QK)*BLOCK_BYTES;
                            yr[(size_t) h*n + j] += (double) w[h*bw + r]*oscar2_value(blk, j % QK);
                            wd_max = fmax(wd_max, w[h*bw + r]*fabs(half_to_float(blk)));
                        }
                    }
                }
                for (int r = 3; r < nr; r += 5) { // garbage where no y row looks: NaN steps and minima
                    uint8_t * xr = xq + row_bytes*r + head_off;
                    for (int b = 0; b < n/QK; b++) { xr[b*BLOCK_BYTES + 0] = 0xff; xr[b*BLOCK_BYTES + 1] = 0x7f; xr[b*BLOCK_BYTES + 2] = 0xff; xr[b*BLOCK_BYTES + 3] = 0x7f; }
                }
                ggml_vec_mads_oscar2(n, nr, nq, y, by, w, bw, xq + head_off, row_bytes);
                // w*d may be rounded to 16 bits against the largest of 32 rows: per term at most
                // half a step of that rounding times code 3, nr terms; float32 rounding beside it
                double worst = 0.0;
                int gaps_kept = 1;
                for (int h = 0; h < nq; h++) {
                    for (int j = 0; j < n; j++) {
                        const double tol = 1e-5*(fabs(yr[(size_t) h*n + j]) + 1.0) + nr*1.5*wd_max/32767.0;
                        const double e   = fabs(y[h*by + j] - yr[(size_t) h*n + j])/tol;
                        worst = isnan(e) ? INFINITY : fmax(worst, e);
                    }
                    for (size_t j = n; j < by; j++) gaps_kept &= y[h*by + j] == 12345.0f;
                }
                char what[160];
                snprintf(what, sizeof(what), "mads n=%d rows=%d y rows=%d: worst error / bound %.3g", n, nr, nq, worst);
                check(worst <= 1.0 && gaps_kept, what);
                free(x); free(xq); free(y); free(w); free(yr);
            }
        }
    }
}

// --- fa: flash attention with oscar2 K/V --------------------------------------

typedef struct {
    int d;      // head_dim
    int hq;     // query heads
    int hkv;    // KV heads
    int nq;     // query tokens
    int nkv;    // KV positions
} fa_case;

// attention in float64 over the given (already dequantised) values; sinks (one logit per query
// head, or NULL) join each softmax's denominator
static void attention_ref(const fa_case * c, const double * q, const double * k, const double * v,
                          const float * mask, const float * sinks, double scale, double * out) {
    double * p = malloc(c->nkv*sizeof(double));
    for (int h = 0; h < c->hq; h++) {
        const int hk = h / (c->hq / c->hkv);
        for (int i = 0; i < c->nq; i++) {
            double mx = -INFINITY;
            for (int j = 0; j < c->nkv; j++) {
                double s = 0.0;
                for (int e = 0; e < c->d; e++) {
                    s += q[((size_t) h*c->nq + i)*c->d + e]*k[((size_t) hk*c->nkv + j)*c->d + e];
                }
                p[j] = s*scale + mask[(size_t) i*c->nkv + j];
                mx = fmax(mx, p[j]);
            }
            if (sinks) mx = fmax(mx, sinks[h]);
            double sum = sinks ? exp(sinks[h] - mx) : 0.0;
            for (int j = 0; j < c->nkv; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
            for (int e = 0; e < c->d; e++) {
                double o = 0.0;
                for (int j = 0; j < c->nkv; j++) { o += p[j]*v[((size_t) hk*c->nkv + j)*c->d + e]; }
                out[((size_t) i*c->hq + h)*c->d + e] = o/sum;
            }
        }
    }
    free(p);
}

// run ggml_flash_attn_ext on the CPU with K/V of type `type`; out is [nq][hq][d]
static void attention_ggml(const fa_case * c, enum ggml_type type, const float * q, const float * k,
                           const float * v, const float * mask, const float * sinks, float scale, int n_threads, float * out) {
    const size_t kv_bytes = ggml_row_size(type, (int64_t) c->d*c->nkv*c->hkv);
    struct ggml_init_params ip = {
        .mem_size   = 2*kv_bytes + (size_t) 4*c->d*(c->nq*c->hq*3 + 64) + (size_t) 2*c->nq*c->nkv
                      + 64*ggml_tensor_overhead() + ggml_graph_overhead() + (size_t) 64*1024*1024,
        .mem_buffer = NULL,
        .no_alloc   = false,
    };
    struct ggml_context * ctx = ggml_init(ip);
    struct ggml_tensor * tq = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, c->d, c->nq,  c->hq,  1);
    struct ggml_tensor * tk = ggml_new_tensor_4d(ctx, type,          c->d, c->nkv, c->hkv, 1);
    struct ggml_tensor * tv = ggml_new_tensor_4d(ctx, type,          c->d, c->nkv, c->hkv, 1);
    struct ggml_tensor * tm = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, c->nkv, c->nq, 1, 1);
    memcpy(tq->data, q, ggml_nbytes(tq));
    const int64_t nkv_el = (int64_t) c->d*c->nkv*c->hkv;
    if (type == GGML_TYPE_F16) {
        ggml_fp32_to_fp16_row(k, tk->data, nkv_el);
        ggml_fp32_to_fp16_row(v, tv->data, nkv_el);
    } else {
        quantize_oscar2_row(k, tk->data, nkv_el);
        quantize_oscar2_row(v, tv->data, nkv_el);
    }
    ggml_fp32_to_fp16_row(mask, tm->data, (int64_t) c->nkv*c->nq);
    struct ggml_tensor * r = ggml_flash_attn_ext(ctx, tq, tk, tv, tm, scale, 0.0f, 0.0f);
    if (sinks) {
        struct ggml_tensor * ts = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, c->hq);
        memcpy(ts->data, sinks, c->hq*sizeof(float));
        ggml_flash_attn_ext_add_sinks(r, ts);
    }
    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, r);
    ggml_graph_compute_with_ctx(ctx, gf, n_threads);
    memcpy(out, r->data, ggml_nbytes(r)); // [d, hq, nq]
    ggml_free(ctx);
}

// Prompt batches of this many queries or more take ggml-cpu's tiled path (GGML_FA_TILE_Q in
// ggml-cpu/common.h): GEMMs over dequantised tiles, with Q rounded as the row-by-row path
// rounds it (q8_0 against oscar2 K, f16 against 16-bit rows), so both paths have the same
// references; the tiled path accumulates V in F32 where the row path uses F16 for an F16 V.
#define FA_TILE_Q 64

static void cmd_fa(void) {
    const fa_case cases[] = {
        {  64, 9, 3,   1,  300 }, // SmolLM2 geometry, decode
        {  64, 9, 3,  37,  300 }, // prefill, row by row
        {  64, 9, 3,  80,  300 }, // prefill, tiled
        { 128, 4, 1,  64,  130 }, // tiled, GQA 4
        { 128, 8, 1,   1,  513 }, // GQA 8
        { 128, 4, 4,  16,  130 }, // no GQA
        { 256, 4, 1,   1,  257 }, // Gemma-3 head size
        { 256, 2, 1,   9,   64 },
        {  64, 9, 3,   1, 1000 }, // decode over many groups of cells per thread, some all masked
        { 128, 6, 1,   3,  700 }, // a few query tokens, GQA 6 (Qwen2.5-Coder-1.5B)
    };
    for (size_t ci = 0; ci < sizeof(cases)/sizeof(cases[0]); ci++) {
        const fa_case * c = &cases[ci];
        const size_t nq_el = (size_t) c->d*c->nq*c->hq, nkv_el = (size_t) c->d*c->nkv*c->hkv;
        float * q = malloc(nq_el*sizeof(float));
        float * k = malloc(nkv_el*sizeof(float));
        float * v = malloc(nkv_el*sizeof(float));
        float * mask = malloc((size_t) c->nq*c->nkv*sizeof(float));
        // keys with a per-channel offset (as real keys have: it widens the 2-bit range
        // but shifts every logit of a query equally), values plain
        for (size_t i = 0; i < nkv_el; i++) {
            const int e = (int)(i % c->d);
            k[i] = rand_normal() + (e % 5 == 0 ? 2.0f : 0.0f);
            v[i] = rand_normal();
        }
        for (size_t i = 0; i < nq_el; i++) q[i] = rand_normal();
        // as in real attention, each query finds a few keys that match it: plant one
        // key per query (logit about +8) among the positions it sees
        for (int h = 0; h < c->hq; h++) {
            const int hk = h / (c->hq / c->hkv);
            for (int i = 0; i < c->nq; i++) {
                const float * qr = q + ((size_t) h*c->nq + i)*c->d;
                double qn = 0.0;
                for (int e = 0; e < c->d; e++) qn += qr[e]*qr[e];
                const int j = (i*7 + h*13) % (c->nkv - c->nq + i + 1);
                float * kr = k + ((size_t) hk*c->nkv + j)*c->d;
                for (int e = 0; e < c->d; e++) kr[e] += (float)(8.0*sqrt((double) c->d)*qr[e]/qn);
            }
        }
        // causal mask: query i sees positions up to nkv - nq + i; a few other holes
        for (int i = 0; i < c->nq; i++) {
            for (int j = 0; j < c->nkv; j++) {
                const int visible = j <= c->nkv - c->nq + i && (j % 11 != 3) && !(c->nkv > 500 && j >= 96 && j < 224);
                mask[(size_t) i*c->nkv + j] = visible ? 0.0f : -INFINITY;
            }
        }
        const float scale = 1.0f/sqrtf((float) c->d);

        // dequantised K/V and the q8_0 view of Q that the kernel multiplies with
        double * kd = malloc(nkv_el*sizeof(double));
        double * vd = malloc(nkv_el*sizeof(double));
        double * qd = malloc(nq_el*sizeof(double));
        double * kf = malloc(nkv_el*sizeof(double));
        double * vf = malloc(nkv_el*sizeof(double));
        double * qf = malloc(nq_el*sizeof(double));
        uint8_t * kq = malloc(ggml_row_size(GGML_TYPE_OSCAR2, nkv_el));
        uint8_t * vq = malloc(ggml_row_size(GGML_TYPE_OSCAR2, nkv_el));
        quantize_oscar2_row(k, kq, nkv_el);
        quantize_oscar2_row(v, vq, nkv_el);
        for (size_t i = 0; i < nkv_el; i++) {
            kd[i] = oscar2_value(kq + (i / QK)*BLOCK_BYTES, i % QK);
            vd[i] = oscar2_value(vq + (i / QK)*BLOCK_BYTES, i % QK);
            kf[i] = ggml_fp16_to_fp32(ggml_fp32_to_fp16(k[i]));
            vf[i] = ggml_fp16_to_fp32(ggml_fp32_to_fp16(v[i]));
        }
        uint8_t * q8 = malloc(ggml_row_size(GGML_TYPE_Q8_0, c->d));
        float   * q8f = malloc(c->d*sizeof(float));
        for (int r = 0; r < c->nq*c->hq; r++) {
            ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(q + (size_t) r*c->d, q8, c->d);
            ggml_get_type_traits(GGML_TYPE_Q8_0)->to_float(q8, q8f, c->d);
            for (int e = 0; e < c->d; e++) {
                qd[(size_t) r*c->d + e] = q8f[e];
                qf[(size_t) r*c->d + e] = q[(size_t) r*c->d + e];
            }
        }
        // Q is stored [d, nq, hq]: reorder to [hq][nq][d] for the reference
        double * qd_h = malloc(nq_el*sizeof(double));
        double * qf_h = malloc(nq_el*sizeof(double));
        for (int h = 0; h < c->hq; h++) for (int i = 0; i < c->nq; i++) for (int e = 0; e < c->d; e++) {
            const size_t src = ((size_t) h*c->nq + i)*c->d + e; // ggml: e + d*(i + nq*h)
            qd_h[src] = qd[src];
            qf_h[src] = qf[src];
        }

        // the decode path sums V in its codes with each weight (times a block's step) rounded to
        // 16 bits against a group's largest: bounded at 2^-12 of the largest value, below what
        // storing V in f16 costs that value (up to 2^-11)
        double vmax = 0.0;
        for (int64_t i = 0; i < nkv_el; i++) vmax = fmax(vmax, fabs(vd[i]));
        const double tol = 2e-4 + vmax/4096.0;

        double * ref_q  = malloc(nq_el*sizeof(double));
        double * ref_16 = malloc(nq_el*sizeof(double));
        attention_ref(c, qd_h, kd, vd, mask, NULL, scale, ref_q);
        attention_ref(c, qf_h, kf, vf, mask, NULL, scale, ref_16);
        // attention sinks (one logit per head, some above every score, some below)
        float  * sinks     = malloc(c->hq*sizeof(float));
        double * ref_sinks = malloc(nq_el*sizeof(double));
        for (int h = 0; h < c->hq; h++) sinks[h] = 12.0f*(float) rand_uniform() - 4.0f;
        attention_ref(c, qd_h, kd, vd, mask, sinks, scale, ref_sinks);

        float * out1 = malloc(nq_el*sizeof(float)); // one thread's result: two threads give the same bits
        for (int nt = 1; nt <= 2; nt++) {
            float * out = malloc(nq_el*sizeof(float));
            attention_ggml(c, GGML_TYPE_OSCAR2, q, k, v, mask, NULL, scale, nt, out);
            if (nt == 1) {
                memcpy(out1, out, nq_el*sizeof(float));
            } else if (c->nq < FA_TILE_Q) {
                char what_t[160];
                snprintf(what_t, sizeof(what_t), "fa d=%d hq=%d nq=%d nkv=%d: 2 threads equal 1 thread bit for bit", c->d, c->hq, c->nq, c->nkv);
                check(memcmp(out, out1, nq_el*sizeof(float)) == 0, what_t);
            }
            double err = 0.0, err16 = 0.0, norm = 0.0;
            for (size_t i = 0; i < nq_el; i++) {
                err   = fmax(err, fabs(out[i] - ref_q[i]));
                err16 += (out[i] - ref_16[i])*(out[i] - ref_16[i]);
                norm  += ref_16[i]*ref_16[i];
            }
            const double rel16 = sqrt(err16/norm);
            char what[200];
            snprintf(what, sizeof(what), "fa d=%d hq=%d hkv=%d nq=%d nkv=%d threads=%d: max |ggml - float64 on dequantised| = %.3g",
                     c->d, c->hq, c->hkv, c->nq, c->nkv, nt, err);
            check(err < tol, what);
            snprintf(what, sizeof(what), "fa d=%d hq=%d hkv=%d nq=%d nkv=%d threads=%d: relative RMS error against f16 attention = %.3f",
                     c->d, c->hq, c->hkv, c->nq, c->nkv, nt, rel16);
            // 2-bit min/max codes of Gaussian values carry about 0.45 relative RMS error on
            // their own (step = range/3): attention to the planted key passes that through
            check(rel16 < 0.55, what);
            printf("fa d=%3d hq=%d hkv=%d nq=%2d nkv=%3d threads=%d: max err vs float64 %.2e, rel RMS vs f16 %.3f\n",
                   c->d, c->hq, c->hkv, c->nq, c->nkv, nt, err, rel16);
            attention_ggml(c, GGML_TYPE_OSCAR2, q, k, v, mask, sinks, scale, nt, out);
            double err_s = 0.0;
            for (size_t i = 0; i < nq_el; i++) err_s = fmax(err_s, fabs(out[i] - ref_sinks[i]));
            snprintf(what, sizeof(what), "fa d=%d hq=%d hkv=%d nq=%d nkv=%d threads=%d with sinks: max |ggml - float64| = %.3g",
                     c->d, c->hq, c->hkv, c->nq, c->nkv, nt, err_s);
            check(err_s < tol, what);
            printf("fa d=%3d hq=%d hkv=%d nq=%2d nkv=%3d threads=%d with sinks: max err vs float64 %.2e\n",
                   c->d, c->hq, c->hkv, c->nq, c->nkv, nt, err_s);
            free(out);
        }
        free(sinks); free(ref_sinks); free(out1);
        free(q); free(k); free(v); free(mask); free(kd); free(vd); free(qd); free(kf); free(vf); free(qf);
        free(kq); free(vq); free(q8); free(q8f); free(qd_h); free(qf_h); free(ref_q); free(ref_16);
    }
}


// --- fa-windows: two-tier attention (16-bit windows beside oscar2) -----------

// Cells hold positions in shuffled order, some have a 16-bit copy in a pool slot. For
// query position t, a cell at position p with a slot is read from the pool when
// p < n_sink or p > t - n_recent; every other cell from the oscar2 tensors.
static void cmd_fa_windows(void) {
    const int d = 64, hq = 4, hkv = 2, nkv = 200, nslot = 80;
    const int n_sink = 8, n_recent = 24;
    const int nq_list[] = { 1, 5, 70 }; // 70: the tiled path
    for (int mode = 0; mode < 3; mode++) { // 0: K and V windows, 1: K only, 2: V only
        for (int nqi = 0; nqi < 3; nqi++) {
            const int nq = nq_list[nqi];
            const size_t nkv_el = (size_t) d*nkv*hkv, nq_el = (size_t) d*nq*hq;
            float * q = malloc(nq_el*sizeof(float));
            float * k = malloc(nkv_el*sizeof(float));
            float * v = malloc(nkv_el*sizeof(float));
            for (size_t i = 0; i < nkv_el; i++) { k[i] = rand_normal(); v[i] = rand_normal(); }
            for (size_t i = 0; i < nq_el; i++) q[i] = rand_normal();

            // positions: a permutation of 0..nkv-1; queries at the last nq positions
            int32_t * info = malloc(2*nkv*sizeof(int32_t)); // [slot | pos]
            for (int c = 0; c < nkv; c++) info[nkv + c] = c;
            for (int c = nkv - 1; c > 0; c--) {
                const int j = (int)(rand_uniform()*(c + 1));
                const int t = info[nkv + c]; info[nkv + c] = info[nkv + j]; info[nkv + j] = t;
            }
            // slots: sinks and the recent end get one (as a cache would keep them), plus a few
            // stray cells that have a slot but are outside every window; one window cell has none
            int next = 0;
            for (int c = 0; c < nkv; c++) {
                const int p = info[nkv + c];
                const int want = p < n_sink || p >= nkv - nq - n_recent || p % 37 == 5;
                info[c] = (want && next < nslot && p != nkv - 3) ? next++ : -1;
            }
            int32_t * qpos = malloc(nq*sizeof(int32_t));
            for (int i = 0; i < nq; i++) qpos[i] = nkv - nq + i;
            float * mask = malloc((size_t) nq*nkv*sizeof(float));
            for (int i = 0; i < nq; i++) for (int c = 0; c < nkv; c++) {
                mask[(size_t) i*nkv + c] = info[nkv + c] <= qpos[i] ? 0.0f : -INFINITY;
            }
            const int use_k = mode != 2, use_v = mode != 1;

            // ggml
            struct ggml_init_params ip = { .mem_size = (size_t) 64*1024*1024, .mem_buffer = NULL, .no_alloc = false };
            struct ggml_context * ctx = ggml_init(ip);
            struct ggml_tensor * tq = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, d, nq, hq, 1);
            struct ggml_tensor * tk = ggml_new_tensor_4d(ctx, use_k ? GGML_TYPE_OSCAR2 : GGML_TYPE_F16, d, nkv, hkv, 1);
            struct ggml_tensor * tv = ggml_new_tensor_4d(ctx, use_v ? GGML_TYPE_OSCAR2 : GGML_TYPE_F16, d, nkv, hkv, 1);
            struct ggml_tensor * tm = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, nkv, nq, 1, 1);
            struct ggml_tensor * kh = use_k ? ggml_new_tensor_4d(ctx, GGML_TYPE_F16, d, nslot, hkv, 1) : NULL;
            struct ggml_tensor * vh = use_v ? ggml_new_tensor_4d(ctx, GGML_TYPE_F16, d, nslot, hkv, 1) : NULL;
            const int64_t n_info = ggml_flash_attn_ext_windows_n_info(nkv, nslot);
            struct ggml_tensor * ti = ggml_new_tensor_4d(ctx, GGML_TYPE_I32, n_info, 4, 1, 1);
            struct ggml_tensor * tp = ggml_new_tensor_4d(ctx, GGML_TYPE_I32, nq, 1, 1, 1);
            memcpy(tq->data, q, ggml_nbytes(tq));
            // k/v are [d, nkv, hkv] in ggml order: element (e, c, h) at e + d*(c + nkv*h)
            if (use_k) quantize_oscar2_row(k, tk->data, nkv_el); else ggml_fp32_to_fp16_row(k, tk->data, nkv_el);
            if (use_v) quantize_oscar2_row(v, tv->data, nkv_el); else ggml_fp32_to_fp16_row(v, tv->data, nkv_el);
            ggml_fp32_to_fp16_row(mask, tm->data, (int64_t) nq*nkv);
            {
                // the op's form: the cells that have a slot, sorted by cell, found by groups
                int32_t * e_cell = malloc(nkv*sizeof(int32_t));
                int32_t * e_slot = malloc(nkv*sizeof(int32_t));
                int32_t * e_pos  = malloc(nkv*sizeof(int32_t));
                int n_ent = 0;
                for (int c = nkv - 1; c >= 0; c--) { // in reverse: the helper sorts them
                    if (info[c] < 0) continue;
                    e_cell[n_ent] = c; e_slot[n_ent] = info[c]; e_pos[n_ent] = info[nkv + c];
                    n_ent++;
                }
                ggml_flash_attn_ext_windows_info(ti->data, n_info, nkv, n_ent, e_cell, e_slot, e_pos);
                free(e_cell); free(e_slot); free(e_pos);
            }
            memcpy(tp->data, qpos, nq*sizeof(int32_t));
            // pool slots: f16 copies of the cells' original values
            for (int c = 0; c < nkv; c++) {
                if (info[c] < 0) continue;
                for (int h = 0; h < hkv; h++) {
                    const size_t src = ((size_t) h*nkv + c)*d, dst = ((size_t) h*nslot + info[c])*d;
                    if (kh) ggml_fp32_to_fp16_row(k + src, (ggml_fp16_t *) kh->data + dst, d);
                    if (vh) ggml_fp32_to_fp16_row(v + src, (ggml_fp16_t *) vh->data + dst, d);
                }
            }
            const float scale = 1.0f/sqrtf((float) d);
            struct ggml_tensor * r = ggml_flash_attn_ext(ctx, tq, tk, tv, tm, scale, 0.0f, 0.0f);
            ggml_flash_attn_ext_add_windows(r, kh, vh, ti, tp, n_sink, n_recent);

            // float64 reference: each (query, cell) read from exactly one tier
            double * ref = malloc(nq_el*sizeof(double));
            uint8_t * q8 = malloc(ggml_row_size(GGML_TYPE_Q8_0, d));
            float * qq = malloc(d*sizeof(float));
            double * p = malloc(nkv*sizeof(double));
            uint8_t * kq = malloc(ggml_row_size(GGML_TYPE_OSCAR2, nkv_el));
            uint8_t * vq = malloc(ggml_row_size(GGML_TYPE_OSCAR2, nkv_el));
            quantize_oscar2_row(k, kq, nkv_el);
            quantize_oscar2_row(v, vq, nkv_el);
            int n_hot_reads = 0;
            for (int h = 0; h < hq; h++) {
                const int hk = h / (hq/hkv);
                for (int i = 0; i < nq; i++) {
                    const float * qr = q + ((size_t) h*nq + i)*d;
                    ggml_get_type_traits_cpu(GGML_TYPE_Q8_0)->from_float(qr, q8, d);
                    ggml_get_type_traits(GGML_TYPE_Q8_0)->to_float(q8, qq, d);
                    double mx = -INFINITY;
                    for (int c = 0; c < nkv; c++) {
                        const int pos = info[nkv + c];
                        const int hot = info[c] >= 0 && (pos < n_sink || pos > qpos[i] - n_recent);
                        n_hot_reads += hot && mask[(size_t) i*nkv + c] == 0.0f;
                        const size_t off = ((size_t) hk*nkv + c)*d;
                        double sc = 0.0;
                        for (int e = 0; e < d; e++) {
                            double kv_e, q_e;
                            if (!use_k) {             // f16 K, f16 Q
                                kv_e = ggml_fp16_to_fp32(ggml_fp32_to_fp16(k[off + e]));
                                q_e  = ggml_fp16_to_fp32(ggml_fp32_to_fp16(qr[e]));
                            } else if (hot) {         // 16-bit tier: f16 K, f16 Q
                                kv_e = ggml_fp16_to_fp32(ggml_fp32_to_fp16(k[off + e]));
                                q_e  = ggml_fp16_to_fp32(ggml_fp32_to_fp16(qr[e]));
                            } else {                  // 2-bit tier: oscar2 K, q8_0 Q
                                kv_e = oscar2_value(kq + ((off + e)/QK)*BLOCK_BYTES, (off + e) % QK);
                                q_e  = qq[e];
                            }
                            sc += kv_e*q_e;
                        }
                        p[c] = sc*scale + mask[(size_t) i*nkv + c];
                        mx = fmax(mx, p[c]);
                    }
                    double sum = 0.0;
                    for (int c = 0; c < nkv; c++) { p[c] = exp(p[c] - mx); sum += p[c]; }
                    for (int e = 0; e < d; e++) {
                        double o = 0.0;
                        for (int c = 0; c < nkv; c++) {
                            if (p[c] == 0.0) continue;
                            const int pos = info[nkv + c];
                            const int hot = info[c] >= 0 && (pos < n_sink || pos > qpos[i] - n_recent);
                            const size_t off = ((size_t) hk*nkv + c)*d + e;
                            const double ve = (!use_v || hot) ? ggml_fp16_to_fp32(ggml_fp32_to_fp16(v[off]))
                                                              : oscar2_value(vq + (off/QK)*BLOCK_BYTES, off % QK);
                            o += p[c]*ve;
                        }
                        ref[((size_t) i*hq + h)*d + e] = o/sum;
                    }
                }
            }
            for (int nt = 1; nt <= 2; nt++) {
                struct ggml_cgraph * gf = ggml_new_graph(ctx);
                ggml_build_forward_expand(gf, r);
                ggml_graph_compute_with_ctx(ctx, gf, nt);
                double err = 0.0;
                for (size_t i = 0; i < nq_el; i++) err = fmax(err, fabs(((float *) r->data)[i] - ref[i]));
                char what[160];
                snprintf(what, sizeof(what), "fa-windows mode=%d nq=%d threads=%d: max |ggml - float64 two-tier| = %.3g (%d hot reads)",
                         mode, nq, nt, err, n_hot_reads);
                // with an F16 V (mode 1) the row-by-row path accumulates the output in F16:
                // 1e-3-sized rounding (the tiled path accumulates in F32)
                check(err < (mode == 1 && nq < FA_TILE_Q ? 5e-3 : 2e-4) && n_hot_reads > 0, what);
                printf("%s\n", what);
            }
            ggml_free(ctx);
            free(q); free(k); free(v); free(info); free(qpos); free(mask); free(ref); free(q8); free(qq); free(p); free(kq); free(vq);
        }
    }
}

// --- windows-info: the op's table of the cells that have a pool slot ----------

// ggml_flash_attn_ext_windows_info against a brute-force lookup: entries sorted by cell,
// each group's range holding exactly its cells, every (cell, slot, position) kept
static void cmd_windows_info(void) {
    const int nkv_list[] = { 1, 31, 32, 33, 700, 4096 };
    for (int ni = 0; ni < 6; ni++) {
        const int nkv = nkv_list[ni];
        for (int density = 0; density < 3; density++) { // no entry, a few, every cell
            const int nslot = nkv + 5;
            int32_t * slot_of = malloc(nkv*sizeof(int32_t)); // -1: no entry
            int32_t * pos_of  = malloc(nkv*sizeof(int32_t));
            int32_t * cell = malloc(nkv*sizeof(int32_t));
            int32_t * slot = malloc(nkv*sizeof(int32_t));
            int32_t * pos  = malloc(nkv*sizeof(int32_t));
            int n_ent = 0;
            for (int c = 0; c < nkv; c++) {
                const int take = density == 2 || (density == 1 && rand_uniform() < 0.1);
                slot_of[c] = take ? n_ent : -1;
                pos_of[c]  = (int32_t) (rand_uniform()*100000);
                if (take) n_ent++;
            }
            // the entries in a random order, with the slots shuffled among them
            int e = 0;
            for (int c = 0; c < nkv; c++) if (slot_of[c] >= 0) { cell[e] = c; e++; }
            for (int i = n_ent - 1; i > 0; i--) {
                const int j = (int)(rand_uniform()*(i + 1));
                const int32_t t = cell[i]; cell[i] = cell[j]; cell[j] = t;
            }
            for (int i = 0; i < n_ent; i++) {
                slot[i] = (int32_t) (n_ent - 1 - i); // distinct slots, in no relation to the cells
                slot_of[cell[i]] = slot[i];
                pos[i] = pos_of[cell[i]];
            }
            const int64_t n_info = ggml_flash_attn_ext_windows_n_info(nkv, nslot);
            const int64_t n_grp  = (nkv + GGML_FA_WIN_GROUP - 1)/GGML_FA_WIN_GROUP;
            int ok = n_info == (n_grp + 1 > nslot ? n_grp + 1 : nslot);
            int32_t * info = malloc(4*n_info*sizeof(int32_t));
            ggml_flash_attn_ext_windows_info(info, n_info, nkv, n_ent, cell, slot, pos);
            const int32_t * grp = info, * ec = info + n_info, * es = info + 2*n_info, * ep = info + 3*n_info;
            ok = ok && grp[0] == 0 && grp[n_grp] == n_ent;
            for (int64_t g = 0; g < n_grp && ok; g++) {
                ok = grp[g] <= grp[g + 1];
                for (int32_t i = grp[g]; i < grp[g + 1] && ok; i++) {
                    ok = ec[i] >= g*GGML_FA_WIN_GROUP && ec[i] < (g + 1)*GGML_FA_WIN_GROUP && (i == 0 || ec[i] > ec[i - 1]);
                }
            }
            // every cell found through its group exactly when it has an entry, with its slot and position
            int n_found = 0;
            for (int c = 0; c < nkv && ok; c++) {
                const int g = c/GGML_FA_WIN_GROUP;
                int found = -1;
                for (int32_t i = grp[g]; i < grp[g + 1]; i++) if (ec[i] == c) found = i;
                ok = (found >= 0) == (slot_of[c] >= 0) && (found < 0 || (es[found] == slot_of[c] && ep[found] == pos_of[c]));
                n_found += found >= 0;
            }
            ok = ok && n_found == n_ent;
            char what[96];
            snprintf(what, sizeof(what), "windows-info n_kv=%d entries=%d", nkv, n_ent);
            check(ok, what);
            printf("%s\n", what);
            free(slot_of); free(pos_of); free(cell); free(slot); free(pos); free(info);
        }
    }
}

int main(int argc, char ** argv) {
    if (argc >= 2 && strcmp(argv[1], "quant") == 0) {
        const int ok = argc == 4 || (argc == 5 && (!strcmp(argv[4], "oscar2") || !strcmp(argv[4], "oscar3") || !strcmp(argv[4], "oscar2s")));
        if (!ok) { fprintf(stderr, "usage: %s quant IN.f32 OUT.bin [oscar2|oscar3|oscar2s]\n", argv[0]); return 2; }
        const char * kind = argc == 5 ? argv[4] : "oscar2";
        return cmd_quant(argv[2], argv[3], !strcmp(kind, "oscar3") ? GGML_TYPE_OSCAR3 : !strcmp(kind, "oscar2s") ? GGML_TYPE_OSCAR2S : GGML_TYPE_OSCAR2);
    }
    const char * what = argc >= 2 ? argv[1] : "all";
    const int all = strcmp(what, "all") == 0;
    if (!all && strcmp(what, "dot") && strcmp(what, "mad") && strcmp(what, "dequant") && strcmp(what, "dots") && strcmp(what, "mads") && strcmp(what, "fa") && strcmp(what, "fa-windows") &&
            strcmp(what, "windows-info")) {
        fprintf(stderr, "usage: %s [quant IN OUT | dot | mad | dequant | dots | mads | fa | fa-windows | windows-info | all]\n", argv[0]);
        return 2;
    }
    ggml_cpu_init();
    if (all || !strcmp(what, "dot")) cmd_dot();
    if (all || !strcmp(what, "mad")) cmd_mad();
    if (all || !strcmp(what, "dequant")) cmd_dequant();
    if (all || !strcmp(what, "dots")) cmd_dots();
    if (all || !strcmp(what, "mads")) cmd_mads();
    if (all || !strcmp(what, "fa"))  cmd_fa();
    if (all || !strcmp(what, "fa-windows")) cmd_fa_windows();
    if (all || !strcmp(what, "windows-info")) cmd_windows_info();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail == 0 ? 0 : 1;
}
