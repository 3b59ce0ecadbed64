#!/usr/bin/env bash
# Writes the calibration text the repository ships (assets/calib/calib.txt): what error feedback
# calibrates on in the demo and in a local build with no text configured. Three kinds of text,
# about a third each, so that the feedback's second moments are not those of one kind only
# (calibrated on licence prose alone, a knot came out further from its f16 on Markdown and code
# than the plain encode, docs/BENCHMARKS.md): prose (the GPL-3 and LGPL-2.1 licence texts, whose
# verbatim copies may be redistributed), code (this repository's Rust and shell, Apache-2.0) and
# Markdown (this repository's docs). Never README.md or the evaluation text (scripts/eval-text.sh):
# those are what the tests and benchmarks measure the knots on.
# Usage: scripts/calib-text.sh [OUT]   (default assets/calib/calib.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-assets/calib/calib.txt}
lic=/usr/share/common-licenses
for f in $lic/GPL-3 $lic/LGPL-2.1; do
  [ -f "$f" ] || { echo "calib-text.sh: $f missing (Debian's base-files holds it)" >&2; exit 1; }
done
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
{
  cat $lic/GPL-3 $lic/LGPL-2.1
  cat src/controlplane/campaign/tick.rs src/config.rs scripts/quality-curve.sh scripts/llama-cpp.sh
  cat docs/ARCHITECTURE.md docs/KAIJU1.md
  head -c 36000 docs/BENCHMARKS.md
} > "$tmp"
sync "$tmp"
mv "$tmp" "$out"
trap - EXIT
wc -c "$out"
