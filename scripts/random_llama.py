"""What scripts/synthetic-llama.py and scripts/feedback-slice.py share: the llama blocks of a
random-weight f16 model (each matmul i.i.d. Gaussian, sigma 0.02, with log-normal per-column
importances) and the legacy .dat imatrix of those importances."""
import struct

import numpy as np


def write_model(w, randn, rng, n_vocab, E, F, KV, layers):
    """Add token_embd, `layers` blocks and output_norm to the GGUFWriter `w`, write it out and
    close it; return the imatrix (name -> per-column importances). `randn(shape)` draws the
    Gaussian weights (each script keeps its own draw, so its files stay as they were)."""
    imatrix = {}

    def matmul(name, ne0, ne1):
        w.add_tensor(name, (randn((ne1, ne0)) * 0.02).astype(np.float16))
        imatrix[name] = np.exp(rng.standard_normal(ne0)).astype(np.float32)

    w.add_tensor("token_embd.weight", (randn((n_vocab, E)) * 0.02).astype(np.float16))
    for i in range(layers):
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
    return imatrix


def write_dat(path, imatrix, dataset):
    """The legacy imatrix .dat: entry count; per entry name length, name, ncall, nval, values;
    then the last call and the dataset name."""
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(imatrix)))
        for name, v in imatrix.items():
            b = name.encode()
            f.write(struct.pack("<i", len(b)) + b + struct.pack("<ii", 1, len(v)) + v.tobytes())
        ds = dataset.encode()
        f.write(struct.pack("<ii", 1, len(ds)) + ds)
