"""Write a 2-layer slice of a 7B model for the error-feedback scale benchmark
(scripts/feedback-slice.sh), or of another size's widths for the big-model passes
(scripts/big-passes.sh): llama architecture with qwen2.5-7b's widths (hidden 3,584, FFN
18,944, 28 query heads and 4 K/V heads of 128; `32b`: 5,120 / 27,648 / 40 and 8; `72b`:
8,192 / 29,568 / 64 and 8) and the real qwen2 vocabulary (151,936 tokens,
taken with the rest of the tokenizer from the Qwen2.5-Coder-0.5B f16 given as the first
argument), f16 weights i.i.d. Gaussian (sigma 0.02) from a fixed seed, and a legacy .dat
imatrix with log-normal per-column importances.

usage: python feedback-slice.py QWEN_F16_GGUF OUT_DIR [LAYERS] [7b|32b|72b]
"""
import sys

import gguf
import numpy as np
from random_llama import write_dat, write_model

src_path, out_dir = sys.argv[1], sys.argv[2]
LAYERS = int(sys.argv[3]) if len(sys.argv) > 3 else 2
WIDTHS = sys.argv[4] if len(sys.argv) > 4 else "7b"
E, F, H, HKV = {"7b": (3584, 18944, 28, 4), "32b": (5120, 27648, 40, 8), "72b": (8192, 29568, 64, 8)}[WIDTHS]
HEAD = 128
KV = HKV * HEAD
src = gguf.GGUFReader(src_path)
w = gguf.GGUFWriter(f"{out_dir}/slice-f16.gguf", "llama")
for key, field in src.fields.items():
    if not key.startswith("tokenizer."):
        continue
    kind = field.types[0]
    if kind == gguf.GGUFValueType.ARRAY:
        w.add_array(key, field.contents())
    else:
        w.add_key_value(key, field.contents(), kind)
n_vocab = len(src.fields["tokenizer.ggml.tokens"].contents())
w.add_name(f"qwen2.5-{WIDTHS} widths, {LAYERS}-layer slice")
w.add_context_length(32768)
w.add_embedding_length(E)
w.add_feed_forward_length(F)
w.add_block_count(LAYERS)
w.add_head_count(H)
w.add_head_count_kv(HKV)
w.add_rope_freq_base(1e6)
w.add_layer_norm_rms_eps(1e-6)
rng = np.random.default_rng(11)
imatrix = write_model(w, lambda shape: rng.standard_normal(shape, dtype=np.float32), rng, n_vocab, E, F, KV, LAYERS)
write_dat(f"{out_dir}/slice.imatrix.dat", imatrix, "slice")
print(f"wrote {out_dir}/slice-f16.gguf and {out_dir}/slice.imatrix.dat")
