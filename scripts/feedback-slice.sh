#!/usr/bin/env bash
# The error-feedback scale benchmark: a 2-layer slice with qwen2.5-7b's widths and the real qwen2
# vocabulary (scripts/feedback-slice.py), encoded plainly and with error feedback over the
# shipped calibration text (the default --calib-inputs). Prints wall time and peak resident memory
# (GNU time) of each.
# Usage: scripts/feedback-slice.sh   env: CHUNKS (calibration chunks; default: the encoder's), SEQ
# (calibration sequence length; default: the encoder's), LAYERS (2),
# ALSO_F16 (also the --calib-inputs f16 run), ALSO_REFINE (also a run with --calib-refine 1),
# ALSO_PRODUCTS (also a run with --calib-products set to this: bf16 or auto; the main run takes
# the encoder's default, f32),
# KEEP_KNOTS (leave the encoded knots, ~1.2 GB each,
# in $WORK; the slice itself is kept for the next run either way)
set -euo pipefail
cd "$(dirname "$0")/.."
chunks=${CHUNKS:-}
seq=${SEQ:-}
layers=${LAYERS:-2}
# shellcheck source=scripts/fixtures.sh
. scripts/fixtures.sh
python=$(gguf_venv)
cargo build --release --quiet
models=.cache/models
qwen=$(bash scripts/fetch-qwen05.sh "$models" | tail -1)
[ -f "$models/qwen2.5-coder-0.5b-f16.gguf" ] ||
  target/release/kaiju-tui convert --to f16 "$qwen" "$models/qwen2.5-coder-0.5b-f16.gguf"
work=${WORK:-.cache/feedback-slice}
mkdir -p "$work"
[ -f "$work/slice-f16.gguf" ] || "$python" scripts/feedback-slice.py "$models/qwen2.5-coder-0.5b-f16.gguf" "$work" "$layers"
run() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/$name.time" target/release/kaiju-tui --encode --quiet \
    --f16 "$work/slice-f16.gguf" --imatrix "$work/slice.imatrix.dat" --base "$work/slice-f16.gguf" \
    --out "$work/$name.knot" --bpw 3.3 "$@" > "$work/$name.out" 2>&1
  read -r secs kb < "$work/$name.time"
  printf '| %s | %.0f s | %.1f GB |\n' "$name" "$secs" "$(echo "$kb / 1048576" | bc -l)"
}
printf '| %s-layer slice, qwen2.5-7b widths, bpw 3.3, %s threads | wall | peak RSS |\n|---|---|---|\n' "$layers" "$(nproc)"
run plain
fb=(--calib-text assets/calib/calib.txt ${chunks:+--calib-chunks "$chunks"} ${seq:+--calib-seq "$seq"})
name="feedback${chunks:+-$chunks}${seq:+x$seq}"
run "$name" "${fb[@]}"
# ALSO_F16=1: the same feedback with the cheaper --calib-inputs f16 beside it
[ -z "${ALSO_F16:-}" ] || run "$name-f16" "${fb[@]}" --calib-inputs f16
# ALSO_REFINE=1: the same feedback with one pass of block coordinate descent after each tensor
[ -z "${ALSO_REFINE:-}" ] || run "$name-refine1" "${fb[@]}" --calib-refine 1
# ALSO_PRODUCTS=f32|bf16: the same feedback with the calibration's products set
[ -z "${ALSO_PRODUCTS:-}" ] || run "$name-$ALSO_PRODUCTS" "${fb[@]}" --calib-products "$ALSO_PRODUCTS"
[ -n "${KEEP_KNOTS:-}" ] || rm -f "$work"/*.knot
