#!/usr/bin/env bash
# Quality side by side: KAIJU1 knots scored by our distributional gate and by llama.cpp's
# `llama-perplexity --kl-divergence`, on the same f16, text, context and chunks.
#   ours:  kaiju-tui gate --knot KNOT --ref F16 --text TEXT --ctx C --chunks N   (the knot itself)
#   peer:  llama-perplexity --kl-divergence-base on the f16, then --kl-divergence on the knot
#          dequantized to F16 by `kaiju-tui convert --to f16` (llama.cpp cannot read KAIJU1)
# Prints one row per (model, q): mean KLD, top-1 agreement and PPL ratio from both, their
# differences, our gate's wall time, model-tokens/s and peak memory.
# Usage: scripts/compare-quality.sh [smollm2|qwen05 ...]   (default: smollm2)
# Env: QS="4 5 6" CTX=512 CHUNKS=16 THREADS=$(nproc); LLAMA_BIN=DIR to use a built llama.cpp.
# The text: Debian's Apache-2.0 + MPL-2.0 + GFDL-1.3 (/usr/share/common-licenses), else LICENSE.
set -euo pipefail
cd "$(dirname "$0")/.."
models=("$@"); [ ${#models[@]} -gt 0 ] || models=(smollm2)
qs=${QS:-4 5 6} ctx=${CTX:-512} chunks=${CHUNKS:-16} threads=${THREADS:-$(nproc)}
work=.cache/compare-quality; mkdir -p "$work"
cargo build --release --quiet
kaiju=$PWD/target/release/kaiju-tui
bin=$(bash scripts/llama-cpp.sh llama-perplexity)
text=$work/text.txt
bash scripts/eval-text.sh "$text"
ppl128=""
field() { awk -v k="$1" 'index($0, k) == 1 { sub(/^[^:]*:[ \t]*/, ""); print $1; exit }' "$2"; }
printf '%-8s %-3s %5s | %8s %8s %6s | %7s %7s %6s | %7s %7s %6s | %8s %8s %6s | %6s %9s %7s\n' \
  model q bpw "KLD ours" "llama" "Δ%" "top1 us" "llama" "Δpt" "ratio" "llama" "Δ%" "PPL f16" "llama" "Δ%" "gate s" "tok/s" "RSS MB"
for m in "${models[@]}"; do
  case $m in
    smollm2) base=$(bash scripts/fetch-smollm2.sh .cache/models | tail -1); imatrix=assets/smollm2/smol.imatrix.gguf
             qspec=qspecs/smollm2-135m.qspec.json ;;
    qwen05)  base=$(bash scripts/fetch-qwen05.sh .cache/models | tail -1); imatrix=assets/qwen05/qwen05.imatrix.gguf
             qspec=assets/qwen05/qwen2.5-coder-0.5b.qspec.json ;;
    *) echo "compare-quality: unknown model $m (smollm2, qwen05)" >&2; exit 2 ;;
  esac
  f16=$work/$m-f16.gguf kld_base=$work/$m-c$ctx-n$chunks.kld
  bash scripts/reference-logits.sh "$base" "$f16" "$kld_base" "$text" "$ctx" "$chunks" "$threads"
  # the f16's perplexity at ctx 128 over 16 chunks, ours (the gate's --ppl-text) against llama.cpp's
  p_ours=$("$kaiju" gate --knot "$f16" --qspec "$qspec" --ppl-text "$text" --ppl-chunks 16 --log "$work/$m-ppl128.gate.log" |
    awk '/^perplexity ctx 128/ { print $NF }')
  p_llama=$("$bin/llama-perplexity" -m "$f16" -f "$text" -c 128 --chunks 16 -t "$threads" 2>&1 |
    awk '/Final estimate/ { for (i = 1; i <= NF; i++) if ($i == "=") { print $(i + 1); exit } }')
  ppl128="$ppl128$(printf '%-8s f16 perplexity ctx 128, 16 chunks: ours %s, llama.cpp %s (%+.3f%%)' "$m" "$p_ours" "$p_llama" \
    "$(awk -v a="$p_ours" -v b="$p_llama" 'BEGIN { print 100 * (a - b) / b }')")
"
  for q in $qs; do
    knot=$work/$m-q$q.knot
    [ -f "$knot" ] || "$kaiju" --encode --quiet --f16 "$f16" --imatrix "$imatrix" --base "$base" --out "$knot" \
      --modulus "$q" --telemetry "$work/$m-q$q.telemetry.json" > "$work/$m-q$q.encode.log"
    bpw=$(python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["totals"]["bpw"])' "$work/$m-q$q.telemetry.json")
    [ -f "$work/$m-q$q-f16.gguf" ] || "$kaiju" convert --to f16 "$knot" "$work/$m-q$q-f16.gguf" >/dev/null 2>&1
    "$bin/llama-perplexity" -m "$work/$m-q$q-f16.gguf" -c "$ctx" --chunks "$chunks" -t "$threads" \
      --kl-divergence-base "$kld_base" --kl-divergence > "$work/$m-q$q.llama.log" 2>&1
    /usr/bin/time -f '%M' -o "$work/$m-q$q.rss" "$kaiju" gate --json --knot "$knot" --qspec "$qspec" --ref "$f16" \
      --text "$text" --ctx "$ctx" --chunks "$chunks" --log "$work/$m-q$q.gate.log" > "$work/$m-q$q.gate.json" || true
    L=$work/$m-q$q.llama.log
    python3 - "$work/$m-q$q.gate.json" "$(field 'Mean    KLD' "$L")" "$(field 'Same top p' "$L")" \
      "$(field 'Mean PPL(Q)/PPL(base)' "$L")" "$(field 'Mean PPL(base)' "$L")" "$(tail -1 "$work/$m-q$q.rss")" "$m" "$q" "$bpw" <<'PY'
import json, sys
g = json.load(open(sys.argv[1]))["quality"]
lk, lt, lr, lp, rss = (float(x) for x in sys.argv[2:7])
m, q, bpw = sys.argv[7:10]
rel = lambda a, b: 100.0 * (a - b) / b
print(f"{m:<8} {q:<3} {bpw:>5} | {g['kld_mean']:8.4f} {lk:8.4f} {rel(g['kld_mean'], lk):+6.2f} | "
      f"{g['top1_pct']:6.2f}% {lt:6.2f}% {g['top1_pct'] - lt:+6.2f} | {g['ppl_ratio']:7.4f} {lr:7.4f} {rel(g['ppl_ratio'], lr):+6.2f} | "
      f"{g['ppl_ref']:8.4f} {lp:8.4f} {rel(g['ppl_ref'], lp):+6.2f} | {g['seconds']:6.1f} {g['model_tokens_per_s']:9.1f} {rss / 1024:7.0f}")
PY
  done
done
printf '%s' "$ppl128"
echo "ctx $ctx, $chunks chunks of $(basename "$text") ($(wc -c < "$text") bytes), $threads threads; llama.cpp: $bin"
