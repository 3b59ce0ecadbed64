#!/usr/bin/env python3
"""Regenerate tests/golden/dequant.bin with llama.cpp's own gguf-py reference dequantizers.

Usage: python3 -m venv /tmp/gv && /tmp/gv/bin/pip install numpy gguf==0.19.0
       /tmp/gv/bin/python scripts/gen-golden-dequant.py tests/golden/dequant.bin
Format: repeated records {u32 type_id, u32 n_elements, u32 n_bytes, bytes, f32[n_elements]}.
"""
import struct, sys
import numpy as np
from gguf import GGMLQuantizationType as T, quants

rng = np.random.default_rng(20261202)
# (type, elements per block, bytes per block, offsets of f16 scale fields)
spec = [(T.Q4_0, 32, 18, [0]), (T.Q4_1, 32, 20, [0, 2]), (T.Q5_0, 32, 22, [0]), (T.Q5_1, 32, 24, [0, 2]),
        (T.Q8_0, 32, 34, [0]), (T.Q4_K, 256, 144, [0, 2]), (T.Q6_K, 256, 210, [208]), (T.F16, 1, 2, []),
        (T.BF16, 1, 2, [])]
out = bytearray()
for ty, qk, bs, scales in spec:
    nblk = 64 if qk == 32 else 8
    if qk == 1:
        nblk = 512
        raw = np.frombuffer(rng.normal(size=nblk).astype(np.float32).tobytes(), dtype=np.uint8)
        if ty == T.F16:
            raw = np.frombuffer(rng.normal(size=nblk).astype(np.float16).tobytes(), dtype=np.uint8)
        else:
            raw = np.frombuffer((rng.normal(size=nblk).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes(), dtype=np.uint8)
    else:
        raw = rng.integers(0, 256, size=nblk * bs, dtype=np.uint8)
        for b in range(nblk):
            for off in scales:
                v = np.float16(rng.uniform(-0.05, 0.05))
                raw[b * bs + off:b * bs + off + 2] = np.frombuffer(v.tobytes(), dtype=np.uint8)
    raw = np.ascontiguousarray(raw)
    vals = quants.dequantize(raw.reshape(1, -1), ty).astype(np.float32).reshape(-1)
    out += struct.pack('<III', int(ty), vals.size, raw.size) + raw.tobytes() + vals.tobytes()
open(sys.argv[1], 'wb').write(out)
print(len(out), 'bytes')
