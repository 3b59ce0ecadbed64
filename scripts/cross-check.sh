#!/usr/bin/env bash
# The forward-pass cross-check's reference side: regenerates tests/golden/forward/ from
# llama.cpp itself (built from the llama-cpp-python 0.3.36 sdist by scripts/llama-cpp.sh).
#
#  1. scripts/tiny-models.py (the PyPI `gguf` package, in a venv made here) writes one tiny
#     random-weight F32 model per architecture feature set and the 64-token sequence;
#  2. scripts/llama-logits.cpp, compiled against that llama.cpp, writes llama.cpp's logits at
#     every position (<name>.logits, f32);
#  3. for the two real fixtures (SmolLM2-135M, llama; Qwen2.5-Coder-0.5B, qwen2), converted to
#     f16 as the tests convert them, llama.cpp's logits over the first TOKENS tokens of the
#     LICENSE text are kept as each position's top 16 ids and logits (<name>.top.json).
#
# `cargo test --release --test forward_golden` then checks the native forward pass against them
# without llama.cpp. Rerunning rewrites the same tiny models (fixed seeds); the logits change
# only if llama.cpp or the models do.
# Usage: scripts/cross-check.sh          env: TOKENS (default 32)
set -euo pipefail
cd "$(dirname "$0")/.."
tokens=${TOKENS:-32}
out=tests/golden/forward
venv=.cache/llama/venv
bin=$(bash scripts/llama-cpp.sh llama-perplexity)
cache=.cache/llama
tool=$bin/llama-logits
if [ ! -x "$tool" ] || [ scripts/llama-logits.cpp -nt "$tool" ]; then
  g++ -O2 -std=c++17 -I"$cache/src/include" -I"$cache/src/ggml/include" scripts/llama-logits.cpp \
    -L"$bin" -lllama -lggml -lggml-base -Wl,-rpath,"$bin" -o "$tool"
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# gguf-py as the pinned sdist vendors it (not whatever version the registry has today)
"$venv/bin/python" -c "import gguf, numpy" 2>/dev/null || "$venv/bin/pip" install --quiet numpy "$cache/src/gguf-py"
cargo build --release --quiet
models=.cache/models
mkdir -p "$models" "$out"
smol=$(bash scripts/fetch-smollm2.sh "$models" | tail -1)
qwen=$(bash scripts/fetch-qwen05.sh "$models" | tail -1)
[ -f "$models/smollm2-135m-f16.gguf" ] || target/release/kaiju-tui convert --to f16 "$smol" "$models/smollm2-135m-f16.gguf"
[ -f "$models/qwen2.5-coder-0.5b-f16.gguf" ] ||
  target/release/kaiju-tui convert --to f16 "$qwen" "$models/qwen2.5-coder-0.5b-f16.gguf"

"$venv/bin/python" scripts/tiny-models.py "$models/smollm2-135m-f16.gguf" "$out"
for m in llama llama-gqa qwen2 qwen3 gemma2 gemma3 gemma4 gemma4-ple; do
  "$tool" "$out/$m.gguf" "$(cat "$out/tokens.txt")" "$out/$m.logits"
  echo "$out/$m.logits"
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 2000 LICENSE > "$tmp/text.txt"
for pair in "smollm2:$models/smollm2-135m-f16.gguf" "qwen05:$models/qwen2.5-coder-0.5b-f16.gguf"; do
  name=${pair%%:*} f16=${pair#*:}
  ids=$(target/release/kaiju-tui tokenize --model "$f16" "$tmp/text.txt" | cut -d, -f1-"$tokens")
  "$tool" "$f16" "$ids" "$tmp/$name.f32"
  "$venv/bin/python" - "$tmp/$name.f32" "$ids" "$out/$name.top.json" <<'EOF'
import json, sys
import numpy as np
path, ids, dest = sys.argv[1], [int(t) for t in sys.argv[2].split(",")], sys.argv[3]
logits = np.fromfile(path, dtype=np.float32).reshape(len(ids), -1)
top = []
for row in logits:
    order = np.argsort(-row, kind="stable")[:16]
    top.append({"ids": [int(i) for i in order], "logits": [round(float(row[i]), 5) for i in order]})
with open(dest + ".tmp", "w") as f:
    json.dump({"source": "llama.cpp (llama-cpp-python 0.3.36 sdist) via scripts/llama-logits.cpp",
               "tokens": ids, "top": top}, f, indent=None, separators=(",", ":"))
    f.write("\n")
import os
os.replace(dest + ".tmp", dest)
print(dest)
EOF
done
