#!/usr/bin/env bash
# Regenerate tests/golden/tokens/: llama.cpp's token ids (llama-tokenize, no BOS) for the first
# 512 tokens of LICENSE (the Apache-2.0 text, which starts the Apache + MPL + GFDL text the
# quality tables are measured on) and for all of tests/golden/tokens/edge.txt, with the
# tokenizers of both real fixtures, and for tests/golden/tokens/runs.txt (long runs of one
# character: what a quadratic BPE cannot finish). tests/tokenizer_golden.rs checks our tokenizer against them.
# Usage: scripts/gen-golden-tokens.sh   (builds llama.cpp once: scripts/llama-cpp.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bash scripts/llama-cpp.sh llama-tokenize)
smol=$(bash scripts/fetch-smollm2.sh .cache/models | tail -1)
qwen=$(bash scripts/fetch-qwen05.sh .cache/models | tail -1)
out=tests/golden/tokens
for m in "smollm2:$smol" "qwen05:$qwen"; do
  name=${m%%:*} model=${m#*:}
  # --no-escape: llama-tokenize would otherwise turn backslash sequences into the characters they
  # name; --no-parse-special: text that looks like a special token is text (as the gate reads it)
  ids() { "$bin/llama-tokenize" -m "$model" -f "$1" --ids --no-bos --no-escape --no-parse-special --log-disable 2>/dev/null | tr -d '[] '; }
  ids LICENSE | tr ',' '\n' | awk 'NR <= 512' | paste -sd, > "$out/$name.LICENSE.ids"
  ids "$out/edge.txt" > "$out/$name.edge.ids"
  ids "$out/runs.txt" > "$out/$name.runs.ids"
  echo "$out/$name.*.ids: $(tr ',' '\n' < "$out/$name.LICENSE.ids" | wc -l) + $(tr ',' '\n' < "$out/$name.edge.ids" | wc -l) ids"
done
