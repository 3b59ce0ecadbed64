#!/usr/bin/env bash
# The reference side of the quality scripts (compare-quality.sh, quality-curve.sh): the f16
# truth of a fixture (`kaiju-tui convert --to f16` of BASE) and llama.cpp's stored f16 logits
# over TEXT (`llama-perplexity --kl-divergence-base`), each made once and kept.
# Usage: scripts/reference-logits.sh BASE F16 KLD_BASE TEXT CTX CHUNKS THREADS
# (needs the release build and the llama.cpp tools: the calling scripts make both)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 7 ] || { echo "usage: scripts/reference-logits.sh BASE F16 KLD_BASE TEXT CTX CHUNKS THREADS" >&2; exit 2; }
base=$1 f16=$2 kld_base=$3 text=$4 ctx=$5 chunks=$6 threads=$7
[ -f "$f16" ] || target/release/kaiju-tui convert --to f16 "$base" "$f16" >/dev/null 2>&1
bin=$(bash scripts/llama-cpp.sh llama-perplexity)
[ -f "$kld_base" ] || "$bin/llama-perplexity" -m "$f16" -f "$text" -c "$ctx" --chunks "$chunks" -t "$threads" \
  --kl-divergence-base "$kld_base" > "${kld_base%.kld}.base.log" 2>&1
