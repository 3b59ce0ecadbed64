#!/usr/bin/env bash
# The gate's tokenizer against llama.cpp's on long natural texts: `kaiju-tui tokenize` and
# `llama-tokenize --ids --no-bos --no-escape --no-parse-special` (without --no-escape
# llama-tokenize rewrites the text's backslash escapes; without --no-parse-special it turns a
# "</s>" in the text into the control token, which llama-perplexity does not) on the vocabularies of llama.cpp's own test suites (the
# llama-cpp-python 0.3.36 sdist's models/ggml-vocab-*.gguf). Prints one row per vocabulary and
# text: the token count of each and EQUAL or the first position where they differ. Exit 1 when
# any pair differs.
# Texts: licence prose (LICENSE), CRLF licence prose, this repository's Rust source, several
# scripts and emoji (scripts/texts/scripts.txt), runs of spaces and tabs.
# Usage: scripts/compare-tokenize.sh [VOCAB ...]   (default: every suite but the WordPiece ones)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(bash scripts/llama-cpp.sh llama-tokenize)
src=$(bash scripts/llama-cpp.sh --src)
cargo build --release --quiet
ours=target/release/kaiju-tui
vocabs=("$@")
[ ${#vocabs[@]} -gt 0 ] || vocabs=(llama-spm phi-3 gemma-4 qwen35 qwen2 llama-bpe gpt-2 starcoder refact
  deepseek-llm deepseek-coder falcon command-r mpt)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp LICENSE "$work/licence.txt"
sed 's/$/\r/' LICENSE > "$work/licence-crlf.txt"
find src -name '*.rs' | sort | xargs cat > "$work/rust-source.txt"
cp scripts/texts/scripts.txt "$work/scripts.txt"
# whitespace: the repository's source with every four spaces of indentation a tab, runs of
# spaces and tabs between words, and lines of nothing but whitespace
{
  sed 's/    /\t/g' src/dataplane/gate/tokenizer/pre.rs
  for n in 1 2 3 5 8 13 21 34; do
    printf 'a%*sb\t%*s\tc\n' "$n" '' "$n" ''
    printf '%*s\n' "$n" ''
    printf '\t%.0s' $(seq "$n"); printf '\n'
  done
} > "$work/whitespace.txt"
texts=(licence licence-crlf rust-source scripts whitespace)
printf '| %-15s | %-13s | %10s | %10s | %s |\n' vocabulary text llama.cpp ours result
printf '|%s|%s|%s|%s|%s|\n' "-----------------" "---------------" "------------" "------------" "--------"
fail=0
for v in "${vocabs[@]}"; do
  model=$src/models/ggml-vocab-$v.gguf
  for t in "${texts[@]}"; do
    f=$work/$t.txt
    "$bin/llama-tokenize" -m "$model" -f "$f" --ids --no-bos --no-escape --no-parse-special \
      --log-disable 2>/dev/null \
      | tail -1 | tr -d '[] ' | tr ',' '\n' > "$work/want"
    "$ours" tokenize --model "$model" "$f" | tr ',' '\n' > "$work/got"
    n_want=$(grep -c . "$work/want" || true)
    n_got=$(grep -c . "$work/got" || true)
    if cmp -s "$work/want" "$work/got"; then
      result=EQUAL
    else
      line=$( (diff "$work/want" "$work/got" || true) | head -1 | sed 's/[^0-9].*//')
      result="DIFFER from token ${line:-?}"
      fail=1
    fi
    printf '| %-15s | %-13s | %10s | %10s | %s |\n' "$v" "$t" "$n_want" "$n_got" "$result"
  done
done
exit $fail
