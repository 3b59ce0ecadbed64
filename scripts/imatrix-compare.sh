#!/usr/bin/env bash
# `kaiju-tui imatrix` against `llama-imatrix` (the peer's, built by scripts/llama-cpp.sh) on both
# fixtures' f16 files, over the same text, context, chunks and threads: the per-tensor relative
# difference of the two imatrices' mean squares (in_sum2 / counts), and each tool's tokens per
# second (chunks × ctx over its whole run's wall time, the model's load included) and peak RSS.
# llama-imatrix runs as the feeder ran it (its defaults: it also computes the text's perplexity,
# so its output matrix runs over every token); ours computes only the imatrix.
# Prints a markdown table.
# Usage: scripts/imatrix-compare.sh   env: CHUNKS (default 8), CTX (512), THREADS (nproc),
#        TEXT (default: the shipped calibration text, assets/calib/calib.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
chunks=${CHUNKS:-8}
ctx=${CTX:-512}
threads=${THREADS:-$(nproc)}
text=${TEXT:-assets/calib/calib.txt}
# shellcheck source=scripts/fixtures.sh
. scripts/fixtures.sh
bin=$(bash scripts/llama-cpp.sh llama-imatrix)
python=$(gguf_venv)
cargo build --release --quiet
fixture_f16s
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '| model | entries | median rel. diff | max rel. diff (tensor) | ours: tokens/s, peak RSS | llama-imatrix: tokens/s, peak RSS | ours / llama.cpp |\n|---|---|---|---|---|---|---|\n'
for m in "smollm2-135m:$smol_f16" "qwen2.5-coder-0.5b:$qwen_f16"; do
  IFS=: read -r name f16 <<<"$m"
  /usr/bin/time -f "%e %M" -o "$work/ours.time" env RAYON_NUM_THREADS="$threads" target/release/kaiju-tui imatrix \
    --model "$f16" --text "$text" --ctx "$ctx" --chunks "$chunks" --out "$work/ours.gguf" > "$work/ours.log" 2>&1
  /usr/bin/time -f "%e %M" -o "$work/theirs.time" "$bin/llama-imatrix" -m "$f16" -f "$text" -c "$ctx" \
    --chunks "$chunks" -t "$threads" -o "$work/theirs.gguf" > "$work/theirs.log" 2>&1
  "$python" - "$name" "$work" "$((chunks * ctx))" <<'PY'
import sys
import numpy as np
from gguf import GGUFReader
name, work, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
def means(path):
    r = GGUFReader(path)
    t = {x.name: np.array(x.data, dtype=np.float64).reshape(-1) for x in r.tensors}
    return {k[: -len(".in_sum2")]: t[k] / t[k[: -len(".in_sum2")] + ".counts"][0]
            for k in t if k.endswith(".in_sum2")}
ours, theirs = means(f"{work}/ours.gguf"), means(f"{work}/theirs.gguf")
assert set(ours) == set(theirs), (sorted(set(ours) ^ set(theirs)))[:5]
diff = {k: np.linalg.norm(ours[k] - theirs[k]) / np.linalg.norm(theirs[k]) for k in theirs}
worst = max(diff, key=diff.get)
def run(f):
    secs, kb = open(f).read().split()
    return tokens / float(secs), int(kb) / 1048576
(ot, orss), (tt, trss) = run(f"{work}/ours.time"), run(f"{work}/theirs.time")
print(f"| {name} | {len(ours)} | {np.median(list(diff.values())):.2e} | {diff[worst]:.2e} ({worst}) "
      f"| {ot:.0f}, {orss:.2f} GB | {tt:.0f}, {trss:.2f} GB | {ot / tt:.2f}× |")
PY
done
