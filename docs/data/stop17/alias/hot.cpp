// the 16-bit window writes that run ahead with their oscar2 cache write (CUDA's
// ggml_cuda_set_rows_oscar2_find_hot): for each oscar2 SET_ROWS, the F16 SET_ROWS of the same
// rows within 8 nodes, and whether a node computed in between reads its pool or writes what it
// reads or writes (the graph as the CPU backend allocates it)
#include "llama.h"
#include "ggml.h"
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <algorithm>
#include <vector>

static std::vector<ggml_tensor *> nodes;
static bool cb(ggml_tensor * t, bool ask, void *) { if (ask) { nodes.push_back(t); } return false; }
static bool ov(const ggml_tensor * a, const ggml_tensor * b) {
    const char * a0 = (const char *) a->data, * b0 = (const char *) b->data;
    return a0 < b0 + ggml_nbytes(b) && b0 < a0 + ggml_nbytes(a);
}
static bool is_view(const ggml_tensor * t) {
    return t->op == GGML_OP_NONE || t->op == GGML_OP_VIEW || t->op == GGML_OP_RESHAPE || t->op == GGML_OP_PERMUTE || t->op == GGML_OP_TRANSPOSE;
}

int main(int argc, char ** argv) {
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    auto cp = llama_context_default_params();
    cp.n_ctx = 1024; cp.n_batch = 512; cp.n_ubatch = 512;
    cp.type_k = GGML_TYPE_OSCAR2; cp.type_v = GGML_TYPE_OSCAR2;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    cp.cb_eval = cb;
    llama_context * ctx = llama_init_from_model(model, cp);
    const int n_tok = argc > 2 ? atoi(argv[2]) : 1;
    std::vector<llama_token> toks(n_tok, 1);
    nodes.clear();
    if (llama_decode(ctx, llama_batch_get_one(toks.data(), n_tok))) { return 1; }
    int n_pairs = 0, n_conflict = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
        const ggml_tensor * w = nodes[i];
        if (w->op != GGML_OP_SET_ROWS || w->type != GGML_TYPE_OSCAR2) continue;
        for (size_t j = i + 1; j < std::min(nodes.size(), i + 8); ++j) {
            const ggml_tensor * h = nodes[j];
            if (h->op != GGML_OP_SET_ROWS || h->type != GGML_TYPE_F16 || h->src[0]->data != w->src[0]->data) continue;
            ++n_pairs;
            for (size_t m = i + 1; m < j; ++m) {
                const ggml_tensor * t = nodes[m];
                if (is_view(t)) continue;
                bool bad = ov(t, h) || ov(t, h->src[0]) || ov(t, h->src[1]);
                for (int k = 0; k < GGML_MAX_SRC; ++k) bad = bad || (t->src[k] && ov(t->src[k], h));
                if (bad) { ++n_conflict; printf("conflict: %s ... %s between %s and %s\n", t->name, ggml_op_desc(t), w->name, h->name); }
            }
            break;
        }
    }
    printf("tokens %d: %d oscar2 writes with a window write within 8 nodes, %d conflicts\n", n_tok, n_pairs, n_conflict);
    return 0;
}
