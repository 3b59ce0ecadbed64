"""Write the forward-pass cross-check's tiny random-weight models, one GGUF per architecture,
each with a small real tokenizer vocabulary (the first VOCAB tokens of SmolLM2's GPT-2 BPE
vocabulary and the merges among them), and the token sequence they are all run on.

Weights are F32 (so llama.cpp computes in f32 and the comparison sees the forward pass, not a
weight format), drawn from a fixed seed: rerunning writes the same bytes. Every architecture
feature the native forward pass claims is switched on in at least one model, with metadata
values small enough to matter within 64 tokens (a sliding window of 8, soft-caps near the
logits' size).

usage: python tiny-models.py SMOLLM2_GGUF OUT_DIR
writes OUT_DIR/<name>.gguf for each model below and OUT_DIR/tokens.txt (64 comma-separated ids)
"""
import sys

import gguf
import numpy as np

VOCAB = 320
N_TOKENS = 64

# name: (architecture, extra settings)
MODELS = {
    # llama: MHA, interleaved RoPE, its own output matrix
    "llama": dict(arch="llama", n_embd=32, n_head=4, n_kv=4, n_ff=64, n_layer=2),
    # mistral-style GQA (llama architecture, four query heads on one K/V head) with llama-3 RoPE
    # frequency factors (rope_freqs.weight)
    "llama-gqa": dict(arch="llama", n_embd=48, n_head=4, n_kv=1, n_ff=64, n_layer=2, rope_freqs=True),
    # qwen2: q/k/v biases, NEOX RoPE, a large rope base
    "qwen2": dict(arch="qwen2", n_embd=32, n_head=4, n_kv=2, n_ff=64, n_layer=2, bias=True, rope_base=1e6),
    # qwen3: per-head q/k RMSNorm, no biases, a head width apart from n_embd / n_head
    "qwen3": dict(arch="qwen3", n_embd=32, n_head=4, n_kv=2, head_dim=16, n_ff=64, n_layer=2, qk_norm=True),
    # gemma2: √d embedding scale, GeGLU, pre and post norms, attention and final soft-caps,
    # sliding-window layers alternating with global ones, tied embeddings
    "gemma2": dict(
        arch="gemma2", n_embd=32, n_head=4, n_kv=2, head_dim=16, n_ff=64, n_layer=2, tied=True,
        post_norms=True, swa=8, attn_cap=4.0, final_cap=2.0,
    ),
    # gemma3: q/k norms, five local layers (base 10000) to one global (base 1e6, linear
    # scaling 4) as the default pattern of 6 gives, no soft-caps
    "gemma3": dict(
        arch="gemma3", n_embd=32, n_head=4, n_kv=2, head_dim=8, n_ff=48, n_layer=6, tied=True,
        post_norms=True, qk_norm=True, swa=8, rope_base=1e6, rope_base_swa=1e4, rope_linear=4.0,
    ),
}


def tokenizer(src_path):
    src = gguf.GGUFReader(src_path)
    tokens = src.fields["tokenizer.ggml.tokens"].contents()[:VOCAB]
    keep = set(tokens)
    merges = [m for m in src.fields["tokenizer.ggml.merges"].contents()
              if all(p in keep for p in m.split(" ")) and m.replace(" ", "") in keep]
    types = src.fields["tokenizer.ggml.token_type"].contents()[:VOCAB]
    return tokens, types, merges


def write(name, spec, tok, out_dir, rng):
    a = spec["arch"]
    d, nh, nkv, ff, nl = spec["n_embd"], spec["n_head"], spec["n_kv"], spec["n_ff"], spec["n_layer"]
    hd = spec.get("head_dim", d // nh)
    w = gguf.GGUFWriter(f"{out_dir}/{name}.gguf", a)
    w.add_name(f"tiny-{name}")
    w.add_context_length(256)
    w.add_embedding_length(d)
    w.add_block_count(nl)
    w.add_feed_forward_length(ff)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    if "head_dim" in spec:
        w.add_key_length(hd)
        w.add_value_length(hd)
    w.add_layer_norm_rms_eps(1e-6)
    if "rope_base" in spec:
        w.add_rope_freq_base(spec["rope_base"])
    if "rope_base_swa" in spec:
        w.add_key_value(f"{a}.rope.freq_base_swa", spec["rope_base_swa"], gguf.GGUFValueType.FLOAT32)
    if "rope_linear" in spec:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(spec["rope_linear"])
    if "swa" in spec:
        w.add_sliding_window(spec["swa"])
    if "attn_cap" in spec:
        w.add_attn_logit_softcapping(spec["attn_cap"])
    if "final_cap" in spec:
        w.add_final_logit_softcapping(spec["final_cap"])
    tokens, types, merges = tok
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)

    def mat(rows, cols, scale=1.0):
        return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

    def norm(n):
        # a GGUF norm weight as stored (gemma's converter has already added its 1)
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    w.add_tensor("token_embd.weight", (rng.standard_normal((VOCAB, d)) * (0.15 if a.startswith("gemma") else 1.0))
                 .astype(np.float32))
    for i in range(nl):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(d))
        w.add_tensor(p + "attn_q.weight", mat(nh * hd, d, 2.0))
        w.add_tensor(p + "attn_k.weight", mat(nkv * hd, d, 2.0))
        w.add_tensor(p + "attn_v.weight", mat(nkv * hd, d))
        if spec.get("bias"):
            for k, n in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd)):
                w.add_tensor(p + f"attn_{k}.bias", (0.5 * rng.standard_normal(n)).astype(np.float32))
        if spec.get("qk_norm"):
            w.add_tensor(p + "attn_q_norm.weight", norm(hd))
            w.add_tensor(p + "attn_k_norm.weight", norm(hd))
        w.add_tensor(p + "attn_output.weight", mat(d, nh * hd))
        if spec.get("post_norms"):
            w.add_tensor(p + "post_attention_norm.weight", norm(d))
            w.add_tensor(p + "post_ffw_norm.weight", norm(d))
        w.add_tensor(p + "ffn_norm.weight", norm(d))
        w.add_tensor(p + "ffn_gate.weight", mat(ff, d))
        w.add_tensor(p + "ffn_up.weight", mat(ff, d))
        w.add_tensor(p + "ffn_down.weight", mat(d, ff))
    if spec.get("rope_freqs"):
        # llama-3 style: high frequencies kept, low ones divided by up to 8
        f = np.linspace(1.0, 8.0, hd // 2).astype(np.float32)
        w.add_tensor("rope_freqs.weight", f)
    w.add_tensor("output_norm.weight", norm(d))
    if not spec.get("tied"):
        w.add_tensor("output.weight", mat(VOCAB, d, 4.0))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(src_path, out_dir):
    tok = tokenizer(src_path)
    for i, (name, spec) in enumerate(MODELS.items()):
        write(name, spec, tok, out_dir, np.random.default_rng(1000 + i))
    ids = np.random.default_rng(7).integers(0, VOCAB, N_TOKENS)
    with open(f"{out_dir}/tokens.txt", "w") as f:
        f.write(",".join(str(int(t)) for t in ids) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
