// which rotation nodes of a layer would race in one launch: for each node named
// {Q,K,V}cur_oscar-<il>, its output and src1 byte ranges; prints overlaps between a later
// rotation's output and an earlier one's input (and the reverse)
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <map>

struct rec { std::string name; const char * y0; size_t ny; const char * x0; size_t nx; int seq; };
static std::vector<rec> recs;
static int seq = 0;

static bool cb(ggml_tensor * t, bool ask, void *) {
    if (ask) {
        if (getenv("ALIAS_NAMES") && seq++ < 80) printf("node %s %s\n", t->name, ggml_op_desc(t));
        ggml_tensor * m = t;
        while (m && m->op != GGML_OP_MUL_MAT && m->view_src) m = m->src[0];
        int il_ = -1; char c_ = 0;
        if (sscanf(t->name, "%ccur_oscar-%d", &c_, &il_) == 2 && !strchr(t->name, ' ') && m && m->op == GGML_OP_MUL_MAT) {
            const ggml_tensor * x = m->src[1];
            const ggml_tensor * xs = x->view_src ? x->view_src : x;
            if (getenv("ALIAS_PREROPE") && xs->op == GGML_OP_ROPE) x = xs->src[0]; // the rows before a RoPE folded into the rotation
            recs.push_back({t->name, (const char *) m->data, ggml_nbytes(m), (const char *) x->data, ggml_nbytes(x), seq++});
        }
        return false;
    }
    return true;
}

int main(int argc, char ** argv) {
    llama_backend_init();
    auto mp = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    auto cp = llama_context_default_params();
    cp.n_ctx = 512; cp.n_batch = 512; cp.n_ubatch = 512;
    cp.type_k = GGML_TYPE_OSCAR2; cp.type_v = GGML_TYPE_OSCAR2;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    cp.cb_eval = cb;
    llama_context * ctx = llama_init_from_model(model, cp);
    int n_tok = argc > 2 ? atoi(argv[2]) : 1;
    std::vector<llama_token> toks(n_tok, 1);
    llama_batch b = llama_batch_get_one(toks.data(), n_tok);
    recs.clear();
    if (llama_decode(ctx, b)) { fprintf(stderr, "decode failed\n"); return 1; }
    int n_ov = 0, n_rec = (int) recs.size();
    for (size_t i = 0; i < recs.size(); ++i) {
        { const rec & a = recs[i]; if (a.y0 < a.x0 + a.nx && a.x0 < a.y0 + a.ny) { ++n_ov; if (n_ov <= 6) printf("%s: output over its own input\n", a.name.c_str()); } }
        for (size_t j = i + 1; j < recs.size() && j < i + 3; ++j) {
            if (recs[i].name.substr(recs[i].name.find('-')) != recs[j].name.substr(recs[j].name.find('-'))) continue; // same layer
            const rec & a = recs[i], & c = recs[j];
            const bool y_over_x = c.y0 < a.x0 + a.nx && a.x0 < c.y0 + c.ny; // later output over earlier input
            const bool x_over_y = c.x0 < a.y0 + a.ny && a.y0 < c.x0 + c.nx; // later input over earlier output
            if (y_over_x || x_over_y) {
                ++n_ov;
                if (n_ov <= 6) printf("%s -> %s: %s\n", a.name.c_str(), c.name.c_str(), y_over_x ? "later output over earlier input" : "later input over earlier output");
            }
        }
    }
    printf("tokens %d: %d rotation nodes, %d neighbouring pairs overlap\n", n_tok, n_rec, n_ov);
    llama_free(ctx); llama_model_free(model);
    return 0;
}
