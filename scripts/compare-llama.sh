#!/usr/bin/env bash
# Like-for-like speed of `kaiju-tui --encode` against llama.cpp's `llama-quantize … IQ2_XS`
# (with an imatrix) on the same machine, interleaved, on a synthetic llama model whose rows
# are multiples of 256 (SmolLM2's are 576 wide, so llama.cpp falls back to IQ4_NL there).
# Not part of the test suite: it builds llama.cpp once (scripts/llama-cpp.sh: the sources
# vendored in the llama-cpp-python 0.3.36 sdist, fetched with pip) unless LLAMA_BIN names a
# folder holding a built llama-quantize. Prints one line per run and the medians.
# Usage: scripts/compare-llama.sh [ROUNDS]   (run from the repository root; default 3 rounds)
set -euo pipefail
rounds=${1:-3}
cache=.cache/compare-llama
mkdir -p "$cache"
cargo build --release --quiet
kaiju=target/release/kaiju-tui
f16=.cache/models/smollm2-135m-f16.gguf
if [ ! -f "$f16" ]; then
  q41=$(bash scripts/fetch-smollm2.sh .cache/models | tail -1)
  "$kaiju" convert --to f16 "$q41" "$f16"
fi
LLAMA_BIN=$(bash scripts/llama-cpp.sh llama-quantize)
if [ ! -f "$cache/synthetic-f16.gguf" ]; then
  # gguf-py as the pinned sdist vendors it (not whatever version the registry has today)
  [ -x "$cache/venv/bin/python" ] || python3 -m venv "$cache/venv"
  "$cache/venv/bin/python" -c "import gguf, numpy" 2>/dev/null || "$cache/venv/bin/pip" install --quiet numpy "$(bash scripts/llama-cpp.sh --src)/gguf-py"
  "$cache/venv/bin/python" scripts/synthetic-llama.py "$f16" "$cache"
fi
weights=153354240 # the synthetic model's matmul weights (scripts/synthetic-llama.py)
threads=2
wall() { local t0 t1; t0=$(date +%s.%N); "$@" >"$cache/last.log" 2>&1; t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}'; }
llama=() ours=()
for r in $(seq "$rounds"); do
  t=$(wall "$LLAMA_BIN/llama-quantize" --imatrix "$cache/synthetic.imatrix.dat" --token-embedding-type f16 \
    "$cache/synthetic-f16.gguf" "$cache/llama-iq2_xs.gguf" IQ2_XS "$threads")
  n_iq2=$(grep -c "converting to iq2_xs" "$cache/last.log" || true)
  echo "round $r  llama-quantize IQ2_XS  ${t}s  ($n_iq2 tensors IQ2_XS, the rest Q2_K)"
  llama+=("$t")
  t=$(wall "$kaiju" --encode --quiet --threads "$threads" --f16 "$cache/synthetic-f16.gguf" \
    --imatrix "$cache/synthetic.imatrix.dat" --base "$cache/synthetic-f16.gguf" --out "$cache/kaiju1.knot")
  echo "round $r  kaiju-tui --encode     ${t}s"
  ours+=("$t")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ml=$(median "${llama[@]}") mo=$(median "${ours[@]}")
awk -v w="$weights" -v n="$threads" -v l="$ml" -v o="$mo" 'BEGIN {
  printf "%-22s %8s %24s\n", "median of the runs", "wall s", "matmul weights/core-s"
  printf "%-22s %8.1f %22.2f M\n", "llama-quantize IQ2_XS", l, w / l / n / 1e6
  printf "%-22s %8.1f %22.2f M\n", "kaiju-tui --encode", o, w / o / n / 1e6
  printf "kaiju-tui is %.1fx faster\n", l / o }'
