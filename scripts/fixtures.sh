# Sourced by the benchmark scripts (from the repository root): what they share.
# gguf_venv: .cache/llama/venv with numpy and gguf-py as the pinned llama.cpp sdist vendors it
#   (not whatever version the registry has today); prints the venv's python.
# fixture_f16s: both fixtures fetched (sha256-checked) into .cache/models and converted to f16
#   by BIN (default target/release/kaiju-tui); sets smol, qwen (the fixtures' own files) and
#   smol_f16, qwen_f16.
gguf_venv() {
  local venv=.cache/llama/venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -c "import gguf, numpy" 2>/dev/null ||
    "$venv/bin/pip" install --quiet numpy "$(bash scripts/llama-cpp.sh --src)/gguf-py" >&2
  echo "$venv/bin/python"
}

fixture_f16s() {
  local models=.cache/models bin=${BIN:-target/release/kaiju-tui}
  smol=$(bash scripts/fetch-smollm2.sh "$models" | tail -1)
  qwen=$(bash scripts/fetch-qwen05.sh "$models" | tail -1)
  smol_f16=$models/smollm2-135m-f16.gguf
  qwen_f16=$models/qwen2.5-coder-0.5b-f16.gguf
  [ -f "$smol_f16" ] || "$bin" convert --to f16 "$smol" "$smol_f16" >&2
  [ -f "$qwen_f16" ] || "$bin" convert --to f16 "$qwen" "$qwen_f16" >&2
}
