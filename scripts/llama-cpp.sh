#!/usr/bin/env bash
# The peer: llama.cpp as vendored in the llama-cpp-python 0.3.36 sdist, fetched with pip (the
# sdist's sha256 checked against the pin), built once into .cache/llama/build (about five
# minutes on two cores). Prints the folder holding the built tools.
# Usage: scripts/llama-cpp.sh [TARGET ...]   (default: llama-perplexity llama-tokenize llama-quantize)
#        scripts/llama-cpp.sh --src            fetch and unpack only; print the source folder (its
#                                              models/ holds llama.cpp's vocabulary test suites)
# LLAMA_BIN=DIR skips all of it and prints DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
src_only=0
if [ "${1:-}" = "--src" ]; then src_only=1; shift; fi
if [ "$src_only" = 0 ] && [ -n "${LLAMA_BIN:-}" ]; then echo "$LLAMA_BIN"; exit 0; fi
version=0.3.36
want=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
cache=.cache/llama
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(llama-perplexity llama-tokenize llama-quantize)
mkdir -p "$cache"
if [ "$src_only" = 1 ] && [ -d "$cache/src/models" ]; then echo "$PWD/$cache/src"; exit 0; fi
missing=0
for t in "${targets[@]}"; do [ -x "$cache/build/bin/$t" ] || missing=1; done
if [ "$src_only" = 0 ] && [ "$missing" = 0 ]; then echo "$PWD/$cache/build/bin"; exit 0; fi
[ -x "$cache/venv/bin/python" ] || python3 -m venv "$cache/venv"
sdist=$cache/llama_cpp_python-$version.tar.gz
if [ ! -f "$sdist" ]; then
  # pip reads the sdist's metadata on download, with its build backend (and that needs cmake)
  "$cache/venv/bin/pip" install --quiet scikit-build-core cmake ninja >&2
  PATH=$PWD/$cache/venv/bin:$PATH "$cache/venv/bin/pip" download --quiet --no-deps --no-binary :all: \
    --no-build-isolation -d "$cache" "llama-cpp-python==$version" >&2
fi
got=$(sha256sum "$sdist" | cut -c1-64)
[ "$got" = "$want" ] || { echo "llama-cpp.sh: $sdist: sha256 $got, expected $want" >&2; exit 1; }
if [ ! -d "$cache/src" ]; then
  # unpacked beside, then moved: an interrupted unpack never looks like a finished one
  rm -rf "$cache/llama_cpp_python-$version"
  tar -xzf "$sdist" -C "$cache"
  mv "$cache/llama_cpp_python-$version/vendor/llama.cpp" "$cache/src"
  rm -rf "$cache/llama_cpp_python-$version"
fi
if [ "$src_only" = 1 ]; then echo "$PWD/$cache/src"; exit 0; fi
"$cache/venv/bin/pip" install --quiet scikit-build-core cmake ninja >&2
echo "building llama.cpp (${targets[*]}; log: $cache/build.log)" >&2
{ PATH=$PWD/$cache/venv/bin:$PATH cmake -S "$cache/src" -B "$cache/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF &&
  PATH=$PWD/$cache/venv/bin:$PATH cmake --build "$cache/build" -j"$(nproc)" --target "${targets[@]}"; } \
  >"$cache/build.log" 2>&1 || { tail -20 "$cache/build.log" >&2; exit 1; }
echo "$PWD/$cache/build/bin"
