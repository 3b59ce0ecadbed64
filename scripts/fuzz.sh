#!/usr/bin/env bash
# A longer, still bounded, fuzzing run of the GGUF and imatrix parsers (proptest).
# Usage: scripts/fuzz.sh [CASES]   (default 20000)
set -euo pipefail
cd "$(dirname "$0")/.."
PROPTEST_CASES="${1:-20000}" cargo test --release --test fuzz_parsers
