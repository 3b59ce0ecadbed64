"""Write a synthetic llama-architecture f16 GGUF whose matmul rows are multiples of 256 wide
(so llama.cpp's IQ2_XS applies to every tensor it chooses it for) and a legacy .dat imatrix
for it: the like-for-like input for scripts/compare-llama.sh.

Shapes: 30 blocks, embedding 768, FFN 1536, 12 heads / 4 KV heads of 64 (K and V 256 wide):
153 354 240 matmul weights, i.i.d. Gaussian (sigma 0.02); per-column importances log-normal.
Metadata (tokenizer included) comes from the SmolLM2 f16 file given as the first argument.

usage: python synthetic-llama.py SMOLLM2_F16_GGUF OUT_DIR
"""
import struct
import sys

import gguf
import numpy as np

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
imatrix = {}


def matmul(name, ne0, ne1):
    w.add_tensor(name, (rng.standard_normal((ne1, ne0)) * 0.02).astype(np.float16))
    imatrix[name] = np.exp(rng.standard_normal(ne0)).astype(np.float32)


w.add_tensor("token_embd.weight", (rng.standard_normal((49152, E)) * 0.02).astype(np.float16))
for i in range(LAYERS):
    p = f"blk.{i}."
    w.add_tensor(p + "attn_norm.weight", np.ones(E, np.float32))
    w.add_tensor(p + "ffn_norm.weight", np.ones(E, np.float32))
    matmul(p + "attn_q.weight", E, E)
    matmul(p + "attn_k.weight", E, KV)
    matmul(p + "attn_v.weight", E, KV)
    matmul(p + "attn_output.weight", E, E)
    matmul(p + "ffn_gate.weight", E, F)
    matmul(p + "ffn_up.weight", E, F)
    matmul(p + "ffn_down.weight", F, E)
w.add_tensor("output_norm.weight", np.ones(E, np.float32))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
# legacy imatrix .dat: entry count; per entry name length, name, ncall, nval, values; then
# the last call and the dataset name
with open(f"{out_dir}/synthetic.imatrix.dat", "wb") as f:
    f.write(struct.pack("<i", len(imatrix)))
    for name, v in imatrix.items():
        b = name.encode()
        f.write(struct.pack("<i", len(b)) + b + struct.pack("<ii", 1, len(v)) + v.tobytes())
    f.write(struct.pack("<ii", 1, 9) + b"synthetic")
print(f"wrote {out_dir}/synthetic-f16.gguf and {out_dir}/synthetic.imatrix.dat")
