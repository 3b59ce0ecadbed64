#!/usr/bin/env python3
"""Write a copy of an F16 GGUF in which every matmul weight (blk.N.<attn|ffn kind>.weight) is
replaced by the same tensor of a llama.cpp-quantized file, dequantized with gguf-py. Every
other tensor stays the f16's, so a quantized file is scored on the same tensors a KAIJU1 knot
re-encodes. Prints the quantized file's matmul bits per weight and its matmul types.

Usage: dequant-into-f16.py F16 QUANTIZED OUT
(needs gguf-py and numpy: scripts/quality-curve.sh installs the sdist's gguf-py in its venv)
"""
import re
import shutil
import sys
from collections import Counter

import numpy as np
from gguf import GGUFReader
from gguf.constants import GGMLQuantizationType
from gguf.quants import dequantize

MATMUL = re.compile(r"^blk\.\d+\.(attn_q|attn_k|attn_v|attn_qkv|attn_output|ffn_gate|ffn_up|ffn_down)\.weight$")


def main(f16_path, q_path, out_path):
    f16 = GGUFReader(f16_path)
    q = {t.name: t for t in GGUFReader(q_path).tensors}
    tmp = out_path + ".tmp"
    shutil.copyfile(f16_path, tmp)
    out = np.memmap(tmp, dtype=np.uint8, mode="r+")
    bits = weights = 0
    types = Counter()
    for t in f16.tensors:
        if not MATMUL.match(t.name):
            continue
        if t.tensor_type != GGMLQuantizationType.F16:
            sys.exit(f"{f16_path}: {t.name} is {t.tensor_type.name}, expected F16")
        src = q.get(t.name)
        if src is None:
            sys.exit(f"{q_path}: no tensor {t.name}")
        n = int(np.prod(t.shape))
        vals = dequantize(src.data, src.tensor_type).astype(np.float16).reshape(-1)
        if vals.size != n:
            sys.exit(f"{q_path}: {t.name} has {vals.size} values, the f16 {n}")
        out[t.data_offset : t.data_offset + 2 * n] = vals.view(np.uint8)
        bits += 8 * int(src.n_bytes)
        weights += n
        types[src.tensor_type.name] += 1
    out.flush()
    del out
    shutil.move(tmp, out_path)
    mix = " ".join(f"{k}:{v}" for k, v in types.most_common())
    print(f"{bits / weights:.4f} {mix}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
