#!/usr/bin/env bash
# The evaluation text of the quality scripts (compare-quality.sh, quality-curve.sh): Debian's
# Apache-2.0 + MPL-2.0 + GFDL-1.3 licence texts (/usr/share/common-licenses), else four copies
# of the repository's LICENSE. Writes it to OUT. Usage: scripts/eval-text.sh OUT
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/eval-text.sh OUT}
lic=/usr/share/common-licenses
if [ -f $lic/Apache-2.0 ] && [ -f $lic/MPL-2.0 ] && [ -f $lic/GFDL-1.3 ]; then
  cat $lic/Apache-2.0 $lic/MPL-2.0 $lic/GFDL-1.3 > "$out"
else
  cat LICENSE LICENSE LICENSE LICENSE > "$out"
fi
