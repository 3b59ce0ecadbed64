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

# gemma4 (scripts write them with write_gemma4): per-layer head sizes and K/V head counts
# (sliding layers 8 wide with 2 K/V heads, full layers 16 wide with 1), √d embeddings, q/k norms
# and the unweighted norm on V, attention scale 1, the full layers' proportional RoPE (two of
# eight frequency pairs turn, rope_freqs 1e30 on the rest) at base 1e6 and the sliding layers'
# at 1e4, the last layers reading an earlier layer's K/V (shared_kv_layers), a full layer whose
# V is its K (no attn_v), post-norms, GELU, a per-layer output scale, a final soft-cap.
# "gemma4-ple" adds the small models' per-layer embeddings, FFNs twice as wide on the shared
# layers (use_double_wide_mlp) and the default final soft-cap (30, no key).
GEMMA4 = {
    "gemma4": dict(
        n_embd=32, n_head=4, n_layer=6, swa=[1, 0, 1, 0, 1, 0], shared=2, hd_swa=8, hd_full=16,
        kv_swa=2, kv_full=1, n_ff=[48] * 6, v_is_k=[3], out_scale=True, final_cap=3.0, n_pl=0,
    ),
    "gemma4-ple": dict(
        n_embd=32, n_head=4, n_layer=5, swa=[1, 1, 0, 1, 0], shared=2, hd_swa=8, hd_full=16,
        kv_swa=2, kv_full=2, n_ff=[32, 32, 32, 64, 64], v_is_k=[], out_scale=False, final_cap=None, n_pl=8,
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


def add_tokenizer(w, tok):
    tokens, types, merges = tok
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)


def mat(rng, rows, cols, scale=1.0):
    return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)


