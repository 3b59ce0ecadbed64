#!/usr/bin/env bash
# The passes the campaign makes over a model, at a big model's widths: a LAYERS-layer slice with
# WIDTHS' widths (7b, 32b or 72b: scripts/feedback-slice.py, random f16 weights, the real qwen2
# vocabulary) through the feeder's imatrix, the plain encode, the encode with the campaign's
# default error feedback (FEEDBACK=1) and the gate against the f16 (ctx 512). Each runs under GNU
# time: wall, CPU (user + sys) and peak RSS (file pages included). Then, per layer, the CPU
# seconds (the slice's whole run over its layers: the embeddings, the output matrix and the load
# counted in, so an upper bound) and the projection to the whole model on E2_HIGHCPU_32 (32
# vCPUs, at the cores-busy share measured here): per-layer CPU seconds × the model's layers ×
# the chunks the campaign runs / the chunks run here, over 32 cores.
# Prints a markdown table.
# Usage: scripts/big-passes.sh   env: WIDTHS (7b), LAYERS (2), CHUNKS (4), FEEDBACK (unset: no
#        feedback encode), BIN (target/release/kaiju-tui; another binary to compare), KEEP (keep
#        the knot for the next run; the slice itself is kept in $WORK either way)
set -euo pipefail
cd "$(dirname "$0")/.."
widths=${WIDTHS:-7b}
layers=${LAYERS:-2}
chunks=${CHUNKS:-4}
case $widths in
  7b) model_layers=28 ;;
  32b) model_layers=64 ;;
  72b) model_layers=80 ;;
  *) echo "WIDTHS=$widths: expected 7b, 32b or 72b" >&2; exit 2 ;;
esac
# shellcheck source=scripts/fixtures.sh
. scripts/fixtures.sh
python=$PWD/$(gguf_venv)
if [ -z "${BIN:-}" ]; then cargo build --release --quiet; fi
bin=${BIN:-target/release/kaiju-tui}
models=.cache/models
qwen=$(bash scripts/fetch-qwen05.sh "$models" | tail -1)
[ -f "$models/qwen2.5-coder-0.5b-f16.gguf" ] ||
  "$bin" convert --to f16 "$qwen" "$models/qwen2.5-coder-0.5b-f16.gguf"
work=${WORK:-.cache/big-passes/$widths-$layers}
mkdir -p "$work"
[ -f "$work/slice-f16.gguf" ] ||
  (cd scripts && "$python" feedback-slice.py "../$models/qwen2.5-coder-0.5b-f16.gguf" "../$work" "$layers" "$widths")
calib=assets/calib/calib.txt
text=$work/gate.txt
[ -f "$text" ] || bash scripts/eval-text.sh "$text" >/dev/null
# the chunks the campaign runs: the feeder's imatrix over the whole calibration text (as many
# chunks of 512 as the qwen2 tokenizer makes of it), the gate's [gate] chunks (16)
calib_chunks=$("$bin" tokenize --model "$work/slice-f16.gguf" "$calib" | tr ',' '\n' | wc -l)
calib_chunks=$((calib_chunks / 512))
cores=$(nproc)
printf '| %s-layer slice at qwen2.5-%s widths, %s threads (%s) | wall | CPU | peak RSS | CPU-s per layer | whole model (%s layers) on 32 vCPUs |\n|---|---|---|---|---|---|\n' \
  "$layers" "$widths" "$cores" "$(basename "$bin")" "$model_layers"
run() {
  local name=$1 campaign_chunks=$2 rc=0; shift 2
  local log="$work/$(basename "$bin") $name"
  /usr/bin/time -f "%e %U %S %M" -o "$log.time" "$bin" "$@" > "$log.out" 2>&1 || rc=$?
  # the gate's verdict (exit 4: a random slice fails its argmax case) is not what is measured
  if [ "$rc" != 0 ] && [ "$rc" != 4 ]; then echo "$name failed:" >&2; tail -5 "$log.out" >&2; return 1; fi
  # GNU time puts "Command exited with non-zero status N" first when the exit is not 0
  read -r secs user sys kb < <(tail -1 "$log.time")
  python3 - "$name" "$secs" "$user" "$sys" "$kb" "$layers" "$model_layers" "$campaign_chunks" "$chunks" "$cores" <<'PY'
import sys
name, secs, user, sys_, kb = sys.argv[1], *map(float, sys.argv[2:6])
layers, model_layers, campaign_chunks, chunks, cores = map(int, sys.argv[6:11])
cpu = user + sys_
per_layer = cpu / layers
busy = cpu / secs / cores  # the share of the cores the run kept busy here
hours = per_layer * model_layers * campaign_chunks / chunks / (32 * busy) / 3600
print(f"| {name} | {secs:.0f} s | {cpu:.0f} s | {kb / 1048576:.2f} GB | {per_layer:.0f} | {hours:.1f} h |")
PY
}
# a binary from before the imatrix command has no imatrix row
! "$bin" imatrix --help >/dev/null 2>&1 ||
  run "imatrix ($chunks × 512)" "$calib_chunks" imatrix --model "$work/slice-f16.gguf" --text "$calib" --ctx 512 \
  --chunks "$chunks" --out "$work/slice.imatrix.gguf"
run "plain encode (q=4)" "$chunks" --encode --quiet --f16 "$work/slice-f16.gguf" --imatrix "$work/slice.imatrix.dat" \
  --base "$work/slice-f16.gguf" --out "$work/slice.knot"
if [ -n "${FEEDBACK:-}" ]; then
  run "encode, default feedback (bpw 2.25)" "$chunks" --encode --quiet --f16 "$work/slice-f16.gguf" \
    --imatrix "$work/slice.imatrix.dat" --base "$work/slice-f16.gguf" --out "$work/slice-fb.knot" \
    --calib-text "$calib"
  rm -f "$work/slice-fb.knot"
fi
echo '{"prompt_tokens":[9707,11,1879],"expect_token":13}' > "$work/qspec.json"
run "gate --ref ($chunks × 512)" 16 gate --knot "$work/slice.knot" --qspec "$work/qspec.json" \
  --ref "$work/slice-f16.gguf" --text "$text" --ctx 512 --chunks "$chunks" --json --log "$work/gate.log"
[ -n "${KEEP:-}" ] || rm -f "$work/slice.knot"
