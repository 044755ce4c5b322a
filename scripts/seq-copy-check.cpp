// seq-copy-check: a copied sequence must decode exactly as its source, on any backend.
//
// Decodes n_prompt pseudo-random tokens in sequence 0, copies sequence 0 to 1
// (llama_memory_seq_cp), then decodes the same n_next tokens in both sequences, one batch
// per step, and compares their logits. With a KV stream per sequence (--no-kv-unified, the
// default here) the copy moves buffers between streams; for oscar2 the 16-bit windows must
// move with them (llama_memory_seq_cp gives the copied cells the source's pool slots, and the
// pools' per-stream views are copied with the buffers). The destination first holds other
// tokens, removed before the copy, so that slots left over from them would show too.
//
// Build against a llama.cpp build (what lab/device/device-cuda.sh does on the device):
//   g++ -O2 -std=c++17 scripts/seq-copy-check.cpp -Illama.cpp/include -Illama.cpp/ggml/include \
//       -L$BLD/bin -lllama -Wl,-rpath,$BLD/bin -o seq-copy-check
// Usage: seq-copy-check MODEL TYPE [n_prompt=600] [n_gpu_layers=99] [unified=0]
// Prints the largest logit difference per step; exits 1 if any exceeds 1e-3 times the
// logits' range.

#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static ggml_type type_by_name(const char * s) {
    if (!strcmp(s, "f16"))    return GGML_TYPE_F16;
    if (!strcmp(s, "q8_0"))   return GGML_TYPE_Q8_0;
    if (!strcmp(s, "q4_0"))   return GGML_TYPE_Q4_0;
    if (!strcmp(s, "oscar2")) return GGML_TYPE_OSCAR2;
    fprintf(stderr, "seq-copy-check: unknown cache type '%s' (f16, q8_0, q4_0, oscar2)\n", s);
    exit(2);
}

// decode tokens[i] at pos0 + i in each of seqs (one token per sequence per entry); returns
// the logits of the last token of each sequence, [seqs.size()][n_vocab]
static std::vector<std::vector<float>> decode(llama_context * ctx, const std::vector<llama_token> & tokens,
                                              int pos0, const std::vector<int> & seqs, int n_vocab) {
    llama_batch b = llama_batch_init((int) (tokens.size()*seqs.size()), 0, 1);
    for (size_t k = 0; k < seqs.size(); ++k) {
        for (size_t i = 0; i < tokens.size(); ++i) {
            const int j = b.n_tokens++;
            b.token[j]     = tokens[i];
            b.pos[j]       = pos0 + (int) i;
            b.n_seq_id[j]  = 1;
            b.seq_id[j][0] = seqs[k];
            b.logits[j]    = i + 1 == tokens.size();
        }
    }
    if (llama_decode(ctx, b) != 0) {
        fprintf(stderr, "seq-copy-check: llama_decode failed\n");
        exit(2);
    }
    std::vector<std::vector<float>> out;
    for (size_t k = 0; k < seqs.size(); ++k) {
        const float * l = llama_get_logits_ith(ctx, (int) ((k + 1)*tokens.size() - 1));
        out.emplace_back(l, l + n_vocab);
    }
    llama_batch_free(b);
    return out;
}

// decode tokens at positions 0.. in sequence seq, in batches of at most 512
static void decode_all(llama_context * ctx, const std::vector<llama_token> & tokens, int seq, int n_vocab) {
    for (size_t i0 = 0; i0 < tokens.size(); i0 += 512) {
        const std::vector<llama_token> part(tokens.begin() + i0, tokens.begin() + std::min(tokens.size(), i0 + 512));
        decode(ctx, part, (int) i0, {seq}, n_vocab);
    }
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL TYPE [n_prompt=600] [n_gpu_layers=99] [unified=0]\n", argv[0]);
        return 2;
    }
    const ggml_type type   = type_by_name(argv[2]);
    const int n_prompt     = argc > 3 ? atoi(argv[3]) : 600;
    const int n_gpu_layers = argc > 4 ? atoi(argv[4]) : 99;
    const bool unified     = argc > 5 && atoi(argv[5]) != 0;
    const int n_next       = 4;

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = n_gpu_layers;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "seq-copy-check: could not load %s\n", argv[1]);
        return 2;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx           = 2*(n_prompt + 64);
    cp.n_batch         = 512;
    cp.n_ubatch        = 512;
    cp.n_seq_max       = 2;
    cp.kv_unified      = unified;
    cp.type_k          = type;
    cp.type_v          = type;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "seq-copy-check: could not create the context\n");
        return 2;
    }
    llama_memory_t mem = llama_get_memory(ctx);

    unsigned rng = 12345u;
    auto tok = [&]() { rng = rng*1664525u + 1013904223u; return (llama_token) ((rng >> 8) % (unsigned) n_vocab); };
    std::vector<llama_token> other(n_prompt/2), prompt(n_prompt), next(n_next);
    for (auto & t : other)  t = tok();
    for (auto & t : prompt) t = tok();
    for (auto & t : next)   t = tok();

    decode_all(ctx, other, 1, n_vocab); // earlier content of the destination, removed
    llama_memory_seq_rm(mem, 1, -1, -1);

    decode_all(ctx, prompt, 0, n_vocab);
    llama_memory_seq_cp(mem, 0, 1, -1, -1);

    bool ok = true;
    for (int i = 0; i < n_next; ++i) {
        const auto l = decode(ctx, {next[i]}, n_prompt + i, {0, 1}, n_vocab);
        float diff = 0.0f, lo = INFINITY, hi = -INFINITY;
        for (int j = 0; j < n_vocab; ++j) {
            diff = std::max(diff, std::fabs(l[0][j] - l[1][j]));
            lo   = std::min(lo, l[0][j]);
            hi   = std::max(hi, l[0][j]);
        }
        const bool step_ok = diff <= 1e-3f*(hi - lo);
        ok = ok && step_ok;
        printf("seq-copy-check: %s, %s cache, step %d: max |logits(seq 1) - logits(seq 0)| = %.3g (range %.3g) %s\n",
               argv[2], unified ? "unified" : "stream per sequence", i, diff, hi - lo, step_ok ? "ok" : "DIFFERENT");
    }

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return ok ? 0 : 1;
}