def norm(rng, n):
    # a GGUF norm weight as stored (gemma's converter has already added its 1)
    return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


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
    add_tokenizer(w, tok)

    w.add_tensor("token_embd.weight", (rng.standard_normal((VOCAB, d)) * (0.15 if a.startswith("gemma") else 1.0))
                 .astype(np.float32))
    for i in range(nl):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(rng, d))
        w.add_tensor(p + "attn_q.weight", mat(rng, nh * hd, d, 2.0))
        w.add_tensor(p + "attn_k.weight", mat(rng, nkv * hd, d, 2.0))
        w.add_tensor(p + "attn_v.weight", mat(rng, nkv * hd, d))
        if spec.get("bias"):
            for k, n in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd)):
                w.add_tensor(p + f"attn_{k}.bias", (0.5 * rng.standard_normal(n)).astype(np.float32))
        if spec.get("qk_norm"):
            w.add_tensor(p + "attn_q_norm.weight", norm(rng, hd))
            w.add_tensor(p + "attn_k_norm.weight", norm(rng, hd))
        w.add_tensor(p + "attn_output.weight", mat(rng, d, nh * hd))
        if spec.get("post_norms"):
            w.add_tensor(p + "post_attention_norm.weight", norm(rng, d))
            w.add_tensor(p + "post_ffw_norm.weight", norm(rng, d))
        w.add_tensor(p + "ffn_norm.weight", norm(rng, d))
        w.add_tensor(p + "ffn_gate.weight", mat(rng, ff, d))
        w.add_tensor(p + "ffn_up.weight", mat(rng, ff, d))
        w.add_tensor(p + "ffn_down.weight", mat(rng, d, ff))
    if spec.get("rope_freqs"):
        # llama-3 style: high frequencies kept, low ones divided by up to 8
        f = np.linspace(1.0, 8.0, hd // 2).astype(np.float32)
        w.add_tensor("rope_freqs.weight", f)
    w.add_tensor("output_norm.weight", norm(rng, d))
    if not spec.get("tied"):
        w.add_tensor("output.weight", mat(rng, VOCAB, d, 4.0))
    finish(w)


def write_gemma4(name, spec, tok, out_dir, rng):
    a = "gemma4"
    d, nh, nl, npl = spec["n_embd"], spec["n_head"], spec["n_layer"], spec["n_pl"]
    swa = [bool(f) for f in spec["swa"]]
    w = gguf.GGUFWriter(f"{out_dir}/{name}.gguf", a)
    w.add_name(f"tiny-{name}")
    w.add_context_length(256)
    w.add_embedding_length(d)
    w.add_block_count(nl)
    w.add_feed_forward_length(spec["n_ff"])
    w.add_head_count(nh)
    w.add_head_count_kv([spec["kv_swa"] if s else spec["kv_full"] for s in swa])
    w.add_key_length(spec["hd_full"])
    w.add_value_length(spec["hd_full"])
    w.add_key_length_swa(spec["hd_swa"])
    w.add_value_length_swa(spec["hd_swa"])
    w.add_rope_dimension_count(spec["hd_full"])
    w.add_rope_dimension_count_swa(spec["hd_swa"])
    w.add_rope_freq_base(1e6)
    w.add_rope_freq_base_swa(1e4)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_sliding_window(8)
    w.add_sliding_window_pattern(swa)
    w.add_shared_kv_layers(spec["shared"])
    w.add_embedding_length_per_layer_input(npl)
    if spec["final_cap"] is not None:
        w.add_final_logit_softcapping(spec["final_cap"])
    add_tokenizer(w, tok)

    w.add_tensor("token_embd.weight", (rng.standard_normal((VOCAB, d)) * 0.15).astype(np.float32))
    if npl:
        w.add_tensor("per_layer_token_embd.weight",
                     (rng.standard_normal((VOCAB, npl * nl)) * 0.3).astype(np.float32))
        w.add_tensor("per_layer_model_proj.weight", mat(rng, npl * nl, d))
        w.add_tensor("per_layer_proj_norm.weight", norm(rng, npl))
    kv_start = nl - spec["shared"]
    for i in range(nl):
        p = f"blk.{i}."
        hd = spec["hd_swa"] if swa[i] else spec["hd_full"]
        nkv = spec["kv_swa"] if swa[i] else spec["kv_full"]
        ff = spec["n_ff"][i]
        w.add_tensor(p + "attn_norm.weight", norm(rng, d))
        w.add_tensor(p + "attn_q.weight", mat(rng, nh * hd, d, 2.0))
        w.add_tensor(p + "attn_q_norm.weight", norm(rng, hd))
        if i < kv_start:
            w.add_tensor(p + "attn_k.weight", mat(rng, nkv * hd, d, 2.0))
            if i not in spec["v_is_k"]:
                w.add_tensor(p + "attn_v.weight", mat(rng, nkv * hd, d))
            w.add_tensor(p + "attn_k_norm.weight", norm(rng, hd))
        w.add_tensor(p + "attn_output.weight", mat(rng, d, nh * hd))
        w.add_tensor(p + "post_attention_norm.weight", norm(rng, d))
        w.add_tensor(p + "ffn_norm.weight", norm(rng, d))
        w.add_tensor(p + "ffn_gate.weight", mat(rng, ff, d))
        w.add_tensor(p + "ffn_up.weight", mat(rng, ff, d))
        w.add_tensor(p + "ffn_down.weight", mat(rng, d, ff))
        w.add_tensor(p + "post_ffw_norm.weight", norm(rng, d))
        if npl:
            w.add_tensor(p + "inp_gate.weight", mat(rng, npl, d, 2.0))
            w.add_tensor(p + "proj.weight", mat(rng, d, npl))
            w.add_tensor(p + "post_norm.weight", norm(rng, d))
        if spec["out_scale"]:
            w.add_tensor(p + "layer_output_scale.weight", np.array([0.5 + rng.random()], dtype=np.float32))
    # proportional RoPE on the full layers: the first quarter of the frequency pairs turn
    half = spec["hd_full"] // 2
    turn = half // 4
    w.add_tensor("rope_freqs.weight", np.array([1.0] * turn + [1e30] * (half - turn), dtype=np.float32))
    w.add_tensor("output_norm.weight", norm(rng, d))
    finish(w)


def main(src_path, out_dir):
    tok = tokenizer(src_path)
    for i, (name, spec) in enumerate(MODELS.items()):
        write(name, spec, tok, out_dir, np.random.default_rng(1000 + i))
    for i, (name, spec) in enumerate(GEMMA4.items()):
        write_gemma4(name, spec, tok, out_dir, np.random.default_rng(2000 + i))
    ids = np.random.default_rng(7).integers(0, VOCAB, N_TOKENS)
    with open(f"{out_dir}/tokens.txt", "w") as f:
        f.write(",".join(str(int(t)) for t in ids) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
