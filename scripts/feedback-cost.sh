#!/usr/bin/env bash
# What the error feedback costs against a plain encode of the same model at
# the same budget, measured in the same run. Each pair is a plain encode and a feedback encode
# (the shipped calibration text, every other setting the encoder's default) one after the other,
# the order alternating from pair to pair (plain first, then feedback first, ...) so that the
# machine's drift does not always favour one side. Prints a markdown table, one row per pair: the
# two walls, their ratio, the feedback's phases from its telemetry (the allocation's error sample,
# the calibration's forward passes / moments / factor, the tensors' encode) and both peak RSS
# (GNU time), and the cores each of the feedback's phases kept busy (its telemetry's CPU seconds
# over its wall seconds). With several THREADS each count runs its own pairs (`--threads`): the
# feedback's and the plain encode's scaling, for machines with more cores than this one.
# Usage: scripts/feedback-cost.sh   env: MODEL (qwen05 or smollm2; default qwen05), BPW (default
# 3.3 for qwen05, 2.6 for smollm2), PAIRS (default 1), THREADS (counts, e.g. "1 2"; default
# nproc), FLAGS (more flags for the feedback encode, e.g. "--calib-products bf16"), CALIB (the
# calibration text; default the shipped assets/calib/calib.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${MODEL:-qwen05}
pairs=${PAIRS:-1}
threads=${THREADS:-$(nproc)}
calib=${CALIB:-assets/calib/calib.txt}
cargo build --release --quiet
models=.cache/models
case $model in
  qwen05)
    base=$(bash scripts/fetch-qwen05.sh "$models" | tail -1)
    f16=$models/qwen2.5-coder-0.5b-f16.gguf imatrix=assets/qwen05/qwen05.imatrix.gguf bpw=${BPW:-3.3} ;;
  smollm2)
    base=$(bash scripts/fetch-smollm2.sh "$models" | tail -1)
    f16=$models/smollm2-135m-f16.gguf imatrix=assets/smollm2/smol.imatrix.gguf bpw=${BPW:-2.6} ;;
  *) echo "feedback-cost.sh: MODEL=$model: expected qwen05 or smollm2" >&2; exit 2 ;;
esac
[ -f "$f16" ] || target/release/kaiju-tui convert --to f16 "$base" "$f16"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# encode NAME THREADS [FLAG...]: one encode; its wall, peak RSS and telemetry under $work/NAME.*
encode() {
  local name=$1 t=$2; shift 2
  /usr/bin/time -f "%e %M" -o "$work/$name.time" target/release/kaiju-tui --encode --quiet --threads "$t" \
    --f16 "$f16" --imatrix "$imatrix" --base "$base" --out "$work/$name.knot" --telemetry "$work/$name.json" \
    --bpw "$bpw" "$@" > "$work/$name.out" 2>&1 || { cat "$work/$name.out" >&2; exit 1; }
  rm -f "$work/$name.knot"
}
read -r -a extra <<<"${FLAGS:-}"
printf '%s `--bpw %s`, feedback on %s%s (%s cores):\n\n' "$model" "$bpw" "$calib" "${FLAGS:+ with $FLAGS}" "$(nproc)"
printf '| pair | threads | plain | feedback | × plain | sample | forward / moments / factor | tensors | cores busy: sample / forward / moments / factor / tensors | peak RSS plain / feedback |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for t in $threads; do
  for p in $(seq 1 "$pairs"); do
    if [ $((p % 2)) -eq 1 ]; then
      order="plain first"; encode plain "$t"; encode fed "$t" --calib-text "$calib" "${extra[@]}"
    else
      order="feedback first"; encode fed "$t" --calib-text "$calib" "${extra[@]}"; encode plain "$t"
    fi
    python3 - "$work" "$t" "pair $p, $order" <<'PY'
import json, sys
work, t, label = sys.argv[1:]
def wall_rss(name):
    secs, kb = open(f"{work}/{name}.time").read().split()
    return float(secs), int(kb) / 1048576
(pw, pr), (fw, fr) = wall_rss("plain"), wall_rss("fed")
tel = json.load(open(f"{work}/fed.json"))
fb, al, tot = tel["feedback"], tel["allocation"], tel["totals"]
def busy(cpu, wall):
    return "?" if cpu is None or wall <= 0 else f"{cpu / wall:.2f}"
cores = " / ".join(busy(c, w) for c, w in [
    (al["sample_cpu_seconds"], al["sample_seconds"]),
    (fb["forward_cpu_seconds"], fb["forward_seconds"]),
    (fb["moments_cpu_seconds"], fb["moments_seconds"]),
    (fb["factor_cpu_seconds"], fb["factor_seconds"]),
    (tot["encode_cpu_seconds"], tot["encode_seconds"]),
])
print(f"| {label} | {t} | {pw:.1f} s | {fw:.1f} s | {fw / pw:.2f}× | {al['sample_seconds']:.1f} s "
      f"| {fb['forward_seconds']:.1f} / {fb['moments_seconds']:.1f} / {fb['factor_seconds']:.1f} s "
      f"| {tot['encode_seconds']:.1f} s | {cores} | {pr:.1f} / {fr:.1f} GB |")
PY
  done
done
