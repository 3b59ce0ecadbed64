"""Write a synthetic llama-architecture f16 GGUF whose matmul rows are multiples of 256 wide
(so llama.cpp's IQ2_XS applies to every tensor it chooses it for) and a legacy .dat imatrix
for it: the like-for-like input for scripts/compare-llama.sh.

Shapes: 30 blocks, embedding 768, FFN 1536, 12 heads / 4 KV heads of 64 (K and V 256 wide):
153 354 240 matmul weights, i.i.d. Gaussian (sigma 0.02); per-column importances log-normal.
Metadata (tokenizer included) comes from the SmolLM2 f16 file given as the first argument.

usage: python synthetic-llama.py SMOLLM2_F16_GGUF OUT_DIR
"""
import sys

import gguf
import numpy as np
from random_llama import write_dat, write_model

src_path, out_dir = sys.argv[1], sys.argv[2]
E, F, H, HKV, LAYERS, KV = 768, 1536, 12, 4, 30, 256
src = gguf.GGUFReader(src_path)
w = gguf.GGUFWriter(f"{out_dir}/synthetic-f16.gguf", "llama")
own = {"general.architecture", "llama.embedding_length", "llama.attention.head_count", "llama.attention.head_count_kv"}
for key, field in src.fields.items():
    if key.startswith("GGUF.") or key in own:
        continue
    kind = field.types[0]
    if kind == gguf.GGUFValueType.ARRAY:
        w.add_array(key, field.contents())
    else:
        w.add_key_value(key, field.contents(), kind)
w.add_embedding_length(E)
w.add_head_count(H)
w.add_head_count_kv(HKV)
rng = np.random.default_rng(7)
imatrix = write_model(w, rng.standard_normal, rng, 49152, E, F, KV, LAYERS)
write_dat(f"{out_dir}/synthetic.imatrix.dat", imatrix, "synthetic")
print(f"wrote {out_dir}/synthetic-f16.gguf and {out_dir}/synthetic.imatrix.dat")
