// llama.cpp's logits at every position of a token sequence, for the forward-pass cross-check
// (scripts/cross-check.sh builds this against the llama.cpp that scripts/llama-cpp.sh builds).
//
// usage: llama-logits MODEL.gguf IDS OUT.f32
//   IDS: comma-separated token ids (no BOS is added)
//   OUT: n_tokens × n_vocab little-endian f32, position-major
//
// The context runs in f32 end to end where llama.cpp lets it: an f32 K/V cache, flash attention
// off, one batch, one sequence, and a full-size sliding-window cache; the model's own weights
// decide the matmul types (the cross-check's models are F32).
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

static void quiet(enum ggml_log_level level, const char * text, void *) {
    if (level == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

int main(int argc, char ** argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL.gguf IDS OUT.f32\n", argv[0]);
        return 2;
    }
    std::vector<llama_token> ids;
    for (const char * p = argv[2]; *p;) {
        char * end = nullptr;
        long v = strtol(p, &end, 10);
        if (end == p) {
            fprintf(stderr, "IDS: expected comma-separated integers at \"%s\"\n", p);
            return 2;
        }
        ids.push_back((llama_token) v);
        p = *end == ',' ? end + 1 : end;
    }
    if (ids.empty()) {
        fprintf(stderr, "IDS: no tokens\n");
        return 2;
    }
    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "%s: cannot load\n", argv[1]);
        return 1;
    }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t) ids.size() + 16;
    cp.n_batch = (uint32_t) ids.size();
    cp.n_ubatch = (uint32_t) ids.size();
    cp.n_seq_max = 1;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.swa_full = true;
    cp.no_perf = true;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "%s: cannot make a context\n", argv[1]);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    llama_batch batch = llama_batch_init((int32_t) ids.size(), 0, 1);
    for (size_t i = 0; i < ids.size(); i++) {
        batch.token[i] = ids[i];
        batch.pos[i] = (llama_pos) i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = (int32_t) ids.size();
    if (llama_decode(ctx, batch) != 0) {
        fprintf(stderr, "%s: llama_decode failed\n", argv[1]);
        return 1;
    }
    FILE * out = fopen(argv[3], "wb");
    if (!out) {
        fprintf(stderr, "%s: cannot write\n", argv[3]);
        return 1;
    }
    for (size_t i = 0; i < ids.size(); i++) {
        const float * l = llama_get_logits_ith(ctx, (int32_t) i);
        if (!l || fwrite(l, sizeof(float), (size_t) n_vocab, out) != (size_t) n_vocab) {
            fprintf(stderr, "position %zu: no logits\n", i);
            return 1;
        }
    }
    if (fclose(out) != 0) {
        fprintf(stderr, "%s: write failed\n", argv[3]);
        return 1;
    }
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
