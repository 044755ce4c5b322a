// The clipped KV-cache write (ggml_set_rows_clip) of the patched ggml, run on the CPU
// backend, for tests/test_rotation_llama.py to compare against numpy
// (py/oscar/calib/clip.py clip_rows, then py/oscar/core/quant.py quantize).
//
//   test-oscar-clip IN.f32 OUT.bin N_ROW N_SEG R [f16]
//
// IN.f32 holds n_rows*N_ROW float32 values (rows of N_ROW = n_heads*N_SEG values).
// The rows are written with ggml_set_rows_clip(N_SEG, R) into an oscar2 tensor,
// through a permutation of the row indices (rows land in reverse order) and, with
// "f16", from an f16 source; OUT.bin receives the oscar2 rows in the order of IN.f32.

#include "ggml.h"
#include "ggml-cpu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char ** argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s IN.f32 OUT.bin N_ROW N_SEG R [f16]\n", argv[0]);
        return 2;
    }
    const int64_t n_row = atoll(argv[3]);
    const int64_t n_seg = atoll(argv[4]);
    const float   r     = (float) atof(argv[5]);
    const int     f16   = argc > 6 && strcmp(argv[6], "f16") == 0;

    FILE * f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    const long n_bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    const int64_t n_rows = n_bytes / (int64_t) sizeof(float) / n_row;

    struct ggml_init_params params = {
        /*.mem_size   =*/ 64*1024*1024 + (size_t) n_bytes*4,
        /*.mem_buffer =*/ NULL,
        /*.no_alloc   =*/ false,
    };
    struct ggml_context * ctx = ggml_init(params);

    struct ggml_tensor * src = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_row, n_rows);
    if (fread(src->data, sizeof(float), (size_t) (n_row*n_rows), f) != (size_t) (n_row*n_rows)) {
        fprintf(stderr, "short read\n");
        return 2;
    }
    fclose(f);

    struct ggml_tensor * x = src;
    if (f16) {
        x = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n_row, n_rows);
        ggml_fp32_to_fp16_row((const float *) src->data, (ggml_fp16_t *) x->data, n_row*n_rows);
    }

    struct ggml_tensor * dst  = ggml_new_tensor_2d(ctx, GGML_TYPE_OSCAR2, n_row, n_rows);
    struct ggml_tensor * idxs = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, n_rows);
    for (int64_t i = 0; i < n_rows; i++) {
        ((int64_t *) idxs->data)[i] = n_rows - 1 - i;
    }
    memset(dst->data, 0, ggml_nbytes(dst));

    struct ggml_tensor * out = ggml_set_rows_clip(ctx, dst, x, idxs, n_seg, r);

    struct ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    // an op that the plan gives every thread (as llama.cpp's graphs have their matmuls): the
    // graph then runs on three threads, and so does the write, each thread with rows
    ggml_build_forward_expand(gf, ggml_add(ctx, src, src));
    // the work buffer the plan asks for, followed by a guard: the write must keep its scratch
    // rows inside what its plan reserved
    struct ggml_cplan plan = ggml_graph_plan(gf, 3, NULL);
    const size_t n_guard = 1 << 16;
    uint8_t * work = (uint8_t *) malloc(plan.work_size + n_guard);
    memset(work + plan.work_size, 0xA5, n_guard);
    plan.work_data = work;
    if (ggml_graph_compute(gf, &plan) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "compute failed\n");
        return 1;
    }
    size_t n_over = 0;
    for (size_t i = 0; i < n_guard; i++) {
        n_over = work[plan.work_size + i] != 0xA5 ? i + 1 : n_over;
    }
    if (n_over > 0) {
        fprintf(stderr, "error: the cache write wrote up to %zu bytes past the %zu-byte work buffer its plan asked for\n",
                n_over, plan.work_size);
        return 1;
    }
    free(work);

    FILE * g = fopen(argv[2], "wb");
    const size_t rs = ggml_row_size(GGML_TYPE_OSCAR2, n_row);
    for (int64_t i = 0; i < n_rows; i++) {
        fwrite((const char *) dst->data + (n_rows - 1 - i)*rs, 1, rs, g);
    }
    fclose(g);

    ggml_free(ctx);
    printf("wrote %lld rows\n", (long long) n_rows);
    return 0;
}
