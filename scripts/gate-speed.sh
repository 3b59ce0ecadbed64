#!/usr/bin/env bash
# The distributional gate's speed against llama.cpp's: model-tokens per second of our gate
# (`kaiju-tui gate --ref`, which runs each of the two models once over every chunk: the fixture's own file as the
# knot and its f16 as the reference, as a real gate runs a knot against its f16 truth; its
# `model_tokens_per_s`) and of `llama-perplexity` (one model: the f16), on the same
# f16 files, text, context, chunks and threads. (The gate refuses an f16 as its own reference:
# a KLD of zero checks nothing.) llama-perplexity's rate is its chunks' tokens
# over the time from "calculating perplexity" to its final estimate (its log's timestamps:
# minutes.seconds.milliseconds). Prints a markdown table.
# Usage: scripts/gate-speed.sh   env: CHUNKS (default 8), CTX (512), THREADS (nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
chunks=${CHUNKS:-8}
ctx=${CTX:-512}
threads=${THREADS:-$(nproc)}
# shellcheck source=scripts/fixtures.sh
. scripts/fixtures.sh
bin=$(bash scripts/llama-cpp.sh llama-perplexity)
cargo build --release --quiet
fixture_f16s
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash scripts/eval-text.sh "$work/text.txt" >/dev/null
printf '| model | ours: model-tokens/s (2 models) | llama-perplexity: tokens/s (1 model) | ours / llama.cpp |\n|---|---|---|---|\n'
for m in "smollm2-135m:$smol:$smol_f16:shared/fixtures/smollm2/smollm2-135m.qspec.json" \
         "qwen2.5-coder-0.5b:$qwen:$qwen_f16:assets/qwen05/qwen2.5-coder-0.5b.qspec.json"; do
  IFS=: read -r name knot f16 qspec <<<"$m"
  [ -f "$qspec" ] || qspec=../$qspec
  RAYON_NUM_THREADS=$threads target/release/kaiju-tui gate --knot "$knot" --qspec "$qspec" --ref "$f16" \
    --text "$work/text.txt" --ctx "$ctx" --chunks "$chunks" --json --log "$work/gate.log" > "$work/gate.json" || true
  ours=$(python3 -c "import json,sys; print('%.1f' % json.load(open(sys.argv[1]))['quality']['model_tokens_per_s'])" "$work/gate.json")
  "$bin/llama-perplexity" -m "$f16" -f "$work/text.txt" -c "$ctx" --chunks "$chunks" -t "$threads" > "$work/ppl.log" 2>&1
  theirs=$(python3 - "$work/ppl.log" "$((chunks * ctx))" <<'PY'
import sys
def t(line):
    m, s, ms = line.split()[0].split(".")[:3]
    return int(m) * 60 + int(s) + int(ms) / 1000
lines = open(sys.argv[1]).read().splitlines()
t0 = t(next(l for l in lines if "calculating perplexity" in l))
t1 = t(next(l for l in lines if "Final estimate" in l))
print("%.1f" % (int(sys.argv[2]) / (t1 - t0)))
PY
)
  ratio=$(python3 -c "print('%.2f' % ($ours / $theirs))")
  printf '| %s | %s | %s | %s× |\n' "$name" "$ours" "$theirs" "$ratio"
done
