#!/usr/bin/env bash
# Measure how much KL divergence a unit of imatrix-weighted error costs, by tensor kind and by
# layer depth: the gains of the --bpw allocator (src/dataplane/encode/alloc.rs, KIND_GAIN / DEPTH_GAIN).
#
# On the SmolLM2 fixture, with the f16 truth as the base (so every other tensor is exact):
#   - one knot per matmul kind with only that kind's tensors (all layers) at q=4
#     (`--mix '*=keep,KIND=4'`), and one knot per layer with only that layer's tensors at q=4
#     (`--mix '*=keep,*@L=4'`);
#   - each scored against the f16 over a calibration text that is NOT the evaluation text of
#     quality-curve.sh (GPL-3 + LGPL-2.1 here), ctx 512: the knot dequantized into an f16
#     copy (`convert --to f16`) and `llama-perplexity --kl-divergence` (our gate gives the
#     same figures within 0.1%, scripts/compare-quality.sh, at twice the time: it runs both
#     models each time);
#   - the separable model KLD(group) = Σ_t kind_gain(kind_t) · depth_gain(layer_t) · err_t
#     (err_t from each knot's telemetry) fitted by alternating the two factors.
# Prints the measured KLD of every group, the fitted gains, and the Rust tables to paste
# (src/dataplane/encode/alloc.rs keeps one table per architecture).
# Usage: scripts/calibrate-sensitivity.sh   (env: CHUNKS=4 CTX=512 MODEL=smollm2|qwen05)
set -euo pipefail
cd "$(dirname "$0")/.."
chunks=${CHUNKS:-4} ctx=${CTX:-512} model=${MODEL:-smollm2}
work=.cache/calibrate-$model; mkdir -p "$work"
cargo build --release --quiet
kaiju=$PWD/target/release/kaiju-tui
bin=$(bash scripts/llama-cpp.sh llama-perplexity llama-quantize)
threads=$(nproc)
case $model in
  smollm2) base=$(bash scripts/fetch-smollm2.sh .cache/models | tail -1); imatrix=assets/smollm2/smol.imatrix.gguf ;;
  qwen05)  base=$(bash scripts/fetch-qwen05.sh .cache/models | tail -1); imatrix=assets/qwen05/qwen05.imatrix.gguf ;;
  *) echo "calibrate-sensitivity: unknown model $model (smollm2, qwen05)" >&2; exit 2 ;;
esac
lic=/usr/share/common-licenses
text=$work/calib.txt
if [ -f $lic/GPL-3 ] && [ -f $lic/LGPL-2.1 ]; then cat $lic/GPL-3 $lic/LGPL-2.1 > "$text"; else cat LICENSE LICENSE > "$text"; fi
f16=$work/f16.gguf kld_base=$work/calib-c$ctx-n$chunks.kld
bash scripts/reference-logits.sh "$base" "$f16" "$kld_base" "$text" "$ctx" "$chunks" "$threads"
layers=$("$kaiju" inspect "$f16" | awk '$1 ~ /^blk\.[0-9]+\./ { split($1, a, "."); if (a[2] + 1 > n) n = a[2] + 1 } END { print n }')
groups=()
for k in attn_q attn_k attn_v attn_output ffn_gate ffn_up ffn_down; do groups+=("kind:$k=*=keep,$k=4"); done
for ((l = 0; l < layers; l++)); do groups+=("layer:$l=*=keep,*@$l=4"); done
for g in "${groups[@]}"; do
  name=${g%%=*} mix=${g#*=}; tag=${name/:/-}
  [ -f "$work/$tag.kld" ] && continue
  "$kaiju" --encode --quiet --f16 "$f16" --imatrix "$imatrix" --base "$f16" --out "$work/$tag.knot" \
    --mix "$mix" --telemetry "$work/$tag.telemetry.json" > /dev/null 2>&1
  "$kaiju" convert --to f16 "$work/$tag.knot" "$work/$tag-f16.gguf" > /dev/null 2>&1
  rm -f "$work/$tag.knot"
  "$bin/llama-perplexity" -m "$work/$tag-f16.gguf" -c "$ctx" --chunks "$chunks" -t "$threads" \
    --kl-divergence-base "$kld_base" --kl-divergence > "$work/$tag.llama.log" 2>&1
  rm -f "$work/$tag-f16.gguf"
  awk 'index($0, "Mean    KLD") == 1 { sub(/^[^:]*:[ \t]*/, ""); print $1; exit }' "$work/$tag.llama.log" > "$work/$tag.kld"
  printf '%-16s KLD %s\n' "$name" "$(cat "$work/$tag.kld")"
done
python3 - "$work" "$layers" <<'PY'
import json, sys, re, os
work, n = sys.argv[1], int(sys.argv[2])
kinds = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]
def load(tag):
    g = float(open(f"{work}/{tag}.kld").read())
    t = json.load(open(f"{work}/{tag}.telemetry.json"))["encoded"]
    errs = []
    for e in t:
        if e["choice"] == "keep":
            continue
        m = re.match(r"blk\.(\d+)\.(\w+)\.weight", e["name"])
        errs.append((int(m.group(1)), m.group(2), e["weighted_rel_mse"]))
    return g, errs
K = {k: load(f"kind-{k}") for k in kinds}
L = {l: load(f"layer-{l}") for l in range(n)}
kg = {k: 1.0 for k in kinds}
dg = [1.0] * n
for _ in range(50):
    for k in kinds:
        kld, errs = K[k]
        kg[k] = kld / sum(dg[l] * e for l, _, e in errs)
    for l in range(n):
        kld, errs = L[l]
        dg[l] = kld / sum(kg[k] * e for _, k, e in errs)
    m = sum(kg.values()) / len(kg)
    kg = {k: v / m for k, v in kg.items()}
    dg = [d * m for d in dg]
# how well the separable model predicts each group
print("\ngroup            measured KLD  predicted  (separable fit)")
for k in kinds:
    kld, errs = K[k]
    print(f"kind {k:<11} {kld:12.4f} {sum(kg[k] * dg[l] * e for l, _, e in errs):10.4f}")
for l in range(n):
    kld, errs = L[l]
    print(f"layer {l:<10} {kld:12.4f} {sum(kg[k] * dg[l] * e for _, k, e in errs):10.4f}")
print("\nkind gains (mean 1):", " ".join(f"{k}={kg[k]:.3f}" for k in kinds))
print("depth gains by layer:", " ".join(f"{d:.3f}" for d in dg))
pts = 11
samp = []
for i in range(pts):
    x = i / (pts - 1) * (n - 1)
    a = int(x); b = min(a + 1, n - 1); t = x - a
    samp.append(dg[a] * (1 - t) + dg[b] * t)
print("\nconst KIND_GAIN: [(&str, f64); 7] = [")
for k in kinds:
    print(f'    ("{k}", {kg[k]:.3f}),')
print("];")
print(f"const DEPTH_GAIN: [f64; {pts}] = [" + ", ".join(f"{d:.3f}" for d in samp) + "];")
PY
